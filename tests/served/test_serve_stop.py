"""The message bus ``serve`` makes (``stopping_bus``): its session streams end, each with a
``context_ext.server_stopping`` event, when the server stops; nothing else does, and a client
that leaves still unsubscribes. AgentScope 2.x's own ``InMemoryMessageBus``, in process (the
SIGTERM of a real ``serve`` with a stream open is in ``test_serve_command.py``)."""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("agentscope.app", reason="AgentScope's service is not installed")

from agentscope.app.message_bus import InMemoryMessageBus, MessageBusKeys

from agentscope_context_ext.agentscope2._serve_stop import STOPPING_EVENT, stopping_bus


async def _consume(bus, key: str, ready: asyncio.Event, into: asyncio.Queue) -> None:
    async for item in bus.subscribe(key, on_ready=ready.set):
        into.put_nowait(item)


async def _next(queue: asyncio.Queue) -> dict:
    return await asyncio.wait_for(queue.get(), 10)


async def test_the_session_streams_end_with_a_last_event_and_other_channels_go_on():
    bus = stopping_bus(InMemoryMessageBus)
    stream, other = MessageBusKeys.session_events("s1"), "some-other-channel"
    got_stream: asyncio.Queue = asyncio.Queue()
    got_other: asyncio.Queue = asyncio.Queue()
    ready = [asyncio.Event(), asyncio.Event()]
    tasks = [
        asyncio.create_task(_consume(bus, stream, ready[0], got_stream)),
        asyncio.create_task(_consume(bus, other, ready[1], got_other)),
    ]
    await asyncio.wait_for(asyncio.gather(*(event.wait() for event in ready)), 10)
    await bus.publish(stream, {"n": 1})
    await bus.publish(other, {"n": 1})
    bus.stopping.set()
    await asyncio.wait_for(tasks[0], 10)  # the stream ended by itself
    assert await _next(got_stream) == {"n": 1}
    last = await _next(got_stream)
    assert last["type"] == "CUSTOM" and last["name"] == STOPPING_EVENT
    assert got_stream.empty()
    await bus.publish(other, {"n": 2})  # the other channel still delivers
    assert [await _next(got_other), await _next(got_other)] == [{"n": 1}, {"n": 2}]
    assert not tasks[1].done()
    tasks[1].cancel()
    await asyncio.gather(tasks[1], return_exceptions=True)


async def test_a_client_that_leaves_unsubscribes():
    bus = stopping_bus(InMemoryMessageBus)
    stream = MessageBusKeys.session_events("s2")
    ready = asyncio.Event()
    task = asyncio.create_task(_consume(bus, stream, ready, asyncio.Queue()))
    await asyncio.wait_for(ready.wait(), 10)
    assert len(bus._subscribers[stream]) == 1  # AgentScope's own registry of subscribers
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert not bus._subscribers[stream]
