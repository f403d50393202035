"""Typed events and the statistics built from them (design §9).

Every action of the extension emits one event, an instance of one class per kind of action
(:class:`ToolResultTruncated`, :class:`CompactionFinished`, ...), each a frozen dataclass with
its numbers as fields. Listeners subscribe through ``manager.subscribe(callback)``; every event
also goes to the ``agentscope_context_ext`` logger, and :class:`ContextStats` folds them into
``manager.stats``. ``event.type`` names the kind (``"compaction_finished"``) and ``event.data``
is the numbers as a dict, for logs and reports.

One module on purpose: it is the catalogue of events (one short class each), read as a list by
anyone writing a listener, with the stats that fold them and the bus that delivers them.
"""

from __future__ import annotations

import dataclasses
import inspect
import logging
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from .messages import Message
from .tokens import UsageVerdict

logger = logging.getLogger("agentscope_context_ext")

__all__ = [
    "CompactionFailed",
    "CompactionFinished",
    "CompactionStarted",
    "Consolidated",
    "ContextError",
    "ContextEvent",
    "ContextOverflow",
    "ContextStats",
    "ContextWarning",
    "DialogSaved",
    "EventBus",
    "MemoryWritten",
    "ProviderOverflowRecovered",
    "SaveFailed",
    "TokenCountJudged",
    "ToolResultRetruncated",
    "ToolResultTruncated",
    "TtlCleanup",
    "UsageIgnored",
    "UserMessageOffloaded",
]


@dataclass(frozen=True, kw_only=True)
class ContextEvent:
    """One thing the extension did (the base of every event class)."""

    type: ClassVar[str] = "event"
    """What kind of thing happened, e.g. ``compaction_finished``."""
    level: ClassVar[int] = logging.INFO
    """How it is logged."""
    time: float = field(default_factory=time.time)
    """When (Unix time)."""

    @property
    def data(self) -> dict[str, Any]:
        """Its numbers and paths (every field but ``time`` and what is not plain data)."""
        return {
            f.name: getattr(self, f.name)
            for f in dataclasses.fields(self)
            if f.name != "time" and f.repr
        }

    def describe(self) -> str:
        """A one-line human summary."""
        details = ", ".join(f"{key}={value}" for key, value in self.data.items())
        return f"{self.type}: {details}" if details else self.type


@dataclass(frozen=True, kw_only=True)
class _Truncation(ContextEvent):
    """What one truncation stage did to one tool result."""

    tool: str
    call_id: str
    path: str | None
    """Where the full text is: a ``tool_result/`` file or the source file of ``read_file``."""
    bytes_before: int
    bytes_after: int
    tokens_saved: int
    bytes_offloaded: int = 0
    """Bytes written to ``tool_result/`` by this step."""
    media_replaced: int = 0
    notice_only: bool = False
    """Cut to its notice alone (the last resort before the window)."""


@dataclass(frozen=True, kw_only=True)
class ToolResultTruncated(_Truncation):
    """Stage one cut a tool result as it arrived."""

    type: ClassVar[str] = "tool_result_truncated"


@dataclass(frozen=True, kw_only=True)
class ToolResultRetruncated(_Truncation):
    """Stage two (or the window guard) cut an older tool result harder."""

    type: ClassVar[str] = "tool_result_retruncated"


@dataclass(frozen=True, kw_only=True)
class UserMessageOffloaded(ContextEvent):
    """A user's text that alone would not fit was saved and cut to a head excerpt."""

    type: ClassVar[str] = "user_message_offloaded"
    message_id: str
    path: str | None
    bytes_before: int
    bytes_after: int
    tokens_saved: int


@dataclass(frozen=True, kw_only=True)
class CompactionStarted(ContextEvent):
    """A compaction begins."""

    type: ClassVar[str] = "compaction_started"
    tokens_before: int
    trigger_tokens: int
    messages_to_compact: int
    messages_kept: int
    forced: bool = False


@dataclass(frozen=True, kw_only=True)
class CompactionFinished(ContextEvent):
    """A compaction is done: the summary replaced the compacted messages, which are in
    ``dialog/``."""

    type: ClassVar[str] = "compaction_finished"
    tokens_before: int
    tokens_after: int
    messages_compacted: int
    messages_kept: int
    summary_source: str
    model_attempts: int
    model_failures: int
    dialog_refs: tuple[str, ...]
    seconds: float
    forced: bool = False
    model_failure: str = ""
    """Why the last failed model attempt failed (``TimeoutError: no answer within 120 s``,
    ``unusable answer``, ...); empty when none failed."""
    messages: Sequence[Message] = field(default=(), repr=False)
    """The compacted messages (their views, truncated outputs read back whole), for listeners
    such as the Summarizer; not part of :attr:`data`."""


@dataclass(frozen=True, kw_only=True)
class CompactionFailed(ContextEvent):
    """A compaction stopped before the messages left the context (nothing is lost)."""

    type: ClassVar[str] = "compaction_failed"
    level: ClassVar[int] = logging.WARNING
    reason: str
    """``dialog write failed``, ``summary failed`` or ``summary not smaller``."""
    tokens: int
    error: str = ""
    summary_tokens: int = 0
    replaced_tokens: int = 0


@dataclass(frozen=True, kw_only=True)
class DialogSaved(ContextEvent):
    """Messages were appended to ``dialog/`` (flushed and fsync'ed)."""

    type: ClassVar[str] = "dialog_saved"
    messages: int
    refs: tuple[str, ...]


@dataclass(frozen=True, kw_only=True)
class ContextOverflow(ContextEvent):
    """The prompt stays over the compaction trigger (within the window) after every step."""

    type: ClassVar[str] = "context_overflow"
    level: ClassVar[int] = logging.WARNING
    tokens: int
    trigger_tokens: int
    max_input_tokens: int
    messages: int
    compactable: int


