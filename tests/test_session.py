"""Session state through JSONSession (design §2.1): a reloaded agent sends the same prompts as one
that never stopped."""

from __future__ import annotations

import contextlib
import difflib
import os
from pathlib import Path

from agentscope.formatter import DashScopeChatFormatter
from agentscope.message import Msg
from agentscope.session import JSONSession

from agentscope_context_ext import (
    AtomicJSONSession,
    ContextMemory,
    enable_context_management,
)

from agent_harness import (
    SIZES_KB,
    is_agent_call,
    make_agent,
    model_summary,
    scripted_session,
    session_plan,
    strip_volatile,
)


async def test_session_reload_gives_the_same_prompts(workspace: Path, tmp_path: Path) -> None:
    plan = session_plan(total_calls=24, sizes_kb=SIZES_KB)
    config = {"workspace": str(workspace), "max_input_tokens": 16384}

    straight_ws = tmp_path / "straight"
    straight = make_agent(scripted_session(plan), DashScopeChatFormatter())
    enable_context_management(straight, {**config, "workspace": str(straight_ws)})
    first = Msg("user", "part one", "user")
    second = Msg("user", "part two", "user")
    await straight(first)
    await straight(second)

    half = make_agent(scripted_session(plan), DashScopeChatFormatter())
    enable_context_management(half, config)
    await half(first)
    session = JSONSession(save_dir=str(tmp_path / "sessions"))
    await session.save_session_state(session_id="s", agent=half)

    done = len([c for c in half.model.inner.calls if is_agent_call(c)]) - 1
    resumed_model = scripted_session(plan[done:])
    resumed = make_agent(resumed_model, DashScopeChatFormatter())
    enable_context_management(resumed, config)
    await session.load_session_state(session_id="s", agent=resumed)
    await resumed(second)

    straight_tail = [c.messages for c in straight.model.inner.calls if is_agent_call(c)][
        -len(resumed_model.calls) :
    ]
    resumed_prompts = [c.messages for c in resumed_model.calls if is_agent_call(c)]
    straight_tail = straight_tail[-len(resumed_prompts) :]
    expected, actual = strip_volatile(straight_tail), strip_volatile(resumed_prompts)
    diff = "\n".join(
        difflib.unified_diff(expected[0].split("\\n"), actual[0].split("\\n"), lineterm="", n=1)
    )
    assert expected == actual, diff[:3000]


def test_model_summary_helper_keeps_paths() -> None:
    from agentscope_context_ext.testing import ModelCall

    call = ModelCall(0, [{"role": "user", "content": "see tool_result/abc.txt"}], None)
    assert "tool_result/abc.txt" in model_summary(call)
    assert os.sep  # keep os imported for path checks on every platform


async def _compacted_session(workspace: Path, sessions: Path) -> tuple[str, int]:
    """Run an agent until it compacted, save it; return the summary text and the prompt size."""
    agent = make_agent(
        scripted_session(session_plan(total_calls=20, sizes_kb=SIZES_KB)),
        DashScopeChatFormatter(),
    )
    manager = enable_context_management(
        agent, {"workspace": str(workspace), "max_input_tokens": 16384}
    )
    await agent(Msg("user", "collect the documents", "user"))
    assert manager.stats.compactions >= 1
    await AtomicJSONSession(save_dir=str(sessions)).save_session_state(session_id="s", agent=agent)
    return agent.memory.compact_summary.render(), (await manager.count()).total


async def test_a_session_loaded_before_enabling_keeps_the_summary(
    workspace: Path, tmp_path: Path
) -> None:
    summary, tokens = await _compacted_session(workspace, tmp_path / "sessions")
    plain = make_agent(scripted_session([]), DashScopeChatFormatter())
    await JSONSession(save_dir=str(tmp_path / "sessions")).load_session_state(
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


async def test_detach_and_enable_again_keeps_the_summary(workspace: Path, tmp_path: Path) -> None:
    agent = make_agent(
        scripted_session(session_plan(total_calls=20, sizes_kb=SIZES_KB)),
        DashScopeChatFormatter(),
    )
    manager = enable_context_management(
        agent, {"workspace": str(workspace), "max_input_tokens": 16384}
    )
    await agent(Msg("user", "collect the documents", "user"))
    summary = agent.memory.compact_summary.render()
    tokens = (await manager.count()).total
    manager.detach()
    again = enable_context_management(
        agent, {"workspace": str(workspace), "max_input_tokens": 16384}
    )
    assert agent.memory.compact_summary.render() == summary
    assert (await again.count()).total == tokens


class Killed(Exception):
    """Stands for a kill in the middle of a write."""


async def test_atomic_session_survives_a_failed_save(
    workspace: Path, tmp_path: Path, monkeypatch
) -> None:
    sessions = tmp_path / "sessions"
    await _compacted_session(workspace, sessions)
    before = (sessions / "s.json").read_bytes()
    assert before.startswith(b"{")

    def killed(*args, **kwargs):  # the process dies in the middle of the write
        raise Killed

    agent = make_agent(scripted_session([]), DashScopeChatFormatter())
    enable_context_management(agent, {"workspace": str(workspace)})
    monkeypatch.setattr(os, "fsync", killed)
    with contextlib.suppress(Killed):
        await AtomicJSONSession(save_dir=str(sessions)).save_session_state(
            session_id="s", agent=agent
        )
    monkeypatch.undo()
    assert (sessions / "s.json").read_bytes() == before, "the old state, whole"
    assert [p.name for p in sessions.iterdir()] == ["s.json"], "no temp file left"
    # JSONSession itself, killed the same way, leaves a truncated file behind
    monkeypatch.setattr("json.dumps", killed)
    with contextlib.suppress(Killed):
        await JSONSession(save_dir=str(sessions)).save_session_state(session_id="s", agent=agent)
    monkeypatch.undo()
    assert (sessions / "s.json").read_bytes() != before
