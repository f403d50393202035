"""``serve`` stops within seconds of SIGTERM or Ctrl-C, clients on its event streams or not.

uvicorn's shutdown waits, with no limit by default, for each open connection to finish its
response; a session's event stream (``GET /sessions/{id}/stream``) ends only when its
subscription to the message bus does, which is when the app's lifespan closes the bus, which
comes after uvicorn's wait: a client holding a stream kept serve alive through any number of
SIGTERMs. So the bus ``serve`` makes (:func:`stopping_bus`) ends each session stream of this
process with a final ``context_ext.server_stopping`` event when told to, and
:class:`StoppingServer` tells it first thing in its shutdown; a grace period
(:data:`GRACE_SECONDS`) bounds any other request still running.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncGenerator, Callable
from typing import Any

import uvicorn
from agentscope.app.message_bus import MessageBusKeys
from agentscope.event import CustomEvent

__all__ = ["GRACE_SECONDS", "STOPPING_EVENT", "StoppingServer", "stopping_bus"]

GRACE_SECONDS = 5
"""How long a request may still run once the server stops (the streams end at once)."""

STOPPING_EVENT = "context_ext.server_stopping"
"""The last event of a session stream the server ends because it stops."""

_STREAM_HEAD, _, _STREAM_TAIL = MessageBusKeys.session_events("\0").partition("\0")


def _is_session_stream(key: str) -> bool:
    return key.startswith(_STREAM_HEAD) and key.endswith(_STREAM_TAIL)


def stopping_bus(bus_class: type, *args: Any, **kwargs: Any) -> Any:
    """An instance of ``bus_class`` (``InMemoryMessageBus``, ``RedisMessageBus``) whose
    session streams end when its ``stopping`` event is set, each after a final
    ``context_ext.server_stopping`` event. Only the subscriptions of this process end:
    other processes sharing a Redis bus keep theirs."""

    class StoppingBus(bus_class):  # type: ignore[valid-type, misc]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.stopping = asyncio.Event()

        async def subscribe(
            self, key: str, *, on_ready: Callable[[], None] | None = None
        ) -> AsyncGenerator[dict, None]:
            source = super().subscribe(key, on_ready=on_ready)
            if not _is_session_stream(key):
                async for item in source:
                    yield item
                return
            async for item in _until(source, self.stopping):
                yield item

    StoppingBus.__name__ = StoppingBus.__qualname__ = f"Stopping{bus_class.__name__}"
    return StoppingBus(*args, **kwargs)


async def _until(source: AsyncGenerator[dict, None], stop: asyncio.Event) -> AsyncGenerator:
    """``source``'s items until ``stop`` is set, then the stopping event."""
    stopped = asyncio.ensure_future(stop.wait())
    pending: asyncio.Future | None = None
    try:
        while True:
            pending = asyncio.ensure_future(anext(source))
            await asyncio.wait({pending, stopped}, return_when=asyncio.FIRST_COMPLETED)
            if not pending.done():
                break
            try:
                item = pending.result()
            except StopAsyncIteration:
                return
            pending = None
            yield item
        reason = {"reason": "the server is stopping"}
        yield CustomEvent(name=STOPPING_EVENT, value=reason).model_dump(mode="json")
    finally:
        stopped.cancel()
        # the source may be waiting in another task (``anext``): stop it there, then close it
        if pending is not None and not pending.done():
            pending.cancel()
            with contextlib.suppress(asyncio.CancelledError, StopAsyncIteration):
                await pending
        await source.aclose()


class StoppingServer(uvicorn.Server):
    """uvicorn's server that ends the session streams of ``bus`` (a :func:`stopping_bus`)
    when it starts to shut down, so that the connections can close.

    Args:
        config (`uvicorn.Config`): The server's config (give it a ``timeout_graceful_shutdown``).
        bus: The app's message bus, made by :func:`stopping_bus`.
    """

    def __init__(self, config: uvicorn.Config, bus: Any) -> None:
        super().__init__(config)
        self.bus = bus

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        self.bus.stopping.set()
        await super().shutdown(sockets=sockets)
