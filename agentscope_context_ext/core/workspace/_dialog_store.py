"""``dialog/YYYY-MM-DD.jsonl``: raw messages that compaction removed from memory (design §2.2, 4.4).

One message per line, as JSON: the record the adapter's codec makes of it (``Msg.to_dict()`` on
AgentScope 1.x), so this store imports nothing of AgentScope. Appends are flushed and fsync'ed before :meth:`append`
returns, because the caller removes the messages from memory right after: the file is then the
only copy. Several processes may share a workspace, so appends hold a lock and start on a fresh
line even if a crash left a torn last line. Readers skip corrupt lines with a warning and
de-duplicate by message id (a crash between the dialog write and the memory update replays the
same messages on the next compaction).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from datetime import date
from typing import Any, Generic

from ..messages import Message, ToolCall, ToolResult
from ..truncation import split_notice
from ._dialog_records import DialogRecord, DialogRef, DictCodec, M, RecordCodec, dialog_date
from ._storage import Storage, open_storage
from ._tool_result_store import ToolResultStore

logger = logging.getLogger("agentscope_context_ext")

DIALOG_DIRNAME = "dialog"
PENDING_DIRNAME = f"{DIALOG_DIRNAME}/pending"
"""Messages saved before they leave memory (a summary written ahead, design §4.6): beside the
day files, which readers list (so no reader sees a message there and in the context at once),
and on the same disk (a ``dialog/`` that cannot be written fails their write too)."""
_PENDING_RE = re.compile(r"^[0-9a-f]{32}\.jsonl$")
PENDING_MAX_AGE_SECONDS = 86400.0
"""Age past which a pending file has no owner (:meth:`DialogStore.sweep_pending`)."""
_FILE_RE = re.compile(r"^(\d{4}-\d{2}-\d{2})\.jsonl$")


class DialogStore(Generic[M]):
    """Appends messages to dated JSONL files and reads them back.

    Args:
        workspace (`str | os.PathLike | Storage`): The workspace: a folder, a ``redis://`` URL
            or an open :class:`Storage` (a log of lines per day on either).
        today (`Callable[[], date]`): Returns today's local date; tests inject one.
        codec (`RecordCodec`): Turns messages into records and back (default: plain dicts).
    """

    def __init__(
        self,
        workspace: str | os.PathLike[str] | Storage,
        today: Callable[[], date] = date.today,
        codec: RecordCodec[M] | None = None,
    ) -> None:
        self.codec: RecordCodec[Any] = codec or DictCodec()
        self.storage = open_storage(workspace)
        self.directory = f"{self.storage.location}/{DIALOG_DIRNAME}"
        """Where the dialog goes, for messages."""
        self._today = today
        self._results = ToolResultStore(self.storage)

    # ------------------------------------------------------------------ writing

    def append(self, msgs: Sequence[M]) -> list[DialogRef]:
        """Append ``msgs`` (in order) and make them durable before returning.

        Messages are grouped into files by their own timestamp's date.

        Returns:
            `list[DialogRef]`: One reference per file written, with the new lines' range.

        Raises:
            `OSError`: The write failed; the caller must keep the messages in memory.
        """
        if not msgs:
            return []
        today = self._today()
        groups: dict[date, list[bytes]] = {}
        for msg in msgs:
            record = self.codec.encode(msg)
            day = dialog_date(record.get("timestamp"), today)
            groups.setdefault(day, []).append(_encode_line(record))
        refs = []
        # One writer at a time: the lines of one compaction stay together, in order (a backend
        # whose appends are atomic by themselves needs no lock for that).
        lock = (
            contextlib.nullcontext()
            if self.storage.atomic_appends
            else self.storage.lock(f"{DIALOG_DIRNAME}/.lock")
        )
        with lock:
            for day in sorted(groups):
                key = f"{DIALOG_DIRNAME}/{day.isoformat()}.jsonl"
                existing = self.storage.append_lines(key, groups[day])
                refs.append(
                    DialogRef(
                        file=key, first_line=existing + 1, last_line=existing + len(groups[day])
                    )
                )
        return refs

    def stage(self, msgs: Sequence[M]) -> str:
        """Write ``msgs`` durably to a pending file of their own under ``dialog/pending/``,
        which no reader lists: saved before a summary model reads them, while they are still
        in memory (design §4.6). They reach ``dialog/`` when a compaction removes them.

        Returns:
            `str`: The file's key, for :meth:`unstage`.

        Raises:
            `OSError`: The write failed.
        """
        key = f"{PENDING_DIRNAME}/{uuid.uuid4().hex}.jsonl"
        self.storage.append_lines(key, [_encode_line(self.codec.encode(msg)) for msg in msgs])
        self.sweep_pending()
        return key

    def sweep_pending(self, older_than_seconds: float = PENDING_MAX_AGE_SECONDS) -> list[str]:
        """Delete the pending files older than ``older_than_seconds``: left by a process killed
        while its summary was written (a live one's summary call ends within its timeout, so
        a file a day old has no owner). Called by :meth:`stage`; a failure only warns.

        Returns:
            `list[str]`: The keys deleted.
        """
        cutoff = time.time() - older_than_seconds
        removed: list[str] = []
        try:
            names = self.storage.names(PENDING_DIRNAME)
        except OSError as exc:
            logger.warning("cannot list %s: %s", PENDING_DIRNAME, exc)
            return removed
        for name in names:
            key = f"{PENDING_DIRNAME}/{name}"
            if not _PENDING_RE.match(name):
                continue
            try:
                mtime = self.storage.mtime(key)
                if mtime is not None and mtime < cutoff and self.storage.delete(key):
                    removed.append(key)
            except OSError as exc:
                logger.warning("cannot delete %s: %s", key, exc)
        return removed

    def unstage(self, key: str) -> None:
        """Delete a pending file: its summary was used or given up (a file left by a failing
        disk is never read, and costs only its bytes)."""
        try:
            self.storage.delete(key)
        except OSError as exc:
            logger.warning("cannot delete %s: %s", key, exc)

    # ------------------------------------------------------------------ reading

    def files(self) -> list[str]:
        """Workspace-relative dialog files, newest date first."""
        names = [n for n in self.storage.names(DIALOG_DIRNAME) if _FILE_RE.match(n)]
        return [f"{DIALOG_DIRNAME}/{n}" for n in sorted(names, reverse=True)]

    def line_count(self, file: str) -> int:
        """Lines in a dialog file (0 if it does not exist)."""
        return self.storage.line_count(self._resolve(file))

    def iter_records(self, newest_first: bool = True) -> Iterator[DialogRecord]:
        """Every saved message once (by id), files newest first and lines from the end.

        Args:
            newest_first (`bool`): ``False`` yields oldest file first, lines in order.
        """
        seen: set[str] = set()
        files = self.files() if newest_first else list(reversed(self.files()))
        for file in files:
            key = self._resolve(file)
            lines = self.storage.lines_backwards(key) if newest_first else self.storage.lines(key)
            for line_no, raw in lines:
                record = self._decode(raw, file, line_no)
                if record is None or record.record["id"] in seen:
                    continue
                seen.add(record.record["id"])
                yield record

    def message_ids(self) -> set[str]:
        """Ids of every saved message."""
        return {str(record.record["id"]) for record in self.iter_records()}

    def read(
        self,
        day: str | None = None,
        start_line: int | None = None,
        limit: int = 50,
    ) -> tuple[str | None, list[DialogRecord]]:
        """Read up to ``limit`` messages of one dialog file, in file order.

        Args:
            day (`str | None`): ``YYYY-MM-DD``; ``None`` reads the newest file.
            start_line (`int | None`): First line to read; ``None`` reads the last ``limit``
                lines (read from the end backwards, the recommended way).
            limit (`int`): Maximum number of lines.

        Returns:
            `tuple[str | None, list[DialogRecord]]`: The file read (``None`` when there is no
            dialog yet) and its records.

        Raises:
            `ValueError`: ``day`` is not a date, or ``limit``/``start_line`` is not positive.
        """
        if limit < 1:
            raise ValueError(f"limit must be at least 1, got {limit}")
        if start_line is not None and start_line < 1:
            raise ValueError(f"start_line must be at least 1, got {start_line}")
        if day is None:
            files = self.files()
            if not files:
                return None, []
            file = files[0]
        else:
            try:
                parsed = date.fromisoformat(day.strip())
            except ValueError:
                raise ValueError(f"date must look like YYYY-MM-DD, got {day!r}") from None
            file = f"{DIALOG_DIRNAME}/{parsed.isoformat()}.jsonl"
        key = self._resolve(file)
        records = []
        if start_line is None:
            for line_no, raw in self.storage.lines_backwards(key):
                record = self._decode(raw, file, line_no)
                if record is not None:
                    records.append(record)
                if len(records) >= limit:
                    break
            records.reverse()
        else:
            for line_no, raw in self.storage.lines(key, start_line):
                if line_no >= start_line + limit:
                    break
                record = self._decode(raw, file, line_no)
                if record is not None:
                    records.append(record)
        return file, records

    def search(self, query: str, limit: int = 10) -> list[DialogRecord]:
        """Messages containing every word of ``query`` (case-insensitive), newest first: the
        plain scan of every file, no index. ``search_dialog`` ranks with the history index
        (``core.search``) instead; this stays as its reference (B11 measures one against the
        other).

        A message is searched in what it says: its text and thinking, the names and every
        string argument (as written, not as JSON) of its tool calls, its tool outputs and the
        saved full text of each truncated one. Never in its id, role or timestamp, which would
        match any message by chance."""
        words = query.lower().split()
        if not words:
            raise ValueError("query must contain at least one word")
        if limit < 1:
            raise ValueError(f"limit must be at least 1, got {limit}")
        found = []
        for record in self.iter_records(newest_first=True):
            texts = _said(self.codec.view(record.msg))
            haystack = "\n".join(texts).lower()
            missing = [word for word in words if word not in haystack]
            if missing:
                # The rest of a truncated output is in tool_result/: look there too.
                saved = "\n".join(self._saved_outputs(texts)).lower()
                if not saved or any(word not in saved and word not in haystack for word in missing):
                    continue
            found.append(record)
            if len(found) >= limit:
                break
        return found

    def _saved_outputs(self, texts: Sequence[str]) -> list[str]:
        """The saved full texts that truncation notices among ``texts`` point at."""
        saved = []
        for text in texts:
            parts = split_notice(text)
            if parts is not None:
                full = self._results.read_text(parts[1].file_path)
                if full is not None:
                    saved.append(full)
        return saved

    def _decode(self, raw: bytes, file: str, line_no: int) -> DialogRecord[M] | None:
        if not raw.strip():
            return None
        try:
            data = json.loads(raw)
            if not isinstance(data, dict) or "id" not in data:
                raise ValueError("not a message record")
            return DialogRecord(file, line_no, self.codec.decode(data), data)
        # RecursionError: JSON nested deeper than the parser recurses ('[' * 100000)
        except (ValueError, KeyError, TypeError, AssertionError, RecursionError) as exc:
            logger.warning("skipping corrupt line %d of %s: %s", line_no, file, exc or "invalid")
            return None

    def _resolve(self, file: str) -> str:
        name = file.replace("\\", "/").rpartition("/")[2]
        if not _FILE_RE.match(name):
            raise ValueError(f"not a dialog file name: {file!r}")
        return f"{DIALOG_DIRNAME}/{name}"


# ---------------------------------------------------------------------- line helpers


def _said(msg: Message) -> list[str]:
    """What a search looks in, one string per place: the message's raw strings (text,
    thinking, tool arguments and outputs) and the names of the tools it calls or answers."""
    names = [part.name for part in msg.parts if isinstance(part, ToolCall | ToolResult)]
    return [*msg.raw_strings(), *names]


def _encode_line(record: dict[str, Any]) -> bytes:
    try:
        return json.dumps(record, ensure_ascii=False, default=str).encode("utf-8")
    except UnicodeEncodeError:
        # Lone surrogates cannot be UTF-8; ASCII escapes keep them exactly (json round-trips).
        return json.dumps(record, ensure_ascii=True, default=str).encode("ascii")
