"""The pipeline on a real ReActAgent (design §4, 4.1, 4.3, 4.4): long sessions stay in the window
without orphans or loss; compaction failures, dialog write failures and crashes lose nothing;
an oversized newest message overflows without looping."""

from __future__ import annotations

from pathlib import Path

import pytest
from agentscope.agent import ReActAgent
from agentscope.formatter import DashScopeChatFormatter
from agentscope.message import Msg
from agentscope.session import JSONSession
from agentscope.tool import Toolkit

from agentscope_context_ext import (
    enable_context_management,
    get_token_counter,
    open_dialog,
    split_notice,
)
from agentscope_context_ext.testing import ScriptedChatModel

from agent_harness import (
    FORMATTERS,
    SIZES_KB,
    is_agent_call,
    make_agent,
    make_text,
    prompt_orphans,
    scripted_session,
    session_plan,
    tool_ids,
)


@pytest.mark.parametrize("window", [16384, 32768])
@pytest.mark.parametrize("formatter_class", FORMATTERS)
async def test_long_session_stays_in_window_without_orphans_or_loss(
    workspace: Path, window: int, formatter_class: type
) -> None:
    plan = session_plan(total_calls=62, sizes_kb=SIZES_KB)
    assert any(len(step) > 1 for step in plan), "the plan has parallel calls"
    model = scripted_session(plan)
    agent = make_agent(model, formatter_class())
    manager = enable_context_management(
        agent, {"workspace": str(workspace), "max_input_tokens": window}
    )
    events = []
    manager.subscribe(events.append)
    user = Msg("user", "Fetch every document and analyse them.", "user")
    final = await agent(user)
    assert final.get_text_content() == "All documents fetched."

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
    store = open_dialog(workspace)
    for ref in agent.memory.compact_summary.dialog_refs:
        assert f"{ref.file} lines {ref.first_line}-{ref.last_line}" in summary_text
        assert (workspace / ref.file).is_file()
        assert store.line_count(ref.file) >= ref.last_line

    # Every message the agent produced is exactly once in dialog/ or memory, in order.
    saved = [r.msg for r in store.iter_records(newest_first=False)]
    sequence = saved + agent.memory.messages
    ids = [m.id for m in sequence]
    assert len(ids) == len(set(ids)), "no message twice"
    total_calls = sum(len(step) for step in plan)
    assert len(sequence) == 1 + len(agent_calls) + total_calls
    assert sequence[0].id == user.id
    steps = [m.get_text_content() for m in sequence if m.role == "assistant"]
    assert steps == [f"step {i}" for i in range(len(plan))] + ["All documents fetched."]
    seen_calls: set[str] = set()
    for msg in sequence:
        for call_id in tool_ids(msg, "tool_result"):
            assert call_id in seen_calls, "each result after its call"
        seen_calls.update(tool_ids(msg, "tool_use"))
    # Every offloaded result is on disk, whole.
    for msg in sequence:
        for block in msg.content if isinstance(msg.content, list) else []:
            if block.get("type") == "tool_result":
                parts = split_notice(
                    block["output"]
                    if isinstance(block["output"], str)
                    else block["output"][0]["text"]
                )
                if parts:
                    assert (workspace / parts[1].file_path).is_file()


@pytest.mark.parametrize(
    "bad",
    [RuntimeError("upstream 500: internal error"), None, "lorem ipsum garbage without sections"],
    ids=["raises", "nothing", "garbage"],
)
async def test_failing_compaction_model_gives_extractive_summary(
    workspace: Path, bad: object
) -> None:
    plan = session_plan(total_calls=20, sizes_kb=SIZES_KB)

    def compaction(call):
        if isinstance(bad, BaseException):
            raise bad
        return bad

    model = scripted_session(plan, compaction=compaction)
    agent = make_agent(model, DashScopeChatFormatter())
    manager = enable_context_management(
        agent, {"workspace": str(workspace), "max_input_tokens": 16384}
    )
    await agent(Msg("user", "Fetch all documents. Never skip one.", "user"))
    assert manager.stats.compactions >= 1
    summary = agent.memory.compact_summary
    assert summary.source == "extractive"
    rendered = summary.render()
    for fragment in ("upstream 500", "lorem ipsum", "RuntimeError", "Traceback"):
        assert fragment not in rendered
    assert "Never skip one" in rendered
    saved = [r.msg.id for r in open_dialog(workspace).iter_records()]
    assert len(saved) + len(agent.memory.messages) == 1 + (len(plan) + 1) + 20


async def test_dialog_write_failure_aborts_compaction_and_keeps_messages(workspace: Path) -> None:
    plan = session_plan(total_calls=14, sizes_kb=SIZES_KB)
    model = scripted_session(plan)
    agent = make_agent(model, DashScopeChatFormatter())
    manager = enable_context_management(
        agent, {"workspace": str(workspace), "max_input_tokens": 16384}
    )
    # The folder disappears after enabling (enable itself refuses an unusable one).
    (workspace / "dialog").rmdir()
    (workspace / "dialog").write_text("a file where the dialog folder should be")
    await agent(Msg("user", "go", "user"))
    assert manager.stats.counts["compaction_failed"] >= 1
    assert manager.stats.compactions == 0
    assert agent.memory.compact_summary is None
    assert len(agent.memory.messages) == 1 + (len(plan) + 1) + 14, "nothing was removed"


