"""The ``read_file`` schema a model is shown, on the installed AgentScope (1.x or 2.x): it
describes its arguments in words and holds no example path a model could copy (a real model
called ``read_file`` with ``tool_result/....txt`` taken from the old description)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from agentscope_context_ext.compat import agentscope_major
from agentscope_context_ext.testing import ScriptedChatModel

PLACEHOLDER = re.compile(r"\.\.\.|<[^<>\s]*>|\bX{3,}\b|\bfoo\b")
"""What a placeholder path looks like: an ellipsis (``tool_result/....txt``), an angle-bracket
slot (``tool_result/<hash>.txt``), XXX, foo."""


async def _shown_tools(workspace: Path) -> list[dict]:
    """The tool schemas the model is given on its first call by a managed agent."""
    model = ScriptedChatModel(["done"])
    config = {"workspace": str(workspace), "max_input_tokens": 16384}
    if agentscope_major() >= 2:
        from agentscope.agent import Agent
        from agentscope.message import UserMsg

        from agentscope_context_ext import ContextMiddleware

        context = ContextMiddleware(config)
        agent = Agent(
            name="assistant",
            system_prompt="You are a careful assistant.",
            model=model,
            middlewares=[context],
            offloader=context.offloader,
        )
        await agent.reply(UserMsg("user", "hi"))
    else:
        from agentscope.agent import ReActAgent
        from agentscope.formatter import DashScopeChatFormatter
        from agentscope.message import Msg
        from agentscope.tool import Toolkit

        from agentscope_context_ext import enable_context_management

        agent = ReActAgent(
            name="assistant",
            sys_prompt="You are a careful assistant.",
            model=model,
            formatter=DashScopeChatFormatter(),
            toolkit=Toolkit(),
        )
        agent.set_console_output_enabled(False)
        enable_context_management(agent, config)
        await agent(Msg("user", "hi", "user"))
    return model.calls[0].tools or []


async def test_the_read_file_schema_has_no_placeholder_path(workspace: Path) -> None:
    tools = {tool["function"]["name"]: tool["function"] for tool in await _shown_tools(workspace)}
    schema = tools["read_file"]
    text = json.dumps(schema, ensure_ascii=False)
    assert not PLACEHOLDER.search(text), PLACEHOLDER.search(text)
    file_path = schema["parameters"]["properties"]["file_path"]["description"]
    assert "file_path given in a truncation notice" in file_path, file_path
    assert "project file" in file_path, file_path


def test_the_placeholder_pattern_finds_the_old_description() -> None:
    """The check above would have failed on the description a model copied."""
    old = "The file, e.g. `tool_result/....txt` from a notice, or a project file."
    assert PLACEHOLDER.search(old)
    assert PLACEHOLDER.search("tool_result/<hash>.txt")
    assert not PLACEHOLDER.search("the file_path given in a truncation notice, or a project file")
