"""The records of the dialog store: where a run of saved messages is (:class:`DialogRef`), one
saved message (:class:`DialogRecord`), the codec an adapter gives the store, and the date a
message is filed under."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date
from typing import Any, Generic, Protocol, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from ..messages import Message, string_values, text_parts

__all__ = ["DialogRecord", "DialogRef", "DictCodec", "M", "RecordCodec", "dialog_date"]

_TIMESTAMP_DATE_RE = re.compile(r"^(\d{4})-(\d{2})-(\d{2})")

M = TypeVar("M")


class RecordCodec(Protocol[M]):
    """How an adapter turns its messages into the JSON records of a dialog file and back."""

    def encode(self, msg: M) -> dict[str, Any]:
        """A JSON-able record with at least ``id`` (and ``timestamp`` to file it by date)."""
        ...

    def decode(self, record: dict[str, Any]) -> M:
        """The message again; raises ``ValueError``/``KeyError``/``TypeError`` when invalid."""
        ...

    def view(self, msg: M) -> Message:
        """The neutral view of a decoded message: what search looks in and the tools render."""
        ...


_IDENTITY_KEYS = frozenset({"id", "type", "role", "timestamp", "created_at", "metadata"})


class DictCodec:
    """Records stay plain dicts (the default). Their view is the text of every string the record
    holds except its identity (ids, types, role, timestamps, metadata) and the speaker's name
    (a ``<system-reminder>`` among them a reminder, as in the adapters' views)."""

    def encode(self, msg: Mapping[str, Any]) -> dict[str, Any]:
        return dict(msg)

    def decode(self, record: dict[str, Any]) -> dict[str, Any]:
        if "id" not in record:
            raise KeyError("id")
        return record

    def view(self, msg: Mapping[str, Any]) -> Message:
        said = {key: value for key, value in msg.items() if key != "name"}
        texts = list(string_values(_without_identity(said)))
        return Message(
            id=str(msg.get("id", "")),
            role=str(msg.get("role", "")),
            name=str(msg.get("name") or ""),
            timestamp=str(msg.get("timestamp") or ""),
            parts=tuple(part for text in texts for part in text_parts(text)),
        )


def _without_identity(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _without_identity(v) for k, v in value.items() if k not in _IDENTITY_KEYS}
    if isinstance(value, list | tuple):
        return [_without_identity(item) for item in value]
    return value


class DialogRef(BaseModel):
    """A run of saved raw messages: ``dialog/2026-12-02.jsonl`` lines 1-340."""

    model_config = ConfigDict(frozen=True)

    file: str
    """Workspace-relative dialog file, e.g. ``dialog/2026-12-02.jsonl``."""
    first_line: int = Field(ge=1)
    """First line (1-based) of the run."""
    last_line: int = Field(ge=1)
    """Last line of the run (inclusive)."""

    def __str__(self) -> str:
        return f"{self.file} lines {self.first_line}-{self.last_line}"


@dataclass(frozen=True)
class DialogRecord(Generic[M]):
    """One saved message and where it is."""

    file: str
    """Workspace-relative path of the dialog file."""
    line: int
    """Line number (1-based) in that file."""
    msg: M
    """The message, as it was when it left memory (decoded by the store's codec)."""
    record: dict[str, Any]
    """The JSON record as saved."""


def dialog_date(timestamp: object, today: date) -> date:
    """The date a message is filed under: its own timestamp's, or ``today`` if that is invalid.

    Nothing but a validated calendar date ever reaches a file name.
    """
    if isinstance(timestamp, str):
        match = _TIMESTAMP_DATE_RE.match(timestamp)
        if match:
            try:
                return date(int(match[1]), int(match[2]), int(match[3]))
            except ValueError:
                pass
    return today
