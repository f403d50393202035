"""Synchronous storage calls that wait on the event loop instead of blocking it (design §2.3).

The workspace stores are synchronous (one :class:`Storage` protocol under the dialog, the saved
results, long-term memory, search and the tools), and much of their code runs inside async hooks
on the event loop. A network store must then not block the loop's thread while the server
answers: a frozen Redis would freeze every session of the process. So a store's call is made in
a thread, and the code that asked for it waits in one of three ways:

- **in a portal** (our hooks' coroutines run in one: :func:`portal`, :func:`portal_stream`,
  :func:`in_portal`): the coroutine is stepped inside a child greenlet, and a synchronous call
  deep inside it hands its wait to the parent (:func:`wait`), which awaits it on the loop while
  other tasks run; the synchronous code then resumes with the answer. This is SQLAlchemy's
  ``greenlet_spawn``/``await_only`` technique, applied to a coroutine (as ``greenback`` does);
- **on a loop's thread outside any portal**: the call blocks the loop (its deadline bounds it)
  and is counted (:func:`blocking_calls`), so that tests assert it never happens;
- **in a thread without a running loop** (the command line, worker threads): a plain blocking
  call.

The portal greenlet shares the task's ``contextvars.Context`` (the same object, as a coroutine
shares its task's), so a span or a variable set inside is seen outside and the other way round.
A cancelled task cancels the awaited call, and the synchronous code sees ``CancelledError``
raised from :func:`wait`. A portal entered inside a portal is the same portal: nesting costs
nothing.
"""

from __future__ import annotations

import asyncio
import functools
import threading
from collections import Counter
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Generator
from typing import Any, ParamSpec, TypeVar

from greenlet import GreenletExit, getcurrent, greenlet

__all__ = [
    "blocking_calls",
    "in_portal",
    "inside_portal",
    "note_blocking_call",
    "on_loop_thread",
    "portal",
    "portal_stream",
    "wait",
    "waits_pending",
]

P = ParamSpec("P")
T = TypeVar("T")

# Messages between the driver (on the loop) and the portal greenlet.
_SEND, _THROW, _YIELDED, _WAIT, _DONE, _RAISED = range(6)
_FINISHED = (_DONE, None)
"""What a portal greenlet says when its coroutine ended (the outcome is on the greenlet)."""
_IDLE_KEPT = 64
"""Portal greenlets kept per thread for reuse."""

_blocking: Counter[str] = Counter()
_pending = [0]
_idle = threading.local()
_lock = threading.Lock()


class _Portal(greenlet):
    """A greenlet stepping one coroutine; synchronous code inside it may :func:`wait`."""

    job: tuple[Any, int, Any] | None = None
    """The coroutine to drive next, and what to send or throw into it first."""
    outcome: tuple[int, Any] | None = None
    """How the last one ended: ``(_DONE, value)`` or ``(_RAISED, exception)``."""


def inside_portal() -> bool:
    """Whether the running code is inside a portal (a :func:`wait` will not block)."""
    return isinstance(getcurrent(), _Portal)


def on_loop_thread() -> bool:
    """Whether an event loop is running in this thread (a blocking call would stall it)."""
    return asyncio._get_running_loop() is not None  # get_running_loop() raises instead


def wait(awaitable: Awaitable[T]) -> T:
    """From synchronous code inside a portal: await ``awaitable`` on the loop and return its
    result (or raise its exception, ``CancelledError`` included).

    Raises:
        `RuntimeError`: Not inside a portal (check :func:`inside_portal` first).
    """
    current = getcurrent()
    if not isinstance(current, _Portal):
        close = getattr(awaitable, "close", None)
        if close is not None:  # a coroutine that will never run: no "never awaited" warning
            close()
        raise RuntimeError("wait() needs a portal: the caller is not inside one")
    with _lock:
        _pending[0] += 1
    try:
        kind, value = current.parent.switch((_WAIT, awaitable))
    finally:
        with _lock:
            _pending[0] -= 1
    if kind == _THROW:
        raise value
    return value


def note_blocking_call(where: str) -> None:
    """Count a network call that blocked an event loop's thread (made outside any portal)."""
    with _lock:
        _blocking[where] += 1


def blocking_calls() -> dict[str, int]:
    """How many network calls blocked an event loop's thread, by store (its location), since
    the process started: the deterministic check that a frozen server cannot stall the loop."""
    with _lock:
        return dict(_blocking)


