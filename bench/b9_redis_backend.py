"""B9 - the workspace on Redis against local files, side by side in one run, on either major.

1. Per-step hook cost (B1's "ours": 1.x the whole ``pre_reasoning`` pipeline, 2.x
   ``agent.compress_context()`` through ``ContextMiddleware``) with contexts of ~8k, 32k and
   128k tokens from a real Claude Code session (B1's contexts), no compaction due, each step
   adding one tool result: a 1 KB one (nothing to save) and a 60 KB one (stage one saves it:
   one write to the workspace; on 2.x the pipeline's stage one for a result that did not come
   through ``on_acting``). Two identical agents, one per backend, steps interleaved; medians.
2. Dialog-append throughput: compaction-sized appends (10 messages of ~2 KB) by 1 and by 4
   writer processes at once, appends per second, per backend.

The Redis server is ``ACE_REDIS_URL``, else a private ``redis-server`` started here (AOF,
``appendfsync always``: the durable setting, as for local files, which are fsync'ed). Without
either the benchmark is skipped, with the reason.
A skipped run reports ``target_met`` false: a target not measured is not met.
Target: the Redis step cost stays flat with the context and under 2x the local cost when no
compaction is due.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import shutil
import socket
import statistics
import subprocess
import tempfile
import threading
import time
import uuid
from pathlib import Path

from agentscope_context_ext import open_dialog

from ._agents import managed, prefix, qwen_counter, user_message
from ._data import claude_code_session
from ._major import agentscope_version
from .b1_hook_overhead import SIZES

TITLE = "the workspace on Redis vs local files: step cost and dialog appends"
BODIES = {"1 KB": 1, "60 KB": 60}
TARGET = "Redis step cost flat with the context, < 2x local when no compaction is due"
CONFIG = {
    "max_input_tokens": 1_048_576,
    "truncation": {"recent_n": 10**6},
    "long_term_memory": {"enabled": False},
    "notices": False,
}


def _result(i: int, kb: int) -> str:
    line = "ok GET /api/items status=200 elapsed=12ms payload=" + "x" * 40 + "\n"
    return "".join(f"{i}:{n:05d} {line}" for n in range(kb * 1024 // (len(line) + 7)))


async def _steps(records: list, workspaces: dict[str, str], repeats: int) -> dict:
    agents = {
        name: await managed(records, {"workspace": workspace, **CONFIG})
        for name, workspace in workspaces.items()
    }
    first = next(iter(agents.values()))
    context_tokens = await first.count()
    samples: dict[tuple[str, str], list[float]] = {
        (backend, body): [] for backend in agents for body in BODIES
    }
    for i in range(repeats):
        for body, kb in BODIES.items():
            for backend, agent in agents.items():  # interleaved: A B A B
                await agent.add_result(f"b9-{uuid.uuid4().hex}", _result(i, kb))
                started = time.perf_counter()
                await agent.step()
                samples[(backend, body)].append(time.perf_counter() - started)
                await agent.remove_added()
    row = {"context_tokens": context_tokens, "records": len(records), "messages": first.messages}
    for agent in agents.values():
        agent.close()
    for (backend, body), values in samples.items():
        row[f"{backend} {body}"] = statistics.median(values)
    return row


def _append_worker(workspace: str, appends: int, ready, start, done) -> None:
    store = open_dialog(workspace)
    batch = [user_message("y" * 2000) for _ in range(10)]
    ready.put(os.getpid())
    start.wait()
    for _ in range(appends):
        store.append(batch)
    done.put(os.getpid())


def _throughput(workspace: str, writers: int, appends: int) -> float:
    context = multiprocessing.get_context("spawn")
    ready, start, done = context.Queue(), context.Event(), context.Queue()
    procs = [
        context.Process(target=_append_worker, args=(workspace, appends, ready, start, done))
        for _ in range(writers)
    ]
    for proc in procs:
        proc.start()
    for _ in procs:  # every worker has imported and opened its store
        ready.get(timeout=600)
    started = time.perf_counter()
    start.set()
    for _ in procs:
        done.get(timeout=600)
    seconds = time.perf_counter() - started
    for proc in procs:
        proc.join(60)
    return writers * appends / seconds


def _redis_server() -> tuple[str | None, subprocess.Popen | None, str | None]:
    url = os.environ.get("ACE_REDIS_URL", "").strip()
    if url:
        return url, None, None
    if shutil.which("redis-server") is None:
        return None, None, "no Redis server: set ACE_REDIS_URL or install redis-server"
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    folder = tempfile.mkdtemp()
    arguments = ["--bind", "127.0.0.1", "--port", str(port), "--dir", folder]
    arguments += ["--appendonly", "yes", "--appendfsync", "always", "--save", ""]
    server = subprocess.Popen(
        ["redis-server", *arguments],
        stdout=subprocess.PIPE,
        text=True,
    )
    for line in server.stdout:
        if "Ready to accept connections" in line:
            threading.Thread(target=server.stdout.read, daemon=True).start()
            return f"redis://127.0.0.1:{port}/0", server, None
    return None, server, "redis-server did not start"


def run(quick: bool = False) -> dict:
    """Measure and return the B9 record."""
    base, server, problem = _redis_server()
    if base is None:
        if server is not None:
            server.kill()
        return {
            "id": "B9",
            "what": TITLE,
            "skipped": problem,
            "target": TARGET,
            "target_met": False,
        }
    try:
        counter = qwen_counter()
        records = claude_code_session()
        repeats = 7 if quick else 21
        rows = []
        with tempfile.TemporaryDirectory() as folder:
            for size in SIZES:
                run_id = uuid.uuid4().hex[:8]
                workspaces = {
                    "local": str(Path(folder) / run_id),
                    "redis": f"{base.split('?')[0]}?prefix=b9-{run_id}",
                }
                row = asyncio.run(_steps(prefix(records, size, counter), workspaces, repeats))
                for body in BODIES:
                    row[f"ratio {body}"] = round(row[f"redis {body}"] / row[f"local {body}"], 2)
                rows.append(row)
            appends = 20 if quick else 60
            throughput = {}
            for writers in (1, 4):
                run_id = uuid.uuid4().hex[:8]
                throughput[f"local x{writers}"] = round(
                    _throughput(str(Path(folder) / f"t{run_id}"), writers, appends), 1
                )
                throughput[f"redis x{writers}"] = round(
                    _throughput(f"{base.split('?')[0]}?prefix=b9t-{run_id}", writers, appends), 1
                )
    finally:
        if server is not None:
            server.kill()
            server.wait(60)
    flat = rows[-1]["redis 1 KB"] / rows[0]["redis 1 KB"]
    worst = max(r["ratio 1 KB"] for r in rows)
    return {
        "id": "B9",
        "what": TITLE,
        "agentscope_version": agentscope_version(),
        "rows": rows,
        "appends_per_second": throughput,
        "redis_growth_128k_over_8k": round(flat, 2),
        "worst_ratio_no_save": worst,
        "target": TARGET,
        "target_met": worst < 2 and flat < 4,
    }


def table(record: dict) -> str:
    """Markdown tables of a B9 record."""
    if record.get("skipped"):
        return f"skipped: {record['skipped']}"
    lines = [
        f"AgentScope {record.get('agentscope_version', '?')}",
        "",
        "| context tokens | local 1 KB (ms) | Redis 1 KB (ms) | ratio | local 60 KB (ms) | Redis 60 KB (ms) | ratio |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in record["rows"]:
        lines.append(
            f"| {r['context_tokens']:,} | {r['local 1 KB'] * 1000:.3f} | {r['redis 1 KB'] * 1000:.3f} | "
            f"{r['ratio 1 KB']}x | {r['local 60 KB'] * 1000:.3f} | {r['redis 60 KB'] * 1000:.3f} | "
            f"{r['ratio 60 KB']}x |"
        )
    t = record["appends_per_second"]
    lines += [
        "",
        "| dialog appends per second (10 messages each) | local | Redis |",
        "|---|---:|---:|",
        f"| 1 writer | {t['local x1']:,} | {t['redis x1']:,} |",
        f"| 4 writers (processes) | {t['local x4']:,} | {t['redis x4']:,} |",
        "",
        f"Redis step at 128k / at 8k: {record['redis_growth_128k_over_8k']}x",
    ]
    return "\n".join(lines)
