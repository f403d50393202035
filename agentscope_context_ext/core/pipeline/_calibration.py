"""``UsageCalibration``: what the provider's reported usage adds to our count (design §5.1).

The last like calls' reports are judged (``core.tokens.judge_usage``): a count error may shift
our count, a server's template skew never does. What usage adds can never lock an agent
(issue 42: one report of 100,000,000 tokens refused every later prompt, and with no call made
nothing could correct it):

- our exact count is the floor: the shift is never negative, and the window guard refuses a
  prompt only on the exact count (a shifted count over the window is still sent, and its report
  re-checks the shift);
- the shift is bounded per call (at most that call's exact count: usage can at most double a
  count) and overall (at most 15% of the window);
- it is re-checked by every like call (the last eight are judged, so one odd report is
  outvoted) and decays: halved every four model calls without a like report;
- a figure no vocabulary or template can explain is ignored (``implausible_usage``; the
  pipeline reports it as a ``usage_ignored`` warning).
"""

from __future__ import annotations

from collections import deque

from ..tokens import UsageSample, UsageVerdict, judge_usage

__all__ = ["UsageCalibration"]

SAMPLES_KEPT = 8
"""Like calls judged (the newest)."""
MAX_SHARE_OF_COUNT = 1.0
"""The shift of a count is at most this share of it (usage can at most double a count)."""
MAX_SHARE_OF_WINDOW = 0.15
"""The shift is at most this share of the window."""
DECAY_STEPS = 4
"""The shift halves every this many model calls without a like report."""


class UsageCalibration:
    """The usage shift: learned from the last like calls, bounded, decaying."""

    def __init__(self) -> None:
        self.samples: deque[UsageSample] = deque(maxlen=SAMPLES_KEPT)
        self.verdict: UsageVerdict | None = None
        """The judgement of the samples (``None`` before the first report)."""
        self.calls_without_report = 0
        """Model calls since the last like report."""

    def add(self, sample: UsageSample) -> UsageVerdict:
        """Judge the samples with ``sample`` added (the newest like call)."""
        self.samples.append(sample)
        self.verdict = judge_usage(self.samples)
        self.calls_without_report = 0
        return self.verdict

    def call_made(self) -> None:
        """A model call is about to be made (its report, if like, resets the decay)."""
        self.calls_without_report += 1

    def shift(self, ours: int, window: int) -> int:
        """What usage adds to a prompt we count exactly as ``ours`` on a ``window``."""
        verdict = self.verdict
        if verdict is None or not verdict.shifts or ours <= 0:
            return 0
        gap = verdict.predicted(ours) - ours
        bounded = min(gap, MAX_SHARE_OF_COUNT * ours, MAX_SHARE_OF_WINDOW * window)
        decay = 0.5 ** ((self.calls_without_report - 1) // DECAY_STEPS)
        return max(0, int(bounded * min(1.0, decay)))
