"""Progress carried across compactions (design §4.2, issue 43): the fourth compaction of a real
run dropped every Progress line the first three had. The previous summary's progress is
merged, bounded by the budget, the oldest condensed first, never dropped silently: for the
extractive summary and for a model's that lost it. Core only: neutral messages."""

from __future__ import annotations

import asyncio
import re

from neutral_port import ScriptedCallModel

from agentscope_context_ext import get_token_counter
from agentscope_context_ext.core.messages import Message, Text, ToolCall, ToolResult
from agentscope_context_ext.core.pipeline import SummaryWriter
from agentscope_context_ext.core.summary import CompactSummary, estimate_tokens, extractive_summary

BUDGET = 400
"""About what an 8k window's summary gets (max_summary_tokens: 5% of it, at least 512, less the
frame)."""


def stretch(k: int) -> list[Message]:
    """One compaction's worth of work: six test runs and one edit."""
    msgs = [Message(f"u{k}", "user", "user", "", (Text(f"Step {k}: fix module m{k}."),))]
    for i in range(6):
        call = ToolCall(f"c{k}_{i}", "bash", {"command": f"pytest tests/test_m{k}_{i}.py -q"})
        msgs.append(Message(f"a{k}_{i}", "assistant", "assistant", "", (Text(""), call)))
        done = ToolResult(call.id, "bash", f"{i + 1} passed in 0.{i}s")
        msgs.append(Message(f"r{k}_{i}", "system", "system", "", (done,)))
    edit = ToolCall(
        f"e{k}",
        "edit",
        {"file_path": f"src/m{k}.py", "old_string": "x = 0\n", "new_string": "x = 1\n"},
    )
    msgs.append(Message(f"e{k}", "assistant", "assistant", "", (Text(""), edit)))
    msgs.append(Message(f"er{k}", "system", "system", "", (ToolResult(edit.id, "edit", "ok"),)))
    return msgs


def names(k: int) -> list[str]:
    return [*(f"pytest tests/test_m{k}_{i}.py -q" for i in range(6)), f"src/m{k}.py"]


def counted(summary: CompactSummary) -> int:
    """Earlier items the summary counts without naming them."""
    match = re.search(r"\(\+(\d+) more", "\n".join(summary.progress))
    return int(match.group(1)) if match else 0


def test_earlier_progress_is_condensed_never_dropped_silently() -> None:
    summary = None
    for k in range(1, 7):
        summary = extractive_summary(stretch(k), summary, budget_tokens=BUDGET)
        text = summary.to_markdown()
        assert estimate_tokens(text) <= BUDGET + 40, "the budget holds"
        earlier = [name for j in range(1, k) for name in names(j)]
        missing = [name for name in earlier if f"`{name}`" not in text]
        assert len(missing) <= counted(summary), (k, missing, summary.progress)
        # the newest work is there with its outcome
        assert f"`pytest tests/test_m{k}_5.py -q` → ok" in text
    assert summary is not None and summary.progress[0].startswith("Earlier: ")
    # the oldest give way first: what is still named is the newer part of the earlier work
    named = [j for j in range(1, 6) if f"`src/m{j}.py`" in summary.to_markdown()]
    assert named == list(range(min(named), 6)), named


def test_a_fourth_compaction_keeps_what_the_first_three_did() -> None:
    """The case of the real run: four compactions on a small budget."""
    summary = None
    for k in range(1, 5):
        summary = extractive_summary(stretch(k), summary, budget_tokens=BUDGET)
    assert summary is not None and counted(summary) == 0
    text = summary.to_markdown()
    for j in range(1, 4):
        assert all(f"`{name}`" in text for name in names(j)), (j, summary.progress)


def test_a_model_summary_that_dropped_earlier_progress_gets_it_back() -> None:
    previous = extractive_summary(stretch(1), None, budget_tokens=BUDGET)
    answer = (
        "## Goal\n- Step 2: fix module m2.\n## Constraints\n- none\n"
        "## Progress\n- Ran `pytest tests/test_m2_0.py -q`: 1 passed\n"
        "## Key Decisions\n- none\n## Next Steps\n- fix m3\n## Critical Context\n- `src/m2.py`\n"
    )
    model = ScriptedCallModel([answer])
    writer = SummaryWriter(model, get_token_counter("qwen"), 32768, 1024)
    result = asyncio.run(writer.summarize(stretch(2), previous))
    summary = result.summary
    assert summary.source == "llm"
    assert "keep every Progress item of the previous memo" in model.calls[0].instruction
    assert summary.progress[0].startswith("Earlier: ")
    text = summary.to_markdown()
    assert all(f"`{name}`" in text for name in names(1)), summary.progress
    assert "Ran `pytest tests/test_m2_0.py -q`: 1 passed" in summary.progress


def test_progress_a_summary_keeps_is_not_carried_twice() -> None:
    first = extractive_summary(stretch(1), None, budget_tokens=2048)
    second = extractive_summary(stretch(2), first, budget_tokens=2048)
    assert not any(item.startswith("Earlier") for item in second.progress)
    assert all(item in second.progress for item in first.progress)
