"""B10: the cost of context management per turn of an agent served by AgentScope 2.x's own
service (``create_app``), which builds agent, model and middleware anew every turn.

``create_app`` is served by uvicorn on loopback (SQLite storage, the in-memory bus,
``LocalWorkspaceManager``; the harness of ``tests/support/served_app.py``), its agents' model an
OpenAI-protocol loopback server with scripted answers (``tests/support/llm_servers.py``). Two agents of
one user run the same turns, interleaved: *ours* gets ``context_middleware_factory`` (extractive
summaries, long-term memory off: the cost of building the middleware and of its pipeline, not of
a summary model), *plain* no middleware. Each turn reads an 8 KB file with ``Read`` and answers
(two model calls); after a dozen turns ours compacts.

Per turn of ours: the middleware's build (the factory call) plus its hook time
(``stats.hook_seconds``: stage one in ``on_acting``, the pipeline in ``on_compress_context``),
median and p99; and both sides' turn wall time. The target compares the overhead with a turn
whose model calls take 1 s each: ``overhead / (plain turn + calls x 1 s)`` < 5% at the median
and at the p99. Run with the workspace in the agent's own 2.x workspace (local) and in a Redis
store (``workspace: redis://...``; ``ACE_REDIS_URL`` or a ``redis-server`` started here).
"""

from __future__ import annotations

import re
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from ._major import agentscope_major

TITLE = "served turn overhead: create_app, ours against no middleware (local / Redis workspace)"
MODEL_SECONDS = 1.0
TARGET_SHARE = 0.05
WINDOW = 32768
SUPPORT = Path(__file__).resolve().parent.parent / "tests" / "support"


def _missing() -> str | None:
    if agentscope_major() < 2:
        return "create_app is AgentScope 2.x's"
    try:
        import agentscope.app  # noqa: F401
        import aiosqlite  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError as exc:
        return f"AgentScope's service is not installed ({exc.name}): pip install -e '.[serve]'"
    if not (SUPPORT / "served_app.py").is_file():
        return f"the served-app harness {SUPPORT / 'served_app.py'} is missing"
    return None


def _file_text() -> str:
    return "".join(f"row {i:04d} " + "v" * 70 + "\n" for i in range(100))


def _respond(folder: Path):
    from llm_servers import Reply

    def respond(request: dict) -> Any:
        messages = request.get("messages", [])
        said = " ".join(str(m.get("content")) for m in messages if m.get("role") == "user")
        turn = max(int(k) for k in re.findall(r"TURN-(\d+):", said))
        if not request.get("tools"):
            return Reply(text=f"## Goal\n- TURN-{turn}: read the file")
        if any(m.get("tool_call_id") == f"call-{turn}" for m in messages):
            return Reply(text=f"Read {turn}.")
        return Reply(tool_calls=[(f"call-{turn}", "Read", {"file_path": str(folder / "f.txt")})])

    return respond


