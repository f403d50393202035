"""A circuit breaker for a network store: after a few calls in a row ran out of time, calls fail
at once for a cool-down, then one call probes the server (design §2.3).

Without it, every call of every turn would wait its whole deadline on a frozen server; with it,
a turn learns within a few deadlines that the store is away and goes on without it (or ends
with a clear error), and the server is asked again once per cool-down, by one call only.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["BREAKER_COOLDOWN_SECONDS", "BREAKER_TIMEOUTS", "Breaker", "BreakerOpen"]

BREAKER_TIMEOUTS = 2
"""Consecutive calls out of time that open the breaker."""
BREAKER_COOLDOWN_SECONDS = 10.0
"""How long an open breaker fails calls at once before one probes the server."""


@dataclass(frozen=True)
class BreakerOpen:
    """Why a call was not made: the breaker is open."""

    timeouts: int
    """Consecutive calls that ran out of time."""
    retry_in: float
    """Seconds until a call probes the server again (0: a probe is under way)."""


class Breaker:
    """Closed (calls go through), open (calls fail at once) or half-open (one probe is out).

    Thread-safe: calls come from the loop's portals and from plain threads alike.

    Args:
        timeouts (`int`): Consecutive calls out of time that open it.
        cooldown (`float`): Seconds it stays open before one call probes.
        clock (`Callable[[], float]`): Monotonic seconds; tests pass their own.
    """

    def __init__(
        self,
        timeouts: int = BREAKER_TIMEOUTS,
        cooldown: float = BREAKER_COOLDOWN_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if timeouts < 1 or cooldown < 0:
            raise ValueError("a breaker needs timeouts >= 1 and cooldown >= 0")
        self.timeouts = timeouts
        self.cooldown = cooldown
        self.clock = clock
        """Monotonic seconds (a test moves its own instead of waiting out a cool-down)."""
        self._lock = threading.Lock()
        self._failures = 0
        self._opened_at: float | None = None
        self._probing = False

    @property
    def is_open(self) -> bool:
        """Whether calls are being refused (open, or half-open with a probe out)."""
        return self._opened_at is not None

    def admit(self) -> BreakerOpen | None:
        """Before a call: ``None`` to make it (closed, or this call is the probe), else why
        not."""
        with self._lock:
            if self._opened_at is None:
                return None
            waited = self.clock() - self._opened_at
            if waited >= self.cooldown and not self._probing:
                self._probing = True
                return None
            retry_in = 0.0 if self._probing else self.cooldown - waited
            return BreakerOpen(self._failures, retry_in)

    def answered(self) -> None:
        """The server answered (a result or an error of its own): close."""
        with self._lock:
            self._failures = 0
            self._opened_at = None
            self._probing = False

    def timed_out(self) -> None:
        """A call ran out of time: count it; open (again) at the threshold or after a probe."""
        with self._lock:
            self._failures += 1
            if self._probing or self._failures >= self.timeouts:
                self._opened_at = self.clock()
            self._probing = False

    def abandoned(self) -> None:
        """A call was given up by its caller (cancelled) before the server answered: a probe
        that never finished lets the next call probe."""
        with self._lock:
            self._probing = False
