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
besides the messages. The point is ``max(trigger, min(K*, limit))``, the limit being 95% of the
window and, below that, room for one more step as large as the largest of the last calls. At
r = 1 K* lies at or below the trigger: the compaction runs at the trigger, as without caching.
On a small window with a large fixed part and small steps (B8's tau-bench) a compaction at the
trigger buys little room for its cost and K* lies past the window, so it waits; a context that
grows in large steps (B8's coding sessions) leaves no room for a step past the trigger.

*g* is the median net change per call over the last calls, from exact counts only (stage two's
cuts included, a compacting call left out): prompts are counted exactly from
:data:`LEARN_FROM_SHARE` of the trigger on. Until the pace is known (a new or just loaded
conversation, or counts that were only bounds) the point is the trigger.
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
LEARN_FROM_SHARE = 0.7
"""When it may wait, prompts are counted exactly from this share of the trigger on (below it
they are only bounded, design §5.1), so the pace is known by the time the trigger is passed.
Lower learns more (B8's coding sessions: 0.6 cost 0.6% more, 0.85 2.4% more, with too few
samples to see their large steps) and tokenizes more (B6's p99 at 128k: 12.2 ms at 0.6, 11.5
at 0.7, 9.9 at 0.85, 10.3 when it never waits)."""


class PrefixCost:
    """The prompt-caching cost model of one pipeline: where compaction is cheapest.

    Args:
        price (`float`): ``prompt_cache_price``: a cached token's price as a share of a full one.
        window (`Window`): The window and the compaction trigger.
        keep_recent_ratio (`float`): ``compaction.keep_recent_ratio``, to estimate what the
            first compaction will leave.
        can_wait (`bool`): Whether waiting past the trigger is safe at all. Not with an
            estimate as counter, never exact (B8: ours with the bytes/4 estimate sent 28
            prompts over the window when it waited), and not when the pipeline runs once
            per reply (1.x ``pre_reply``: the steps of a reply add to the prompt unchecked):
            there the trigger's margin is what keeps a prompt inside the window.
    """

    def __init__(
        self, price: float, window: Window, keep_recent_ratio: float, can_wait: bool = True
    ) -> None:
        self.price = price
        self.can_wait = can_wait
        self.window = window
        self.keep_recent_ratio = keep_recent_ratio
        self._growth: deque[int] = deque(maxlen=GROWTH_SAMPLES)
        self._sent: int | None = None
        self.after_compaction: int | None = None
        """Prompt tokens right after the last compaction (``None`` before the first)."""

    def observe(self, count: PromptCount, compacted: bool) -> None:
        """Learn from one call: its prompt's ``count``; ``compacted``: this call's pipeline
        compacted (its change is not growth). A count that is only a bound (far below the
        trigger new messages are bounded, not tokenized) teaches nothing and breaks the chain:
        a bound is several times the real size, and growth measured from one would be wrong.
        """
        if count.estimated:
            self._sent = None
            return
        if self._sent is not None and not compacted:
            self._growth.append(count.total - self._sent)
        self._sent = count.total

    def forget(self) -> None:
        """Start over (a loaded session: the calls before it are not this conversation's)."""
        self._growth.clear()
        self._sent = None
        self.after_compaction = None

    @property
    def may_wait(self) -> bool:
        """Whether the compaction may ever wait past the trigger: caching priced below a
        full token, and waiting safe (``can_wait``)."""
        return self.price < 1.0 and self.can_wait

    @property
    def exact_above(self) -> int:
        """The prompt size from which counts must be exact: the trigger, or (when the
        compaction may wait) :data:`LEARN_FROM_SHARE` of it, where the pace is learned."""
        trigger = self.window.trigger_tokens
        return int(trigger * LEARN_FROM_SHARE) if self.may_wait else trigger

    @property
    def growth(self) -> float | None:
        """The median tokens a call added lately (``None`` until two calls were seen)."""
        if not self._growth:
            return None
        return max(float(statistics.median(self._growth)), 1.0)

    def wait_limit(self) -> int:
        """How far past the trigger a compaction may safely wait (for the cheapest point, or
        for a summary written in the background): 95% of the window, and room for one more
        step as large as the largest lately; the trigger when waiting is not safe
        (``can_wait``) or nothing is known of the pace."""
        trigger = self.window.trigger_tokens
        if not self.can_wait or not self._growth:
            # nothing is known of the pace (a new conversation, one just loaded, whose prompt
            # the provider has not cached, or counts that stayed bounds because no usage was
            # reported): waiting blind could leave no room for the next step.
            return trigger
        # Only while one more step as large as the largest lately surely fits: a model call
        # that no run of the pipeline precedes (1.x's answer after max_iters) still fits, and
        # a context that grows in large steps (B8's coding sessions, where waiting cost 1.6%
        # more) keeps compacting at the trigger.
        window = self.window.tokens
        return max(trigger, min(int(DEFER_LIMIT_SHARE * window), window - max(self._growth)))

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
        growth = self.growth
        if not self.may_wait or growth is None:
            return trigger
        limit = self.wait_limit()
        if self.price <= 0.0:
            return limit
        after = self.after_compaction or self.estimate_after(count, memo_tokens)
        cached = count.system + count.tools
        fixed = (1.0 - self.price) * max(after - cached, 0) + memo_tokens
        best = after + math.sqrt(2 * growth * fixed / self.price)
        if not math.isfinite(best) or best >= limit:  # a price near 0: wait as long as allowed
            return limit
        return max(trigger, int(best))

    def estimate_after(self, count: PromptCount, memo_tokens: int) -> int:
        """What the first compaction will leave, by the compaction's own budget: the system
        prompt, the tools, the summary and the kept tail."""
        fixed = count.system + count.tools + max(count.head, memo_tokens)
        tail = min(
            int(self.keep_recent_ratio * self.window.tokens),
            int(self.window.trigger_tokens * AFTER_COMPACTION_SHARE) - fixed,
        )
        return fixed + max(tail, 0)
