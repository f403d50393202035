"""The incremental token check (design §4 step 2, 5.1) on a real agent: the running count equals
formatting and counting the whole prompt."""

from __future__ import annotations

from pathlib import Path

from agentscope.formatter import DashScopeChatFormatter
from agentscope.message import Msg

from agentscope_context_ext import (
    enable_context_management,
)

from agent_harness import (
    SIZES_KB,
    make_agent,
    scripted_session,
    session_plan,
)


async def test_incremental_count_matches_the_formatted_prompt(workspace: Path) -> None:
    plan = session_plan(total_calls=20, sizes_kb=SIZES_KB)
    model = scripted_session(plan)
    agent = make_agent(model, DashScopeChatFormatter())
    manager = enable_context_management(
        agent, {"workspace": str(workspace), "max_input_tokens": 65536}
    )
    errors = []

    async def check(agent_, kwargs):
        ours = (await manager.count()).total
        prompt = await agent.formatter.format(
            [Msg("system", agent.sys_prompt, "system"), *await agent.memory.get_memory()]
        )
        # what the model is sent: the tools it is offered (no dialog tools before a dialog)
        shown = manager.offered_tools(agent.toolkit.get_json_schemas())
        exact = await manager.counter.count(prompt, shown)
        errors.append(abs(ours - exact) / exact)

    agent.register_instance_hook("pre_reasoning", "zz_check", check)
    await agent(Msg("user", "go", "user"))
    assert len(errors) == len(plan) + 1
    assert max(errors) < 0.01
