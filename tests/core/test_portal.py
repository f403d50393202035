"""The portal (design §2.3): synchronous code inside our hooks' coroutines waits on the event
loop instead of blocking it. The core alone, no framework, no server: what a portal must keep
of a coroutine's semantics (its context variables, cancellation, nesting, async generators,
exceptions) and that the loop runs other tasks while synchronous code waits."""

from __future__ import annotations

import asyncio
import contextvars
import gc
import weakref

import pytest
from greenlet import getcurrent

from agentscope_context_ext.core.workspace import (
    in_portal,
    inside_portal,
    portal,
    portal_stream,
    waits_pending,
)
from agentscope_context_ext.core.workspace._portal import wait

VARIABLE = contextvars.ContextVar("portal_test", default="unset")


def sync_store_call(awaitable):
    """What a store's synchronous method does inside a portal: hand the wait to the loop."""
    return wait(awaitable)


async def test_synchronous_code_waits_on_the_loop_while_other_tasks_run() -> None:
    gate = asyncio.Event()
    seen_waiting: list[int] = []

    async def other_session() -> None:
        # runs only if the loop is free while the synchronous call below waits
        seen_waiting.append(waits_pending())
        gate.set()

    @portal
    async def hook() -> str:
        asyncio.get_running_loop().create_task(other_session())
        return sync_store_call(_after(gate, "answered"))

    assert await hook() == "answered"
    assert seen_waiting == [1], "the other task ran while the synchronous call was waiting"
    assert waits_pending() == 0


async def _after(event: asyncio.Event, value: str) -> str:
    await event.wait()
    return value


async def test_the_portal_shares_the_tasks_context_variables() -> None:
    VARIABLE.set("outside")

    @portal
    async def hook() -> str:
        before = VARIABLE.get()
        await asyncio.sleep(0)
        VARIABLE.set("inside")
        sync_store_call(asyncio.sleep(0))
        return before

    assert await hook() == "outside"
    assert VARIABLE.get() == "inside", "what the coroutine set, the task sees (as without one)"


async def test_an_open_telemetry_span_is_current_inside_the_portal() -> None:
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider

    tracer = TracerProvider().get_tracer("portal-test")

    @portal
    async def hook() -> tuple[int, int]:
        inside = trace.get_current_span().get_span_context().span_id
        with tracer.start_as_current_span("child") as child:
            sync_store_call(asyncio.sleep(0))
            parent = child.parent.span_id
        return inside, parent

    with tracer.start_as_current_span("turn") as span:
        inside, parent = await hook()
    assert inside == parent == span.get_span_context().span_id


async def test_a_cancelled_task_cancels_the_awaited_call() -> None:
    never = asyncio.get_running_loop().create_future()
    outcome: list[str] = []

    @portal
    async def hook() -> None:
        try:
            sync_store_call(never)
        except asyncio.CancelledError:
            outcome.append("cancelled inside")
            raise

    task = asyncio.get_running_loop().create_task(hook())
    while waits_pending() == 0:  # the hook is waiting on `never`
        await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert outcome == ["cancelled inside"], "the synchronous code saw the cancellation"
    assert never.cancelled(), "the awaited call was cancelled with the task"
    assert waits_pending() == 0


async def test_nested_portals_are_one_portal() -> None:
    greenlets = []

    @portal
    async def inner() -> int:
        greenlets.append(getcurrent())
        return sync_store_call(asyncio.sleep(0, result=2))

    @portal
    async def outer() -> int:
        greenlets.append(getcurrent())
        return await inner() + await in_portal(inner())

    assert await outer() == 4
    assert greenlets[0] is greenlets[1] is greenlets[2]
    assert not inside_portal()


async def test_exceptions_cross_the_portal_unchanged() -> None:
    @portal
    async def hook() -> None:
        sync_store_call(asyncio.sleep(0))
        raise KeyError("boom")

    with pytest.raises(KeyError, match="boom"):
        await hook()

    async def failing() -> None:
        raise ValueError("from the awaited call")

    @portal
    async def waits_on_a_failure() -> str:
        try:
            sync_store_call(failing())
        except ValueError as exc:
            return f"caught {exc}"
        return "not raised"

    assert await waits_on_a_failure() == "caught from the awaited call"


async def test_an_async_generator_runs_each_step_in_a_portal() -> None:
    closed: list[str] = []

    @portal_stream
    async def stream(n: int):
        try:
            for i in range(n):
                assert inside_portal()
                sent = yield sync_store_call(asyncio.sleep(0, result=i))
                if sent is not None:
                    yield f"got {sent}"
        finally:
            closed.append("inner closed")

    assert [item async for item in stream(3)] == [0, 1, 2]
    assert closed == ["inner closed"]

    generator = stream(5)
    assert await generator.__anext__() == 0
    assert await generator.asend("x") == "got x", "a value sent in reaches the inner generator"
    await generator.aclose()
    assert closed == ["inner closed", "inner closed"], "closing it closes the inner one"


async def test_an_exception_thrown_into_the_stream_reaches_the_inner_generator() -> None:
    @portal_stream
    async def stream():
        try:
            yield 1
        except RuntimeError as exc:
            yield f"handled {exc}"

    generator = stream()
    assert await generator.__anext__() == 1
    assert await generator.athrow(RuntimeError("stop")) == "handled stop"
    await generator.aclose()


async def test_waiting_needs_a_portal() -> None:
    assert not inside_portal()
    with pytest.raises(RuntimeError, match="portal"):
        wait(asyncio.sleep(0))


def test_outside_any_loop_there_is_no_portal() -> None:
    assert not inside_portal()
    assert asyncio.run(in_portal(_inside())) is True


async def _inside() -> bool:
    return inside_portal()


async def test_an_idle_portal_keeps_nothing_of_its_last_job() -> None:
    """Portal greenlets are reused; one waiting for its next job must not hold the last one's
    result (a turn's whole reply, say) alive."""

    class Result:
        pass

    @portal
    async def job() -> Result:
        sync_store_call(asyncio.sleep(0))
        return Result()

    result = weakref.ref(await job())
    gc.collect()
    assert result() is None
