"""Faults of the workspace (issue: faults that lose data or overflow the window), on a managed
agent of the installed AgentScope: a workspace that cannot be written is refused when enabling,
and a disk that fills up during a run never lets a prompt over the window go out; the run stops
with ``WorkspaceWriteError`` and an ``error`` event, keeps every message, and carries on once
writes work again. Disk full and read-only are simulated by making the write calls fail, never
by filling a real disk."""

from __future__ import annotations

import contextlib
import errno
import os
from pathlib import Path

import pytest
from harness_common import (
    SIZES_KB,
    disk_full,
    expire_everything_and_clean,
    make_text,
    prompt_orphans,
    session_plan,
)
from installed_harness import (
    call_ids,
    dialog_views,
    is_agent_call,
    is_compaction_call,
    managed,
    offloaded_files_missing,
    result_ids,
    scripted_session,
    session_responder,
    tool_results,
)

from agentscope_context_ext.core.errors import WorkspaceError, WorkspaceWriteError
from agentscope_context_ext.core.tokens import get_token_counter
from agentscope_context_ext.core.truncation import split_notice
from agentscope_context_ext.core.workspace import DialogStore, ToolResultStore
from agentscope_context_ext.testing import ModelCall, ScriptedChatModel, reply, tool_call

WINDOW = 16384
SIZES = [60, 90, 150, 30]


def config(workspace: Path | str, **extra) -> dict:
    return {"workspace": str(workspace), "max_input_tokens": WINDOW, **extra}


def _prompt_tokens(call: ModelCall) -> int:
    return get_token_counter("qwen").count_formatted(call.messages, call.tools)


