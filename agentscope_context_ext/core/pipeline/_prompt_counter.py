"""``PromptCounter``: the prompt's token count as the pipeline uses it (design §5.1, 4.3): of
the tools the model is shown, shifted by what the provider taught us (its reported usage, its
length rejections), and recorded in the stats when exact."""

from __future__ import annotations

import dataclasses

from ..config import ContextConfig
from ..events import EventBus, TokenCountJudged, UsageIgnored
from ..provider_errors import LengthRejection
from ..tokens import UsageSample, implausible_usage
from ._calibration import UsageCalibration
from ._offer import ToolOffer
from ._port import ContextPort
from ._tally import PromptCount, TokenTally
from ._window_size import Window

__all__ = ["PromptCounter"]


class PromptCounter:
    """The prompt's token count as the pipeline uses it: of the tools the model is shown
    (:class:`ToolOffer`), shifted by what the provider taught us, and recorded in the stats
    when exact.

    Two shifts, kept apart: the usage shift (:class:`UsageCalibration`,
    ``calibrate_with_usage``: a count error the provider's reported input tokens of like calls
    show; a call with another tool list is not like), and ``overflow_shift``, learned when the
    provider rejected a prompt for its length (always on, so the next compaction comes
    early enough; a like call's report with a gap under half of it lowers it). Neither ever
    refuses a call (``PromptCount.floor``).

    Args:
        config (`ContextConfig`): ``calibrate_with_usage``.
        tally (`TokenTally`): The incremental count.
        port (`ContextPort`): The memory.
        bus (`EventBus`): Whose stats record the counts.
        offer (`ToolOffer`): The tool schemas the model is shown.
        window (`Window`): The window (bounds the usage shift; judges a figure plausible).
    """

    def __init__(
        self,
        config: ContextConfig,
        tally: TokenTally,
        port: ContextPort,
        bus: EventBus,
        offer: ToolOffer,
        window: Window,
    ) -> None:
        self.config = config
        self.tally = tally
        self.port = port
        self.bus = bus
        self.offer = offer
        self.window = window
        self.usage = UsageCalibration()
        self.overflow_shift = 0
        self._last_floor = 0
        self._result_tokens: dict[str, tuple[int, int]] = {}
        """Call id -> (length of its result text, our count of it)."""

    @property
    def calibration(self) -> int:
        """The shift added to the last prompt counted, as learned now (usage and overflow)."""
        return self.usage_shift(self._last_floor) + self.overflow_shift

    def usage_shift(self, ours: int) -> int:
        """What usage adds to a prompt we count exactly as ``ours`` (``0`` with
        ``calibrate_with_usage`` off)."""
        if not self.config.calibrate_with_usage:
            return 0
        return self.usage.shift(ours, self.window.tokens)

    def call_made(self) -> None:
        """A model call is about to be made (the usage shift decays without like reports)."""
        self.usage.call_made()

    async def __call__(
        self, sys_prompt: str, tools: list[dict] | None, exact_above: int | None = None
    ) -> PromptCount:
        """Count the prompt now. With ``exact_above``, new messages are only bounded while the
        total cannot pass it (see :class:`TokenTally`); the stats record exact counts only."""
        count = await self.tally.count(self.port, sys_prompt, self.offer(tools), exact_above)
        usage = self.usage_shift(count.floor)
        if usage or self.overflow_shift:
            count = dataclasses.replace(count, calibration=usage + self.overflow_shift)
        if not count.estimated:
            self._last_floor = count.floor
            stats = self.bus.stats
            stats.usage_shift = usage
            stats.last_prompt_tokens = count.total
            stats.peak_prompt_tokens = max(stats.peak_prompt_tokens, count.total)
        return count

    async def record_usage(self, provider_input_tokens: int, ours: int) -> None:
        """Compare the provider's count of a like prompt with ours (design §5.1); ``ours`` is our
        count of the same prompt without any shift. A figure no vocabulary or template can
        explain is ignored (a ``usage_ignored`` warning); the others are judged with the last
        like calls (``stats.token_count``, a ``token_count_judged`` event when the judgement
        changes)."""
        if ours <= 0 or provider_input_tokens <= 0:
            return
        window = self.window.tokens
        reason = implausible_usage(provider_input_tokens, ours, window)
        if reason is not None:
            await self.bus.emit(
                UsageIgnored(
                    provider_tokens=provider_input_tokens,
                    ours=ours,
                    max_input_tokens=window,
                    reason=reason,
                )
            )
            return
        gap = provider_input_tokens - ours
        if self.overflow_shift and gap < self.overflow_shift / 2:
            # A call the provider served shows a gap under half of what its length rejection
            # taught: that rejection's count was not of our prompt (B12: llama-cpp-python's
            # function-calling loop overflowed on its own output and said 4,097 for a 581-token
            # prompt; kept, the 3,516 counted every later prompt over the window).
            self.overflow_shift = max(0, gap)
        stats = self.bus.stats
        stats.token_count_error = round((ours - provider_input_tokens) / provider_input_tokens, 5)
        before = self.usage.verdict
        verdict = self.usage.add(UsageSample(ours, provider_input_tokens, self._tool_results()))
        stats.token_count = verdict
        quiet = ("agrees", "unsettled")  # nothing to act on: stats.token_count tells, no event
        first = before is None and verdict.kind in quiet
        if not first and (
            before is None or (before.kind, before.form) != (verdict.kind, verdict.form)
        ):
            await self.bus.emit(TokenCountJudged(verdict=verdict, shift=self.usage_shift(ours)))

    def _tool_results(self) -> int:
        """Our count of the tool-result text in the context (what a server's template may drop),
        each result counted once while its text stays the same length."""
        counts: dict[str, tuple[int, int]] = {}
        count_text = self.tally.counter.count_text
        for msg_id in self.port.result_message_ids():
            for slot in self.port.result_slots(msg_id):
                text = slot.text or ""
                known = self._result_tokens.get(slot.call_id)
                if known is None or known[0] != len(text):
                    known = (len(text), count_text(text))
                counts[slot.call_id] = known
        self._result_tokens = counts
        return sum(tokens for _, tokens in counts.values())

    async def learn_rejection(self, rejection: LengthRejection, ours: int, window: Window) -> bool:
        """The provider rejected a prompt we counted as ``ours`` tokens (without shifts): learn
        what its numbers say. Its window, less the room it keeps for the answer, when smaller
        than ours, becomes the window (``window.lower_to``); its count of the prompt, when
        larger than ours, becomes a shift of every count (re-checked by the next like call's
        report, :meth:`record_usage`). With no numbers at all, its window is
        taken to be just under what we sent. Returns ``False`` when nothing about the prompt
        can help: the room for the answer alone fills its window, its own count shows the
        prompt within it, or the window that would follow is under a quarter of ours (the
        error is raised as it is). Its count of the prompt is ignored (a ``usage_ignored``
        warning) when no vocabulary or template can explain it."""
        prompt_tokens = rejection.prompt_tokens
        reason = (
            None if prompt_tokens is None else implausible_usage(prompt_tokens, ours, window.tokens)
        )
        if reason is not None:
            await self.bus.emit(
                UsageIgnored(
                    provider_tokens=prompt_tokens,
                    ours=ours,
                    max_input_tokens=window.tokens,
                    reason=f"{reason} (in a length rejection)",
                )
            )
            prompt_tokens = None
        room = None
        learned = False
        if rejection.limit_tokens is not None:
            room = rejection.limit_tokens - (rejection.completion_tokens or 0)
            if room <= 0:
                return False
            learned = window.lower_to(room)
        if prompt_tokens is not None:
            gap = prompt_tokens - ours
            if gap > 0:
                self.overflow_shift = max(self.overflow_shift, gap)
                learned = True
            elif room is not None and prompt_tokens <= room and not learned:
                return False
        if not learned:
            cap = int(ours * 0.95)
            if cap < window.configured // 4:
                return False
            window.lower_to(cap)
        return True
