"""Provider usage: the gap between our count and the provider's (design §5.1), and calibration, on
a managed agent of the installed AgentScope (the scripted model reports the exact Qwen count of
what it received, as a provider reports its usage; the providers below report it otherwise).

Calibration can never lock an agent (issue 42): a figure no vocabulary explains is ignored
with a warning, what usage adds is bounded, decays and is re-checked, and a prompt is refused
only on our exact count. A server's template skew is told from a count error and never shifted
on (issue 43)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from harness_common import session_plan
from installed_harness import managed, scripted_session, session_responder

from agentscope_context_ext.testing import ModelCall, ScriptedChatModel


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


# ------------------------------------------------- providers that report otherwise (issue 42, 43)


Report = Callable[[ModelCall, int], int | None]
"""``(the call, our exact count of it) -> the input tokens the provider reports`` (``None``:
no usage in the response)."""


class Reporting(ScriptedChatModel):
    """A provider whose usage is ``report(call, exact)``; ``reported`` keeps what it said."""

    def __init__(self, script: object, report: Report, **kwargs: object) -> None:
        super().__init__(script, **kwargs)
        self.report = report
        self.reported: list[int | None] = []

    async def __call__(self, *args, **kwargs):
        response = await super().__call__(*args, **kwargs)
        said = self.report(self.calls[-1], response.usage.input_tokens)
        self.reported.append(said)
        if said is None:
            response.usage = None
        else:
            response.usage.input_tokens = said
        return response


def dropping_tool_results(call: ModelCall, exact: int) -> int:
    """llama-cpp-python's ``chatml-function-calling`` template, as issue 43 measured it: tool
    results left out, schemas written compactly."""
    counter = get_counter()
    kept = [m for m in call.messages if m.get("role") != "tool"]
    tools = json.dumps(call.tools or [], separators=(",", ":"), ensure_ascii=False)
    return counter.count_formatted(kept) + counter.count_text(tools)


def get_counter():
    from agentscope_context_ext.core.tokens import get_token_counter

    return get_token_counter("qwen")


PLAN = session_plan(10, [4, 20, 1, 60, 8])
"""Ten fetches of 1-60 KB (stage one cuts the large ones): the tool-result text grows."""


def agent_on(workspace: Path, report: Report, plan: list = PLAN, **config: object) -> object:
    model = Reporting(session_responder(plan), report)
    return managed(model, {"workspace": str(workspace), **config})


def events_of(agent: object) -> list:
    seen: list = []
    agent.manager.subscribe(seen.append)
    return seen


async def test_one_lying_figure_never_locks_the_agent(workspace: Path) -> None:
    """Issue 42: a buggy proxy reports 100,000,000 input tokens once; every later reply
    failed with ContextOverflowError on a ~400-token prompt. The figure is ignored."""
    lies = iter([100_000_000])
    model = Reporting(["a", "b", "c"], lambda call, exact: next(lies, exact))
    agent = managed(
        model,
        {"workspace": str(workspace), "calibrate_with_usage": True, "max_input_tokens": 16384},
    )
    seen = events_of(agent)
    assert [await agent.ask(q) for q in ("one", "two", "three")] == ["a", "b", "c"]
    ignored = [e for e in seen if e.type == "usage_ignored"]
    assert len(ignored) == 1 and ignored[0].provider_tokens == 100_000_000
    assert "100,000,000" in ignored[0].reason
    manager = agent.manager
    assert manager.pipeline.count.calibration == 0
    assert manager.stats.token_count.kind == "agrees", "judged on the honest reports only"
    assert (await manager.count()).total < 2000


async def test_a_large_gap_is_bounded_and_re_checked(workspace: Path) -> None:
    """A plausible but huge first figure (the whole window over ours) adds at most 15% of the
    window, and honest reports that follow take it back."""
    window = 16384
    first = {"left": 1}

    def report(call: ModelCall, exact: int) -> int:
        if first["left"]:
            first["left"] -= 1
            return 2 * exact + window  # just within what a report can plausibly be
        return exact

    agent = agent_on(workspace, report, calibrate_with_usage=True, max_input_tokens=window)
    manager = agent.manager
    model = agent.agent.model.inner if hasattr(agent.agent.model, "inner") else agent.agent.model
    shifts: list[int] = []
    manager.subscribe(lambda e: shifts.append(manager.pipeline.count.calibration))
    assert await agent.ask("go") == "All documents fetched."
    assert max(shifts) <= 0.15 * window, "bounded overall"
    assert len(model.reported) >= 4
    assert manager.pipeline.count.calibration == 0, "outvoted by the honest reports"


async def test_the_usage_shift_decays_without_reports(workspace: Path) -> None:
    """A provider that reported +500 twice and then no usage at all: the shift halves every
    four calls without a report."""
    reports = iter([500, 500])

    def report(call: ModelCall, exact: int) -> int | None:
        extra = next(reports, None)
        return None if extra is None else exact + extra

    one_fetch_a_step = [[(1, step)] for step in range(12)]
    agent = agent_on(workspace, report, one_fetch_a_step, calibrate_with_usage=True)
    counter = agent.manager.pipeline.count
    seen: list[tuple[int, int]] = []
    original = counter.call_made

    def call_made() -> None:
        original()
        seen.append((counter.usage.calls_without_report, counter.calibration))

    counter.call_made = call_made
    assert await agent.ask("go") == "All documents fetched."
    by_calls = dict(seen)
    assert by_calls[1] == 500 and by_calls[4] == 500
    assert by_calls[5] == 250 and by_calls[9] == 125 and by_calls[11] == 125, by_calls


async def test_a_shift_never_refuses_a_prompt_that_fits(workspace: Path) -> None:
    """A provider counting 20% more than we do: its shift puts a 14k-token prompt (a long
    system prompt and a long question, nothing to offload) over the 16k window, yet the call
    is made; only our exact count over the window is refused."""
    window = 16384
    model = Reporting(["a", "b", "c"], lambda call, exact: round(exact * 1.2))
    system = "Follow the house rules. " * 2500  # about 12,500 tokens: under the trigger
    agent = managed(
        model,
        {"workspace": str(workspace), "calibrate_with_usage": True, "max_input_tokens": window},
        system_prompt=system,
        tools=(),
    )
    assert await agent.ask("one") == "a"
    assert await agent.ask("two " * 1400) == "b", "sent, not refused"
    count = await agent.manager.count()
    assert count.floor <= window < count.total, "shifted over the window, exact within it"


async def test_a_template_that_drops_tool_results_is_skew_not_a_count_error(
    workspace: Path,
) -> None:
    """Issue 43: llama-cpp-python's template leaves tool results out of its count, so its
    prompt_tokens fell 1.25x-5.95x below ours; calibration learned -94 from the first call and
    the chat said "token count error +146%". It is judged template skew and never shifted on."""
    agent = agent_on(workspace, dropping_tool_results, calibrate_with_usage=True)
    seen = events_of(agent)
    assert await agent.ask("go") == "All documents fetched."
    assert agent.manager.pipeline.count.calibration == 0, "never shifted on (was negative)"
    verdict = agent.manager.stats.token_count
    assert (verdict.kind, verdict.form) == ("template_skew", "drops_tool_results"), verdict
    assert verdict.ratio > 0.9, "the results' tokens are not counted at all"
    assert verdict.ratio_high < 1 and verdict.ratio_low < 0.5
    assert agent.manager.stats.as_dict()["token_count"]["kind"] == "template_skew"
    assert "template skew, not a count error" in verdict.describe()
    judged = [e for e in seen if e.type == "token_count_judged"]
    assert judged[-1].data["kind"] == "template_skew" and judged[-1].data["shift"] == 0


@pytest.mark.parametrize(
    ("report", "form", "fitted"),
    [
        (lambda call, exact: exact + 500, "offset", ("offset", 500)),
        (lambda call, exact: round(exact * 1.2), "ratio", ("ratio", 1.2)),
        (lambda call, exact: round(exact * 1.1) + 1500, "offset+ratio", ("ratio", 1.1)),
    ],
    ids=["offset", "ratio", "both"],
)
async def test_a_count_error_is_told_and_calibrated(
    workspace: Path, report: Report, form: str, fitted: tuple[str, float]
) -> None:
    agent = agent_on(workspace, report, calibrate_with_usage=True, max_input_tokens=131072)
    assert await agent.ask("go") == "All documents fetched."
    manager = agent.manager
    verdict = manager.stats.token_count
    assert (verdict.kind, verdict.form) == ("count_error", form), verdict
    assert getattr(verdict, fitted[0]) == pytest.approx(fitted[1], rel=0.01)
    count = await manager.count()
    expected = verdict.predicted(count.floor) - count.floor
    assert count.calibration == pytest.approx(expected, abs=2)
    assert "token count error" in verdict.describe()


async def test_an_exact_provider_agrees(workspace: Path) -> None:
    agent = agent_on(workspace, lambda call, exact: exact, calibrate_with_usage=True)
    assert await agent.ask("go") == "All documents fetched."
    assert agent.manager.stats.token_count.kind == "agrees"
    assert agent.manager.pipeline.count.calibration == 0


async def test_a_lying_length_rejection_teaches_nothing(workspace: Path) -> None:
    """The same lie in a provider's length rejection: its count of the prompt is ignored (a
    ``usage_ignored`` warning), not made a shift that every later prompt would carry."""
    said = (
        "Error code: 400 - This model's maximum context length is 16384 tokens. However, your "
        "messages resulted in 100000000 tokens."
    )
    model = ScriptedChatModel([RuntimeError(said), "fine", "still fine"])
    agent = managed(model, {"workspace": str(workspace), "max_input_tokens": 16384})
    seen = events_of(agent)
    with pytest.raises(Exception, match="100000000 tokens"):
        await agent.ask("hello")
    assert await agent.ask("again") == "fine"
    assert await agent.ask("and again") == "still fine"
    assert agent.manager.pipeline.count.overflow_shift == 0
    ignored = [e for e in seen if e.type == "usage_ignored"]
    assert len(ignored) == 1 and "length rejection" in ignored[0].reason
