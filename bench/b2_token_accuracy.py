"""B2 - token count accuracy, on either AgentScope major.

Our incremental count (per message, or per 2.x segment, through the model's formatter, summed)
against the exact count of the fully formatted prompt with the same tokenizer, and the bytes/4
estimate against the same exact count. The prompt is the one AgentScope builds (1.x: the system
prompt and the memory; 2.x: ``Agent._prepare_model_input``, the system prompt as the middlewares
leave it, the summary and ``state.context``), with the tools the model is shown. On 2.x also
2.x's own count, ``ChatModelBase.count_tokens`` (bytes/4 of the texts and tool schemas, the count
its compression compares with the trigger; 1.x has no count of its own). Transcripts: two real
Claude Code sessions (English, code-heavy) and a Chinese conversation built from the Chinese
design text in ``shared/seed``, the same records on both majors.
Target: ours within 1%; the estimate's error is reported.
"""

from __future__ import annotations

import asyncio
import tempfile
from typing import Any

from agentscope_context_ext import get_token_counter
from agentscope_context_ext.replay import Record

from ._agents import MAJOR, managed, qwen_counter
from ._data import chinese_conversation, claude_code_session
from ._major import agentscope_version

TITLE = "token count accuracy vs the exact formatted prompt"
FORMATTERS = ("DashScopeChatFormatter", "OpenAIChatFormatter")
CONFIG = {
    "max_input_tokens": 4_194_304,
    "truncation": {"enabled": False},
    "compaction": {"enabled": False},
}


async def _measure(records: list[Record], formatter_name: str) -> dict:
    counter = qwen_counter()
    estimate = get_token_counter("estimate")
    with tempfile.TemporaryDirectory() as workspace:
        agent = await managed(records, {"workspace": workspace, **CONFIG}, formatter_name)
        ours = await agent.count()
        messages, tools = await _as_sent(agent)
        prompt = await agent.formatter.format(messages)
        exact = counter.count_formatted(prompt, tools)
        guess = estimate.count_formatted(prompt, tools)
        native = None
        if MAJOR >= 2:
            from agentscope.model import ChatModelBase

            # 2.x's own count, what its compression compares with the trigger (every 2.0.x
            # model inherits it).
            native = await ChatModelBase.count_tokens(agent.agent.model, messages, tools)
        agent.close()
    return {
        "ours": ours,
        "exact": exact,
        "estimate": guess,
        "ours_error": (ours - exact) / exact,
        "estimate_error": (guess - exact) / exact,
        "agentscope_count": native,
        "agentscope_count_error": None if native is None else (native - exact) / exact,
    }


async def _as_sent(agent: Any) -> tuple[list[Any], list[dict]]:
    """The messages and the tools the model is sent now, built by
    AgentScope itself; the tools as the model is shown them (the dialog tools join once there
    is a dialog: ``offered_tools``, what our ``on_model_call`` / the 1.x hooks pass on)."""
    manager = agent.manager
    if MAJOR == 1:
        from agentscope.message import Msg

        system = Msg("system", agent.agent.sys_prompt, "system")
        messages = [system, *await agent.agent.memory.get_memory()]
        return messages, manager.offered_tools(agent.agent.toolkit.get_json_schemas())
    model_input = await agent.agent._prepare_model_input()
    return model_input["messages"], manager.offered_tools(model_input["tools"])


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
    for name, records in cases.items():
        for formatter_name in FORMATTERS:
            row = asyncio.run(_measure(records, formatter_name))
            rows.append({"transcript": name, "formatter": formatter_name, **row})
    worst = max(abs(r["ours_error"]) for r in rows)
    return {
        "id": "B2",
        "what": TITLE,
        "agentscope_version": agentscope_version(),
        "rows": rows,
        "worst_ours_error": round(worst, 5),
        "worst_estimate_error": round(max(abs(r["estimate_error"]) for r in rows), 4),
        "worst_agentscope_count_error": (
            round(max(abs(r["agentscope_count_error"]) for r in rows), 4) if MAJOR >= 2 else None
        ),
        "target": "ours within 1% of the exact formatted count",
        "target_met": worst <= 0.01,
    }


def table(record: dict) -> str:
    """Markdown table of a B2 record."""
    lines = [
        f"AgentScope {record.get('agentscope_version', '?')}",
        "",
        "| transcript | formatter | exact | ours | ours error | bytes/4 | bytes/4 error "
        "| 2.x count_tokens | its error |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in record["rows"]:
        if r.get("agentscope_count") is None:
            native = "- (1.x: none) | -"
        else:
            native = f"{r['agentscope_count']:,} | {r['agentscope_count_error']:+.1%}"
        lines.append(
            f"| {r['transcript']} | {r['formatter']} | {r['exact']:,} | {r['ours']:,} "
            f"| {r['ours_error']:+.3%} | {r['estimate']:,} | {r['estimate_error']:+.1%} | {native} |"
        )
    return "\n".join(lines)
