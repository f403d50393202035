"""Long-term memory on a 2.x agent (design §7): the Summarizer and consolidation agents as 2.x
``Agent``\\ s.

``Memory.md`` reaches the model through the system prompt (the middleware's
``on_system_prompt``, 2.x's own transformer for it): 2.x does not keep the system prompt in the
agent's state, so the file's text never ends up in a saved state.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from agentscope.agent import Agent, InjectionConfig
from agentscope.message import UserMsg
from agentscope.model import ChatModelBase
from agentscope.tool import Toolkit
from agentscope.types import ReplyFinishedReason

from ..core.longterm import (
    CONSOLIDATOR_MAX_ITERS,
    AgentRunner,
    ConsolidationResult,
    LongTermMemory,
    interrupted_reply,
)
from ..core.longterm import consolidate as core_consolidate
from ..core.tracing import conversation_id
from ..core.workspace import Storage
from ._tools import as_tool
from ._tracing import traced

__all__ = ["agent_runner", "consolidate"]

Emit = Callable[..., Awaitable[Any]]


def agent_runner(model: ChatModelBase, name: str, max_iters: int = 8) -> AgentRunner:
    """Runs a 2.x ``Agent`` with the given tools and nothing else, in a state of its own (no
    runtime-state injection); returns its final answer. A reply 2.x ended as interrupted (it
    turns a cancel into one) is not an answer: see ``interrupted_reply``."""

    async def run(system_prompt: str, prompt: str, tools: Sequence[Callable]) -> str:
        toolkit = Toolkit(tools=[as_tool(tool, read_only=False) for tool in tools])
        agent = Agent(
            name=name,
            system_prompt=system_prompt,
            model=model,
            toolkit=toolkit,
            injection_config=InjectionConfig(inject_runtime_state=False),
            middlewares=traced(),  # its model and tool calls in the trace, when one is made
        )
        agent.react_config.max_iters = max_iters
        conversation = conversation_id()
        if conversation:  # its spans join the conversation whose compaction it follows
            agent.state.session_id = conversation
        answer = await agent.reply(UserMsg("user", prompt))
        if answer.finished_reason == ReplyFinishedReason.INTERRUPTED:
            interrupted_reply(name)
        return answer.get_text_content() or ""

    return run


async def consolidate(
    workspace_or_memory: str | Path | Storage | LongTermMemory,
    model: ChatModelBase,
    formatter: Any = None,
    *,
    max_bytes: int = 16384,
    now: datetime | None = None,
    on_write: Callable[[str, dict[str, Any]], Any] | None = None,
) -> ConsolidationResult:
    """Merge the daily notes since the last consolidation into ``Memory.md``, with a consolidation
    agent on ``model`` (see :func:`agentscope_context_ext.core.longterm.consolidate`). A 2.x
    model formats for itself: ``formatter`` (1.x's argument) is not used."""
    return await core_consolidate(
        workspace_or_memory,
        agent_runner(model, "consolidator", max_iters=CONSOLIDATOR_MAX_ITERS),
        max_bytes=max_bytes,
        now=now,
        on_write=on_write,
    )
