"""B1 - hook overhead per reasoning step with no compaction due, on either AgentScope major.

Contexts of ~8k, 32k and 128k tokens are built from a real Claude Code session (the same records
on both majors, each kept as the installed major keeps a context: ``_agents``). Each step adds
one new tool result (1 KB; on 2.x with its call, in the reply's message) and times:

- ours: what runs before a reasoning step with a window large enough that no compaction is due:
  1.x the whole ``pre_reasoning`` pipeline; 2.x ``agent.compress_context()``, which runs the
  middleware's ``on_compress_context`` (the same pipeline: pending stage one, stage-two scan,
  incremental token check);
- (a) formatting the whole prompt with the agent's formatter and counting it with the same
  tokenizer, what a hook without incremental accounting must do every step (the counter
  without our counts of large texts, ``memo_size=0``: a plain hook tokenizes what it counts);
- (b) AgentScope's own check below its threshold with the same tokenizer: 1.x
  ``ReActAgent(compression_config=...)``'s ``_compress_memory_if_needed``; 2.x a plain
  ``Agent``'s ``compress_context()`` (``_compress_context_impl``) with a model whose
  ``count_tokens`` counts the formatted prompt exactly;
- (b') 2.x only: the same 2.x check as 2.x ships it, ``count_tokens`` being bytes/4
  (``ChatModelBase.count_tokens``; no 2.0.x model overrides it). 1.x has no such side: its
  check needs a token counter.

Runs are interleaved (ours, a, b, b', ours, ...) and medians compared.
Targets: ours >= 20x faster than (a) at 128k; faster than (b); ours grows with the new message,
not with the context (ratio of ours at 128k to ours at 8k far below the context's growth).
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time

from ._agents import MAJOR, managed, native, plain_counter, prefix, qwen_counter
from ._data import SESSION, claude_code_session
from ._major import agentscope_version

TITLE = "hook overhead per step, no compaction due (8k / 32k / 128k)"
SIZES = (8_000, 32_000, 128_000)
FORMATTER = "DashScopeChatFormatter"
OURS_CONFIG = {
    "max_input_tokens": 1_048_576,
    "truncation": {
        "first_max_bytes": 10**9,
        "markdown_first_max_bytes": 10**9,
        "max_window_share": 1.0,
        "recent_n": 10**6,
    },
    "notices": False,
}


def new_result(i: int) -> str:
    """A step's 1 KB tool result."""
    return "".join(f"{i}:{n:03d} ok GET /api/items status=200 elapsed=12ms\n" for n in range(22))


async def _measure(records: list, repeats: int) -> dict:
    counter = plain_counter()  # (a) and (b) tokenize what they count, every time
    sides = ("ours", "a", "b", "b_native") if MAJOR >= 2 else ("ours", "a", "b")
    with tempfile.TemporaryDirectory() as workspace:
        ours = await managed(records, {"workspace": workspace, **OURS_CONFIG}, FORMATTER)
        context_tokens = await ours.count()
        formatter = ours.formatter
        checks = {"b": await native(records, counter, FORMATTER)}
        if MAJOR >= 2:
            checks["b_native"] = await native(records, None, FORMATTER)
        samples: dict[str, list[float]] = {side: [] for side in sides}
        for i in range(repeats):
            call_id = f"bench-{i}"
            await ours.add_result(call_id, new_result(i))
            started = time.perf_counter()
            await ours.step()
            samples["ours"].append(time.perf_counter() - started)

            started = time.perf_counter()
            await ours.format_and_count(counter, formatter)
            samples["a"].append(time.perf_counter() - started)

            for side, check in checks.items():
                await check.add_result(call_id, new_result(i))
                started = time.perf_counter()
                await check.check()
                samples[side].append(time.perf_counter() - started)
                await check.remove_added()
            await ours.remove_added()
        messages = ours.messages
        ours.close()
    medians = {k: statistics.median(v) for k, v in samples.items()}
    return {
        "context_tokens": context_tokens,
        "records": len(records),
        "messages": messages,
        **{f"seconds_{k}": v for k, v in medians.items()},
    }


def run(quick: bool = False) -> dict:
    """Measure and return the B1 record."""
    counter = qwen_counter()
    records = claude_code_session()
    repeats = 7 if quick else 21
    rows = []
    for size in SIZES:
        row = asyncio.run(_measure(prefix(records, size, counter), repeats))
        row["target_tokens"] = size
        row["speedup_vs_a"] = round(row["seconds_a"] / row["seconds_ours"], 1)
        row["speedup_vs_b"] = round(row["seconds_b"] / row["seconds_ours"], 1)
        if "seconds_b_native" in row:
            row["speedup_vs_b_native"] = round(row["seconds_b_native"] / row["seconds_ours"], 2)
        rows.append(row)
    growth = rows[-1]["seconds_ours"] / rows[0]["seconds_ours"]
    context_growth = rows[-1]["context_tokens"] / rows[0]["context_tokens"]
    met = (
        rows[-1]["speedup_vs_a"] >= 20
        and all(r["speedup_vs_b"] > 1 for r in rows)
        and growth < context_growth / 4
    )
    return {
        "id": "B1",
        "what": TITLE,
        "agentscope_version": agentscope_version(),
        "session": SESSION,
        "formatter": FORMATTER,
        "ours": (
            "agent.compress_context() -> ContextMiddleware.on_compress_context"
            if MAJOR >= 2
            else "pre_reasoning pipeline (manager.pipeline.before_reasoning)"
        ),
        "b": (
            "Agent.compress_context() without middleware, exact count_tokens"
            if MAJOR >= 2
            else "ReActAgent(compression_config=...)._compress_memory_if_needed"
        ),
        "b_native": (
            "Agent.compress_context() without middleware, 2.x's bytes/4 count_tokens"
            if MAJOR >= 2
            else "none on 1.x: its check needs a token counter"
        ),
        "rows": rows,
        "ours_growth_128k_over_8k": round(growth, 2),
        "context_growth_128k_over_8k": round(context_growth, 2),
        "target": ">= 20x faster than (a) at 128k; faster than (b); ours grows far slower than the context",
        "target_met": met,
    }


def table(record: dict) -> str:
    """Markdown table of a B1 record."""
    two = any("seconds_b_native" in r for r in record["rows"])
    lines = [
        f"AgentScope {record.get('agentscope_version', '?')}: ours = {record.get('ours', '')}; "
        f"(b) = {record.get('b', '')}; (b') = {record.get('b_native', '')}",
        "",
        "| context tokens | transcript messages | context messages | ours (ms) "
        "| (a) format+count (ms) | (b) AgentScope check, same count (ms) "
        "| (b') 2.x check as shipped, bytes/4 (ms) | vs (a) | vs (b) | vs (b') |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in record["rows"]:
        native = f"{r['seconds_b_native'] * 1000:.3f}" if two else "- (1.x: none)"
        versus = f"{r['speedup_vs_b_native']}x" if two else "-"
        lines.append(
            f"| {r['context_tokens']:,} | {r['records']} | {r['messages']} "
            f"| {r['seconds_ours'] * 1000:.3f} | {r['seconds_a'] * 1000:.2f} "
            f"| {r['seconds_b'] * 1000:.2f} | {native} | {r['speedup_vs_a']}x "
            f"| {r['speedup_vs_b']}x | {versus} |"
        )
    lines.append(
        f"\nours at 128k / ours at 8k: {record['ours_growth_128k_over_8k']}x while the context grew "
        f"{record['context_growth_128k_over_8k']}x"
    )
    return "\n".join(lines)
