"""Long-term memory on a 1.x agent (SPEC 7): the Summarizer and consolidation agents as
``ReActAgent``\\ s, and the service that wires the core's long-term memory to one managed agent.

``Memory.md`` reaches the model as a head message of the agent's ``ContextMemory``, never
through the system prompt: ``ReActAgent`` saves its system prompt as state, and the file's text
would end up in every ``JSONSession``.
"""

from __future__ import annotations

import logging
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

from ..core.config import ContextConfig
from ..core.longterm import (
    AgentRunner,
    ConsolidationResult,
    ConsolidationScheduler,
    LongTermMemory,
    SummarizerService,
    SummarizerSettings,
    last_consolidation,
    make_memory_tools,
    memory_block,
)
from ..core.longterm import consolidate as core_consolidate
from ..core.summary import render_for_summary
from ..core.workspace import Storage
from ._convert import as_tool, to_views
from ._memory import ContextMemory

__all__ = ["LongTermMemoryService", "agent_runner", "consolidate"]

logger = logging.getLogger("agentscope_context_ext")

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
    its own; returns its final answer."""

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
        agent_runner(model, formatter, "consolidator", max_iters=6),
        max_bytes=max_bytes,
        now=now,
        on_write=on_write,
    )


class LongTermMemoryService:
    """The long-term memory of one managed agent: its memory tools, ``Memory.md`` at the head of
    its context, the Summarizer on every compaction and the daily consolidation.

    Args:
        config (`ContextConfig`): The configuration in force.
        workspace (`Path | Storage`): The workspace.
        context_memory (`ContextMemory`): The agent's memory (shows ``Memory.md``).
        model (`ChatModelBase`): Model of the Summarizer and the consolidation agent.
        formatter (`FormatterBase`): Their formatter.
        count_text (`Callable[[str], int]`): Token counter, to bound ``Memory.md``.
        emit (`Callable[..., Awaitable]`): The manager's event emitter.
    """

    def __init__(
        self,
        config: ContextConfig,
        workspace: Path | Storage,
        context_memory: ContextMemory,
        model: ChatModelBase,
        formatter: FormatterBase,
        count_text: Callable[[str], int],
        emit: Emit,
    ) -> None:
        settings = config.long_term_memory
        self.config = config
        self.context_memory = context_memory
        self.model = model
        self.formatter = formatter
        self.count_text = count_text
        self.emit = emit
        self.memory = LongTermMemory(workspace, backups_kept=settings.backups_kept)
        self.summarizer: SummarizerService | None = None
        self.scheduler: ConsolidationScheduler | None = None
        if settings.summarize_on_compaction:
            self.summarizer = SummarizerService(
                self.memory,
                agent_runner(model, formatter, "summarizer"),
                tools=lambda: make_memory_tools(self.memory, self._written, "summarizer")[:3],
                emit=emit,
                settings=SummarizerSettings(
                    retries=settings.summarizer_retries,
                    backoff_seconds=settings.retry_backoff_seconds,
                ),
            )
        if settings.consolidation_time != "off":
            self.scheduler = ConsolidationScheduler(
                settings.consolidation_time,
                run=self.consolidate,
                last_run=lambda: last_consolidation(self.memory),
            )
        self._version: object = None
        self._started = False

    def agent_tools(self) -> list[Callable]:
        """The memory tools for the agent (none when ``tools.memory`` is off)."""
        if not self.config.tools.memory:
            return []
        return [as_tool(tool) for tool in make_memory_tools(self.memory, self._written, "agent")]

    def start(self) -> None:
        """Resume journaled Summarizer jobs and start the daily scheduler. Called on the first
        hook call: the event loop runs only from then on."""
        if self._started:
            return
        self._started = True
        if self.summarizer is not None:
            resumed = self.summarizer.resume_pending()
            if resumed:
                logger.info("resuming %d journaled summarizer job(s)", resumed)
        if self.scheduler is not None:
            self.scheduler.start()

    def refresh(self) -> None:
        """Show the current ``Memory.md`` at the head of the context, re-rendered only when the
        file changed, so that the prompt prefix stays byte-stable."""
        version = self.memory.version()
        if version == self._version:
            return
        self._version = version
        self.context_memory.set_long_term(
            memory_block(
                self.memory,
                self.count_text,
                self.config.long_term_memory.inject_max_tokens,
                with_guide=self.config.tools.memory,
            )
        )

    async def on_compacted(self, msgs: list[Msg]) -> None:
        """Give the messages a compaction removed to the Summarizer (in the background)."""
        if self.summarizer is not None:
            self.summarizer.submit(render_for_summary(to_views(msgs)))

    async def drain(self) -> None:
        """Wait for every pending Summarizer job."""
        if self.summarizer is not None:
            await self.summarizer.drain()

    async def consolidate(self) -> ConsolidationResult:
        """Merge the daily notes into ``Memory.md`` (what the scheduler runs)."""
        result = await consolidate(
            self.memory,
            self.model,
            self.formatter,
            max_bytes=self.config.long_term_memory.max_bytes,
            on_write=self._written,
        )
        await self.emit(
            "consolidated",
            status=result.status,
            notes=result.notes,
            backup=result.backup,
            bytes=result.bytes_after,
        )
        return result

    def close(self) -> None:
        """Stop the scheduler and take ``Memory.md`` out of the context."""
        if self.scheduler is not None:
            self.scheduler.stop()
        self.context_memory.set_long_term(None)

    async def _written(self, tool: str, details: dict[str, Any]) -> None:
        await self.emit("memory_written", tool=tool, **details)
