"""The breaker of a network store (design §2.3): after N calls in a row ran out of time, calls
fail at once for a cool-down, then one call probes the server. Driven by a test clock."""

from __future__ import annotations

import pytest

from agentscope_context_ext.core.workspace import Breaker


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_it_opens_after_consecutive_timeouts_only() -> None:
    breaker = Breaker(timeouts=3, cooldown=10, clock=Clock())
    breaker.timed_out()
    breaker.timed_out()
    breaker.answered()  # an answer in between: the count starts again
    breaker.timed_out()
    breaker.timed_out()
    assert breaker.admit() is None and not breaker.is_open
    breaker.timed_out()
    refused = breaker.admit()
    assert breaker.is_open and refused is not None
    assert refused.timeouts == 3 and refused.retry_in == pytest.approx(10)


def test_after_the_cooldown_one_call_probes_and_its_outcome_decides() -> None:
    clock = Clock()
    breaker = Breaker(timeouts=2, cooldown=10, clock=clock)
    breaker.timed_out()
    breaker.timed_out()
    clock.now += 4
    assert breaker.admit().retry_in == pytest.approx(6)
    clock.now += 6
    assert breaker.admit() is None, "the first call after the cool-down probes"
    assert breaker.admit().retry_in == 0, "the others fail at once while it is out"
    breaker.timed_out()  # the probe timed out: open again, a full cool-down
    assert breaker.admit().retry_in == pytest.approx(10)
    clock.now += 10
    assert breaker.admit() is None
    breaker.answered()  # the probe got an answer: closed
    assert not breaker.is_open and breaker.admit() is None and breaker.admit() is None


def test_a_probe_given_up_lets_the_next_call_probe() -> None:
    clock = Clock()
    breaker = Breaker(timeouts=1, cooldown=5, clock=clock)
    breaker.timed_out()
    clock.now += 5
    assert breaker.admit() is None
    breaker.abandoned()  # the caller was cancelled before the server answered
    assert breaker.admit() is None, "another call may probe"


def test_bad_settings_are_refused() -> None:
    with pytest.raises(ValueError):
        Breaker(timeouts=0)
    with pytest.raises(ValueError):
        Breaker(cooldown=-1)
