"""Attacks on the compaction point under prompt caching (design §4.5, ``PrefixCost``).

The point may wait past the trigger up to 95% of the window. What the trigger's margin used to
absorb must still fit: model calls the pipeline does not run before (1.x ``pre_reply``, 1.x's
final call after ``max_iters``), a large parallel step arriving while the compaction waits, a
window learned from the provider, a loaded session. And the decision itself must rest on the
prompt's real growth, not on the upper bounds the count uses far below the trigger.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from harness_common import make_text, model_summary
from installed_harness import (
    is_agent_call,
    is_background_call,
    is_compaction_call,
    managed,
    scripted_session,
)
from neutral_port import NeutralAgent, NeutralManager, assistant, fetch_session, user

from agentscope_context_ext import get_token_counter
from agentscope_context_ext.core.provider_errors import LengthRejection
from agentscope_context_ext.testing import ModelCall, ScriptedChatModel, reply, tool_call

WINDOW = 8_192


def _config(workspace: Path, price: float = 0.1, **extra: object) -> dict:
    return {
        "workspace": str(workspace),
        "max_input_tokens": WINDOW,
        "prompt_cache_price": price,
        "notices": False,
        "long_term_memory": {"enabled": False},
        **extra,
    }


def _agent_prompt_sizes(model: ScriptedChatModel) -> list[int]:
    counter = get_token_counter("qwen")
    return [counter.count_formatted(c.messages, c.tools) for c in model.calls if is_agent_call(c)]


# ------------------------------------------- calls the pipeline does not run before (1.x)


def _steps_per_reply(steps: int, kb: int):
    """A model that makes ``steps`` tool calls of ``kb`` KiB in each reply, then answers."""
    state = {"n": 0, "in_reply": 0}

    def respond(call: ModelCall) -> object:
        if is_compaction_call(call):
            return model_summary(call)
        if is_background_call(call):
            return "[SILENT]"
        if "maximum iterations" in call.text[-400:]:
            return "Where things stand."
        if state["in_reply"] < steps:
            state["in_reply"] += 1
            state["n"] += 1
            n = state["n"]
            return reply(f"s{n}", tool_call("fetch", f"c{n}", size_kb=kb, seed=n))
        state["in_reply"] = 0
        return "ok"

    return respond


async def test_pre_reply_hook_point_never_sends_a_prompt_over_the_window(workspace: Path) -> None:
    # 1.x pre_reply: the pipeline runs once per reply, and every step of the reply adds to the
    # prompt unchecked. The trigger's 20% margin took that; a point at 95% of the window does
    # not (at price 1.0 the same session stays inside). On 2.x the pipeline runs every step.
    model = ScriptedChatModel(_steps_per_reply(steps=3, kb=1))
    agent = managed(model, _config(workspace, compaction={"hook_point": "pre_reply"}))
    for i in range(25):
        await agent.ask(f"next batch {i}")
    sizes = _agent_prompt_sizes(model)
    assert agent.manager.stats.compactions >= 1
    assert max(sizes) <= WINDOW, f"{sum(s > WINDOW for s in sizes)} prompt(s) over the window"


async def test_the_call_after_max_iters_never_goes_over_the_window(workspace: Path) -> None:
    # 1.x: after max_iters ReActAgent._summarizing calls the model without pre_reasoning, on
    # the prompt the last step's results grew. Waiting until 95% leaves no room for them.
    model = ScriptedChatModel(_steps_per_reply(steps=10, kb=2))
    agent = managed(model, _config(workspace), max_iters=2)
    for i in range(30):
        await agent.ask(f"next batch {i}")
    sizes = _agent_prompt_sizes(model)
    assert agent.manager.stats.compactions >= 1
    assert max(sizes) <= WINDOW, f"{sum(s > WINDOW for s in sizes)} prompt(s) over the window"


# ------------------------------------------------------- what the waiting must survive


async def test_a_large_parallel_step_while_waiting_stays_in_the_window(workspace: Path) -> None:
    # Small steps until the compaction waits past the trigger, then six 30 KiB reads in one
    # step (on 2.x one message), then small steps again.
    plan = [[(1, i)] for i in range(14)] + [[(30, 100 + k) for k in range(6)]]
    plan += [[(1, 200 + i)] for i in range(20)]
    model = scripted_session(plan)
    agent = managed(model, _config(workspace))
    assert await agent.ask("Fetch them all.") == "All documents fetched."
    sizes = _agent_prompt_sizes(model)
    assert agent.manager.stats.compactions >= 1
    assert max(sizes) <= WINDOW


def _neutral(workspace: Path, price: float = 0.1, window: int = WINDOW, **extra) -> NeutralManager:
    async def fetch(size_kb: int, seed: int) -> str:
        """Fetch a document.

        Args:
            size_kb (int): Size in KiB.
            seed (int): Which document.
        """
        return make_text(size_kb * 1024, seed)

    settings = {**_config(workspace, price, **extra), "max_input_tokens": window}
    settings.setdefault("compaction", {"model": "extractive"})
    return NeutralManager(settings, tools=[fetch])


@pytest.mark.parametrize(
    ("price", "extra"),
    [
        (0.0, {}),
        (1e-9, {}),
        (1.0, {}),
        (0.1, {"compaction": {"model": "extractive", "trigger_ratio": 1.0}}),
        (0.1, {"compaction": {"model": "extractive", "keep_recent_ratio": 0.75}}),
        (0.1, {"compaction": {"enabled": False}}),
        (0.1, {"truncation": {"retruncate": "eager"}}),
    ],
    ids=["free", "tiny", "uncached", "trigger-1.0", "keep-0.75", "no-compaction", "eager"],
)
async def test_edge_settings_keep_every_prompt_in_the_window(
    workspace: Path, price: float, extra: dict
) -> None:
    manager = _neutral(workspace, price, **extra)
    events: list = []
    manager.subscribe(events.append)
    agent = NeutralAgent(manager, fetch_session([[(1, i)] for i in range(45)]))
    await agent.ask("go")
    assert max(turn.prompt_tokens for turn in agent.turns) <= WINDOW
    assert not [e for e in events if e.type == "warning"]


async def test_a_denormal_cache_price_does_not_switch_the_pipeline_off(workspace: Path) -> None:
    # prompt_cache_price accepts any float in [0, 1]; at 1e-320 sqrt(2 g F / r) is inf and
    # int(inf) raises in compaction_point: the manager logs a pipeline warning and the call
    # goes on unmanaged (no compaction, no guard) - straight over the window.
    manager = _neutral(workspace, price=1e-320)
    events: list = []
    manager.subscribe(events.append)
    agent = NeutralAgent(manager, fetch_session([[(1, i)] for i in range(45)]))
    await agent.ask("go")
    assert not [e for e in events if e.type == "warning"]
    assert max(turn.prompt_tokens for turn in agent.turns) <= WINDOW


async def test_a_window_the_provider_taught_bounds_the_point(workspace: Path) -> None:
    manager = _neutral(workspace)
    agent = NeutralAgent(manager, fetch_session([[(1, i)] for i in range(12)]))
    await agent.ask("go")
    # The provider says its window is 6,000 (what we counted was over it).
    ours = (await manager.count()).total
    await manager.pipeline.learn_rejection(ours, LengthRejection("too long", limit_tokens=6_000))
    assert manager.max_input_tokens == 6_000
    agent.respond = fetch_session([[(1, 100 + i)] for i in range(30)], first_step=100)
    await agent.ask("more")
    assert max(turn.prompt_tokens for turn in agent.turns[13:]) <= 6_000


async def test_a_loaded_session_starts_over_and_stays_in_the_window(workspace: Path) -> None:
    manager = _neutral(workspace)
    agent = NeutralAgent(manager, fetch_session([[(1, i)] for i in range(14)]))
    await agent.ask("go")
    state = agent.port.state()
    agent.port.load(state)
    agent.respond = fetch_session([[(1, 100 + i)] for i in range(30)], first_step=100)
    await agent.ask("more")
    assert max(turn.prompt_tokens for turn in agent.turns) <= WINDOW
    assert manager.stats.compactions >= 1


# --------------------------------------------------- the decision rests on real growth


async def _first_compaction(workspace: Path, counted_between_calls: bool) -> int:
    """Calls before the first compaction of a chat with a large system prompt (B8's tau-bench
    shape: a compaction at the trigger buys little room, so under cheap caching it waits)."""
    manager = NeutralManager(
        _config(workspace, compaction={"model": "extractive"}),
        system_prompt=make_text(9_000, 3),
    )
    for i in range(200):
        manager.port.add(user(f"Please go on with item {i} of the list and note it."))
        await manager.before_model_call()
        if counted_between_calls:
            await manager.count()  # what a provider's usage report makes the adapter do
        if manager.stats.compactions:
            return i
        manager.port.add(assistant(f"Noted item {i}: the value is {i * 7} and all is well."))
    raise AssertionError("no compaction")


async def test_the_point_does_not_depend_on_whether_the_prompt_was_counted_between_calls(
    tmp_path: Path,
) -> None:
    # Below the trigger before_reasoning's count is an upper bound (bytes, not tokens, of the
    # new messages), and PrefixCost.observe takes it as the size sent. Near the trigger the
    # tally resolves just enough bounds to stay under it, so the "growth" per call collapses
    # to ~0 and the compaction never waits; when something (usage recording) counts exactly
    # between the calls, the same conversation waits. A provider without usage reports (or a
    # call with another tool list) thus silently turns the feature off.
    exact = await _first_compaction(tmp_path / "counted", counted_between_calls=True)
    bounded = await _first_compaction(tmp_path / "bounded", counted_between_calls=False)
    assert exact == bounded


async def test_a_rejection_that_counted_far_more_than_we_sent_is_rechecked(
    workspace: Path,
) -> None:
    """B12 on 1.x: llama-cpp-python's function-calling loop overflowed on its own output and
    said "4097 in the messages" for a prompt of 581 tokens. The shift it taught was the whole
    gap (3,516), for good: every later prompt was counted over the window. The next call the
    provider serves re-checks it: a gap under half of it lowers it to that gap."""
    manager = _neutral(workspace, window=4_096)
    agent = NeutralAgent(manager, fetch_session([[(1, i)] for i in range(2)]))
    await agent.ask("go")
    ours = (await manager.count()).floor
    said = LengthRejection(
        "too long", prompt_tokens=ours + 3_000, limit_tokens=4_096, completion_tokens=512
    )
    await manager.pipeline.learn_rejection(ours, said)
    counter = manager.pipeline.count
    assert counter.overflow_shift == 3_000, "learned as the provider said"
    assert manager.max_input_tokens == 4_096 - 512
    await counter.record_usage(ours + 2_000, ours)  # under the shift, not under half: kept
    assert counter.overflow_shift == 3_000
    await counter.record_usage(int(ours * 1.17), ours)  # the server's own count of a like call
    assert counter.overflow_shift == int(ours * 1.17) - ours
    assert (await manager.count()).total <= 3_584, "a short prompt is not counted over the window"
