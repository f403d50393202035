"""Provider usage: the gap between our count and the provider's (design §5.1), and calibration, on
a managed agent of the installed AgentScope (the scripted model reports the exact Qwen count of
what it received, as a provider reports its usage)."""

from __future__ import annotations

from pathlib import Path

import pytest
from harness_common import session_plan
from installed_harness import managed, scripted_session

from agentscope_context_ext.testing import ScriptedChatModel


async def test_token_count_error_is_recorded_against_reported_usage(workspace: Path) -> None:
    model = scripted_session(session_plan(8, [4, 20]))
    agent = managed(model, {"workspace": str(workspace)})
    manager = agent.manager
    assert manager.stats.token_count_error is None, "nothing reported yet"
    assert await agent.ask("go") == "All documents fetched."
    assert manager.stats.token_count_error is not None
    assert abs(manager.stats.token_count_error) < 0.01


class Overcounting(ScriptedChatModel):
    """A provider that counts 500 tokens more than we do (e.g. a template of its own)."""

    async def __call__(self, *args, **kwargs):
        response = await super().__call__(*args, **kwargs)
        response.usage.input_tokens += 500
        return response


async def test_calibration_shifts_the_budget(workspace: Path) -> None:
    model = Overcounting(["a", "b"])
    agent = managed(model, {"workspace": str(workspace), "calibrate_with_usage": True})
    manager = agent.manager
    raw = (await manager.count()).total
    assert raw > 0
    assert manager.pipeline.count.calibration == 0
    assert await agent.ask("one") == "a"
    assert manager.pipeline.count.calibration > 400
    calibrated = await manager.count()
    assert calibrated.calibration == manager.pipeline.count.calibration
    uncalibrated = calibrated.system + calibrated.head + calibrated.messages + calibrated.tools
    assert calibrated.total == uncalibrated + manager.pipeline.count.calibration


async def test_without_calibration_the_gap_is_only_recorded(workspace: Path) -> None:
    model = Overcounting(["a", "b"])
    agent = managed(model, {"workspace": str(workspace)})
    manager = agent.manager
    assert await agent.ask("one") == "a"
    # (ours - theirs) / theirs, of the one call made: we count 500 tokens fewer
    ours = manager.stats.last_prompt_tokens
    assert manager.stats.token_count_error == pytest.approx(-500 / (ours + 500), abs=1e-4)
    assert manager.pipeline.count.calibration == 0
    assert (await manager.count()).calibration == 0


# ------------------------------------------------------------- 1.x: the model is wrapped


@pytest.mark.agentscope1
async def test_the_usage_tap_wraps_the_1x_model_until_close(workspace: Path) -> None:
    """1.x reads usage by wrapping the agent's model (2.x: in its model-call middleware)."""
    from agentscope_context_ext.agentscope1 import UsageTap

    model = scripted_session(session_plan(8, [4, 20]))
    agent = managed(model, {"workspace": str(workspace)})
    assert isinstance(agent.agent.model, UsageTap) and agent.agent.model.inner is model
    await agent.ask("go")
    assert agent.manager.stats.token_count_error is not None
    agent.manager.close()
    assert agent.agent.model is model


@pytest.mark.agentscope1
def test_stream_flag_is_delegated() -> None:
    from agentscope_context_ext.agentscope1 import UsageTap

    inner = ScriptedChatModel(["x"], stream=True)
    tap = UsageTap(inner, lambda tokens: None)
    tap.stream = False
    assert inner.stream is False and tap.model_name == inner.model_name
