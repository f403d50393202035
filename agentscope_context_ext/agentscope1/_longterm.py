"""Long-term memory on a 1.x agent (design §7): the Summarizer and consolidation agents as
``ReActAgent``\\ s (the core's long-term memory, wired by the manager, runs them).

``Memory.md`` reaches the model as a head message of the agent's ``ContextMemory``, never
through the system prompt: ``ReActAgent`` saves its system prompt as state, and the file's text
would end up in every ``JSONSession``.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, ClassVar

from agentscope.agent import ReActAgent
from agentscope.formatter import FormatterBase
from agentscope.memory import InMemoryMemory
from agentscope.message import Msg
from agentscope.model import ChatModelBase
from agentscope.tool import Toolkit

from ..core.longterm import (
    CONSOLIDATOR_MAX_ITERS,
    AgentRunner,
    ConsolidationResult,
    LongTermMemory,
    interrupted_reply,
)
from ..core.longterm import consolidate as core_consolidate
from ..core.workspace import Storage
from ._convert import as_tool

__all__ = ["agent_runner", "consolidate"]

Emit = Callable[..., Awaitable[Any]]


class BackgroundAgent(ReActAgent):
    """A ``ReActAgent`` whose messages stay out of the user's run: console output off, and
    nothing forwarded to AgentScope Studio.

    Studio forwarding is a class ``pre_print`` hook that ``agentscope.init(studio_url=...)``
    registers on ``AgentBase``; AgentScope looks class hooks up on the agent's own class, so
    this class keeps print hooks of its own (none). Its model calls still appear in Studio's
    traces, as every model call does.
    """

    _class_pre_print_hooks: ClassVar[OrderedDict] = OrderedDict()
    _class_post_print_hooks: ClassVar[OrderedDict] = OrderedDict()


def agent_runner(
    model: ChatModelBase, formatter: FormatterBase, name: str, max_iters: int = 8
) -> AgentRunner:
    """Runs a :class:`BackgroundAgent` with the given tools and nothing else, in a memory of
    its own; returns its final answer. A reply 1.x ended as interrupted (``handle_interrupt``
    answers a cancel with "I noticed that you have interrupted me") is not an answer: see
    ``interrupted_reply``."""

    async def run(system_prompt: str, prompt: str, tools: Sequence[Callable]) -> str:
        toolkit = Toolkit()
        for tool in tools:
            toolkit.register_tool_function(as_tool(tool))
        agent = BackgroundAgent(
            name=name,
            sys_prompt=system_prompt,
            model=model,
            formatter=formatter,
            toolkit=toolkit,
            memory=InMemoryMemory(),
            max_iters=max_iters,
        )
        agent.set_console_output_enabled(False)
        reply = await agent(Msg("user", prompt, "user"))
        if (reply.metadata or {}).get("_is_interrupted"):
            interrupted_reply(name)
        return reply.get_text_content() or ""

    return run


async def consolidate(
    workspace_or_memory: str | Path | Storage | LongTermMemory,
    model: ChatModelBase,
    formatter: FormatterBase,
    *,
    max_bytes: int = 16384,
    now: datetime | None = None,
    on_write: Callable[[str, dict[str, Any]], Any] | None = None,
) -> ConsolidationResult:
    """Merge the daily notes since the last consolidation into ``Memory.md``, with a consolidation
    agent on ``model`` (see :func:`agentscope_context_ext.core.longterm.consolidate`)."""
    return await core_consolidate(
        workspace_or_memory,
        agent_runner(model, formatter, "consolidator", max_iters=CONSOLIDATOR_MAX_ITERS),
        max_bytes=max_bytes,
        now=now,
        on_write=on_write,
    )
