"""The long-term memory of one managed agent, for any framework: the memory tools, ``Memory.md``
shown to the model, the Summarizer on every compaction (it listens for ``CompactionFinished``)
and the daily consolidation. An adapter gives it the agents that write (:data:`AgentRunner`) and
where the ``Memory.md`` block goes."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from ..config import ContextConfig
from ..events import CompactionFinished, Consolidated, ContextEvent, MemoryWritten
from ..summary import render_for_summary
from ..workspace import Storage
from ._consolidation import AgentRunner, ConsolidationResult, consolidate
from ._guide import MemoryView, memory_block
from ._schedule import ConsolidationScheduler, last_consolidation
from ._store import LongTermMemory
from ._summarizer import SummarizerService, SummarizerSettings
from ._tools import MemoryTool, make_memory_tools

__all__ = ["LongTermService"]

logger = logging.getLogger("agentscope_context_ext")

Emit = Callable[..., Awaitable[Any]]

SUMMARIZER_MAX_ITERS = 8
CONSOLIDATOR_MAX_ITERS = 6


class LongTermService:
    """Long-term memory wired to one managed agent.

    Args:
        config (`ContextConfig`): The configuration in force.
        workspace (`Path | Storage`): The workspace.
        runner (`Callable[[str, int], AgentRunner]`): ``runner(name, max_iters)``: an agent of
            the adapter's framework (the Summarizer, the consolidator).
        count_text (`Callable[[str], int]`): Token counter, to bound ``Memory.md``.
        emit (`Callable[..., Awaitable]`): The manager's event emitter.
        show (`Callable[[str | None], None]`): Puts the ``Memory.md`` block where the model sees
            it (``None``: take it away).
    """

    def __init__(
        self,
        config: ContextConfig,
        workspace: Path | Storage,
        runner: Callable[[str, int], AgentRunner],
        count_text: Callable[[str], int],
        emit: Emit,
        show: Callable[[str | None], None],
    ) -> None:
        settings = config.long_term_memory
        self.config = config
        self.runner = runner
        self.count_text = count_text
        self.emit = emit
        self.show = show
        self.memory = LongTermMemory(workspace, backups_kept=settings.backups_kept)
        self.summarizer: SummarizerService | None = None
        self.scheduler: ConsolidationScheduler | None = None
        if settings.summarize_on_compaction:
            self.summarizer = SummarizerService(
                self.memory,
                runner("summarizer", SUMMARIZER_MAX_ITERS),
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
        self._view = MemoryView()
        self._started = False

    def memory_tools(self) -> tuple[MemoryTool, ...]:
        """``(memory_read, memory_append, memory_edit, daily_note)`` for the agent, as core tool
        functions for the adapter to wrap (none when ``tools.memory`` is off)."""
        if not self.config.tools.memory:
            return ()
        return make_memory_tools(self.memory, self._written, "agent")

    def start(self, *, background: bool = True) -> None:
        """Resume journaled Summarizer jobs and start the daily scheduler. Called on the first
        hook call: the event loop runs only from then on. ``background=False`` (a served turn)
        starts no scheduler: :meth:`end_turn` runs a consolidation that is due."""
        if self._started:
            return
        self._started = True
        if self.summarizer is not None:
            resumed = self.summarizer.resume_pending()
            if resumed:
                logger.info("resuming %d journaled summarizer job(s)", resumed)
        if self.scheduler is not None and background:
            self.scheduler.start()

    async def end_turn(self) -> None:
        """The end of a served turn, whose agent is built anew next turn: wait for the
        Summarizer's jobs, run the daily consolidation if its time has passed, then stop (a
        job that fails stays journaled for the next turn)."""
        try:
            await self.drain()
            if self.scheduler is not None and self._started:
                await self.scheduler.tick()
        finally:
            self.close()

    def refresh(self) -> None:
        """Show the current ``Memory.md``, re-rendered only when the file changed, so that the
        prompt prefix stays byte-stable."""
        version = self.memory.version()
        if version == self._version:
            return
        self._version = version
        self._view = memory_block(
            self.memory,
            self.count_text,
            self.config.long_term_memory.inject_max_tokens,
            with_tools=self.config.tools.memory,
        )
        self.show(self._view.block)

    def unused_tools(self) -> frozenset[str]:
        """The memory tools of no use now (their schemas are left out): ``memory_edit`` while
        ``Memory.md`` is empty, ``memory_read`` while the prompt shows the whole file."""
        view = self._view
        unused = {"memory_read"} if view.whole else set()
        if view.block is None and view.whole:
            unused.add("memory_edit")
        return frozenset(unused)

    def on_event(self, event: ContextEvent) -> None:
        """Listens to the manager's events: the messages each compaction removed go to the
        Summarizer (in the background)."""
        if isinstance(event, CompactionFinished) and self.summarizer is not None:
            self.summarizer.submit(render_for_summary(list(event.messages)))

    def abandon_turn(self) -> None:
        """An interrupted served turn: nothing is awaited. The Summarizer's jobs go on in the
        background and finish on their own; a job stopped before it is done (its worker dies,
        the event loop ends) stays journaled and the next turn resumes it. The scheduler
        stops."""
        self.close()

    async def drain(self) -> None:
        """Wait for every pending Summarizer job."""
        if self.summarizer is not None:
            await self.summarizer.drain()

    async def consolidate(self) -> ConsolidationResult:
        """Merge the daily notes into ``Memory.md`` (what the scheduler runs)."""
        result = await consolidate(
            self.memory,
            self.runner("consolidator", CONSOLIDATOR_MAX_ITERS),
            max_bytes=self.config.long_term_memory.max_bytes,
            on_write=self._written,
        )
        if result.status == "nothing_to_do":
            return result  # no notes to merge: nothing happened, no event (no stream noise)
        await self.emit(
            Consolidated(
                status=result.status,
                notes=tuple(result.notes),
                backup=result.backup,
                bytes=result.bytes_after,
            )
        )
        return result

    def close(self) -> None:
        """Stop the scheduler and take ``Memory.md`` away from the model."""
        if self.scheduler is not None:
            self.scheduler.stop()
        self.show(None)

    async def _written(self, tool: str, details: dict[str, Any]) -> None:
        await self.emit(MemoryWritten(tool=tool, details=details))
