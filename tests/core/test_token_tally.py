"""The incremental token check (design §4 step 2, 5.1), framework-free: over a long session with
parallel calls, truncations and compactions, the running count before every model call equals
formatting and counting the whole prompt. (The same check on the installed AgentScope's agents
is in test_port_contract.py.)"""

from __future__ import annotations

from pathlib import Path

from harness_common import SIX_SECTIONS, SIZES_KB, fetch, session_plan
from neutral_port import NeutralAgent, NeutralManager, assistant

from agentscope_context_ext.core.messages import ToolCall


def planned(plan: list[list[tuple[int, int]]], final: str = "All documents fetched."):
    """The scripted model of a session: one step of ``fetch`` calls per model call."""

    def respond(turn):
        if turn.index < len(plan):
            calls = [
                ToolCall(f"call-{turn.index}-{k}", "fetch", {"size_kb": size, "seed": seed})
                for k, (size, seed) in enumerate(plan[turn.index])
            ]
            return assistant(f"step {turn.index}", *calls)
        return final

    return respond


async def summary_model(instruction: str, content: str) -> str:
    return SIX_SECTIONS


async def test_incremental_count_matches_the_formatted_prompt(workspace: Path) -> None:
    plan = session_plan(total_calls=20, sizes_kb=SIZES_KB)
    manager = NeutralManager(
        {"workspace": str(workspace), "max_input_tokens": 65536},
        tools=[fetch],
        summary_call=summary_model,
    )
    agent = NeutralAgent(manager, planned(plan))
    assert await agent.ask("go") == "All documents fetched."
    assert len(agent.turns) == len(plan) + 1
    assert manager.stats.truncations >= 1
    for turn in agent.turns:
        assert turn.counted_tokens == turn.prompt_tokens, turn.index


async def test_the_count_stays_exact_across_compactions_and_a_reload(workspace: Path) -> None:
    plan = session_plan(total_calls=30, sizes_kb=SIZES_KB)
    config = {"workspace": str(workspace), "max_input_tokens": 16384}
    manager = NeutralManager(config, tools=[fetch], summary_call=summary_model)
    agent = NeutralAgent(manager, planned(plan[:15]))
    await agent.ask("first half")
    assert manager.stats.compactions >= 1 and manager.stats.retruncations >= 1
    assert all(turn.counted_tokens == turn.prompt_tokens for turn in agent.turns)
    assert agent.turns[-1].messages[0].id == "context-summary", "the summary is counted too"

    # a fresh manager loads the session: a new epoch, every message counted again
    fresh = NeutralManager(config, tools=[fetch], summary_call=summary_model)
    fresh.port.load(manager.port.state())
    assert (await fresh.count()).total == (await manager.count()).total
    resumed = NeutralAgent(fresh, planned(plan[15:]))
    await resumed.ask("second half")
    assert all(turn.counted_tokens == turn.prompt_tokens for turn in resumed.turns)
