"""The catch-up of the history index (design §6.2): what was appended to a conversation's dialog
or saved to its outputs since the last search, read from the workspace (the truth) into the
index's ``docs`` rows and its ranking engine, in one transaction; and what a saved message
becomes as a document (the text a search looks in).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
import sqlite3
from collections.abc import Callable

from ..messages import Message, Reminder, Text, Thinking, ToolCall, ToolResult, string_values
from ..rendering import REMINDER_LABEL
from ..truncation import sendable_text
from ..workspace import (
    DIALOG_DIRNAME,
    MESSAGE_DIRNAME,
    TOOL_RESULT_DIRNAME,
    DictCodec,
    Storage,
)
from ._engines import Engine
from ._looking import OUTPUT_INDEX_BYTES
from ._text import PART_SEPARATOR

__all__ = ["CatchUp", "StaleIndex"]

_DIALOG_RE = re.compile(r"^\d{4}-\d{2}-\d{2}\.jsonl$")
_SAVED_RE = re.compile(r"^[0-9a-f]{32}\.txt$")
_BATCH = 500


class StaleIndex(Exception):
    """The truth changed in a way the index cannot follow by appending: rebuild."""


def _head(storage: Storage, key: str, number: int = 1) -> str:
    """A fingerprint of the first line of a log (or of line ``number``): another file under
    the same name differs."""
    lines = storage.lines(key, number)
    try:
        first = next(iter(lines), (0, b""))[1]
    finally:
        close = getattr(lines, "close", None)
        if close is not None:
            close()
    return _digest(first)


def _digest(line: bytes) -> str:
    return hashlib.sha256(line).hexdigest()[:16]


_PLAIN = DictCodec()


def _searchable(part: object) -> str:
    """What a search looks in, of one part: what it says (a reminder labelled as the tools
    render it), a tool's name and its string arguments as written, a tool's output; never a
    call id (a random id holds a short word now and then) or a media block."""
    if isinstance(part, Reminder):
        return REMINDER_LABEL + part.body
    if isinstance(part, Text | Thinking):
        return part.text
    if isinstance(part, ToolCall):
        return "\n".join([part.name, *string_values(dict(part.arguments))])
    if isinstance(part, ToolResult):
        return f"{part.name}\n{part.complete_text}"
    return ""


def _text(value: object) -> str:
    """``value`` as text SQLite can store (a lone surrogate, kept by the dialog's ASCII
    escapes, becomes U+FFFD)."""
    return sendable_text(str(value))


class CatchUp:
    """One catch-up of an index file with its conversation's workspace.

    Args:
        storage (`Storage`): The conversation's workspace (the truth).
        engine (`Engine`): The index's ranking engine, told of every document added.
        view (`Callable[[dict], Message] | None`): A saved record as the tools show it
            (``None``, or a record it cannot read: every string of the record).
        progress (`Callable[[int], None] | None`): Told how many documents were added.
    """

    def __init__(
        self,
        storage: Storage,
        engine: Engine,
        view: Callable[[dict], Message] | None,
        progress: Callable[[int], None] | None,
    ) -> None:
        self.storage = storage
        self.engine = engine
        self.view = view
        self.progress = progress

    def run(self, db: sqlite3.Connection) -> int:
        """Index what was appended to the dialog or saved since the last catch-up, in one
        transaction of ``db``; the documents added.

        Raises:
            `StaleIndex`: A dialog file was removed, shrank or was replaced: rebuild.
        """
        storage = self.storage
        dialog = sorted(n for n in storage.names(DIALOG_DIRNAME) if _DIALOG_RE.match(n))
        saved = [
            f"{folder}/{name}"
            for folder in (TOOL_RESULT_DIRNAME, MESSAGE_DIRNAME)
            for name in storage.names(folder)
            if _SAVED_RE.match(name)
        ]
        keys = [f"{DIALOG_DIRNAME}/{n}" for n in dialog]
        # one read for every day file (one round trip on Redis, however many days)
        versions = dict(zip(keys, map(self._version, storage.log_versions(keys)), strict=True))
        known = dict(db.execute("SELECT name, version FROM sources").fetchall())
        gone = [k for k in known if k.startswith(f"{DIALOG_DIRNAME}/") and k not in versions]
        if gone:  # listed again: a file made (and indexed elsewhere) since the list is not gone
            listed = set(storage.names(DIALOG_DIRNAME))
            gone = [k for k in gone if k.rpartition("/")[2] not in listed]
        if gone:  # a removed file's messages would stay findable, pointing at nothing
            raise StaleIndex(f"{gone[0]} was removed")
        if (
            all(known.get(k) == v for k, v in versions.items())
            and all(k in known for k in saved)
            and not self.engine.behind(db)
        ):
            return 0  # the common case: nothing new, no write lock taken
        added = 0
        db.execute("BEGIN IMMEDIATE")  # one writer; the sources are read again under it
        try:
            self.engine.prepare(db)  # a copy ahead of the file (a crash) forgets its extra ids
            state = {
                name: (lines, version, head)
                for name, lines, version, head in db.execute(
                    "SELECT name, lines, version, head FROM sources"
                )
            }
            for key, version in versions.items():
                lines, known_version, head = state.get(key, (0, None, ""))
                if known_version != version:
                    added += self._index_dialog(db, key, lines, head)
            for key in saved:
                if key not in state:
                    added += self._index_output(db, key)
            # the engine's own copy (Tantivy) commits first: one found ahead is cut back
            self.engine.sync(db)
            db.execute("COMMIT")
        except BaseException:
            if db.in_transaction:  # SQLite may have rolled back by itself (a full disk)
                db.execute("ROLLBACK")
            raise
        return added

    def _version(self, found: tuple | None) -> str:
        # A log whose appends are atomic (Redis) is versioned by its length (LLEN, O(1)) and its
        # last line (a list rewritten to the same length differs there); a file by its size and
        # time (one stat). ``found``: what ``Storage.log_versions`` read.
        if self.storage.atomic_appends:
            count, last = found or (0, b"")
            return f"n{count}:{_digest(last) if count else ''}"
        return repr(found)

    def _index_dialog(self, db: sqlite3.Connection, key: str, done: int, head: str) -> int:
        storage = self.storage
        with contextlib.ExitStack() as held:
            if not storage.atomic_appends:
                # Under the dialog's lock the lines counted are whole: a writer holds it while
                # appending (a crashed writer's torn line is ended by the next append). A
                # workspace that cannot be locked is one nobody writes to (read-only).
                with contextlib.suppress(OSError):
                    held.enter_context(storage.lock(f"{DIALOG_DIRNAME}/.lock"))
            count = storage.line_count(key)
            # Redis: the version is the length just counted and its last line (below; a later
            # append is read next time)
            version = "" if storage.atomic_appends else repr(storage.version(key))
        # ``head``: fingerprints of the first line and of the last line indexed
        first = _head(storage, key)
        known_first, _, last = head.partition(":")
        if count < done or (done and known_first != first):
            # shorter, or another file under the same name (restored from a backup)
            raise StaleIndex(f"{key} is not the file that was indexed")
        added = 0
        rows: list[tuple] = []
        for line_no, raw in storage.lines(key, max(done, 1)):
            if line_no > count:
                break
            if line_no == done:
                # still the line indexed last: the file only grew (a backup restored and
                # appended to since has another line here)
                if _digest(raw) != last:
                    raise StaleIndex(f"{key} is not the file that was indexed")
                continue
            last = _digest(raw)
            row = self._message_row(key, line_no, raw)
            if row is not None:
                rows.append(row)
            if len(rows) >= _BATCH:
                added += self._insert(db, rows)
                rows = []
        added += self._insert(db, rows)
        if storage.atomic_appends:
            version = f"n{count}:{last if count else ''}"
        db.execute(
            "INSERT OR REPLACE INTO sources VALUES (?, ?, ?, ?)",
            (key, count, version, f"{first}:{last}"),
        )
        return added

    def _message_row(self, key: str, line_no: int, raw: bytes) -> tuple | None:
        if not raw.strip():
            return None
        try:
            record = json.loads(raw)
            if not isinstance(record, dict) or "id" not in record:
                return None
        except (ValueError, RecursionError):
            return None  # a torn, foreign or hostile line: the dialog reader skips it too
        msg = None
        if self.view is not None:
            with contextlib.suppress(Exception):  # a record its codec cannot read
                msg = self.view(record)
        try:
            msg = msg or _PLAIN.view(record)
        except (ValueError, TypeError, KeyError, AttributeError):
            return None
        # One part a block, reminders labelled as the tools render them (design §6.2).
        body = PART_SEPARATOR.join(text for part in msg.parts if (text := _searchable(part)))
        return (
            "message",
            key,
            line_no,
            _text(record["id"]),
            _text(msg.role),
            _text(msg.timestamp),
            _text(body),
        )

    def _insert(self, db: sqlite3.Connection, rows: list[tuple]) -> int:
        added = 0
        for row in rows:
            cursor = db.execute(
                "INSERT OR IGNORE INTO docs(kind, file, line, msg_id, role, ts, body) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                row,
            )
            if cursor.rowcount == 1:  # a message replayed by a crashed compaction: once
                self.engine.added(db, cursor.lastrowid, row[6])
                added += 1
        if added and self.progress is not None:
            self.progress(added)
        return added

    def _index_output(self, db: sqlite3.Connection, key: str) -> int:
        data = self.storage.read(key, OUTPUT_INDEX_BYTES)
        db.execute("INSERT OR REPLACE INTO sources VALUES (?, 0, 'saved', '')", (key,))
        if not data:
            return 0
        text = data.decode("utf-8", errors="replace")
        return self._insert(db, [("output", key, 1, None, "tool", "", text)])
