"""What a provider's reported input tokens say about our count (design §5.1): a pure judgement
over the last like calls, no I/O.

Each sample is one call: our exact count of the prompt, the provider's ``input_tokens`` and our
count of the tool-result text in it. How the gap behaves across calls tells its cause:

- **agrees**: every gap within 16 tokens (or 0.2%);
- **count error**: the provider counts what we sent with another vocabulary or template
  overhead, so its count follows ours: a fixed offset, a fixed ratio (0.75-1.35, the spread
  between real vocabularies) or both (``P = k*C + a``); calibration may shift by it;
- **template skew**: the server's chat template does not lay out what we sent (llama-cpp-
  python's drops tool results and writes schemas compactly, issue 43): its count follows the
  structure, not the size. Told by a gap that grows with the tool-result text
  (``drops_tool_results``), a count under half ours (``leaves_out``: a dropped part, or a prompt
  cache left out of the report) or a gap that follows neither ours nor the results
  (``varies``). Never shifted on: what the server counts is not what a calibration of our
  count could learn;
- **unsettled**: fewer than three like calls, too few to tell.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

__all__ = ["UsageSample", "UsageVerdict", "implausible_usage", "judge_usage"]

AGREE_SHARE = 0.002
AGREE_TOKENS = 16
"""A gap within this many tokens (or this share of our count) is agreement; a larger one, even a
fixed +37, is a count error worth its shift."""
FIT_SHARE = 0.05
FIT_TOKENS = 32
"""A model of the gap explains a sample whose residual is within this share of our count (or
this many tokens): real templates differ from ours by a few percent (issue 43: 1.2-7.4%)."""
VOCABULARY_RATIOS = (0.75, 1.35)
"""The provider's count over ours that another vocabulary can explain."""
MIN_SAMPLES = 3
"""Like calls needed to tell a count error from template skew."""
DROP_SLOPE = -0.5
"""A gap that falls by at least half a token per tool-result token: the results are dropped."""
SPREAD = 0.1
"""A quantity varies across the samples when its range is this share of our mean count."""


@dataclass(frozen=True)
class UsageSample:
    """One like call."""

    ours: int
    """Our exact count of the prompt (no shift)."""
    provider: int
    """The provider's reported input tokens."""
    tool_results: int = 0
    """Our count of the tool-result text in the prompt."""


@dataclass(frozen=True)
class UsageVerdict:
    """What the provider's counts say about ours (``stats.token_count``)."""

    kind: str
    """``unsettled``, ``agrees``, ``count_error`` or ``template_skew``."""
    form: str
    """A count error's ``offset``, ``ratio`` or ``offset+ratio``; a skew's
    ``drops_tool_results``, ``leaves_out`` or ``varies``; ``""`` otherwise."""
    samples: int
    """Like calls judged (the last ones, at most eight)."""
    error: float
    """``(ours - provider) / provider`` of the last like call (``stats.token_count_error``)."""
    ratio_low: float
    """The smallest provider/ours ratio among the samples."""
    ratio_high: float
    """The largest."""
    offset: float = 0.0
    """A count error's fitted offset ``a`` in ``provider = ratio * ours + offset`` (tokens);
    for a skew that drops tool results, the gap left with no results."""
    ratio: float = 1.0
    """A count error's fitted ``ratio``; for a skew that drops tool results, the share of their
    tokens the server does not count (``1.0``: all)."""

    @property
    def shifts(self) -> bool:
        """Whether calibration may learn from it (a count error, or too few calls yet)."""
        return self.kind in ("count_error", "unsettled")

    def predicted(self, ours: int) -> float:
        """The provider's count of a prompt we count as ``ours``, by the fitted model."""
        return self.ratio * ours + self.offset

    def describe(self) -> str:
        """One line for people (``chat``'s closing line)."""
        low, high = f"{self.ratio_low:.0%}", f"{self.ratio_high:.0%}"
        span = low if low == high else f"{low}-{high}"
        if self.kind == "agrees":
            return f"token count agrees with the provider's ({self.error:+.2%})"
        if self.kind == "count_error":
            fitted = {
                "offset": f"a fixed offset of {self.offset:+,.0f} tokens",
                "ratio": f"a fixed ratio of {self.ratio:.3f}",
            }.get(self.form, f"a ratio of {self.ratio:.3f} and {self.offset:+,.0f} tokens")
            return f"token count error {self.error:+.2%} ({fitted} over {self.samples} calls)"
        if self.kind == "template_skew":
            why = {
                "drops_tool_results": "its chat template drops tool results",
                "leaves_out": "it leaves part of the prompt out of its count",
            }.get(self.form, "its count follows neither ours nor the tool results")
            return (
                f"template skew, not a count error: the server counts {span} of what we count "
                f"({why}; {self.samples} calls), no calibration"
            )
        return (
            f"token count error {self.error:+.2%} ({self.samples} call(s): too few to tell a "
            "count error from template skew)"
        )

    def as_dict(self) -> dict[str, Any]:
        """Plain data, for reports."""
        return {**asdict(self), "detail": self.describe()}


