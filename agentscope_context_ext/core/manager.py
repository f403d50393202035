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
from .pipeline import DIALOG_TOOL_NAMES, ContextPipeline, PromptCount, tool_name
from .provider_errors import LengthRejection

__all__ = ["DIALOG_TOOL_NAMES", "ManagerBase"]


class ManagerBase(ABC):
    """The public side of a manager (set ``bus``, ``pipeline`` and ``long_term_service``)."""

    bus: EventBus
    pipeline: ContextPipeline
    long_term_service: LongTermService | None

    @abstractmethod
    async def prompt_parts(self) -> tuple[str, list[dict]]:
        """The system prompt and every tool schema of the agent now (the pipeline counts those
        the model is shown, :meth:`offered_tools`)."""

    def offered_tools(self, schemas: list[dict]) -> list[dict]:
        """``schemas`` as the model should see them: without ``read_dialog`` and
        ``search_dialog`` until there is a dialog to read (see ``core.pipeline.ToolOffer``)."""
        return self.pipeline.offered_tools(schemas)

    async def record_usage(
        self,
        provider_input_tokens: int,
        sent: tuple[str, list[dict]] | None = None,
        tool_choice: object = None,
    ) -> None:
        """Compare the provider's input-token count of the prompt just sent with ours
        (``stats.token_count_error``; with ``calibrate_with_usage`` the next counts shift by
        the gap). Only a like call counts: one sent with the tool list the pipeline counted
        before it and a tool choice other than ``none`` (a final call without tools, or one
        whose tools cannot be used, is not the prompt the trigger is about). ``sent``: the
        system prompt and tool schemas of that call, as the adapter saw them."""
        if sent is None:
            return
        sys_prompt, tools = sent
        names = tuple(tool_name(tool) for tool in self.offered_tools(tools))
        choice = getattr(tool_choice, "mode", tool_choice)
        if names != self.pipeline.counted_tools or choice == "none":
            return
        # The prompt just sent was built from the context as it is now: count it exactly.
        count = await self.pipeline.count(sys_prompt, tools)
        self.pipeline.record_usage(provider_input_tokens, count.total - count.calibration)

    async def recover_overflow(self, rejection: LengthRejection) -> PromptCount:
        """The provider rejected a call for its length: compact for one retry and learn the
        gap (``ContextPipeline.recover_overflow``). Raises ``ContextOverflowError`` when the
        prompt still cannot fit."""
        sys_prompt, tools = await self.prompt_parts()
        return await self.pipeline.recover_overflow(sys_prompt, tools, rejection)

    @property
    def stats(self) -> ContextStats:
        """Totals of everything the extension did (see :class:`ContextStats`)."""
        return self.bus.stats

    def subscribe(self, callback: Callable[[ContextEvent], Any]) -> Callable[[], None]:
        """Call ``callback(event)`` (sync or async) for every event; returns an unsubscriber."""
        return self.bus.subscribe(callback)

    async def compact_now(self, extra_instruction: str | None = None) -> PromptCount:
        """Compact right away (as far as a pair-safe cut allows), e.g. before a long task.

        Args:
            extra_instruction (`str | None`): Added to the compaction model's instruction, e.g.
                "keep every SQL query verbatim".

        Returns:
            `PromptCount`: The prompt's token count afterwards.
        """
        sys_prompt, tools = await self.prompt_parts()
        return await self.pipeline.compact(sys_prompt, tools, extra_instruction, force=True)

    async def count(self) -> PromptCount:
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
