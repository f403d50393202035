"""The calls of a network store: each within a deadline, off the event loop, behind a breaker
(design §2.3).

A store on a server (``RedisStorage``) makes every round trip through :class:`RemoteCalls`:

- inside a portal (``_portal.py``) the call runs in a thread of the store's own small pool and
  the loop awaits it, running other sessions meanwhile; the wait is bounded by the deadline
  (time in the pool's queue included: a frozen server holds every thread);
- on a loop's thread outside any portal it is made there and counted (``blocking_calls``);
- elsewhere (the command line, worker threads) it is a plain blocking call, bounded by the
  client's socket timeouts, which the store sets to the deadline.

The breaker (``_breaker.py``) turns repeated timeouts into immediate failures. Every failure
is a :class:`WorkspaceError` (an ``OSError``) whose message names the store and what to do.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from ..errors import WorkspaceError
from ._breaker import Breaker, BreakerOpen
from ._portal import inside_portal, note_blocking_call, on_loop_thread, wait

__all__ = ["DEFAULT_TIMEOUT_SECONDS", "POOL_THREADS", "RemoteCalls"]

logger = logging.getLogger("agentscope_context_ext")
T = TypeVar("T")

DEFAULT_TIMEOUT_SECONDS = 3.0
"""The deadline of one call (``workspace_timeout``)."""
POOL_THREADS = 8
"""Threads of a store's pool: calls in flight at once from portals (more wait their turn,
within their deadline)."""


class RemoteCalls:
    """Makes a network store's calls: ``calls(function, *args)``.

    Args:
        location (`str`): The store, for messages (no password).
        timeout (`float`): The deadline of one call, in seconds.
        timeouts (`tuple[type[BaseException], ...]`): What the client raises when its socket
            timed out (``TimeoutError`` itself is always one).
        errors (`tuple[type[BaseException], ...]`): The client's other errors (the server
            answered, or refused the connection at once).
        advice (`str`): What to do about a server that does not answer, for messages.
        breaker (`Breaker | None`): Default: open after 2 timeouts in a row, for 10 s.

    Attributes:
        blocking_calls (`int`): Calls made on an event loop's thread outside any portal: the
            loop's other tasks waited for them.
    """

    def __init__(
        self,
        location: str,
        timeout: float = DEFAULT_TIMEOUT_SECONDS,
        *,
        timeouts: tuple[type[BaseException], ...] = (),
        errors: tuple[type[BaseException], ...] = (),
        advice: str = "check the server",
        breaker: Breaker | None = None,
    ) -> None:
        if not timeout > 0:
            raise ValueError(f"a call's deadline must be positive, got {timeout}")
        self.location = location
        self.timeout = timeout
        self.breaker = breaker or Breaker()
        self.advice = advice
        self.blocking_calls = 0
        self._timeouts = (TimeoutError, *timeouts)
        self._errors = errors
        self._pool = ThreadPoolExecutor(POOL_THREADS, thread_name_prefix="ace-store")

    def __call__(self, function: Callable[..., T], *args: Any) -> T:
        """``function(*args)`` (one or a few round trips to the server) within the deadline.

        Raises:
            `WorkspaceError`: The server did not answer in time, the breaker is open, or the
                client failed; ``CancelledError`` when the waiting task was cancelled.
        """
        refused = self.breaker.admit()
        if refused is not None:
            raise self._refusal(refused)
        try:
            if inside_portal():
                result = wait(self._off_loop(function, args))
            else:
                if on_loop_thread():  # no portal: the loop waits for this call
                    self.blocking_calls += 1
                    note_blocking_call(self.location)
                    logger.debug("a call to %s blocked the event loop", self.location)
                result = function(*args)
        except self._timeouts:
            self.breaker.timed_out()
            raise WorkspaceError(
                f"the workspace {self.location} did not answer within {self.timeout:g} s (a "
                f"frozen, failing-over or unreachable server): {self.advice}, or raise "
                "workspace_timeout if it is only slow"
            ) from None
        except self._errors as exc:
            self.breaker.answered()  # a quick failure: the server is not frozen
            raise WorkspaceError(
                f"the workspace {self.location} failed: {_one_line(exc)}"
            ) from None
        except BaseException:
            self.breaker.abandoned()  # cancelled, or a bad argument: no answer to learn from
            raise
        self.breaker.answered()
        return result

    def pause(self, seconds: float) -> None:
        """A wait between two tries (a lock held by another worker): on the loop inside a
        portal, else a sleep."""
        if inside_portal():
            wait(asyncio.sleep(seconds))
        else:
            time.sleep(seconds)  # a lock's wait, not a test's synchronisation

    async def _off_loop(self, function: Callable[..., T], args: tuple) -> T:
        future = asyncio.get_running_loop().run_in_executor(self._pool, function, *args)
        async with asyncio.timeout(self.timeout):
            return await future

    def _refusal(self, refused: BreakerOpen) -> WorkspaceError:
        when = (
            "one call is trying it now"
            if refused.retry_in <= 0
            else f"calls fail at once for {refused.retry_in:.0f} s more, then one tries again"
        )
        return WorkspaceError(
            f"the workspace {self.location} is not answering ({refused.timeouts} calls in a row "
            f"took over {self.timeout:g} s): {when}; {self.advice}"
        )


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:200] or type(exc).__name__
