"""Provider usage: the gap between our count and the provider's (design §5.1), and calibration."""

from __future__ import annotations

from pathlib import Path

from agentscope.formatter import DashScopeChatFormatter
from agentscope.message import Msg

from agentscope_context_ext import enable_context_management
from agentscope_context_ext.agentscope1 import UsageTap
from agentscope_context_ext.testing import ScriptedChatModel

from agent_harness import make_agent, scripted_session, session_plan


async def test_token_count_error_is_recorded_against_reported_usage(workspace: Path) -> None:
    model = scripted_session(session_plan(8, [4, 20]))
    agent = make_agent(model, DashScopeChatFormatter())
    manager = enable_context_management(agent, {"workspace": str(workspace)})
    assert isinstance(agent.model, UsageTap) and agent.model.inner is model
    await agent(Msg("user", "go", "user"))
    # The scripted model reports the exact Qwen count of what it received.
    assert manager.stats.token_count_error is not None
    assert abs(manager.stats.token_count_error) < 0.01
    manager.close()
    assert agent.model is model


async def test_calibration_shifts_the_budget(workspace: Path) -> None:
    class Overcounting(ScriptedChatModel):
        async def __call__(self, messages, tools=None, **kwargs):
            response = await super().__call__(messages, tools, **kwargs)
            response.usage.input_tokens += 500  # a provider that counts 500 more (e.g. a template)
            return response

    model = Overcounting(["a", "b"])
    agent = make_agent(model, DashScopeChatFormatter())
    manager = enable_context_management(
        agent, {"workspace": str(workspace), "calibrate_with_usage": True}
    )
    raw = (await manager.count()).total
    await agent(Msg("user", "one", "user"))
    assert manager.pipeline.count.calibration > 400
    calibrated = await manager.count()
    assert calibrated.calibration == manager.pipeline.count.calibration
    uncalibrated = calibrated.system + calibrated.head + calibrated.messages + calibrated.tools
    assert calibrated.total == uncalibrated + manager.pipeline.count.calibration
    assert raw > 0


def test_stream_flag_is_delegated() -> None:
    inner = ScriptedChatModel(["x"], stream=True)
    tap = UsageTap(inner, lambda tokens: None)
    tap.stream = False
    assert inner.stream is False and tap.model_name == inner.model_name
