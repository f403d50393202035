"""The pipeline (design §4, 4.1, 4.3, 4.4): long sessions stay in the window without orphans or
loss, on a real agent of the installed AgentScope with either prompt layout; compaction failures,
dialog write failures and crashes lose nothing, an oversized newest message overflows without
looping and the Raw Dialog guide stays one line per file, framework-free on the neutral port."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from harness_common import SIZES_KB, fetch, make_text, model_summary, prompt_orphans, session_plan
from installed_harness import (
    FORMATTERS,
    all_views,
    call_ids,
    is_agent_call,
    managed,
    offloaded_files_missing,
    result_ids,
    said,
    scripted_session,
)
from neutral_port import (
    NeutralAgent,
    NeutralManager,
    ScriptedCallModel,
    everything,
    fetch_session,
    replies,
    user,
)

from agentscope_context_ext import get_token_counter, split_notice


@pytest.mark.parametrize("window", [16384, 32768])
@pytest.mark.parametrize("layout", FORMATTERS)
async def test_long_session_stays_in_window_without_orphans_or_loss(
    workspace: Path, window: int, layout: str
) -> None:
    plan = session_plan(total_calls=62, sizes_kb=SIZES_KB)
    assert any(len(step) > 1 for step in plan), "the plan has parallel calls"
    model = scripted_session(plan)
    agent = managed(model, {"workspace": str(workspace), "max_input_tokens": window}, layout=layout)
    manager = agent.manager
    events = []
    manager.subscribe(events.append)
    request = "Fetch every document and analyse them."
    assert await agent.ask(request) == "All documents fetched."

    counter = get_token_counter("qwen")
    agent_calls = [c for c in model.calls if is_agent_call(c)]
    assert len(agent_calls) == len(plan) + 1
    for call in agent_calls:
        assert counter.count_formatted(call.messages, call.tools) <= window
        assert prompt_orphans(call.messages) == []
    assert manager.stats.compactions > 1
    assert not [e for e in events if e.type == "context_overflow"]

    # The summary message comes first and names real dialog files with real line ranges.
    last = agent_calls[-1].messages
    assert last[0]["role"] == "system"
    summary_text = str(
        last[1]["content"] if isinstance(last[1]["content"], str) else last[1]["content"][0]["text"]
    )
    assert summary_text.startswith("<context-summary>")
    store = manager.dialog_store
    assert manager.port.summary.dialog_refs
    for ref in manager.port.summary.dialog_refs:
        assert f"{ref.file} lines {ref.first_line}-{ref.last_line}" in summary_text
        assert (workspace / ref.file).is_file()
        assert store.line_count(ref.file) >= ref.last_line

    # Everything the agent produced is exactly once in dialog/ or the context, in order.
    sequence = all_views(agent)
    ids = [m.id for m in sequence]
    assert len(ids) == len(set(ids)), "no message twice"
    assert (sequence[0].role, sequence[0].text) == ("user", request)
    calls = [f"call-{i}-{k}" for i, step in enumerate(plan) for k in range(len(step))]
    assert call_ids(sequence) == calls, "every call once, in order"
    assert sorted(result_ids(sequence)) == sorted(calls), "every result once"
    seen_calls: set[str] = set()
    for item in said(sequence):
        if item[0] == "result":
            assert item[1] in seen_calls, "each result after its call"
        elif item[0] == "call":
            seen_calls.add(item[1])
    steps = [item[2] for item in said(sequence) if item[:2] == ("text", "assistant")]
    assert steps == [f"step {i}" for i in range(len(plan))] + ["All documents fetched."]
    # Every offloaded result is on disk, whole.
    assert offloaded_files_missing(sequence, workspace) == []


# ------------------------------------------------------------ framework-free: the core alone


def _manager(
    workspace: Path, window: int, summary_call=None, background: bool = True
) -> NeutralManager:
    return NeutralManager(
        {
            "workspace": str(workspace),
            "max_input_tokens": window,
            "compaction": {"background_summary": background},
        },
        tools=[fetch],
        summary_call=summary_call or ScriptedCallModel(model_summary),
    )


@pytest.mark.parametrize(
    "bad",
    [RuntimeError("upstream 500: internal error"), None, "lorem ipsum garbage without sections"],
    ids=["raises", "nothing", "garbage"],
)
@pytest.mark.parametrize("background", [False, True], ids=["at-compaction", "ahead"])
async def test_failing_compaction_model_gives_extractive_summary(
    workspace: Path, bad: object, background: bool
) -> None:
    plan = session_plan(total_calls=20, sizes_kb=SIZES_KB)
    compaction = ScriptedCallModel(lambda call: bad)
    manager = _manager(workspace, 16384, compaction, background)
    agent = NeutralAgent(manager, fetch_session(plan))
    assert await agent.ask("Fetch all documents. Never skip one.") == "All documents fetched."
    assert manager.stats.compactions >= 1
    ahead = manager.pipeline.parts.compaction.ahead
    if not background:
        assert ahead is None
        assert len(compaction.calls) == 2 * manager.stats.compactions, "tried, retried, extracted"
    else:
        # written ahead (tried, retried) and failed: each compaction extracted, none waited
        if ahead.pending:
            await asyncio.wait({ahead._job.task})
        ahead.outcome()  # the last one's failure, counted
        assert ahead.stats.failed >= 1 and ahead.stats.used == 0
        assert len(compaction.calls) == 2 * ahead.stats.failed, "tried, retried, extracted"
    assert all(turn.orphans() == [] for turn in agent.turns)
    summary = manager.port.summary
    assert summary.source == "extractive"
    rendered = summary.render()
    for fragment in ("upstream 500", "lorem ipsum", "RuntimeError", "Traceback"):
        assert fragment not in rendered
    assert "Never skip one" in rendered
    saved = [r.msg.id for r in manager.dialog_store.iter_records()]
    assert len(saved) + len(agent.port.messages) == 1 + (len(plan) + 1) + 20


async def test_dialog_write_failure_aborts_compaction_and_keeps_messages(workspace: Path) -> None:
    plan = session_plan(total_calls=14, sizes_kb=SIZES_KB)
    compaction = ScriptedCallModel(model_summary)
    manager = _manager(workspace, 16384, compaction)
    agent = NeutralAgent(manager, fetch_session(plan))
    # The folder disappears after enabling (enable itself refuses an unusable one).
    (workspace / "dialog").rmdir()
    (workspace / "dialog").write_text("a file where the dialog folder should be")
    await agent.ask("go")
    assert manager.stats.counts["compaction_failed"] >= 1
    assert manager.stats.compactions == 0
    assert manager.port.summary is None
    assert compaction.calls == [], "no summary asked for messages that could not be saved"
    assert len(agent.port.messages) == 1 + (len(plan) + 1) + 14, "nothing was removed"


async def test_crash_between_dialog_write_and_memory_update_loses_nothing(
    workspace: Path,
) -> None:
    plan = session_plan(total_calls=14, sizes_kb=SIZES_KB)
    manager = _manager(workspace, 16384)
    agent = NeutralAgent(manager, fetch_session(plan))
    saved: dict[str, str] = {}

    class Crash(BaseException):
        pass

    async def snapshot_then_crash(event):
        # Persist the agent the moment the dialog is written, then die before the summary and
        # the memory are updated: what a power cut at that point leaves behind.
        if event.type == "dialog_saved" and not saved:
            saved["state"] = manager.port.state()
            raise Crash()

    manager.bus._listeners.append(snapshot_then_crash)
    with pytest.raises(Crash):
        await agent.ask("go")

    fresh = _manager(workspace, 16384)
    fresh.port.load(saved["state"])
    in_memory = {m.id for m in fresh.port.messages}
    on_disk = [r.msg.id for r in fresh.dialog_store.iter_records()]
    assert len(on_disk) == len(set(on_disk))
    assert in_memory & set(on_disk), "the crash left messages in both places"
    made = len(agent.turns)  # the steps the crashed agent was given
    resumed = NeutralAgent(fresh, fetch_session(plan[made:], first_step=made))
    # continue: compaction writes the same messages again
    assert await resumed.ask(None) == "All documents fetched."
    records = list(fresh.dialog_store.iter_records())
    ids = [r.msg.id for r in records]
    assert len(ids) == len(set(ids)), "duplicates are ignored on read"
    assert in_memory <= set(ids) | {m.id for m in fresh.port.messages}
    # and the whole session is there once: every call and its result
    views = list(everything(resumed))
    calls = [f"call-{i}-{k}" for i, step in enumerate(plan) for k in range(len(step))]
    assert [c.id for v in views for c in v.tool_calls] == calls
    assert sorted(r.id for v in views for r in v.tool_results) == sorted(calls)


async def test_oversized_newest_message_is_offloaded_without_looping(workspace: Path) -> None:
    """A user message larger than the window: kept (same id), its head and a notice in the
    prompt, the whole text saved where read_file reads it; no prompt over the window."""
    manager = NeutralManager(
        {"workspace": str(workspace), "max_input_tokens": 8192},
        summary_call=ScriptedCallModel(model_summary),
        system_prompt="S " * 3000,
    )
    agent = NeutralAgent(manager, replies("first answer", "second answer", "third answer"))
    events = []
    manager.subscribe(events.append)
    assert await agent.ask("small question") == "first answer"
    text = "please read: " + make_text(40 * 1024, seed=3)
    huge = user(text)
    assert await agent.ask(huge) == "second answer"
    offloaded = [e for e in events if e.type == "user_message_offloaded"]
    assert len(offloaded) == 1
    assert huge.id in agent.port.message_ids(), "the user's message is kept"
    excerpt, notice = split_notice(agent.port.view(huge.id).text)
    assert text.startswith(excerpt) and "please read: 3:00000" in agent.turns[1].text
    assert (workspace / notice.file_path).read_text(encoding="utf-8") == text
    assert await agent.ask("and now?") == "third answer"
    assert manager.stats.counts["compaction_started"] <= 2, "a bounded number of compactions"
    assert len(agent.turns) == 3
    assert all(turn.prompt_tokens <= 8192 for turn in agent.turns)


async def test_many_compactions_keep_one_raw_dialog_line_per_file(workspace: Path) -> None:
    """The Raw Dialog guide merges touching ranges: it does not grow a line per compaction."""
    plan = session_plan(total_calls=80, sizes_kb=[8, 12, 4])
    manager = _manager(workspace, 4096)
    agent = NeutralAgent(manager, fetch_session(plan))
    await agent.ask("fetch the documents")
    assert manager.stats.compactions >= 10
    assert all(turn.orphans() == [] for turn in agent.turns), "every cut was pair-safe"
    summary = manager.port.summary
    files = {p.name for p in (workspace / "dialog").glob("*.jsonl")}
    assert len(summary.dialog_refs) == len(files), summary.dialog_refs
    ref = summary.dialog_refs[0]
    assert ref.first_line == 1
    assert ref.last_line == manager.dialog_store.line_count(ref.file)
    raw = summary.render().split("## Raw Dialog", 1)[1]
    assert raw.count(".jsonl lines ") == len(files)
