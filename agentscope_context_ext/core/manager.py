"""What every adapter's ``ContextManager`` offers, whatever the framework: stats and events,
compacting and counting now, long-term memory. An adapter subclasses :class:`ManagerBase` and
says how to read the prompt's system text and tool schemas (:meth:`ManagerBase.prompt_parts`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any

from .events import ContextEvent, ContextStats, EventBus
from .longterm import ConsolidationResult, LongTermMemory, LongTermService, SummarizerService
from .pipeline import ContextCount, ContextPipeline

__all__ = ["DIALOG_TOOL_NAMES", "ManagerBase"]

DIALOG_TOOL_NAMES = frozenset({"read_dialog", "search_dialog"})
"""The dialog tools: shown to the model once there is a dialog to read."""


def tool_name(schema: dict) -> str:
    """The name in one tool schema (OpenAI's ``{"function": {"name": ...}}`` or a bare one)."""
    function = schema.get("function")
    return str((function if isinstance(function, dict) else schema).get("name", ""))


class ManagerBase(ABC):
    """The public side of a manager (set ``bus``, ``pipeline`` and ``long_term_service``)."""

    bus: EventBus
    pipeline: ContextPipeline
    long_term_service: LongTermService | None

    _dialog_shown = False
    _dialog_checked = False

    @abstractmethod
    async def prompt_parts(self) -> tuple[str, list[dict]]:
        """The system prompt and the tool schemas the agent sends now."""

    def offered_tools(self, schemas: list[dict]) -> list[dict]:
        """``schemas`` as the model should see them: without ``read_dialog`` and
        ``search_dialog`` until there is a dialog to read (a compaction happened, the context
        holds a summary, or the workspace has dialog files from before). Until then they could
        only answer "nothing was compacted", and their schemas would cost every prompt; from
        then on they stay, so the tool list changes once at most. A model that calls one anyway
        is answered: the tools stay registered."""
        if self._dialog_shown or not any(tool_name(s) in DIALOG_TOOL_NAMES for s in schemas):
            return schemas
        if self.stats.compactions or self.pipeline.port.summary is not None:
            self._dialog_shown = True
        elif not self._dialog_checked:
            self._dialog_checked = True  # dialog files from before: listed once
            self._dialog_shown = bool(self.pipeline.parts.compaction.dialog.files())
        if self._dialog_shown:
            return schemas
        return [s for s in schemas if tool_name(s) not in DIALOG_TOOL_NAMES]

    async def record_usage(
        self, provider_input_tokens: int, sent: tuple[str, list[dict]] | None = None
    ) -> None:
        """Compare the provider's input-token count of the prompt just sent with ours
        (``stats.token_count_error``; with ``calibrate_with_usage`` the next counts shift by
        the gap). ``sent``: the system prompt and tool schemas of that call, where the adapter
        sees them (else they are built again)."""
        # The prompt just sent was built from the context as it is now: count it exactly.
        sys_prompt, tools = sent if sent is not None else await self.prompt_parts()
        count = await self.pipeline.count(sys_prompt, tools)
        self.pipeline.record_usage(provider_input_tokens, count.total - count.calibration)

    @property
    def stats(self) -> ContextStats:
        """Totals of everything the extension did (see :class:`ContextStats`)."""
        return self.bus.stats

    def subscribe(self, callback: Callable[[ContextEvent], Any]) -> Callable[[], None]:
        """Call ``callback(event)`` (sync or async) for every event; returns an unsubscriber."""
        return self.bus.subscribe(callback)

    async def compact_now(self, extra_instruction: str | None = None) -> ContextCount:
        """Compact right away (as far as a pair-safe cut allows), e.g. before a long task.

        Args:
            extra_instruction (`str | None`): Added to the compaction model's instruction, e.g.
                "keep every SQL query verbatim".

        Returns:
            `ContextCount`: The prompt's token count afterwards.
        """
        sys_prompt, tools = await self.prompt_parts()
        return await self.pipeline.compact(sys_prompt, tools, extra_instruction, force=True)

    async def count(self) -> ContextCount:
        """The token count of the prompt the agent would send now."""
        sys_prompt, tools = await self.prompt_parts()
        return await self.pipeline.count(sys_prompt, tools)

    @property
    def long_term(self) -> LongTermMemory | None:
        """``Memory.md`` and the daily notes (``None`` when long-term memory is off)."""
        return self.long_term_service.memory if self.long_term_service else None

    @property
    def summarizer(self) -> SummarizerService | None:
        """The background Summarizer (``None`` when off)."""
        return self.long_term_service.summarizer if self.long_term_service else None

    async def drain(self) -> None:
        """Wait until every pending Summarizer job is done (or recorded as failed)."""
        if self.long_term_service is not None:
            await self.long_term_service.drain()

    async def consolidate_now(self) -> ConsolidationResult | None:
        """Merge the daily notes into ``Memory.md`` now (what the daily scheduler runs)."""
        if self.long_term_service is None:
            return None
        return await self.long_term_service.consolidate()
