"""Long-term memory attached to one agent (SPEC 7): the memory tools, ``Memory.md`` in the system
prompt, the Summarizer on every compaction and the daily consolidation. ``ContextManager`` builds
one when ``long_term_memory.enabled``."""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from agentscope.message import Msg
from agentscope.model import ChatModelBase

from ..agentscope1._convert import to_views
from ..core.config import ContextConfig
from ..core.summary import render_for_summary
from ..tools import make_memory_tools
from ._consolidation import (
    ConsolidationResult,
    ConsolidationScheduler,
    consolidate,
    last_consolidation,
)
from ._store import LongTermMemory
from ._summarizer import SummarizerService, SummarizerSettings

logger = logging.getLogger("agentscope_context_ext")

MEMORY_BLOCK_START = "<long-term-memory>"
MEMORY_BLOCK_END = "</long-term-memory>"
MEMORY_BLOCK_RE = re.compile(r"\n*<long-term-memory>.*?</long-term-memory>\n?", re.S)
MEMORY_GUIDE = """You have a long-term memory that lasts beyond this conversation, in the workspace:
- memory_append(text, section): a durable fact worth remembering next time, e.g. a user \
preference (section "Personal") or a lesson from a failed attempt (section "Try-Error Notes");
- memory_edit(old_text, new_text): correct a fact that changed;
- daily_note(text): what you did or learned today (merged into Memory.md daily);
- memory_read(): the whole file.
Do not store task progress or file contents there."""

Emit = Callable[..., Awaitable[Any]]


class LongTermMemoryService:
    """The long-term memory of one managed agent.

    Args:
        agent: The agent (its ``formatter`` and ``_sys_prompt`` are used).
        config (`ContextConfig`): The configuration in force.
        workspace (`Path`): The workspace folder.
        model (`ChatModelBase`): Model of the Summarizer and the consolidation agent.
        count_text (`Callable[[str], int]`): Token counter, to bound ``Memory.md`` in the prompt.
        emit (`Callable[..., Awaitable]`): The manager's event emitter.
    """

    def __init__(
        self,
        agent: Any,
        config: ContextConfig,
        workspace: Path,
        model: ChatModelBase,
        count_text: Callable[[str], int],
        emit: Emit,
    ) -> None:
        settings = config.long_term_memory
        self.agent = agent
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
                model,
                agent.formatter,
                tools=lambda: make_memory_tools(self.memory, self._written, writer="summarizer")[
                    :3
                ],
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
        return list(make_memory_tools(self.memory, self._written, writer="agent"))

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
            self.agent.formatter,
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

    def refresh_prompt(self) -> None:
        """Put the memory guide and the current ``Memory.md`` in the system prompt, re-rendered
        only when the file changed, so that the prompt prefix stays byte-stable."""
        if not isinstance(getattr(self.agent, "_sys_prompt", None), str):
            return
        version = self.memory.version()
        if version == self._version and MEMORY_BLOCK_START in self.agent._sys_prompt:
            return
        self._version = version
        base = MEMORY_BLOCK_RE.sub("", self.agent._sys_prompt)
        block = MEMORY_GUIDE if self.config.tools.memory else ""
        content = self.memory.read().strip()
        limit = self.config.long_term_memory.inject_max_tokens
        if content and limit > 0:
            block += f"\n\nCurrent Memory.md:\n{bounded_by_tokens(content, limit, self.count_text)}"
        if not block:
            self.agent._sys_prompt = base
            return
        self.agent._sys_prompt = (
            f"{base}\n\n{MEMORY_BLOCK_START}\n{block.strip()}\n{MEMORY_BLOCK_END}"
        )

    def close(self) -> None:
        """Stop the scheduler and take the memory block out of the system prompt."""
        if self.scheduler is not None:
            self.scheduler.stop()
        if isinstance(getattr(self.agent, "_sys_prompt", None), str):
            self.agent._sys_prompt = MEMORY_BLOCK_RE.sub("", self.agent._sys_prompt)

    async def _written(self, tool: str, details: dict[str, Any]) -> None:
        await self.emit("memory_written", tool=tool, **details)


def bounded_by_tokens(text: str, limit: int, count: Callable[[str], int]) -> str:
    """``text`` cut at a line boundary to at most ``limit`` tokens, saying so when cut."""
    if count(text) <= limit:
        return text
    kept: list[str] = []
    for line in text.split("\n"):
        if count("\n".join([*kept, line])) > limit:
            break
        kept.append(line)
    return "\n".join(kept) + "\n(... Memory.md continues: call memory_read for the rest)"