def _measure(kind: str, redis_url: str | None, turns: int) -> dict:
    from llm_servers import ModelServer
    from served_app import ServedApp

    from agentscope_context_ext import context_middleware_factory

    config: dict[str, Any] = {
        "max_input_tokens": WINDOW,
        "compaction": {"model": "extractive"},
        "long_term_memory": {"enabled": False},
    }
    if redis_url is not None:
        config["workspace"] = f"{redis_url.split('?')[0]}?prefix=b10-{uuid.uuid4().hex[:8]}"
    inner = context_middleware_factory(config)
    ours_agent: list[str] = []
    built: list[tuple[float, Any]] = []

    async def factory(user_id: str, agent_id: str, session_id: str, workspace: Any) -> list:
        if agent_id not in ours_agent:
            return []
        started = time.perf_counter()
        middlewares = await inner(user_id, agent_id, session_id, workspace)
        built.append((time.perf_counter() - started, middlewares[0]))
        return middlewares

    overhead: list[float] = []
    walls: dict[str, list[float]] = {"ours": [], "plain": []}
    calls: list[int] = []
    compactions = 0
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "f.txt").write_text(_file_text())
        with (
            ModelServer("openai", _respond(folder)) as model,
            ServedApp(folder / "app", extra_agent_middlewares=factory) as served,
        ):
            credential = served.create_credential(model.url)
            agents = {
                "ours": served.create_agent("ours", "You read files."),
                "plain": served.create_agent("plain", "You read files."),
            }
            ours_agent.append(agents["ours"])
            sessions = {side: served.create_session(a, credential) for side, a in agents.items()}
            for turn in range(1, turns + 1):
                order = ("ours", "plain") if turn % 2 else ("plain", "ours")
                for side in order:
                    before = len(model.requests)
                    started = time.perf_counter()
                    served.chat(agents[side], sessions[side], f"TURN-{turn}: read f.txt")
                    walls[side].append(time.perf_counter() - started)
                    if side == "ours":
                        build, middleware = built.pop()
                        overhead.append(build + middleware.stats.hook_seconds)
                        compactions += middleware.stats.compactions
                        calls.append(sum(1 for r in model.requests[before:] if r.get("tools")))
    plain = statistics.median(walls["plain"])
    turn_with_model = plain + statistics.median(calls) * MODEL_SECONDS
    median = statistics.median(overhead)
    p99 = _p99(overhead)
    return {
        "workspace": kind,
        "turns": turns,
        "model_calls_per_turn": statistics.median(calls),
        "compactions": compactions,
        "overhead_median_ms": round(median * 1000, 2),
        "overhead_p99_ms": round(p99 * 1000, 2),
        "turn_ours_median_ms": round(statistics.median(walls["ours"]) * 1000, 1),
        "turn_plain_median_ms": round(plain * 1000, 1),
        "turn_with_1s_model_ms": round(turn_with_model * 1000, 1),
        "share_median": round(median / turn_with_model, 5),
        "share_p99": round(p99 / turn_with_model, 5),
    }


def _p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, -(-99 * len(ordered) // 100) - 1))]


def run(quick: bool = False) -> dict:
    """Measure and return the B10 record."""
    missing = _missing()
    if missing is not None:
        return {"id": "B10", "skipped": missing}
    sys.path.insert(0, str(SUPPORT))
    from .b9_redis_backend import _redis_server

    turns = 6 if quick else 20
    rows = [_measure("local", None, turns)]
    url, server, problem = _redis_server()
    try:
        if url is not None:
            rows.append(_measure("redis", url, turns))
        else:
            rows.append({"workspace": "redis", "skipped": problem})
    finally:
        if server is not None:
            server.terminate()
            server.wait(10)
    measured = [row for row in rows if "skipped" not in row]
    met = len(measured) == len(rows) and all(
        row["share_median"] < TARGET_SHARE and row["share_p99"] < TARGET_SHARE for row in measured
    )
    return {
        "id": "B10",
        "what": TITLE,
        "rows": rows,
        "target": "overhead (build + pipeline) < 5% of a turn with a 1 s model, median and p99, "
        "local and Redis",
        "target_met": met,
    }


def table(record: dict) -> str:
    head = (
        "| workspace | turns | model calls a turn | compactions | overhead median (ms) | "
        "overhead p99 (ms) | turn, ours (ms) | turn, plain (ms) | turn with a 1 s model (ms) "
        "| share median | share p99 |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    )
    lines = [head]
    for row in record["rows"]:
        if "skipped" in row:
            lines.append(f"| {row['workspace']} | skipped: {row['skipped']} |")
            continue
        lines.append(
            f"| {row['workspace']} | {row['turns']} | {row['model_calls_per_turn']:g} | "
            f"{row['compactions']} | {row['overhead_median_ms']:.2f} | "
            f"{row['overhead_p99_ms']:.2f} | {row['turn_ours_median_ms']:.1f} | "
            f"{row['turn_plain_median_ms']:.1f} | {row['turn_with_1s_model_ms']:,.1f} | "
            f"{row['share_median']:.2%} | {row['share_p99']:.2%} |"
        )
    return "\n".join(lines)
