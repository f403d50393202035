"""Stage two after a session is loaded into a live manager (an undo, ``/load``): the port
reports a new epoch, and what stage two remembers by message id (the results it settled, the
gains it waits on) starts over. It once kept them: the loaded snapshot's results, back at stage
one under the same ids, stayed whole (30 KB instead of ~2.5 KB) outside ``recent_n`` for the
rest of the session."""

from __future__ import annotations

from pathlib import Path

import pytest
from harness_common import fetch, model_summary
from installed_harness import managed
from neutral_port import NeutralAgent, NeutralManager, ScriptedCallModel, fetch_session

from agentscope_context_ext.testing import ScriptedChatModel, reply, tool_call


def config(workspace: Path, policy: str = "eager") -> dict:
    return {
        "workspace": str(workspace),
        "max_input_tokens": 131072,
        "long_term_memory": {"enabled": False},
        "truncation": {"recent_n": 2, "retruncate": policy, "retruncate_min_gain_tokens": 1},
    }


def stages(port) -> dict[str, int]:
    """Call id -> the stage its result went through."""
    return {
        slot.call_id: slot.record.stage
        for msg_id in port.result_message_ids()
        for slot in port.result_slots(msg_id)
    }


def old_results(port, recent_n: int = 2) -> list[str]:
    """Call ids of the results outside the last ``recent_n`` tool-result messages."""
    return [
        slot.call_id
        for msg_id in port.result_message_ids()[:-recent_n]
        for slot in port.result_slots(msg_id)
    ]


@pytest.mark.parametrize("policy", ["eager", "batched"])
async def test_stage_two_cuts_old_results_of_a_session_loaded_into_a_live_manager(
    workspace: Path, policy: str
) -> None:
    """Framework-free: the core's stage two on the neutral port."""
    manager = NeutralManager(
        config(workspace, policy), tools=[fetch], summary_call=ScriptedCallModel(model_summary)
    )
    port = manager.port
    agent = NeutralAgent(manager, fetch_session([[(30, i)] for i in range(3)]))
    await agent.ask("first")
    early = port.state()
    agent.respond = fetch_session([[(30, i)] for i in range(3, 7)], first_step=3)
    agent.turns.clear()
    await agent.ask("second")
    assert all(stages(port)[call] == 2 for call in old_results(port)), "cut while old"

    port.load(early)  # back to the earlier snapshot, and carry on
    agent.respond = fetch_session([[(30, i)] for i in range(7, 11)], first_step=7)
    agent.turns.clear()
    await agent.ask("third")
    now = stages(port)
    assert {"call-1-0", "call-2-0", "call-7-0"} <= set(old_results(port))
    assert all(now[call] == 2 for call in old_results(port)), now


async def test_stage_two_cuts_old_results_after_a_managed_agent_loads_a_session(
    workspace: Path,
) -> None:
    """The same on a managed agent of the installed AgentScope (``load_session``)."""
    queue: list[int] = []

    def respond(call) -> object:
        if queue:
            step = queue.pop(0)
            return reply(f"step {step}", tool_call("fetch", f"call-{step}", size_kb=30, seed=step))
        return "ok"

    agent = managed(ScriptedChatModel(respond), config(workspace))
    port = agent.manager.port
    queue.extend(range(3))
    await agent.ask("first")
    await agent.save_session("early")
    queue.extend(range(3, 7))
    await agent.ask("second")
    assert all(stages(port)[call] == 2 for call in old_results(port)), "cut while old"

    await agent.load_session("early")
    queue.extend(range(7, 11))
    await agent.ask("third")
    now = stages(port)
    assert {"call-1", "call-2", "call-7"} <= set(old_results(port))
    assert all(now[call] == 2 for call in old_results(port)), now