async def test_crash_between_dialog_write_and_memory_update_loses_nothing(
    workspace: Path, tmp_path: Path
) -> None:
    plan = session_plan(total_calls=14, sizes_kb=SIZES_KB)
    model = scripted_session(plan)
    agent = make_agent(model, DashScopeChatFormatter())
    manager = enable_context_management(
        agent, {"workspace": str(workspace), "max_input_tokens": 16384}
    )
    session = JSONSession(save_dir=str(tmp_path / "sessions"))
    saved_once = {}

    class Crash(BaseException):
        pass

    async def snapshot_then_crash(event):
        # Persist the agent the moment the dialog is written, then die before the summary and
        # the memory are updated: what a power cut at that point leaves behind.
        if event.type == "dialog_saved" and not saved_once:
            saved_once["state"] = True
            await session.save_session_state(session_id="s", agent=agent)
            raise Crash()

    manager.bus._listeners.append(snapshot_then_crash)
    with pytest.raises(Crash):
        await agent(Msg("user", "go", "user"))

    fresh_model = scripted_session(plan[len([c for c in model.calls if is_agent_call(c)]) - 1 :])
    fresh = make_agent(fresh_model, DashScopeChatFormatter())
    enable_context_management(fresh, {"workspace": str(workspace), "max_input_tokens": 16384})
    await session.load_session_state(session_id="s", agent=fresh)
    in_memory = {m.id for m in fresh.memory.messages}
    on_disk = [r.msg.id for r in open_dialog(workspace).iter_records()]
    assert len(on_disk) == len(set(on_disk))
    assert in_memory & set(on_disk), "the crash left messages in both places"
    await fresh(None)  # continue: compaction writes the same messages again
    records = list(open_dialog(workspace).iter_records())
    ids = [r.msg.id for r in records]
    assert len(ids) == len(set(ids)), "duplicates are ignored on read"
    assert in_memory <= set(ids) | {m.id for m in fresh.memory.messages}


async def test_oversized_newest_message_is_offloaded_without_looping(workspace: Path) -> None:
    """A user message larger than the window: kept (same id), its head and a notice in the
    prompt, the whole text saved where read_file reads it; no prompt over the window."""
    model = ScriptedChatModel(["first answer", "second answer", "third answer"])
    toolkit = Toolkit()
    agent = ReActAgent(
        name="a",
        sys_prompt="S " * 3000,
        model=model,
        formatter=DashScopeChatFormatter(),
        toolkit=toolkit,
    )
    agent.set_console_output_enabled(False)
    manager = enable_context_management(
        agent, {"workspace": str(workspace), "max_input_tokens": 8192}
    )
    events = []
    manager.subscribe(events.append)
    await agent(Msg("user", "small question", "user"))
    text = "please read: " + make_text(40 * 1024, seed=3)
    huge = Msg("user", text, "user")
    await agent(huge)
    offloaded = [e for e in events if e.type == "user_message_offloaded"]
    assert len(offloaded) == 1
    kept = agent.memory.get(huge.id)
    assert kept is not None, "the user's message is kept"
    excerpt, notice = split_notice(kept.content)
    assert text.startswith(excerpt) and "please read: 3:00000" in model.calls[1].text
    assert (workspace / notice.file_path).read_text(encoding="utf-8") == text
    await agent(Msg("user", "and now?", "user"))
    assert manager.stats.counts["compaction_started"] <= 2, "a bounded number of compactions"
    counter = manager.counter
    assert all(counter.count_formatted(call.messages, call.tools) <= 8192 for call in model.calls)


async def test_many_compactions_keep_one_raw_dialog_line_per_file(workspace: Path) -> None:
    """The Raw Dialog guide merges touching ranges: it does not grow a line per compaction."""
    model = scripted_session(session_plan(total_calls=80, sizes_kb=[8, 12, 4]))
    agent = make_agent(model, DashScopeChatFormatter())
    manager = enable_context_management(
        agent, {"workspace": str(workspace), "max_input_tokens": 4096}
    )
    await agent(Msg("user", "fetch the documents", "user"))
    assert manager.stats.compactions >= 10
    summary = agent.memory.compact_summary
    files = {p.name for p in (workspace / "dialog").glob("*.jsonl")}
    assert len(summary.dialog_refs) == len(files), summary.dialog_refs
    ref = summary.dialog_refs[0]
    assert ref.first_line == 1
    assert ref.last_line == open_dialog(workspace).line_count(ref.file)
    raw = summary.render().split("## Raw Dialog", 1)[1]
    assert raw.count(".jsonl lines ") == len(files)
