"""Session state through JSONSession (SPEC 2.1): a reloaded agent sends the same prompts as one
that never stopped."""

from __future__ import annotations

import difflib
import os
from pathlib import Path

from agentscope.formatter import DashScopeChatFormatter
from agentscope.message import Msg
from agentscope.session import JSONSession

from agentscope_context_ext import (
    enable_context_management,
)

from agent_harness import (
    SIZES_KB,
    is_agent_call,
    make_agent,
    model_summary,
    scripted_session,
    session_plan,
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
    expected, actual = _strip_volatile(straight_tail), _strip_volatile(resumed_prompts)
    diff = "\n".join(
        difflib.unified_diff(expected[0].split("\\n"), actual[0].split("\\n"), lineterm="", n=1)
    )
    assert expected == actual, diff[:3000]


def _strip_volatile(prompts: list[list[dict]]) -> list[str]:
    """Prompts with the one part that differs between two runs by construction (the summary's
    wall-clock timestamp) replaced by a placeholder. Saved-result paths are content hashes and
    stay as they are."""
    import re

    text = repr(prompts)
    text = re.sub(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:\.\d+)?", "TIME", text)
    return [text]


def test_model_summary_helper_keeps_paths() -> None:
    from agentscope_context_ext.testing import ModelCall

    call = ModelCall(0, [{"role": "user", "content": "see tool_result/abc.txt"}], None)
    assert "tool_result/abc.txt" in model_summary(call)
    assert os.sep  # keep os imported for path checks on every platform
