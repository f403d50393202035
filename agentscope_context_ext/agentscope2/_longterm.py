"""Long-term memory on a 2.x agent (design §7): the Summarizer and consolidation agents as 2.x
``Agent``\\ s, and the service that wires the core's long-term memory to one managed agent.

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

from ..core.config import ContextConfig
from ..core.longterm import (
    CONSOLIDATOR_MAX_ITERS,
    AgentRunner,
    ConsolidationResult,
    LongTermMemory,
    LongTermService,
)
from ..core.longterm import consolidate as core_consolidate
from ..core.workspace import Storage
from ._convert import to_views
from ._tools import as_memory_tools, as_tool

__all__ = ["LongTermMemoryService", "agent_runner", "consolidate"]

Emit = Callable[..., Awaitable[Any]]


def agent_runner(model: ChatModelBase, name: str, max_iters: int = 8) -> AgentRunner:
    """Runs a 2.x ``Agent`` with the given tools and nothing else, in a state of its own (no
    runtime-state injection); returns its final answer."""

    async def run(system_prompt: str, prompt: str, tools: Sequence[Callable]) -> str:
        toolkit = Toolkit(tools=[as_tool(tool, read_only=False) for tool in tools])
        agent = Agent(
            name=name,
            system_prompt=system_prompt,
            model=model,
            toolkit=toolkit,
            injection_config=InjectionConfig(inject_runtime_state=False),
        )
        agent.react_config.max_iters = max_iters
        answer = await agent.reply(UserMsg("user", prompt))
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


class LongTermMemoryService(LongTermService):
    """The long-term memory of one managed 2.x agent (the core :class:`LongTermService`):
    ``Memory.md`` after its system prompt (:meth:`system_prompt`, which the middleware's
    ``on_system_prompt`` calls), the Summarizer and the consolidator as 2.x ``Agent``\\ s.

    Args:
        config (`ContextConfig`): The configuration in force.
        workspace (`Path | Storage`): The workspace.
        model (`ChatModelBase`): Model of the Summarizer and the consolidation agent.
        count_text (`Callable[[str], int]`): Token counter, to bound ``Memory.md``.
        emit (`Callable[..., Awaitable]`): The manager's event emitter.
    """

    def __init__(
        self,
        config: ContextConfig,
        workspace: Path | Storage,
        model: ChatModelBase,
        count_text: Callable[[str], int],
        emit: Emit,
    ) -> None:
        self.model = model
        self.block: str | None = None
        """The long-term memory text the system prompt carries now."""
        super().__init__(
            config,
            workspace,
            lambda name, max_iters: agent_runner(model, name, max_iters),
            count_text,
            emit,
            show=self._show,
            views=to_views,
        )

    def _show(self, block: str | None) -> None:
        self.block = block

    def agent_tools(self) -> list[Any]:
        """The memory tools for the agent as 2.x ``FunctionTool``\\ s (``memory_read`` is
        read-only)."""
        return list(as_memory_tools(self.memory_tools()))

    def system_prompt(self, prompt: str) -> str:
        """``prompt`` with the long-term memory block after it (once)."""
        if not self.block or self.block in prompt:
            return prompt
        return f"{prompt}\n\n{self.block}"
