"""What the truncation stages work with: one tool result (:class:`ResultSlot`) and its record
(:class:`TruncationRecord`), what to write back into it (:class:`ResultChange`), and what a stage
did (:class:`TruncationOutcome`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..messages import Media

if TYPE_CHECKING:
    from ..workspace import ToolResultStore

__all__ = [
    "ResultChange",
    "ResultSlot",
    "TextSlot",
    "TruncationOutcome",
    "TruncationRecord",
    "outcome_data",
]


@dataclass
class TruncationRecord:
    """What the truncation stages did to one tool result (or one offloaded user text). The
    stages change it; the adapter keeps it with the message (:meth:`to_dict` in its metadata,
    :meth:`from_dict` back), so a result is processed once per stage, even after a reload."""

    stage: int = 0
    """0: not seen yet; 1: stage one done; 2: stage two done; 3: cut to its notice alone."""
    path: str | None = None
    """Where the whole text is: a ``tool_result/`` or ``message/`` file, or the source file a
    ``read_file`` result came from."""
    bytes: int = 0
    """Size of the whole text, in UTF-8 bytes, when it was saved."""
    markdown: bool | None = None
    """Whether the Markdown limits apply (``None``: not decided yet)."""
    exempt: bool = False
    """The tool is in ``exempt_tools``: never cut."""
    source_file: bool = False
    """A ``read_file`` result: ``path`` is the file it read, never a copy."""
    start_line: int = 1
    """Where a ``read_file`` result began in its file (line, 1-based)..."""
    start_byte: int = 0
    """...and byte inside that line."""
    save_failed: str | None = None
    """Why the last save failed (the result stays whole and is saved again later)."""

    def to_dict(self) -> dict[str, Any]:
        """The fields that differ from their defaults (what the adapter stores)."""
        return {
            f.name: getattr(self, f.name)
            for f in dataclasses.fields(self)
            if getattr(self, f.name) != f.default
        }

    def saved_part(self, store: ToolResultStore) -> str | None:
        """The whole text of an offloaded part of a user's message, read back from its
        ``message/`` file (saved alone, or with other parts of the message, each at a line of
        its own: ``start_line``, ``bytes`` long); ``None`` for any other record."""
        if not (self.path or "").startswith("message/"):
            return None
        return store.read_message_part(self.path, self.start_line, self.bytes)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> TruncationRecord:
        """A record from what :meth:`to_dict` stored (unknown keys ignored, a value of the
        wrong type taken as its default: the metadata may have been edited)."""
        record = cls()
        for f in dataclasses.fields(cls):
            value = (data or {}).get(f.name)
            if value is None:
                continue
            kind = type(f.default) if f.default is not None else str
            if f.name == "markdown":
                kind = bool
            if isinstance(value, kind) and not (kind is int and isinstance(value, bool)):
                setattr(record, f.name, value)
        return record


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
    record: TruncationRecord = field(default_factory=TruncationRecord)
    """What the stages did to it; they change it, and the port writes it back (``apply``)."""


@dataclass
class TextSlot:
    """One text part of a user message, for the last resort before the window: a part that
    alone takes more than the window share is offloaded like a tool result."""

    key: str
    """Which part of the message (the adapter's own key, e.g. the block's id or index)."""
    text: str
    record: TruncationRecord = field(default_factory=TruncationRecord)
    """Whether it was offloaded, and where; the port writes it back (``apply_texts``)."""


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
