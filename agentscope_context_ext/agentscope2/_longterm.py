"""Long-term memory on a 2.x agent (SPEC 7): the Summarizer and consolidation agents as 2.x
``Agent``\\ s, and the service that wires the core's long-term memory to one managed agent.

``Memory.md`` reaches the model through the system prompt (the middleware's
``on_system_prompt``, 2.x's own transformer for it): 2.x does not keep the system prompt in the
agent's state, so the file's text never ends up in a saved state.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from agentscope.agent import Agent, InjectionConfig
from agentscope.message import Msg, UserMsg
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
from ._convert import to_views
from ._tools import as_tool

__all__ = ["LongTermMemoryService", "agent_runner", "consolidate"]

logger = logging.getLogger("agentscope_context_ext")

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
    *,
    max_bytes: int = 16384,
    now: datetime | None = None,
    on_write: Callable[[str, dict[str, Any]], Any] | None = None,
) -> ConsolidationResult:
    """Merge the daily notes since the last consolidation into ``Memory.md``, with a consolidation
    agent on ``model`` (see :func:`agentscope_context_ext.core.longterm.consolidate`)."""
    return await core_consolidate(
        workspace_or_memory,
        agent_runner(model, "consolidator", max_iters=6),
        max_bytes=max_bytes,
        now=now,
        on_write=on_write,
    )


class LongTermMemoryService:
    """The long-term memory of one managed 2.x agent: its memory tools, ``Memory.md`` in its
    system prompt, the Summarizer on every compaction and the daily consolidation.

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
        settings = config.long_term_memory
        self.config = config
        self.model = model
        self.count_text = count_text
        self.emit = emit
        self.memory = LongTermMemory(workspace, backups_kept=settings.backups_kept)
        self.summarizer: SummarizerService | None = None
        self.scheduler: ConsolidationScheduler | None = None
        if settings.summarize_on_compaction:
            self.summarizer = SummarizerService(
                self.memory,
                agent_runner(model, "summarizer"),
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
        self.block: str | None = None
        """The long-term memory text the system prompt carries now."""
        self._version: object = None
        self._started = False

    def agent_tools(self) -> list[Any]:
        """The memory tools for the agent (none when ``tools.memory`` is off)."""
        if not self.config.tools.memory:
            return []
        read, append, edit, note = make_memory_tools(self.memory, self._written, "agent")
        return [
            as_tool(read),
            as_tool(append, read_only=False),
            as_tool(edit, read_only=False),
            as_tool(note, read_only=False),
        ]

    def start(self) -> None:
        """Resume journaled Summarizer jobs and start the daily scheduler (first hook call: the
        event loop runs only from then on)."""
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
        """Re-render the block only when ``Memory.md`` changed, so the prompt stays byte-stable."""
        version = self.memory.version()
        if version == self._version:
            return
        self._version = version
        self.block = memory_block(
            self.memory,
            self.count_text,
            self.config.long_term_memory.inject_max_tokens,
            with_guide=self.config.tools.memory,
        )

    def system_prompt(self, prompt: str) -> str:
        """``prompt`` with the long-term memory block after it (once)."""
        if not self.block or self.block in prompt:
            return prompt
        return f"{prompt}\n\n{self.block}"

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
        """Stop the scheduler and take ``Memory.md`` out of the system prompt."""
        if self.scheduler is not None:
            self.scheduler.stop()
        self.block = None

    async def _written(self, tool: str, details: dict[str, Any]) -> None:
        await self.emit("memory_written", tool=tool, **details)
