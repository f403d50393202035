"""The totals of one manager's events (``manager.stats``, design §9)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from ..tokens import UsageVerdict
from ._catalogue import (
    CompactionFinished,
    ContextEvent,
    ToolResultRetruncated,
    ToolResultTruncated,
    Truncation,
    UserMessageOffloaded,
)

__all__ = ["ContextStats"]


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
        if isinstance(event, Truncation):
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
