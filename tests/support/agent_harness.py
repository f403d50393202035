"""The AgentScope 1.x side of the test helpers: a ``ReActAgent`` on the scripted model, a 1.x
tool function (it answers a ``ToolResponse``; agent files on 1.x name it as
``agent_harness:fetch``), and the tool blocks of 1.x messages. For the tests about 1.x's own
objects (marked ``agentscope1``) and the Studio stub; every other test drives the installed
major through ``installed_harness``."""

from __future__ import annotations

from agentscope.agent import ReActAgent
from agentscope.formatter import FormatterBase
from agentscope.message import Msg, TextBlock
from agentscope.tool import Toolkit, ToolResponse
from harness_common import make_text

from agentscope_context_ext.testing import ScriptedChatModel


async def fetch(size_kb: int, seed: int) -> ToolResponse:
    """Fetch a document of the given size.

    Args:
        size_kb (int): Size of the document in KiB.
        seed (int): Which document.
    """
    return ToolResponse(content=[TextBlock(type="text", text=make_text(size_kb * 1024, seed))])


def make_agent(
    model: ScriptedChatModel,
    formatter: FormatterBase,
    sys_prompt: str = "You are a diligent research agent.",
) -> ReActAgent:
    """A 1.x ``ReActAgent`` with :func:`fetch`, parallel tool calls, its console off."""
    toolkit = Toolkit()
    toolkit.register_tool_function(fetch)
    agent = ReActAgent(
        name="researcher",
        sys_prompt=sys_prompt,
        model=model,
        formatter=formatter,
        toolkit=toolkit,
        max_iters=500,
        parallel_tool_calls=True,
    )
    agent.set_console_output_enabled(False)
    return agent


def tool_ids(msg: Msg, kind: str) -> list[str]:
    """Ids of the ``kind`` blocks (``tool_use``, ``tool_result``) of a 1.x message."""
    if not isinstance(msg.content, list):
        return []
    return [str(b.get("id")) for b in msg.content if isinstance(b, dict) and b.get("type") == kind]


def result_text(msg: Msg) -> str:
    """The text of the first tool result of a 1.x message."""
    output = msg.content[0]["output"]
    return output if isinstance(output, str) else "".join(b.get("text", "") for b in output)
