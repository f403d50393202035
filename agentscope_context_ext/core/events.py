"""Typed events and the statistics built from them (design §9).

Every action of the extension emits one :class:`ContextEvent`. Listeners subscribe through
``manager.subscribe(callback)``; every event also goes to the ``agentscope_context_ext``
logger, and :class:`ContextStats` aggregates them for ``manager.stats``.
"""

from __future__ import annotations

import inspect
import logging
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal

logger = logging.getLogger("agentscope_context_ext")

EventType = Literal[
    "tool_result_truncated",
    "tool_result_retruncated",
    "compaction_started",
    "compaction_finished",
    "compaction_failed",
    "dialog_saved",
    "context_overflow",
    "memory_written",
    "consolidated",
    "ttl_cleanup",
    "save_failed",
    "warning",
    "error",
]


@dataclass(frozen=True)
class ContextEvent:
    """One thing the extension did, with its numbers."""

    type: EventType
    """What happened."""
    data: dict[str, Any] = field(default_factory=dict)
    """Its numbers and paths, e.g. ``tokens_before``, ``tokens_after``, ``path``, ``seconds``."""
    time: float = field(default_factory=time.time)
    """When (Unix time)."""

    def describe(self) -> str:
        """A one-line human summary."""
        details = ", ".join(f"{key}={value}" for key, value in self.data.items())
        return f"{self.type}: {details}" if details else self.type


@dataclass
class ContextStats:
    """Totals over the events of one manager."""

    counts: Counter = field(default_factory=Counter)
    """Events by type."""
    bytes_offloaded: int = 0
    """Bytes of tool output moved out of the context to ``tool_result/``."""
    tokens_saved_by_truncation: int = 0
    """Tokens removed from the context by both truncation stages."""
    tokens_saved_by_compaction: int = 0
    """Tokens removed from the context by compactions."""
    messages_compacted: int = 0
    """Messages moved from memory to ``dialog/``."""
    last_prompt_tokens: int = 0
    """The context size the last exact check counted (far below the trigger a check only bounds
    the size and is not recorded; ``await manager.count()`` is always exact)."""
    peak_prompt_tokens: int = 0
    """The largest context size an exact check counted."""
    token_count_error: float | None = None
    """Relative gap between our count and the provider's reported input tokens (last call)."""
    hook_seconds: float = 0.0
    """Time spent inside the hooks."""

    @property
    def compactions(self) -> int:
        """Compactions that finished."""
        return self.counts["compaction_finished"]

    @property
    def truncations(self) -> int:
        """Stage-one truncations."""
        return self.counts["tool_result_truncated"]

    @property
    def retruncations(self) -> int:
        """Stage-two truncations."""
        return self.counts["tool_result_retruncated"]

    def record(self, event: ContextEvent) -> None:
        """Fold one event into the totals."""
        self.counts[event.type] += 1
        data = event.data
        if event.type in ("tool_result_truncated", "tool_result_retruncated"):
            # Stage two saves a copy too, of a result stage one left whole.
            self.bytes_offloaded += int(data.get("bytes_offloaded", 0))
            self.tokens_saved_by_truncation += int(data.get("tokens_saved", 0))
        elif event.type == "compaction_finished":
            self.tokens_saved_by_compaction += max(
                0, int(data.get("tokens_before", 0)) - int(data.get("tokens_after", 0))
            )
            self.messages_compacted += int(data.get("messages_compacted", 0))

    def as_dict(self) -> dict[str, Any]:
        """Plain data, for reports."""
        return {
            "counts": dict(self.counts),
            "compactions": self.compactions,
            "truncations": self.truncations,
            "retruncations": self.retruncations,
            "bytes_offloaded": self.bytes_offloaded,
            "tokens_saved_by_truncation": self.tokens_saved_by_truncation,
            "tokens_saved_by_compaction": self.tokens_saved_by_compaction,
            "messages_compacted": self.messages_compacted,
            "last_prompt_tokens": self.last_prompt_tokens,
            "peak_prompt_tokens": self.peak_prompt_tokens,
            "token_count_error": self.token_count_error,
            "hook_seconds": round(self.hook_seconds, 6),
        }


Listener = Callable[[ContextEvent], Awaitable[None] | None]

_LEVELS = {
    "context_overflow": logging.WARNING,
    "compaction_failed": logging.WARNING,
    "save_failed": logging.WARNING,
    "warning": logging.WARNING,
    "error": logging.ERROR,
}


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

    async def emit(self, type_: EventType, **data: Any) -> ContextEvent:
        """Record, log and deliver one event. A failing listener is logged, never raised."""
        event = ContextEvent(type_, data)
        self.stats.record(event)
        level = _LEVELS.get(type_, logging.INFO)
        logger.log(level, "%s", event.describe())
        for listener in list(self._listeners):
            try:
                result = listener(event)
                if inspect.isawaitable(result):
                    await result
            except Exception:
                logger.exception("event listener %r failed on %s", listener, type_)
        return event
