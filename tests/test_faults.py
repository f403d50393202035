"""Faults of the workspace (issue: faults that lose data or overflow the window): a workspace that
cannot be written is refused when enabling, and a disk that fills up during a run never lets a
prompt over the window go out; the run stops with ``WorkspaceWriteError`` and an ``error`` event,
keeps every message, and carries on once writes work again. Disk full and read-only are
simulated by making the write calls fail, never by filling a real disk."""

from __future__ import annotations

import contextlib
import errno
import os
from pathlib import Path

import pytest
from agentscope.formatter import DashScopeChatFormatter
from agentscope.message import Msg
from harness_common import disk_full, expire_everything_and_clean

from agentscope_context_ext import (
    ToolResultStore,
    WorkspaceError,
    WorkspaceWriteError,
    enable_context_management,
    get_token_counter,
)
from agentscope_context_ext.core.workspace import DialogStore
from agentscope_context_ext.testing import ModelCall

from agent_harness import (
    is_agent_call,
    is_compaction_call,
    make_agent,
    result_text,
    scripted_session,
    session_plan,
    tool_ids,
)

WINDOW = 16384


def _prompt_tokens(call: ModelCall) -> int:
    return get_token_counter("qwen").count_formatted(call.messages, call.tools)


def test_enable_refuses_a_read_only_workspace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    workspace = tmp_path / "ws"
    real_open = os.open

    def read_only(path, flags, *args, **kwargs):
        if str(path).startswith(str(workspace)) and flags & os.O_CREAT:
            raise OSError(errno.EROFS, "Read-only file system")
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", read_only)
    agent = make_agent(scripted_session([]), DashScopeChatFormatter())
    with pytest.raises(WorkspaceError, match="Read-only file system") as raised:
        enable_context_management(agent, {"workspace": str(workspace)})
    assert str(workspace) in str(raised.value), "the error names the folder"
    assert not hasattr(agent, "context_manager"), "nothing was attached"


def test_enable_refuses_a_workspace_that_cannot_be_created() -> None:
    agent = make_agent(scripted_session([]), DashScopeChatFormatter())
    with pytest.raises(WorkspaceError, match="/proc/ace-workspace"):
        enable_context_management(agent, {"workspace": "/proc/ace-workspace"})


async def test_a_full_disk_never_sends_a_prompt_over_the_window(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plan = session_plan(total_calls=14, sizes_kb=[60, 90, 150, 30])
    model = scripted_session(plan)
    agent = make_agent(model, DashScopeChatFormatter())
    manager = enable_context_management(
        agent, {"workspace": str(workspace), "max_input_tokens": WINDOW}
    )
    events = []
    manager.subscribe(events.append)
    monkeypatch.setattr(ToolResultStore, "save", disk_full)
    monkeypatch.setattr(DialogStore, "append", disk_full)

    with pytest.raises(WorkspaceWriteError, match="No space left on device") as raised:
        await agent(Msg("user", "fetch the documents", "user"))
    assert raised.value.tokens > raised.value.max_input_tokens == WINDOW
    assert all(_prompt_tokens(call) <= WINDOW for call in model.calls), "nothing over the window"
    assert not any(is_compaction_call(call) for call in model.calls), "no summary made for nothing"
    types = [event.type for event in events]
    assert types.count("error") == 1 and "save_failed" in types
    # every result is in memory, whole
    results = [m for m in agent.memory.messages if tool_ids(m, "tool_result")]
    calls = {c for m in agent.memory.messages for c in tool_ids(m, "tool_use")}
    assert {c for m in results for c in tool_ids(m, "tool_result")} == calls
    assert all("<<<TRUNCATED>>>" not in result_text(m) for m in results)

    # Space again: the same agent saves what it kept, compacts and finishes the work.
    monkeypatch.undo()
    final = await agent(Msg("user", "go on", "user"))
    assert final.get_text_content() == "All documents fetched."
    assert manager.stats.truncations >= 1 and manager.stats.compactions >= 1
    assert all(_prompt_tokens(call) <= WINDOW for call in model.calls)
    assert len([c for c in model.calls if is_agent_call(c)]) == len(plan) + 1


async def test_a_failing_dialog_write_costs_no_model_call(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = scripted_session(session_plan(total_calls=10, sizes_kb=[30, 12]))
    agent = make_agent(model, DashScopeChatFormatter())
    manager = enable_context_management(
        agent,
        {"workspace": str(workspace), "max_input_tokens": WINDOW},
    )
    monkeypatch.setattr(DialogStore, "append", disk_full)
    with contextlib.suppress(WorkspaceWriteError):  # whether the prompt reaches the window
        await agent(Msg("user", "fetch the documents", "user"))  # depends on the plan
    assert manager.stats.counts["compaction_failed"] >= 1
    assert not any(is_compaction_call(call) for call in model.calls)
    assert not list((workspace / "dialog").glob("*.jsonl")), "nothing half-written"


async def test_cleanup_keeps_what_the_context_still_names(workspace: Path) -> None:
    """The TTL cleanup never deletes a saved result that a live message or the summary names;
    one that only a saved dialog line names expires, and read_file says so."""
    model = scripted_session(session_plan(total_calls=20, sizes_kb=[60, 90, 150, 30]))
    agent = make_agent(model, DashScopeChatFormatter())
    manager = enable_context_management(
        agent, {"workspace": str(workspace), "max_input_tokens": WINDOW}
    )
    await agent(Msg("user", "fetch the documents", "user"))
    assert manager.stats.compactions >= 1
    removed = await expire_everything_and_clean(manager, workspace)
    read_file = agent.toolkit.tools["read_file"].original_func
    answer = (await read_file(file_path=sorted(removed)[0])).content[0]["text"]
    assert answer.startswith("Error: ") and "has expired" in answer
