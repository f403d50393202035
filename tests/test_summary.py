"""Summary parsing, the extractive fallback and the Compactor's failure handling (SPEC 4.2, 12.7,
12.12), with the real scripted model and AgentScope formatter."""

from __future__ import annotations

import asyncio

import pytest
from agentscope.formatter import DashScopeChatFormatter
from agentscope.message import Msg

from agentscope_context_ext import CompactSummary, get_token_counter
from agentscope_context_ext.memory import DialogRange
from agentscope_context_ext.pipeline import (
    Compactor,
    extractive_summary,
    merge_summaries,
    parse_summary,
    render_for_summary,
    summary_language,
)
from agentscope_context_ext.testing import ScriptedChatModel
from agentscope_context_ext.truncation import truncate_fresh

GOOD = """## Goal
- Migrate the billing service to Postgres 16
## Constraints
- Never drop the legacy table
## Progress
- Dumped schema to /srv/dump.sql
## Key Decisions
- Use logical replication
## Next Steps
- Run the cutover script
## Critical Context
- tool_result/0123456789abcdef0123456789abcdef.txt
"""


def conversation() -> list[Msg]:
    big = truncate_fresh(
        "row\n" * 5000, max_bytes=200, file_path="tool_result/" + "a" * 32 + ".txt"
    )
    return [
        Msg(
            "user",
            "Please migrate billing to Postgres. You must never drop the legacy table.",
            "user",
        ),
        Msg(
            "assistant",
            [
                {"type": "text", "text": "I will dump the schema first."},
                {
                    "type": "tool_use",
                    "id": "c1",
                    "name": "shell",
                    "input": {"cmd": "pg_dump billing"},
                },
            ],
            "assistant",
        ),
        Msg(
            "system",
            [{"type": "tool_result", "id": "c1", "name": "shell", "output": big}],
            "system",
        ),
        Msg(
            "assistant",
            [
                {
                    "type": "tool_use",
                    "id": "c2",
                    "name": "shell",
                    "input": {"cmd": "psql -f /srv/x.sql"},
                }
            ],
            "assistant",
        ),
        Msg(
            "system",
            [
                {
                    "type": "tool_result",
                    "id": "c2",
                    "name": "shell",
                    "output": "Error: relation missing",
                }
            ],
            "system",
        ),
        Msg(
            "assistant",
            "I decided to use logical replication instead. Next I will run the cutover.",
            "assistant",
        ),
    ]


def test_parse_accepts_the_six_sections() -> None:
    summary = parse_summary(GOOD)
    assert summary is not None
    assert summary.goal == ["Migrate the billing service to Postgres 16"]
    assert summary.key_decisions == ["Use logical replication"]
    assert summary.source == "llm"


@pytest.mark.parametrize(
    "variant",
    [
        GOOD.replace("## ", "### "),
        GOOD.replace("## Goal", "**Goal**").replace("## Progress", "**Progress:**"),
        GOOD.replace("## Key Decisions", "## KEY DECISIONS").replace("- ", "1. "),
        "Sure, here it is:\n\n" + GOOD,
    ],
)
def test_parse_is_tolerant_of_heading_styles(variant: str) -> None:
    summary = parse_summary(variant)
    assert summary is not None and summary.goal and summary.progress


@pytest.mark.parametrize(
    "answer",
    [
        None,
        "",
        "   ",
        "Error: 429 Too Many Requests",
        "I'm sorry, I cannot help with that.",
        "## Goal\n- x\n",  # too few sections
        "## Progress\n- a\n## Next Steps\n- b\n## Constraints\n- c\n",  # no goal
        "{'garbage': true}",
    ],
)
def test_parse_rejects_unusable_answers(answer: str | None) -> None:
    assert parse_summary(answer) is None


def test_extractive_summary_covers_every_dimension() -> None:
    summary = extractive_summary(conversation())
    assert summary.source == "extractive"
    assert "migrate billing" in summary.goal[0]
    assert any("never drop the legacy table" in c for c in summary.constraints)
    assert any(p.startswith("shell(cmd=pg_dump billing) -> ok") for p in summary.progress)
    assert any("-> error: Error: relation missing" in p for p in summary.progress)
    assert any("tool_result/" + "a" * 32 + ".txt" in p for p in summary.progress)
    assert any("logical replication" in d for d in summary.key_decisions)
    assert any("cutover" in n for n in summary.next_steps)
    assert "tool_result/" + "a" * 32 + ".txt" in summary.critical_context
    assert "/srv/x.sql" in summary.critical_context


def test_extractive_summary_in_chinese() -> None:
    msgs = [
        Msg("user", "请帮我整理报告。不要删除原始数据。", "user"),
        Msg("assistant", "接下来我会读取文件。", "assistant"),
    ]
    summary = extractive_summary(msgs)
    assert summary.goal == ["请帮我整理报告。不要删除原始数据。"]
    assert any("不要删除原始数据" in c for c in summary.constraints)
    assert summary.next_steps
    assert summary_language(msgs, "auto").startswith("Chinese")
    assert summary_language(conversation(), "auto") == "English"
    assert summary_language(msgs, "French") == "French"


