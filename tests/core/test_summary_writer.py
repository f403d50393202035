"""The SummaryWriter (design §4.2, 12.7, 12.12; issue 11), framework-free: the compaction model's
prompt and input as the core sends them, the stricter retry, the extractive fallback, the budget.
(How each adapter's ``model_call`` passes the two texts to a real chat model is in
test_port_contract.py.)"""

from __future__ import annotations

import asyncio

import pytest
from neutral_port import ScriptedCallModel, assistant, results, user

from agentscope_context_ext import CompactSummary, get_token_counter
from agentscope_context_ext.core.messages import Message, ToolCall, ToolResult
from agentscope_context_ext.core.pipeline import SummaryWriter
from agentscope_context_ext.core.truncation import truncate_fresh

SAVED = "tool_result/" + "a" * 32 + ".txt"
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


FULL_OUTPUT = "HEAD\n" + "filler line\n" * 3000 + "found `legacy_invoice_id` in table ledger_2019\n"


def views(full_text: str | None = None) -> list[Message]:
    """The conversation to summarise; with ``full_text``, the truncated output loaded whole
    (what the port's view gives the summary)."""
    big = truncate_fresh(FULL_OUTPUT, max_bytes=200, file_path=SAVED)
    return [
        user("Please migrate billing to Postgres. You must never drop the legacy table."),
        assistant(
            "I will dump the schema first.", ToolCall("c1", "shell", {"cmd": "pg_dump billing"})
        ),
        results(ToolResult("c1", "shell", big, full_text=full_text)),
        assistant(None, ToolCall("c2", "shell", {"cmd": "psql -f /srv/x.sql"})),
        results(ToolResult("c2", "shell", "Error: relation missing")),
        assistant("I decided to use logical replication instead. Next I will run the cutover."),
    ]


def _writer(
    script, budget: int = 2048, timeout: float = 5
) -> tuple[SummaryWriter, ScriptedCallModel]:
    model = ScriptedCallModel(script)
    writer = SummaryWriter(model, get_token_counter("qwen"), 32768, budget, timeout=timeout)
    return writer, model


def test_the_model_gets_the_instruction_and_every_identifier() -> None:
    writer, model = _writer([GOOD])
    result = asyncio.run(writer.summarize(views(FULL_OUTPUT), None))
    assert result.summary.source == "llm"
    assert result.summary.goal == ["Migrate the billing service to Postgres 16"]
    assert result.attempts == 1
    prompt = model.calls[0].text
    for wanted in (
        "## Goal",
        "quoted in the user's own words",
        "exact message",
        "Please migrate billing to Postgres. You must never drop the legacy table.",
        "cmd=pg_dump billing",
        "Error: relation missing",
        SAVED,
        # from the saved full output, past the excerpt and past the clipped middle
        "legacy_invoice_id",
    ):
        assert wanted in prompt, wanted


def test_retries_once_with_a_stricter_instruction() -> None:
    writer, model = _writer(["Here is a summary of what happened...", GOOD])
    result = asyncio.run(writer.summarize(views(), None))
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
def test_falls_back_to_extractive_without_error_text(script: list) -> None:
    writer, _ = _writer(script)
    result = asyncio.run(writer.summarize(views(), None))
    summary = result.summary
    assert summary.source == "extractive"
    assert len(result.failures) == 2
    rendered = summary.render()
    for bad in ("503", "rate limit", "oops", "Traceback", "RuntimeError"):
        assert bad not in rendered
    assert summary.goal and summary.progress
    assert "`psql -f /srv/x.sql` → failed: tool `shell` said: `Error: relation missing`" in rendered


def test_times_out() -> None:
    async def never(call):
        await asyncio.Event().wait()  # a model that never answers

    writer, model = _writer(never, timeout=0.05)
    result = asyncio.run(writer.summarize(views(), None))
    assert result.summary.source == "extractive"
    assert result.failures == [
        "TimeoutError: no answer within 0.05 s (compaction.summary_timeout_seconds)"
    ]
    # a model too slow for one answer is as slow for a second: the agent would wait twice
    assert len(model.calls) == 1, "tried once, then extracted"


def test_keeps_offload_paths_the_model_dropped() -> None:
    writer, _ = _writer(
        [GOOD.replace("- tool_result/0123456789abcdef0123456789abcdef.txt", "- nothing")]
    )
    result = asyncio.run(writer.summarize(views(), None))
    assert SAVED in "\n".join(result.summary.critical_context)


def test_an_overlong_model_summary_is_fitted_to_the_budget() -> None:
    counter = get_token_counter("qwen")
    answer = GOOD + "".join(
        f"- step {i}: rebuilt index ix_{i} on table t_{i}\n" for i in range(800)
    )
    writer, _ = _writer([answer], budget=1024)
    result = asyncio.run(writer.summarize(views(), None))
    summary = result.summary
    assert summary.source == "llm"
    assert counter.count_text(summary.render()) <= 1024
    assert summary.goal == ["Migrate the billing service to Postgres 16"]
    assert summary.next_steps == ["Run the cutover script"]


def test_splits_input_larger_than_the_window_and_counts_one_compaction() -> None:
    msgs = [user(f"message {i} " + "word " * 400) for i in range(40)]
    writer, model = _writer([GOOD] * 10)
    writer.max_input_tokens = 4096
    previous = CompactSummary(goal=["Earlier goal"], compactions=3)
    result = asyncio.run(writer.summarize(msgs, previous))
    assert result.summary.source == "llm"
    assert len(model.calls) > 1
    assert "# Previous memo" in model.calls[1].text
    assert result.summary.compactions == 4


def test_nothing_to_summarise_gives_an_empty_extractive_summary() -> None:
    writer, model = _writer([GOOD])
    result = asyncio.run(writer.summarize([], None))
    assert result.summary.source == "extractive" and not model.calls
    assert result.summary.goal == [] and result.summary.compactions == 1
