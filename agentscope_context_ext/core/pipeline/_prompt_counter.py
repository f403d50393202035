"""``PromptCounter``: the prompt's token count as the pipeline uses it (design §5.1, 4.3): of
the tools the model is shown, shifted by what the provider taught us (its reported usage, its
length rejections), and recorded in the stats when exact."""

from __future__ import annotations

import dataclasses

from ..config import ContextConfig
from ..events import EventBus
from ..provider_errors import LengthRejection
from ._offer import ToolOffer
from ._port import ContextPort
from ._tally import PromptCount, TokenTally
from ._window_size import Window

__all__ = ["PromptCounter"]


class PromptCounter:
    """The prompt's token count as the pipeline uses it: of the tools the model is shown
    (:class:`ToolOffer`), shifted by what the provider taught us, and recorded in the stats
    when exact.

    Two shifts, kept apart: ``usage_shift``, the gap to the provider's reported input tokens
    of the last like call (``calibrate_with_usage``; a call with another tool list is not
    like), and ``overflow_shift``, learned when the provider rejected a prompt for its length
    (always on: it only grows, so the next compaction comes early enough).

    Args:
        config (`ContextConfig`): ``calibrate_with_usage``.
        tally (`TokenTally`): The incremental count.
        port (`ContextPort`): The memory.
        bus (`EventBus`): Whose stats record the counts.
        offer (`ToolOffer`): The tool schemas the model is shown.
    """

    def __init__(
        self,
        config: ContextConfig,
        tally: TokenTally,
        port: ContextPort,
        bus: EventBus,
        offer: ToolOffer,
    ) -> None:
        self.config = config
        self.tally = tally
        self.port = port
        self.bus = bus
        self.offer = offer
        self.usage_shift = 0
        self.overflow_shift = 0

    @property
    def calibration(self) -> int:
        """The shift added to every count."""
        usage = self.usage_shift if self.config.calibrate_with_usage else 0
        return usage + self.overflow_shift

    async def __call__(
        self, sys_prompt: str, tools: list[dict] | None, exact_above: int | None = None
    ) -> PromptCount:
        """Count the prompt now. With ``exact_above``, new messages are only bounded while the
        total cannot pass it (see :class:`TokenTally`); the stats record exact counts only."""
        count = await self.tally.count(self.port, sys_prompt, self.offer(tools), exact_above)
        if self.calibration:
            count = dataclasses.replace(count, calibration=self.calibration)
        if not count.estimated:
            stats = self.bus.stats
            stats.last_prompt_tokens = count.total
            stats.peak_prompt_tokens = max(stats.peak_prompt_tokens, count.total)
        return count

    def record_usage(self, provider_input_tokens: int, ours: int) -> None:
        """Compare the provider's count of a like prompt with ours (design §5.1); ``ours`` is our
        count of the same prompt without any shift."""
        if ours <= 0 or provider_input_tokens <= 0:
            return
        self.bus.stats.token_count_error = round(
            (ours - provider_input_tokens) / provider_input_tokens, 5
        )
        # A provider that reports less than half our count leaves tokens out of its usage (a
        # prompt cache it does not count there): nothing to learn. Otherwise it may count up to
        # a tenth less than we do (another tokenizer); more would let prompts over the window
        # through if its report is short of what it bills.
        if provider_input_tokens * 2 < ours:
            return
        self.usage_shift = max(provider_input_tokens - ours, -(ours // 10))

    def learn_rejection(self, rejection: LengthRejection, ours: int, window: Window) -> bool:
        """The provider rejected a prompt we counted as ``ours`` tokens (without shifts): learn
        what its numbers say. Its window, less the room it keeps for the answer, when smaller
        than ours, becomes the window (``window.lower_to``); its count of the prompt, when
        larger than ours, becomes a shift of every count. With no numbers at all, its window is
        taken to be just under what we sent. Returns ``False`` when nothing about the prompt
        can help: the room for the answer alone fills its window, its own count shows the
        prompt within it, or the window that would follow is under a quarter of ours (the
        error is raised as it is)."""
        room = None
        learned = False
        if rejection.limit_tokens is not None:
            room = rejection.limit_tokens - (rejection.completion_tokens or 0)
            if room <= 0:
                return False
            learned = window.lower_to(room)
        if rejection.prompt_tokens is not None:
            gap = rejection.prompt_tokens - ours
            if gap > 0:
                self.overflow_shift = max(self.overflow_shift, gap)
                learned = True
            elif room is not None and rejection.prompt_tokens <= room and not learned:
                return False
        if not learned:
            cap = int(ours * 0.95)
            if cap < window.configured // 4:
                return False
            window.lower_to(cap)
        return True