def _read_only(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Creating anything under ``workspace`` fails as on a read-only file system."""
    real_open = os.open

    def read_only(path, flags, *args, **kwargs):
        if str(path).startswith(str(workspace)) and flags & os.O_CREAT:
            raise OSError(errno.EROFS, "Read-only file system")
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", read_only)


def test_enable_refuses_a_read_only_workspace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    workspace = tmp_path / "ws"
    _read_only(workspace, monkeypatch)
    with pytest.raises(WorkspaceError, match="Read-only file system") as raised:
        managed(scripted_session([]), {"workspace": str(workspace)})
    assert str(workspace) in str(raised.value), "the error names the folder"


@pytest.mark.agentscope1
def test_a_refused_workspace_leaves_a_1x_agent_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """1.x attaches to an agent that exists already: nothing is attached when it refuses."""
    from installed_harness import formatter

    from agentscope_context_ext import enable_context_management

    from agent_harness import make_agent

    workspace = tmp_path / "ws"
    _read_only(workspace, monkeypatch)
    agent = make_agent(scripted_session([]), formatter())
    with pytest.raises(WorkspaceError, match="Read-only file system"):
        enable_context_management(agent, {"workspace": str(workspace)})
    assert not hasattr(agent, "context_manager"), "nothing was attached"


def test_enable_refuses_a_workspace_that_cannot_be_created() -> None:
    with pytest.raises(WorkspaceError, match="/proc/ace-workspace"):
        managed(scripted_session([]), {"workspace": "/proc/ace-workspace"})


async def test_a_full_disk_never_sends_a_prompt_over_the_window(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plan = session_plan(total_calls=14, sizes_kb=SIZES)
    model = scripted_session(plan)
    agent = managed(model, config(workspace))
    manager = agent.manager
    events = []
    manager.subscribe(events.append)
    monkeypatch.setattr(ToolResultStore, "save", disk_full)
    monkeypatch.setattr(DialogStore, "append", disk_full)

    with pytest.raises(WorkspaceWriteError, match="No space left on device") as raised:
        await agent.ask("fetch the documents")
    assert raised.value.tokens > raised.value.max_input_tokens == WINDOW
    assert all(_prompt_tokens(call) <= WINDOW for call in model.calls), "nothing over the window"
    assert all(prompt_orphans(call.messages) == [] for call in model.calls)
    assert not any(is_compaction_call(call) for call in model.calls), "no summary made for nothing"
    types = [event.type for event in events]
    assert types.count("error") == 1 and "save_failed" in types
    # every result is in the context, whole, and paired with its call
    views = agent.views()
    results = tool_results(views)
    assert results and sorted(result_ids(views)) == sorted(call_ids(views))
    assert not dialog_views(agent)
    for result in results:
        step, k = map(int, result.id.split("-")[1:])
        size, seed = plan[step][k]
        assert result.text == make_text(size * 1024, seed), "whole"
    assert not any("<<<TRUNCATED>>>" in result.text for result in results)

    # Space again: the same agent saves what it kept, compacts and finishes the work.
    monkeypatch.undo()
    assert await agent.ask("go on") == "All documents fetched."
    assert manager.stats.truncations == 14 and manager.stats.compactions >= 1
    assert all(_prompt_tokens(call) <= WINDOW for call in model.calls)
    assert all(prompt_orphans(call.messages) == [] for call in model.calls)
    assert len([c for c in model.calls if is_agent_call(c)]) == len(plan) + 1
    for result in tool_results(agent.views()):  # each result left in the context is cut
        parts = split_notice(result.text)
        assert parts is not None and (workspace / parts[1].file_path).is_file()
    everything = dialog_views(agent) + agent.views()
    assert len(set(result_ids(everything))) == 14, "every result in the context or in dialog/"
    assert offloaded_files_missing(everything, workspace) == []


async def test_a_failing_dialog_write_costs_no_model_call(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = scripted_session(session_plan(total_calls=10, sizes_kb=[30, 12]))
    agent = managed(model, config(workspace))
    manager = agent.manager
    monkeypatch.setattr(DialogStore, "append", disk_full)
    monkeypatch.setattr(DialogStore, "stage", disk_full)  # what a summary written ahead saves
    with contextlib.suppress(WorkspaceWriteError):  # whether the prompt reaches the window
        await agent.ask("fetch the documents")  # depends on the plan
    assert manager.stats.counts["compaction_failed"] >= 1
    assert manager.stats.compactions == 0
    assert not any(is_compaction_call(call) for call in model.calls), "no summary asked"
    assert not list((workspace / "dialog").glob("*.jsonl")), "nothing half-written"
    results = tool_results(agent.views())
    assert len(results) == 10, "nothing left the context"
    cut = [result for result in results if split_notice(result.text)]
    assert cut and manager.stats.truncations == len(cut), "stage one works on"


async def test_cleanup_keeps_what_the_context_still_names(workspace: Path) -> None:
    """The TTL cleanup never deletes a saved result that a live message or the summary names;
    one that only a saved dialog line names expires, and read_file says so."""
    first = session_responder(session_plan(total_calls=20, sizes_kb=SIZES))
    later: list = []

    def respond(call: ModelCall) -> object:
        return later.pop(0) if later and is_agent_call(call) else first(call)

    agent = managed(ScriptedChatModel(respond), config(workspace))
    await agent.ask("fetch the documents")
    assert agent.manager.stats.compactions >= 1
    removed = await expire_everything_and_clean(agent.manager, workspace)
    # the agent reads an expired one: a clear answer, not an exception
    later += [reply("look", tool_call("read_file", "gone", file_path=sorted(removed)[0])), "ok"]
    assert await agent.ask("read it") == "ok"
    answer = next(r.text for r in tool_results(agent.views()) if r.id == "gone")
    assert answer.startswith("Error: ") and "has expired" in answer


async def test_a_crash_between_the_dialog_write_and_the_context_update_loses_nothing(
    workspace: Path,
) -> None:
    """The session saved the moment the dialog is written (then the process dies, before the
    summary and the context are updated) holds the saved messages in both places; a fresh
    agent that loads it and carries on writes them again, and the dialog reader keeps one of
    each: nothing lost, nothing twice, no orphan."""
    plan = session_plan(total_calls=14, sizes_kb=SIZES_KB)
    model = scripted_session(plan)
    agent = managed(model, config(workspace))

    class Crash(BaseException):
        pass

    async def snapshot_then_crash(event) -> None:
        if event.type == "dialog_saved":
            await agent.save_session("s")
            raise Crash()

    unsubscribe = agent.manager.subscribe(snapshot_then_crash)
    with pytest.raises(Crash):
        await agent.ask("go")
    unsubscribe()
    done = len([call for call in model.calls if is_agent_call(call)])
    lines_before = sum(1 for p in (workspace / "dialog").glob("*.jsonl") for _ in p.open())

    fresh_model = ScriptedChatModel(session_responder(plan, first_step=done))
    fresh = managed(fresh_model, config(workspace))
    await fresh.load_session("s")
    in_context = set(result_ids(fresh.views()))
    on_disk = result_ids(dialog_views(fresh))
    assert on_disk and len(on_disk) == len(set(on_disk))
    assert set(on_disk) <= in_context, "the crash left the saved steps in both places"

    assert await fresh.ask("continue") == "All documents fetched."  # compaction writes them again
    lines_after = sum(1 for p in (workspace / "dialog").glob("*.jsonl") for _ in p.open())
    saved = dialog_views(fresh)
    ids = [view.id for view in saved]
    assert lines_after > lines_before and len(ids) == len(set(ids)), "duplicates ignored on read"
    saved_results = result_ids(saved)
    assert len(saved_results) == len(set(saved_results))
    everything = set(saved_results) | set(result_ids(fresh.views()))
    assert in_context <= everything
    assert everything == {f"call-{i}-{k}" for i, step in enumerate(plan) for k in range(len(step))}
    assert all(prompt_orphans(c.messages) == [] for c in [*model.calls, *fresh_model.calls])
