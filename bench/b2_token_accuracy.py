"""B2 - token count accuracy.

Our incremental count (per message, through the agent's formatter, summed) against the exact
count of the fully formatted prompt with the same tokenizer, and the bytes/4 estimate against
the same exact count. Transcripts: two real Claude Code sessions (English, code-heavy) and a
Chinese conversation built from the Chinese design text in ``shared/seed``.
Target: ours within 1%; the estimate's error is reported.
"""

from __future__ import annotations

import asyncio
import copy
import tempfile
from pathlib import Path

from agentscope.agent import ReActAgent
from agentscope.formatter import DashScopeChatFormatter, OpenAIChatFormatter
from agentscope.message import Msg
from agentscope.tool import Toolkit

from agentscope_context_ext import enable_context_management, get_token_counter
from agentscope_context_ext.testing import ScriptedChatModel

from ._data import claude_code_session, transcripts_dir

TITLE = "token count accuracy vs the exact formatted prompt"
SYS_PROMPT = "You are a helpful agent."


def chinese_conversation() -> list[Msg]:
    """A tool-using conversation whose content is the Chinese design text, paragraph by paragraph."""
    seed = transcripts_dir().parent.parent / "seed" / "copaw-context-management-v2.zh.md"
    paragraphs = [
        p.strip() for p in Path(seed).read_text(encoding="utf-8").split("\n\n") if p.strip()
    ]
    msgs = [Msg("user", "请阅读设计文档并总结上下文管理的要点。", "user")]
    for i in range(0, len(paragraphs), 4):
        call_id = f"zh-{i}"
        msgs.append(
            Msg(
                "assistant",
                [
                    {"type": "text", "text": f"继续阅读第 {i // 4 + 1} 部分。"},
                    {
                        "type": "tool_use",
                        "id": call_id,
                        "name": "read_file",
                        "input": {"file_path": "design.zh.md", "start_line": i + 1},
                    },
                ],
                "assistant",
            )
        )
        msgs.append(
            Msg(
                "system",
                [
                    {
                        "type": "tool_result",
                        "id": call_id,
                        "name": "read_file",
                        "output": "\n\n".join(paragraphs[i : i + 4]),
                    }
                ],
                "system",
            )
        )
    msgs.append(Msg("assistant", "总结：两阶段截断、压缩摘要、对话落盘、长期记忆。", "assistant"))
    return msgs


async def _measure(msgs: list[Msg], formatter_class: type) -> dict:
    counter = get_token_counter("qwen")
    estimate = get_token_counter("estimate")
    agent = ReActAgent(
        name="b2",
        sys_prompt=SYS_PROMPT,
        model=ScriptedChatModel(["ok"]),
        formatter=formatter_class(),
        toolkit=Toolkit(),
    )
    await agent.memory.add(copy.deepcopy(msgs))
    with tempfile.TemporaryDirectory() as workspace:
        manager = enable_context_management(
            agent,
            {
                "workspace": workspace,
                "max_input_tokens": 4_194_304,
                "truncation": {"enabled": False},
                "compaction": {"enabled": False},
            },
        )
        ours = (await manager.count()).total
        # The tools the model is shown: the dialog tools join once there is a dialog.
        tools = manager.offered_tools(agent.toolkit.get_json_schemas())
        prompt = await agent.formatter.format(
            [Msg("system", SYS_PROMPT, "system"), *await agent.memory.get_memory()]
        )
        exact = counter.count_formatted(prompt, tools)
        guess = estimate.count_formatted(prompt, tools)
        manager.close()
    return {
        "ours": ours,
        "exact": exact,
        "estimate": guess,
        "ours_error": (ours - exact) / exact,
        "estimate_error": (guess - exact) / exact,
    }


def run(quick: bool = False) -> dict:
    """Measure and return the B2 record."""
    cases = {
        "claude-code 4d5611e5 (English, code)": claude_code_session(),
        "claude-code 8463c716 (English, code)": claude_code_session(
            "8463c716-a2ea-4c14-9efa-87158ebd9f20.jsonl"
        ),
        "design text (Chinese)": chinese_conversation(),
    }
    rows = []
    for name, msgs in cases.items():
        for formatter_class in (DashScopeChatFormatter, OpenAIChatFormatter):
            row = asyncio.run(_measure(msgs, formatter_class))
            rows.append({"transcript": name, "formatter": formatter_class.__name__, **row})
    worst = max(abs(r["ours_error"]) for r in rows)
    return {
        "id": "B2",
        "what": TITLE,
        "rows": rows,
        "worst_ours_error": round(worst, 5),
        "worst_estimate_error": round(max(abs(r["estimate_error"]) for r in rows), 4),
        "target": "ours within 1% of the exact formatted count",
        "target_met": worst <= 0.01,
    }


def table(record: dict) -> str:
    """Markdown table of a B2 record."""
    lines = [
        "| transcript | formatter | exact | ours | ours error | bytes/4 | bytes/4 error |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for r in record["rows"]:
        lines.append(
            f"| {r['transcript']} | {r['formatter']} | {r['exact']:,} | {r['ours']:,} | {r['ours_error']:+.3%} | "
            f"{r['estimate']:,} | {r['estimate_error']:+.1%} |"
        )
    return "\n".join(lines)
