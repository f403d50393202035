"""Delivery of events: to the stats, the ``agentscope_context_ext`` logger and the
subscribers (``manager.subscribe``)."""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable

from ._catalogue import ContextEvent
from ._stats import ContextStats

__all__ = ["EventBus", "Listener"]

logger = logging.getLogger("agentscope_context_ext")

Listener = Callable[[ContextEvent], Awaitable[None] | None]


class EventBus:
    """Delivers events to the stats, the logger and the subscribers."""

    def __init__(self) -> None:
        self.stats = ContextStats()
        self._listeners: list[Listener] = []

    def subscribe(self, callback: Listener) -> Callable[[], None]:
        """Call ``callback(event)`` (sync or async) for every event; returns an unsubscriber."""
        self._listeners.append(callback)

        def unsubscribe() -> None:
            if callback in self._listeners:
                self._listeners.remove(callback)

        return unsubscribe

    async def emit(self, event: ContextEvent) -> ContextEvent:
        """Record, log and deliver one event. A failing listener is logged, never raised."""
        self.stats.record(event)
        logger.log(event.level, "%s", event.describe())
        for listener in list(self._listeners):
            try:
                result = listener(event)
                if inspect.isawaitable(result):
                    await result
            except Exception:
                logger.exception("event listener %r failed on %s", listener, event.type)
        return event
