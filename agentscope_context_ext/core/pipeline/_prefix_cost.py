"""When to compact under provider prompt caching (design §4.5).

Providers bill the part of a prompt that repeats the previous prompt's prefix at a fraction *r*
of the price (``prompt_cache_price``): about 0.1 at Anthropic and DeepSeek, 0.25-0.5 at OpenAI,
0.2-0.4 at DashScope, 1.0 without caching. A compaction makes the provider read everything after
the cached system prompt and tools again at full price, once; until the next one, every call
carries the context at the cached price. Over a conversation that keeps going, a compaction
that waits for the prompt to reach *K* tokens and leaves *A* comes every ``(K - A) / g`` calls
(*g*: the growth per call), so the cost per call is lowest at

    K* = A + sqrt(2 g F / r),    F = (1 - r)(A - H) + m

where *H* is the cached system prompt and tools and *m* what a compaction sends the summary model
besides the messages. At r = 1 that lies at or below the trigger: the compaction runs at the
trigger, as without caching. At r = 0.1 with a slowly growing context (B8's tau-bench: g ~ 200
tokens) it lies past the window, so the compaction waits until the prompt nears the window
(:data:`DEFER_LIMIT_SHARE`); with a context that grows in large steps (B8's coding sessions) it
stays near the trigger. The trigger is the earliest point, never moved earlier.

*g* is the median of the net change per call over the last calls (stage two's cuts included, a
compaction's call left out): large single reads that stage two cuts again later do not set the
pace (B8: the mean put every coding session's compaction at the window and cost 9% more).
"""

from __future__ import annotations

import math
import statistics
from collections import deque

from ._compaction import AFTER_COMPACTION_SHARE
from ._tally import PromptCount
from ._window_size import Window

__all__ = ["DEFER_LIMIT_SHARE", "PrefixCost"]

DEFER_LIMIT_SHARE = 0.95
"""A compaction waits at most until the prompt reaches this share of the window (the margin
covers the count's error; the pipeline compacts before any call the window cannot take)."""
GROWTH_SAMPLES = 16
"""How many recent calls the growth per call is taken from."""


class PrefixCost:
    """The prompt-caching cost model of one pipeline: where compaction is cheapest.

    Args:
        price (`float`): ``prompt_cache_price``: a cached token's price as a share of a full one.
        window (`Window`): The window and the compaction trigger.
        keep_recent_ratio (`float`): ``compaction.keep_recent_ratio``, to estimate what the
            first compaction will leave.
        exact (`bool`): Whether the counts come from a real vocabulary. The bytes/4 estimate
            can be a quarter short (B8: ours with it sent 28 prompts over the window when it
            waited): with it the compaction never waits past the trigger, whose margin is
            what keeps such a prompt inside the window.
    """

    def __init__(
        self, price: float, window: Window, keep_recent_ratio: float, exact: bool = True
    ) -> None:
        self.price = price
        self.exact = exact
        self.window = window
        self.keep_recent_ratio = keep_recent_ratio
        self._growth: deque[int] = deque(maxlen=GROWTH_SAMPLES)
        self._sent: int | None = None
        self.after_compaction: int | None = None
        """Prompt tokens right after the last compaction (``None`` before the first)."""

    def observe(self, sent: int, compacted: bool) -> None:
        """Learn from one call: its prompt was ``sent`` tokens; ``compacted``: this call's
        pipeline compacted (its change is not growth)."""
        if self._sent is not None and not compacted:
            self._growth.append(sent - self._sent)
        self._sent = sent

    def forget(self) -> None:
        """Start over (a loaded session: the calls before it are not this conversation's)."""
        self._growth.clear()
        self._sent = None
        self.after_compaction = None

    @property
    def growth(self) -> float | None:
        """The median tokens a call added lately (``None`` until two calls were seen)."""
        if not self._growth:
            return None
        return max(float(statistics.median(self._growth)), 1.0)

    def compaction_point(self, count: PromptCount, memo_tokens: int) -> int:
        """The prompt size above which to compact now: the cheapest point, never below the
        trigger, never past :data:`DEFER_LIMIT_SHARE` of the window.

        Args:
            count (`PromptCount`): The prompt now (its system prompt and tools stay cached
                across a compaction).
            memo_tokens (`int`): The summary's budget: what a compaction sends the summary model
                besides the messages (the previous summary), and what it adds to the prompt.
        """
        trigger = self.window.trigger_tokens
        if self.price >= 1.0 or not self.exact:
            return trigger
        limit = max(trigger, int(DEFER_LIMIT_SHARE * self.window.tokens))
        growth = self.growth
        if growth is None or self.price <= 0.0:
            # Nothing known of the pace yet (a new conversation, or one just loaded, which may
            # have been waiting): the decision waits for two calls, within the limit.
            return limit
        after = self.after_compaction or self.estimate_after(count, memo_tokens)
        cached = count.system + count.tools
        fixed = (1.0 - self.price) * max(after - cached, 0) + memo_tokens
        best = after + math.sqrt(2 * growth * fixed / self.price)
        return max(trigger, min(int(best), limit))

    def estimate_after(self, count: PromptCount, memo_tokens: int) -> int:
        """What the first compaction will leave, by the compaction's own budget: the system
        prompt, the tools, the summary and the kept tail."""
        fixed = count.system + count.tools + max(count.head, memo_tokens)
        tail = min(
            int(self.keep_recent_ratio * self.window.tokens),
            int(self.window.trigger_tokens * AFTER_COMPACTION_SHARE) - fixed,
        )
        return fixed + max(tail, 0)