def implausible_usage(provider: int, ours: int, window: int) -> str | None:
    """Why a reported count cannot be a count of the prompt we sent, or ``None``.

    A gap larger than the whole window on top of twice our count is no vocabulary or template:
    a buggy proxy (issue 42: 100,000,000 for a 400-token prompt)."""
    if provider > 2 * ours + window:
        return (
            f"the provider reported {provider:,} input tokens for a prompt we count as "
            f"{ours:,} on a {window:,}-token window"
        )
    return None


def judge_usage(samples: Sequence[UsageSample]) -> UsageVerdict:
    """The verdict on ``samples`` (oldest first, ``ours`` and ``provider`` positive)."""
    if not samples:
        return UsageVerdict("unsettled", "", 0, 0.0, 1.0, 1.0)
    last = samples[-1]
    ratios = [s.provider / s.ours for s in samples]
    base = {
        "samples": len(samples),
        "error": round((last.ours - last.provider) / last.provider, 5),
        "ratio_low": round(min(ratios), 4),
        "ratio_high": round(max(ratios), 4),
    }
    gaps = [s.provider - s.ours for s in samples]
    if all(
        abs(g) <= max(AGREE_TOKENS, AGREE_SHARE * s.ours)
        for g, s in zip(gaps, samples, strict=True)
    ):
        return UsageVerdict("agrees", "", **base)
    if len(samples) < MIN_SAMPLES:
        if min(ratios) < 0.5:  # no vocabulary counts under half of another's
            return UsageVerdict("template_skew", "leaves_out", **base)
        return UsageVerdict("unsettled", "", offset=float(statistics.median(gaps)), **base)
    mean_ours = statistics.fmean(s.ours for s in samples)
    count_error = _count_error(samples, gaps, ratios, mean_ours)
    drop = _drop(samples, gaps, mean_ours)
    if count_error is not None and (drop is None or count_error[0] == "offset"):
        form, ratio, offset = count_error
        return UsageVerdict("count_error", form, offset=offset, ratio=ratio, **base)
    if drop is not None:
        offset, share = drop
        return UsageVerdict(
            "template_skew", "drops_tool_results", offset=offset, ratio=share, **base
        )
    form = "leaves_out" if min(ratios) < 0.5 else "varies"
    return UsageVerdict("template_skew", form, **base)


def _fits(samples: Sequence[UsageSample], predict: Any) -> bool:
    return all(abs(s.provider - predict(s)) <= max(FIT_TOKENS, FIT_SHARE * s.ours) for s in samples)


def _count_error(
    samples: Sequence[UsageSample], gaps: list[int], ratios: list[float], mean_ours: float
) -> tuple[str, float, float] | None:
    """``(form, ratio, offset)`` of the simplest count error that explains every sample."""
    offset = float(statistics.median(gaps))
    if _fits(samples, lambda s: s.ours + offset):
        return "offset", 1.0, round(offset, 1)
    ratio = statistics.median(ratios)
    low, high = VOCABULARY_RATIOS
    if low <= ratio <= high and _fits(samples, lambda s: ratio * s.ours):
        return "ratio", round(ratio, 4), 0.0
    ours = [s.ours for s in samples]
    if max(ours) - min(ours) < SPREAD * mean_ours:
        return None  # our counts barely vary: a ratio and an offset cannot be told apart
    slope, intercept = statistics.linear_regression(ours, [s.provider for s in samples])
    if low <= slope <= high and _fits(samples, lambda s: slope * s.ours + intercept):
        return "offset+ratio", round(slope, 4), round(intercept, 1)
    return None


def _drop(
    samples: Sequence[UsageSample], gaps: list[int], mean_ours: float
) -> tuple[float, float] | None:
    """``(gap without results, share of the results' tokens not counted)`` when the gap falls
    with the tool-result text and that explains every sample."""
    results = [s.tool_results for s in samples]
    if max(results) - min(results) < SPREAD * mean_ours:
        return None
    slope, intercept = statistics.linear_regression(results, gaps)
    if slope > DROP_SLOPE:
        return None
    if not _fits(samples, lambda s: s.ours + intercept + slope * s.tool_results):
        return None
    return round(intercept, 1), round(-slope, 4)
