"""When to compact under prompt caching (design §4.5): the cost model on its own, then the
pipeline on the neutral port. With ``prompt_cache_price`` 1.0 compaction runs at the trigger;
with caching priced low and a context growing in small steps it waits until the prompt nears
the window, never sending a prompt over it, and neither stage two nor the window guard cuts
anything in between (each cut would break the cached prefix the waiting is for)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from neutral_port import NeutralAgent, NeutralManager, assistant

from agentscope_context_ext import ContextConfig
from agentscope_context_ext.core.messages import ToolCall
from agentscope_context_ext.core.pipeline import PrefixCost, PromptCount, Window
from agentscope_context_ext.core.pipeline._prefix_cost import DEFER_LIMIT_SHARE

WINDOW = 10_000


def _count(total: int, system: int = 1_000, tools: int = 500) -> PromptCount:
    return PromptCount(system=system, head=0, messages=total - system - tools, tools=tools)


def _cost(price: float, growth: list[int]) -> PrefixCost:
    cost = PrefixCost(price, Window(WINDOW, 0.8), keep_recent_ratio=0.3)
    sent = 3_000
    cost.observe(_count(sent), compacted=False)
    for step in growth:
        sent += step
        cost.observe(_count(sent), compacted=False)
    return cost


def test_without_caching_or_with_an_estimated_count_the_point_is_the_trigger() -> None:
    assert _cost(1.0, [100] * 5).compaction_point(_count(8_100), 500) == 8_000
    estimated = PrefixCost(0.1, Window(WINDOW, 0.8), keep_recent_ratio=0.3, can_wait=False)
    estimated.observe(_count(3_000), compacted=False)
    estimated.observe(_count(3_100), compacted=False)
    assert estimated.compaction_point(_count(8_100, system=3_000, tools=1_000), 500) == 8_000


def test_before_the_pace_is_known_the_point_is_the_trigger() -> None:
    # A new or just loaded conversation (nothing cached at the provider), or counts that were
    # only bounds: waiting blind could leave no room for the next step.
    assert _cost(0.1, []).compaction_point(_count(8_100), 500) == 8_000
    bounded = _cost(0.1, [])
    bounded.observe(PromptCount(1_000, 0, 2_000, 500, estimated=True), compacted=False)
    bounded.observe(PromptCount(1_000, 0, 2_100, 500, estimated=True), compacted=False)
    assert bounded.growth is None


def test_the_limit_leaves_room_for_the_largest_recent_step() -> None:
    # 1.x answers after max_iters without a run of the pipeline: one more step must fit.
    cost = _cost(0.1, [100, 100, 900, 100])
    count = _count(8_100, system=3_000, tools=1_000)
    assert cost.compaction_point(count, 500) == WINDOW - 900


def test_little_room_at_the_trigger_under_cheap_caching_waits_until_near_the_window() -> None:
    # A large system prompt and tools (4,000 of a 10,000 window): a compaction at the trigger
    # would buy little room for its cost, so it waits (B8's tau-bench case).
    cost = _cost(0.1, [400] * 5)
    point = cost.compaction_point(_count(8_100, system=3_000, tools=1_000), 500)
    assert point == int(DEFER_LIMIT_SHARE * WINDOW) <= WINDOW


def test_the_point_is_the_cost_model_optimum_between_trigger_and_limit() -> None:
    cost = _cost(0.1, [100] * 5)
    count = _count(8_100, system=3_000, tools=1_000)
    after = cost.estimate_after(count, 500)
    assert after == 3_000 + 1_000 + 500 + (6_800 - 4_500)
    fixed = 0.9 * (after - 4_000) + 500
    expected = int(after + math.sqrt(2 * 100 * fixed / 0.1))
    assert 8_000 < expected < int(DEFER_LIMIT_SHARE * WINDOW)
    assert cost.compaction_point(count, 500) == expected


def test_plenty_of_room_at_the_trigger_compacts_there() -> None:
    # A small fixed part: the compaction at the trigger buys room enough (B8's coding case).
    assert _cost(0.1, [50] * 5).compaction_point(_count(8_100), 500) == 8_000


def test_one_large_read_does_not_set_the_pace() -> None:
    # The median: one 6,000-token read among small steps (stage two cuts it later) would put
    # the point at the window if it counted as the pace.
    cost = _cost(0.1, [50, 50, 6_000, 50, 50])
    assert cost.growth == 50
    assert cost.compaction_point(_count(8_100), 500) == 8_000


def test_a_compaction_is_not_growth_and_a_new_conversation_starts_over() -> None:
    cost = _cost(0.1, [100, 100])
    cost.observe(_count(4_000), compacted=True)  # the prompt shrank: a compaction, not growth
    assert cost.growth == 100
    cost.after_compaction = 4_000
    cost.forget()
    assert cost.growth is None and cost.after_compaction is None


@pytest.mark.parametrize("value", [-0.1, 1.5, "cheap"])
def test_a_bad_price_is_a_config_error(value: object) -> None:
    from agentscope_context_ext import ConfigError

    with pytest.raises(ConfigError, match="prompt_cache_price"):
        ContextConfig.load({"prompt_cache_price": value})


def _slow_session(steps: int):
    """A model that calls ``note`` once per step, each result ~150 tokens."""

    def respond(turn):
        if turn.index >= steps:
            return "Done."
        return assistant(
            f"step {turn.index}", ToolCall(f"c{turn.index}", "note", {"n": turn.index})
        )

    return respond


async def note(n: int) -> str:
    """A small tool result.

    Args:
        n (int): The step.
    """
    return " ".join(f"fact-{n}-{k}" for k in range(60))


async def _run(workspace: Path, price: float, steps: int = 60):
    manager = NeutralManager(
        {
            "workspace": str(workspace),
            "max_input_tokens": 4_096,
            "prompt_cache_price": price,
            "notices": False,
            "compaction": {"model": "extractive"},
            "long_term_memory": {"enabled": False},
        },
        tools=[note],
    )
    events = []
    manager.subscribe(events.append)
    agent = NeutralAgent(manager, _slow_session(steps))
    await agent.ask("Take notes.")
    return agent, events


async def test_without_caching_the_first_compaction_comes_at_the_trigger(tmp_path: Path) -> None:
    agent, events = await _run(tmp_path / "ws", price=1.0)
    trigger = agent.manager.pipeline.trigger_tokens
    started = [e for e in events if e.type == "compaction_started"]
    assert started and started[0].tokens_before <= trigger + 400
    assert all(turn.prompt_tokens <= 4_096 for turn in agent.turns)


async def test_cheap_caching_waits_past_the_trigger_and_never_overflows(tmp_path: Path) -> None:
    cheap, events = await _run(tmp_path / "cheap", price=0.1)
    plain, _ = await _run(tmp_path / "plain", price=1.0)
    trigger = cheap.manager.pipeline.trigger_tokens
    started = [e for e in events if e.type == "compaction_started"]
    assert started, "the session still compacts"
    assert started[0].tokens_before > trigger + 400, "it waited past the trigger"
    assert all(turn.prompt_tokens <= 4_096 for turn in cheap.turns)
    assert not [t for t in cheap.turns if t.orphans()]
    # Fewer compactions, and nothing cut or reported between the trigger and the point.
    assert cheap.manager.stats.compactions < plain.manager.stats.compactions
    assert not [e for e in events if e.type in ("context_overflow", "tool_result_retruncated")]
    # Every prompt extends the previous one except where a compaction happened.
    breaks = sum(
        1
        for a, b in zip(cheap.turns, cheap.turns[1:], strict=False)
        if [m.id for m in b.messages[: len(a.messages)]] != [m.id for m in a.messages]
    )
    assert breaks == cheap.manager.stats.compactions
