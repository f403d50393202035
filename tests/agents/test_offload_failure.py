"""AgentScope 2.x: a tool result that can be saved neither by stage one nor when 2.x splits it
itself. 2.x splits a result over its ``tool_result_limit`` and drops the part its offloader
takes. When the workspace refuses that part too, it is held in memory under the path it will
have: ``read_file`` reads it, the agent carries on, and it is written before the first model
call the workspace allows. Before, the offloader's OSError broke out of 2.x's tool call in a
task group, the call stayed unfinished in the state, and the next reply sent it as an orphan."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from harness_common import disk_full

from agentscope_context_ext.compat import agentscope_major

pytestmark = pytest.mark.skipif(agentscope_major() < 2, reason="AgentScope 2.x's own split")


def lines(n: int) -> str:
    """Return n long numbered lines.

    Args:
        n (int): How many lines.
    """
    return "\n".join(f"line {i:05d} " + "x" * 80 for i in range(n))


async def test_a_result_the_workspace_refuses_is_held_read_back_and_saved_later(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agentscope.agent import Agent, ReActConfig
    from agentscope.agent import ContextConfig as AgentContextConfig
    from agentscope.message import ToolResultBlock, UserMsg
    from agentscope.permission import PermissionBehavior, PermissionDecision
    from agentscope.tool import FunctionTool, Toolkit

    from agentscope_context_ext import ContextMiddleware
    from agentscope_context_ext.testing import ModelCall, ScriptedChatModel, reply, tool_call

    seen: dict[str, str] = {}

    def script(call: ModelCall):
        last = str(call.messages[-1].get("content"))
        if call.index == 0:
            return reply("reading", tool_call("lines", n=3000))
        if call.index == 1:
            (path,) = re.findall(r"tool_result/[0-9a-f]{32}\.txt", last)
            seen["path"] = path
            return reply("the rest", tool_call("read_file", file_path=path, start_line=2780))
        seen["read"] = last
        return "done"

    allow = PermissionDecision(behavior=PermissionBehavior.ALLOW, message="test tool")
    model = ScriptedChatModel(script)
    context = ContextMiddleware(
        {
            "workspace": str(tmp_path),
            "max_input_tokens": 200_000,
            "notices": False,
            "long_term_memory": {"enabled": False},
        }
    )
    agent = Agent(
        name="worker",
        system_prompt="You work with tools.",
        model=model,
        toolkit=Toolkit(tools=[FunctionTool(lines, permission=allow)]),
        middlewares=[context],
        offloader=context.offloader,
        react_config=ReActConfig(max_iters=10),
        # 2.x's own split fires above ~5k tokens (its bytes/4 count), under stage one's limit
        context_config=AgentContextConfig(tool_result_limit=5000),
    )
    with monkeypatch.context() as patched:
        patched.setattr(context.storage, "write", disk_full)
        answer = await agent.reply(UserMsg("user", "read 3000 lines"))
        assert answer.get_text_content() == "done", "the agent carried on"
        assert not (tmp_path / seen["path"]).exists(), "the disk took nothing"
        assert context.manager.stats.counts["save_failed"] >= 1
    # what 2.x took out of the context was read back from memory, to the last line
    assert "line 02999" in seen["read"]
    results = [b for m in agent.state.context for b in m.content if isinstance(b, ToolResultBlock)]
    assert not agent.state.get_unfinished_tool_calls(agent.name)
    assert len(results) == 2
    # the workspace takes writes again: saved before the next model call
    model.script = ["ok"]
    await agent.reply(UserMsg("user", "thanks"))
    saved = (tmp_path / seen["path"]).read_text(encoding="utf-8")
    assert "line 02999" in saved and lines(3000).endswith(saved[-500:])
    assert context.tool_result_store.held(seen["path"]) is None
