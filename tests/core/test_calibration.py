"""The judgement of a provider's reported counts and the usage shift (design §5.1), on the
core's own records: no framework. The agents that report usage are in ``test_usage.py``."""

from __future__ import annotations

import pytest

from agentscope_context_ext.core.pipeline._calibration import UsageCalibration
from agentscope_context_ext.core.tokens import UsageSample, implausible_usage, judge_usage

GROWING = [(400, 0), (1_200, 700), (2_500, 1_900), (3_900, 3_200), (5_200, 4_400)]
"""(our count, our count of the tool-result text) of five calls of a session whose results
pile up."""


def samples(provider, calls=GROWING) -> list[UsageSample]:
    return [UsageSample(ours, provider(ours, results), results) for ours, results in calls]


def test_a_template_that_drops_tool_results_is_skew() -> None:
    # issue 43's server: results dropped, schemas compact (about 94 tokens fewer)
    verdict = judge_usage(samples(lambda ours, results: ours - results - 94))
    assert (verdict.kind, verdict.form) == ("template_skew", "drops_tool_results")
    assert verdict.offset == pytest.approx(-94, abs=1) and verdict.ratio == pytest.approx(1)
    assert not verdict.shifts
    assert verdict.ratio_low < 0.2 and verdict.ratio_high > 0.75
    assert "template skew, not a count error" in verdict.describe()


def test_a_template_that_drops_them_with_noise_is_still_skew() -> None:
    # our count within 1.2-7.4% of the model's own template (issue 43)
    noise = iter([1.012, 0.95, 1.03, 0.974, 1.02])
    verdict = judge_usage(samples(lambda ours, results: round((ours - results) * next(noise))))
    assert (verdict.kind, verdict.form) == ("template_skew", "drops_tool_results")


@pytest.mark.parametrize(
    ("provider", "form", "ratio", "offset"),
    [
        (lambda ours, results: ours + 500, "offset", 1.0, 500),
        (lambda ours, results: ours - 120, "offset", 1.0, -120),
        (lambda ours, results: round(ours * 1.25), "ratio", 1.25, 0),
        (lambda ours, results: round(ours * 0.8), "ratio", 0.8, 0),
        (lambda ours, results: round(ours * 1.1) + 2_000, "offset+ratio", 1.1, 2_000),
    ],
)
def test_a_count_error_is_a_fixed_offset_a_fixed_ratio_or_both(provider, form, ratio, offset):
    verdict = judge_usage(samples(provider))
    assert (verdict.kind, verdict.form) == ("count_error", form)
    assert verdict.ratio == pytest.approx(ratio, rel=0.01)
    assert verdict.offset == pytest.approx(offset, abs=max(20, abs(offset) * 0.02))
    assert verdict.shifts and "token count error" in verdict.describe()


def test_agreement_and_too_few_calls() -> None:
    assert judge_usage(samples(lambda ours, results: ours + 3)).kind == "agrees"
    assert judge_usage([]).kind == "unsettled"
    two = judge_usage(samples(lambda ours, results: ours + 300, GROWING[:2]))
    assert (two.kind, two.offset) == ("unsettled", 300) and two.shifts
    assert "too few to tell" in two.describe()
    # under half of ours at once: no vocabulary does that (a dropped part, an uncounted cache)
    cached = judge_usage(samples(lambda ours, results: ours // 3, GROWING[:1]))
    assert (cached.kind, cached.form) == ("template_skew", "leaves_out")


def test_a_count_that_follows_nothing_is_skew() -> None:
    erratic = iter([1.4, 0.7, 1.3, 0.6, 1.2])
    verdict = judge_usage(samples(lambda ours, results: round(ours * next(erratic))))
    assert (verdict.kind, verdict.form) == ("template_skew", "varies")
    assert not verdict.shifts


def test_an_implausible_figure() -> None:
    assert implausible_usage(100_000_000, 412, 16_384) is not None
    assert implausible_usage(2 * 412 + 16_384, 412, 16_384) is None
    assert implausible_usage(3_400, 400, 16_384) is None  # a hidden prompt of 3,000 tokens


def test_the_shift_is_floored_bounded_and_decays() -> None:
    calibration = UsageCalibration()
    assert calibration.shift(1_000, 16_384) == 0, "nothing learned yet"
    calibration.call_made()
    calibration.add(UsageSample(1_000, 900))
    assert calibration.shift(1_000, 16_384) == 0, "our exact count is the floor"
    calibration.call_made()
    calibration.add(UsageSample(1_000, 9_000))
    # median gap 3,550 (unsettled): at most the count itself, at most 15% of the window
    assert calibration.shift(1_000, 131_072) == 1_000
    assert calibration.shift(12_000, 16_384) == int(0.15 * 16_384)
    for _ in range(4):
        calibration.call_made()  # calls whose answers report no usage
    assert calibration.shift(1_000, 131_072) == 1_000
    calibration.call_made()
    assert calibration.shift(1_000, 131_072) == 500
    for _ in range(4):
        calibration.call_made()
    assert calibration.shift(1_000, 131_072) == 250


def test_one_odd_report_is_outvoted() -> None:
    calibration = UsageCalibration()
    calibration.add(UsageSample(1_000, 8_000))
    for ours in (1_100, 1_300, 1_500, 1_800):
        calibration.add(UsageSample(ours, ours))
    assert calibration.shift(2_000, 131_072) == 0
    for ours in (2_000, 2_100, 2_300, 2_500):
        calibration.add(UsageSample(ours, ours))
    assert calibration.verdict.kind == "agrees", "the odd one left the last eight"