def waits_pending() -> int:
    """How many synchronous calls are waiting in portals now (in every thread): while one
    waits, the loop is free, which is what a test of a frozen server looks for."""
    with _lock:
        return _pending[0]


def _serve() -> None:
    """A portal greenlet's life: drive one coroutine, leave its outcome, wait for the next
    (a greenlet is kept for reuse: making one costs far more than switching to it)."""
    me = getcurrent()
    while True:
        coro, kind, value = me.job
        me.job = None
        me.outcome = _drive(coro, kind, value)
        coro = value = None  # idle, it holds nothing of its last job
        me.parent.switch(_FINISHED)


def _drive(coro: Any, kind: int, value: Any) -> tuple[int, Any]:
    """Step ``coro`` to its end, handing each suspension to the driver on the loop."""
    while True:
        try:
            out = coro.send(value) if kind == _SEND else coro.throw(value)
        except StopIteration as stop:
            return _DONE, stop.value
        except GreenletExit:
            raise
        except BaseException as exc:  # noqa: BLE001 - handed to the awaiting task as it is
            return _RAISED, exc
        kind, value = getcurrent().parent.switch((_YIELDED, out))


def _idle_portals() -> list[_Portal]:
    try:
        return _idle.portals
    except AttributeError:
        _idle.portals = []
        return _idle.portals


def _awaited(awaitable: Awaitable[Any]) -> Generator[Any, Any, Any]:
    return (yield from awaitable.__await__())


class _Drive:
    """Awaiting it runs a coroutine in a portal, passing its suspensions to the task."""

    __slots__ = ("coro",)

    def __init__(self, coro: Any) -> None:
        self.coro = coro

    def __await__(self) -> Generator[Any, Any, Any]:
        here = getcurrent()
        idle = _idle_portals()
        child = idle.pop() if idle else _Portal(_serve)
        child.parent = here
        # The same Context object as the task's: what the coroutine sets, the task sees.
        child.gr_context = here.gr_context
        child.job = (self.coro, _SEND, None)
        message = child.switch()
        try:
            while message is not _FINISHED:
                kind, value = message
                try:
                    if kind == _YIELDED:  # an ordinary suspension: the task's to handle
                        reply = (_SEND, (yield value))
                    else:  # synchronous code waits: await it here, on the loop
                        reply = (_SEND, (yield from _awaited(value)))
                except BaseException as exc:  # noqa: BLE001 - cancellation too: passed inside
                    reply = (_THROW, exc)
                child.parent = getcurrent()  # whoever steps the task now
                message = child.switch(reply)
            kind, value = child.outcome
            child.outcome = None
        finally:
            if message is _FINISHED and len(idle) < _IDLE_KEPT:
                child.gr_context = None
                idle.append(child)
        if kind == _RAISED:
            raise value
        return value


async def in_portal(awaitable: Awaitable[T]) -> T:
    """Await ``awaitable`` inside a portal (the running one, if any)."""
    if isinstance(getcurrent(), _Portal):
        return await awaitable
    return await _Drive(awaitable.__await__())


def portal(function: Callable[P, Awaitable[T]]) -> Callable[P, Awaitable[T]]:
    """Decorate an async function so that it runs inside a portal."""

    @functools.wraps(function)
    async def run(*args: P.args, **kwargs: P.kwargs) -> T:
        if isinstance(getcurrent(), _Portal):
            return await function(*args, **kwargs)
        return await _Drive(function(*args, **kwargs).__await__())

    return run


def portal_stream(function: Callable[P, AsyncIterator[T]]) -> Callable[P, AsyncGenerator[T, Any]]:
    """Decorate an async generator function so that each of its steps runs inside a portal
    (values sent and exceptions thrown in are passed on; closing it closes the inner one)."""

    @functools.wraps(function)
    def run(*args: P.args, **kwargs: P.kwargs) -> AsyncGenerator[T, Any]:
        return _stream(function(*args, **kwargs))

    return run


async def _stream(inner: Any) -> AsyncGenerator[Any, Any]:
    step, argument = inner.__anext__, ()
    try:
        while True:
            try:
                item = await in_portal(step(*argument))
            except StopAsyncIteration:
                return
            try:
                sent = yield item
            except GeneratorExit:
                raise
            except BaseException as exc:  # noqa: BLE001 - thrown in: the inner one's to handle
                step, argument = inner.athrow, (exc,)
            else:
                step, argument = inner.asend, (sent,)
    finally:
        await in_portal(inner.aclose())
