"""The catalogue of events (design §9): one frozen dataclass per kind of action, its numbers
as fields. Read as a list by anyone writing a listener."""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ..messages import Message
from ..tokens import UsageVerdict

__all__ = [
    "CompactionFailed",
    "CompactionFinished",
    "CompactionStarted",
    "Consolidated",
    "ContextError",
    "ContextEvent",
    "ContextOverflow",
    "ContextWarning",
    "DialogSaved",
    "MemoryWritten",
    "ProviderOverflowRecovered",
    "SaveFailed",
    "TokenCountJudged",
    "ToolResultRetruncated",
    "ToolResultTruncated",
    "Truncation",
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
class Truncation(ContextEvent):
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
class ToolResultTruncated(Truncation):
    """Stage one cut a tool result as it arrived."""

    type: ClassVar[str] = "tool_result_truncated"


@dataclass(frozen=True, kw_only=True)
class ToolResultRetruncated(Truncation):
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
    """``dialog write failed``, ``summary failed``, ``summary not smaller`` or ``context
    changed`` (what it folds or extends changed under it: it started over)."""
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
