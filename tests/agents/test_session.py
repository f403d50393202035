"""Session state (design §2.1), on the installed AgentScope: a managed agent saves its
conversation in the workspace (1.x: ``AtomicJSONSession``, 2.x: its state as 2.x saves it) and a
reloaded agent sends the same prompts as one that never stopped; the summary survives a detach
and a new enable; a save killed midway leaves the old state whole. Loading a 1.x session into a
plain ``ReActAgent`` before enabling, and 1.x's own ``JSONSession``, are 1.x tests (marked
``agentscope1``)."""

from __future__ import annotations

import contextlib
import difflib
import os
from pathlib import Path

import pytest
from harness_common import SIZES_KB, model_summary, session_plan, strip_volatile
from installed_harness import is_agent_call, managed, scripted_session

from agentscope_context_ext.adapter import installed


async def test_session_reload_gives_the_same_prompts(workspace: Path, tmp_path: Path) -> None:
    plan = session_plan(total_calls=24, sizes_kb=SIZES_KB)
    config = {"workspace": str(workspace), "max_input_tokens": 16384}

    straight_model = scripted_session(plan)
    straight = managed(straight_model, {**config, "workspace": str(tmp_path / "straight")})
    await straight.ask("part one")
    await straight.ask("part two")

    half_model = scripted_session(plan)
    half = managed(half_model, config)
    await half.ask("part one")
    await half.save_session("s")

    done = len([c for c in half_model.calls if is_agent_call(c)]) - 1
    resumed_model = scripted_session(plan[done:])
    resumed = managed(resumed_model, config)
    await resumed.load_session("s")
    await resumed.ask("part two")

    resumed_prompts = [c.messages for c in resumed_model.calls if is_agent_call(c)]
    straight_tail = [c.messages for c in straight_model.calls if is_agent_call(c)]
    straight_tail = straight_tail[-len(resumed_prompts) :]
    assert resumed_prompts and straight.manager.stats.compactions >= 1
    expected, actual = strip_volatile(straight_tail), strip_volatile(resumed_prompts)
    diff = "\n".join(
        difflib.unified_diff(expected[0].split("\\n"), actual[0].split("\\n"), lineterm="", n=1)
    )
    assert expected == actual, diff[:3000]


def test_model_summary_helper_keeps_paths() -> None:
    call = installed.ModelCall(0, [{"role": "user", "content": "see tool_result/abc.txt"}], None)
    assert "tool_result/abc.txt" in model_summary(call)
    assert os.sep  # keep os imported for path checks on every platform


async def _compacted_session(workspace: Path) -> tuple[str, int]:
    """Run an agent until it compacted, save it as ``s``; return the summary text and the
    prompt size."""
    agent = managed(
        scripted_session(session_plan(total_calls=20, sizes_kb=SIZES_KB)),
        {"workspace": str(workspace), "max_input_tokens": 16384},
    )
    await agent.ask("collect the documents")
    assert agent.manager.stats.compactions >= 1
    await agent.save_session("s")
    return agent.manager.port.summary.render(), (await agent.manager.count()).total


@pytest.mark.agentscope1
async def test_a_session_loaded_before_enabling_keeps_the_summary(workspace: Path) -> None:
    from agentscope.formatter import DashScopeChatFormatter
    from agentscope.session import JSONSession

    from agentscope_context_ext import ContextMemory, enable_context_management

    from agent_harness import make_agent

    summary, tokens = await _compacted_session(workspace)
    plain = make_agent(scripted_session([]), DashScopeChatFormatter())
    await JSONSession(save_dir=str(workspace / installed.SESSIONS_DIRNAME)).load_session_state(
        session_id="s", agent=plain
    )
    # a plain agent keeps the summary as its first message, and so the model still sees it
    first = (await plain.memory.get_memory())[0]
    assert first.get_text_content() == summary
    manager = enable_context_management(
        plain, {"workspace": str(workspace), "max_input_tokens": 16384}
    )
    assert isinstance(plain.memory, ContextMemory)
    assert plain.memory.compact_summary is not None
    assert plain.memory.compact_summary.render() == summary
    assert all(m.name != "context_summary" for m in plain.memory.messages), "not twice"
    assert (await manager.count()).total == tokens


async def test_a_saved_session_loads_into_a_fresh_agent_with_its_summary(
    workspace: Path,
) -> None:
    summary, tokens = await _compacted_session(workspace)
    fresh = managed(scripted_session([]), {"workspace": str(workspace), "max_input_tokens": 16384})
    await fresh.load_session("s")
    assert fresh.manager.port.summary is not None
    assert fresh.manager.port.summary.render() == summary
    assert (await fresh.manager.count()).total == tokens


async def test_detach_and_enable_again_keeps_the_summary(workspace: Path) -> None:
    config = {"workspace": str(workspace), "max_input_tokens": 16384}
    agent = managed(scripted_session(session_plan(total_calls=20, sizes_kb=SIZES_KB)), config)
    await agent.ask("collect the documents")
    assert agent.manager.stats.compactions >= 1
    summary = agent.manager.port.summary.render()
    tokens = (await agent.manager.count()).total
    agent.manager.detach()
    again = installed.enable_context_management(agent.agent, config)
    assert again.port.summary.render() == summary
    assert (await again.count()).total == tokens


class Killed(Exception):
    """Stands for a kill in the middle of a write."""


def killed(*args, **kwargs):  # the process dies in the middle of the write
    raise Killed


async def test_a_session_save_killed_midway_leaves_the_old_state(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    await _compacted_session(workspace)
    sessions = workspace / installed.SESSIONS_DIRNAME
    before = (sessions / "s.json").read_bytes()
    assert before.startswith(b"{")

    agent = managed(scripted_session([]), {"workspace": str(workspace)})
    await agent.ask("a different conversation")
    monkeypatch.setattr(os, "fsync", killed)
    with contextlib.suppress(Killed):
        await agent.save_session("s")
    monkeypatch.undo()
    assert (sessions / "s.json").read_bytes() == before, "the old state, whole"
    assert [p.name for p in sessions.iterdir()] == ["s.json"], "no temp file left"
    await agent.save_session("s")  # and once the write completes, the new state is there
    assert (sessions / "s.json").read_bytes() != before


@pytest.mark.agentscope1
async def test_agentscopes_own_json_session_killed_midway_leaves_a_truncated_file(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Why 1.x's managed agent saves with ``AtomicJSONSession``: AgentScope's ``JSONSession``,
    killed the same way, leaves a truncated file behind."""
    from agentscope.session import JSONSession

    await _compacted_session(workspace)
    sessions = workspace / installed.SESSIONS_DIRNAME
    before = (sessions / "s.json").read_bytes()
    agent = managed(scripted_session([]), {"workspace": str(workspace)})
    monkeypatch.setattr("json.dumps", killed)
    with contextlib.suppress(Killed):
        await JSONSession(save_dir=str(sessions)).save_session_state(
            session_id="s", agent=agent.agent
        )
    monkeypatch.undo()
    assert (sessions / "s.json").read_bytes() != before
