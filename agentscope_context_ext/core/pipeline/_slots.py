"""What the truncation stages work with: one tool result (:class:`ResultSlot`), what to write back
into it (:class:`ResultChange`), and what a stage did (:class:`TruncationOutcome`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..messages import Media

__all__ = ["ResultChange", "ResultSlot", "TextSlot", "TruncationOutcome", "outcome_data"]


@dataclass
class ResultSlot:
    """One tool result as the stages see it."""

    call_id: str
    tool: str
    text: str | None
    """The output's text (``None`` when the output has no text at all)."""
    media: tuple[Media, ...] = ()
    """The output's media blocks, in order."""
    tool_input: Mapping[str, Any] = field(default_factory=dict)
    """The arguments of the call it answers."""
    state: dict[str, Any] = field(default_factory=dict)
    """This result's record, mutated in place (the adapter persists it with the message)."""


@dataclass
class TextSlot:
    """One text part of a user message, for the last resort before the window: a part that
    alone takes more than the window share is offloaded like a tool result."""

    key: str
    """Which part of the message (the adapter's own key, e.g. the block's id or index)."""
    text: str
    state: dict[str, Any] = field(default_factory=dict)
    """This part's record, mutated in place (the adapter persists it with the message)."""


@dataclass
class ResultChange:
    """What to write back into a result: its new text and, in order, each media block kept
    (a :class:`Media`) or replaced by a placeholder text (a ``str``)."""

    text: str
    media: tuple[Media | str, ...] = ()


@dataclass
class TruncationOutcome:
    """What one stage did to one tool result (the numbers of its event)."""

    stage: int
    call_id: str
    tool: str
    path: str | None
    """Where the full text is: a ``tool_result/`` file or the source file of ``read_file``."""
    bytes_before: int
    bytes_after: int
    tokens_before: int
    """Estimated from the excerpt's tokens per byte (tokenizing 200 KB to report it would cost
    more than the whole step)."""
    tokens_after: int
    bytes_offloaded: int = 0
    """Bytes written to ``tool_result/`` by this step."""
    media_replaced: int = 0
    notice_only: bool = False
    """The result was cut down to its notice alone (the last resort before the window)."""


def outcome_data(outcome: TruncationOutcome) -> dict[str, Any]:
    """The numbers of a ``tool_result_truncated`` / ``tool_result_retruncated`` event."""
    return {
        "tool": outcome.tool,
        "call_id": outcome.call_id,
        "path": outcome.path,
        "bytes_before": outcome.bytes_before,
        "bytes_after": outcome.bytes_after,
        "tokens_saved": outcome.tokens_before - outcome.tokens_after,
        "bytes_offloaded": outcome.bytes_offloaded,
        "media_replaced": outcome.media_replaced,
        "notice_only": outcome.notice_only,
    }