@dataclass(frozen=True, kw_only=True)
class ProviderOverflowRecovered(ContextEvent):
    """The provider rejected a call for its length; the gap was learned and the context
    compacted for one retry."""

    type: ClassVar[str] = "provider_overflow_recovered"
    level: ClassVar[int] = logging.WARNING
    tokens_before: int
    tokens_after: int
    provider_tokens: int | None
    provider_limit: int | None
    shift: int
    """What every count adds now for the tokens the provider counts more than we do."""
    window: int
    """The window prompts are fitted in now (smaller when the provider's is)."""
    error: str


@dataclass(frozen=True, kw_only=True)
class UsageIgnored(ContextEvent):
    """A provider's token figure (reported usage, or the count in a length rejection) that no
    vocabulary or template can explain was ignored: calibration learned nothing from it."""

    type: ClassVar[str] = "usage_ignored"
    level: ClassVar[int] = logging.WARNING
    provider_tokens: int
    ours: int
    """Our exact count of the same prompt."""
    max_input_tokens: int
    reason: str


@dataclass(frozen=True, kw_only=True)
class TokenCountJudged(ContextEvent):
    """The judgement of the provider's reported counts against ours changed (design §5.1):
    ``kind`` ``agrees``, ``count_error`` (calibration may shift by it), ``template_skew``
    (never shifted on) or ``unsettled``."""

    type: ClassVar[str] = "token_count_judged"
    verdict: UsageVerdict = field(repr=False)
    shift: int = 0
    """What calibration adds to the count now (``0`` with ``calibrate_with_usage`` off)."""

    @property
    def data(self) -> dict[str, Any]:
        return {**self.verdict.as_dict(), "shift": self.shift}


@dataclass(frozen=True, kw_only=True)
class MemoryWritten(ContextEvent):
    """``Memory.md`` or a daily note was written (by the agent, the Summarizer or the
    consolidation)."""

    type: ClassVar[str] = "memory_written"
    tool: str
    details: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def data(self) -> dict[str, Any]:
        return {"tool": self.tool, **self.details}


@dataclass(frozen=True, kw_only=True)
class Consolidated(ContextEvent):
    """The daily notes were merged into ``Memory.md``."""

    type: ClassVar[str] = "consolidated"
    status: str
    notes: tuple[str, ...]
    backup: str | None
    bytes: int


@dataclass(frozen=True, kw_only=True)
class TtlCleanup(ContextEvent):
    """Saved results older than ``ttl_days`` were deleted."""

    type: ClassVar[str] = "ttl_cleanup"
    removed: int


@dataclass(frozen=True, kw_only=True)
class SaveFailed(ContextEvent):
    """A write to the workspace failed; the data stays in memory (reported once per fault)."""

    type: ClassVar[str] = "save_failed"
    level: ClassVar[int] = logging.WARNING
    what: str
    key: str
    path: str
    error: str


@dataclass(frozen=True, kw_only=True)
class ContextWarning(ContextEvent):
    """A step failed and left the data as it was (the agent goes on)."""

    type: ClassVar[str] = "warning"
    level: ClassVar[int] = logging.WARNING
    where: str
    error: str = ""
    details: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def data(self) -> dict[str, Any]:
        return {"where": self.where, "error": self.error, **self.details}


@dataclass(frozen=True, kw_only=True)
class ContextError(ContextEvent):
    """A model call was refused before it was sent (its prompt would be over the window)."""

    type: ClassVar[str] = "error"
    level: ClassVar[int] = logging.ERROR
    reason: str
    """``workspace write failed`` or ``context overflow``."""
    tokens: int
    max_input_tokens: int
    path: str = ""
    error: str = ""
    largest: str = ""
    parts: dict[str, int] = field(default_factory=dict)


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
    """Relative gap between our count and the provider's reported input tokens (last like call),
    whatever its cause: :attr:`token_count` says whether it is a count error."""
    token_count: UsageVerdict | None = None
    """What the provider's counts of the last like calls say about ours: a count error or a
    server's template skew (``kind``, ``form``, ...; ``None`` before the first report)."""
    usage_shift: int = 0
    """What calibration added to the last exact count (``calibrate_with_usage``)."""
    hook_seconds: float = 0.0
    """Time spent inside the hooks."""

    @property
    def compactions(self) -> int:
        """Compactions that finished."""
        return self.counts[CompactionFinished.type]

    @property
    def truncations(self) -> int:
        """Stage-one truncations."""
        return self.counts[ToolResultTruncated.type]

    @property
    def retruncations(self) -> int:
        """Stage-two truncations (results cut to their notice included)."""
        return self.counts[ToolResultRetruncated.type]

    def record(self, event: ContextEvent) -> None:
        """Fold one event into the totals."""
        self.counts[event.type] += 1
        if isinstance(event, _Truncation):
            # Stage two saves a copy too, of a result stage one left whole.
            self.bytes_offloaded += event.bytes_offloaded
            self.tokens_saved_by_truncation += event.tokens_saved
        elif isinstance(event, UserMessageOffloaded):
            self.bytes_offloaded += event.bytes_before
            self.tokens_saved_by_truncation += event.tokens_saved
        elif isinstance(event, CompactionFinished):
            self.tokens_saved_by_compaction += max(0, event.tokens_before - event.tokens_after)
            self.messages_compacted += event.messages_compacted

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
            "token_count": self.token_count.as_dict() if self.token_count else None,
            "usage_shift": self.usage_shift,
            "hook_seconds": round(self.hook_seconds, 6),
        }


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