def test_merge_keeps_the_earliest_goal_and_accumulates_refs() -> None:
    first = CompactSummary(
        goal=["A"],
        progress=["p1"],
        dialog_refs=[DialogRange(file="dialog/2026-12-01.jsonl", first_line=1, last_line=9)],
    )
    second = CompactSummary(goal=["B"], progress=["p2"], next_steps=["n2"])
    merged = merge_summaries(first, second)
    assert merged.goal == ["A", "B"]
    assert merged.progress == ["p1", "p2"]
    assert merged.next_steps == ["n2"]
    assert [str(r) for r in merged.dialog_refs] == ["dialog/2026-12-01.jsonl lines 1-9"]
    assert merged.compactions == 2


def test_render_for_summary_keeps_offload_paths() -> None:
    text = render_for_summary(conversation(), block_chars=50)
    assert "tool_result/" + "a" * 32 + ".txt" in text
    assert "pg_dump billing" in text


def test_summary_message_has_sections_and_dialog_guide() -> None:
    summary = parse_summary(GOOD).model_copy(
        update={
            "dialog_refs": [
                DialogRange(file="dialog/2026-12-02.jsonl", first_line=1, last_line=340)
            ]
        }
    )
    msg = summary.to_msg("context-summary-1")
    assert msg.role == "user" and msg.id == "context-summary-1"
    for title in (
        "## Goal",
        "## Constraints",
        "## Progress",
        "## Key Decisions",
        "## Next Steps",
        "## Critical Context",
    ):
        assert title in msg.content
    assert "dialog/2026-12-02.jsonl lines 1-340" in msg.content
    assert "read_dialog" in msg.content and "backwards" in msg.content


def _compactor(script) -> tuple[Compactor, ScriptedChatModel]:
    model = ScriptedChatModel(script, when_exhausted=None)
    return Compactor(
        model, DashScopeChatFormatter(), get_token_counter("qwen"), 32768, timeout=5
    ), model


def test_compactor_uses_the_model_answer() -> None:
    compactor, model = _compactor([GOOD])
    result = asyncio.run(compactor.summarize(conversation(), None))
    assert result.summary.source == "llm"
    assert result.summary.goal == ["Migrate the billing service to Postgres 16"]
    assert result.attempts == 1
    prompt = model.calls[0].text
    assert "## Goal" in prompt and "pg_dump billing" in prompt


def test_compactor_retries_once_with_a_stricter_instruction() -> None:
    compactor, model = _compactor(["Here is a summary of what happened...", GOOD])
    result = asyncio.run(compactor.summarize(conversation(), None))
    assert result.summary.source == "llm"
    assert result.attempts == 2
    assert "could not be used" in model.calls[1].text


@pytest.mark.parametrize(
    "script",
    [
        [RuntimeError("503 Service Unavailable"), RuntimeError("503 Service Unavailable")],
        [None, None],
        ["Error: rate limit exceeded", "{'oops': 1}"],
        [TimeoutError("slow"), "garbage"],
    ],
)
def test_compactor_falls_back_to_extractive_without_error_text(script: list) -> None:
    compactor, _ = _compactor(script)
    result = asyncio.run(compactor.summarize(conversation(), None))
    summary = result.summary
    assert summary.source == "extractive"
    assert len(result.failures) == 2
    rendered = summary.render()
    for bad in ("503", "rate limit", "oops", "Traceback", "RuntimeError"):
        assert bad not in rendered
    assert summary.goal and summary.progress


def test_compactor_times_out() -> None:
    async def slow(call):
        await asyncio.sleep(3600)

    model = ScriptedChatModel(slow)
    compactor = Compactor(
        model, DashScopeChatFormatter(), get_token_counter("qwen"), 32768, timeout=0.05
    )
    result = asyncio.run(compactor.summarize(conversation(), None))
    assert result.summary.source == "extractive"
    assert all("TimeoutError" in f for f in result.failures)


def test_compactor_keeps_offload_paths_the_model_dropped() -> None:
    compactor, _ = _compactor(
        [GOOD.replace("- tool_result/0123456789abcdef0123456789abcdef.txt", "- nothing")]
    )
    result = asyncio.run(compactor.summarize(conversation(), None))
    assert "tool_result/" + "a" * 32 + ".txt" in result.summary.critical_context


def test_compactor_splits_input_larger_than_the_window() -> None:
    msgs = [Msg("user", f"message {i} " + "word " * 400, "user") for i in range(40)]
    compactor, model = _compactor([GOOD] * 10)
    compactor.max_input_tokens = 4096
    result = asyncio.run(compactor.summarize(msgs, None))
    assert result.summary.source == "llm"
    assert len(model.calls) > 1
    assert "# Previous memo" in model.calls[1].text
