"""B1 - hook overhead per reasoning step with no compaction due.

Contexts of ~8k, 32k and 128k tokens are built from a real Claude Code session. Each step adds
one new message (a 1 KB tool result) and times:

- ours: the whole ``pre_reasoning`` pipeline (stage one on the new result, stage two scan,
  incremental token check), with a window large enough that no compaction is due;
- (a) formatting the whole prompt with the agent's formatter and counting it with the same
  tokenizer, what a hook without incremental accounting must do every step;
- (b) AgentScope's own ``ReActAgent(compression_config=...)`` check below its threshold
  (``_compress_memory_if_needed``), with the same token counter.

Runs are interleaved (ours, a, b, ours, a, b ...) and medians compared.
Targets: ours >= 20x faster than (a) at 128k; faster than (b); ours grows with the new message,
not with the context (ratio of ours at 128k to ours at 8k stays small).
"""

from __future__ import annotations

import asyncio
import copy
import statistics
import tempfile
import time

from agentscope.agent import ReActAgent
from agentscope.formatter import DashScopeChatFormatter
from agentscope.memory import InMemoryMemory
from agentscope.message import Msg
from agentscope.tool import Toolkit

from agentscope_context_ext import enable_context_management, get_token_counter
from agentscope_context_ext.testing import ScriptedChatModel

from ._data import claude_code_session

TITLE = "hook overhead per step, no compaction due (8k / 32k / 128k)"
SIZES = (8_000, 32_000, 128_000)
SYS_PROMPT = "You are a coding agent working in a large repository. Be careful and precise."


def _prefix(msgs: list[Msg], target: int, counter) -> list[Msg]:
    total = 0
    out = []
    for msg in msgs:
        tokens = counter.count_msg(msg)
        if total + tokens > target and out:
            break
        out.append(msg)
        total += tokens
    # A prefix must not end with unanswered calls: drop trailing assistant messages with calls.
    while (
        out
        and out[-1].role == "assistant"
        and any(b.get("type") == "tool_use" for b in out[-1].content if isinstance(b, dict))
    ):
        out.pop()
    return out


def _new_message(i: int) -> Msg:
    body = "".join(f"{i}:{n:03d} ok GET /api/items status=200 elapsed=12ms\n" for n in range(22))
    return Msg(
        "system",
        [{"type": "tool_result", "id": f"bench-{i}", "name": "shell", "output": body}],
        "system",
    )


async def _measure(context: list[Msg], repeats: int) -> dict:
    counter = get_token_counter("qwen")
    formatter = DashScopeChatFormatter()
    toolkit = Toolkit()
    agent = ReActAgent(
        name="bench",
        sys_prompt=SYS_PROMPT,
        model=ScriptedChatModel(["ok"]),
        formatter=formatter,
        toolkit=toolkit,
    )
    await agent.memory.add(copy.deepcopy(context))
    with tempfile.TemporaryDirectory() as workspace:
        manager = enable_context_management(
            agent,
            {
                "workspace": workspace,
                "max_input_tokens": 1_048_576,
                "truncation": {
                    "first_max_bytes": 10**9,
                    "markdown_first_max_bytes": 10**9,
                    "max_window_share": 1.0,
                    "recent_n": 10**6,
                },
                "notices": False,
            },
        )
        tools = agent.toolkit.get_json_schemas()
        await manager.pipeline.before_reasoning(SYS_PROMPT, tools)  # warm: count the context once
        context_tokens = (await manager.count()).total

        # (b) AgentScope's own check, on an identical agent with InMemoryMemory.
        native = ReActAgent(
            name="native",
            sys_prompt=SYS_PROMPT,
            model=ScriptedChatModel(["ok"]),
            formatter=DashScopeChatFormatter(),
            toolkit=Toolkit(),
            memory=InMemoryMemory(),
            compression_config=ReActAgent.CompressionConfig(
                enable=True, agent_token_counter=counter, trigger_threshold=10**9
            ),
        )
        await native.memory.add(copy.deepcopy(context))

        samples: dict[str, list[float]] = {"ours": [], "a": [], "b": []}
        for i in range(repeats):
            new = _new_message(i)
            await agent.memory.add(new)
            started = time.perf_counter()
            await manager.pipeline.before_reasoning(SYS_PROMPT, tools)
            samples["ours"].append(time.perf_counter() - started)

            started = time.perf_counter()
            prompt = await formatter.format(
                [Msg("system", SYS_PROMPT, "system"), *await agent.memory.get_memory()]
            )
            await counter.count(prompt, tools)
            samples["a"].append(time.perf_counter() - started)

            await native.memory.add(new)
            started = time.perf_counter()
            await native._compress_memory_if_needed()
            samples["b"].append(time.perf_counter() - started)

            await agent.memory.delete([new.id])
            await native.memory.delete([new.id])
        manager.close()
    medians = {k: statistics.median(v) for k, v in samples.items()}
    return {
        "context_tokens": context_tokens,
        "messages": len(context),
        **{f"seconds_{k}": v for k, v in medians.items()},
    }


def run(quick: bool = False) -> dict:
    """Measure and return the B1 record."""
    counter = get_token_counter("qwen")
    msgs = claude_code_session()
    repeats = 7 if quick else 21
    rows = []
    for size in SIZES:
        context = _prefix(msgs, size, counter)
        row = asyncio.run(_measure(context, repeats))
        row["target_tokens"] = size
        row["speedup_vs_a"] = round(row["seconds_a"] / row["seconds_ours"], 1)
        row["speedup_vs_b"] = round(row["seconds_b"] / row["seconds_ours"], 1)
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
        "rows": rows,
        "ours_growth_128k_over_8k": round(growth, 2),
        "context_growth_128k_over_8k": round(context_growth, 2),
        "target": ">= 20x faster than (a) at 128k; faster than (b); ours grows far slower than the context",
        "target_met": met,
    }


def table(record: dict) -> str:
    """Markdown table of a B1 record."""
    lines = [
        "| context tokens | messages | ours (ms) | (a) format+count (ms) | (b) AgentScope check (ms) | vs (a) | vs (b) |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in record["rows"]:
        lines.append(
            f"| {r['context_tokens']:,} | {r['messages']} | {r['seconds_ours'] * 1000:.3f} | {r['seconds_a'] * 1000:.2f} | "
            f"{r['seconds_b'] * 1000:.2f} | {r['speedup_vs_a']}x | {r['speedup_vs_b']}x |"
        )
    lines.append(
        f"\nours at 128k / ours at 8k: {record['ours_growth_128k_over_8k']}x while the context grew "
        f"{record['context_growth_128k_over_8k']}x"
    )
    return "\n".join(lines)
