"""The history index of one conversation: its dialog and saved outputs, ranked by BM25.

The JSONL files of ``dialog/`` and the saved texts of ``tool_result/`` and ``message/`` are the
truth; the index is a cache of them, brought up to date before each search (it reads only what
was appended or saved since) and rebuilt from them when it is missing, stale (a dialog file
that shrank), corrupt or not ours. Nothing is written to it on the agent's step: the cost of a
message is paid once, by the first search after it was saved.

Where it is: ``<workspace>/.search/index.sqlite`` for a local workspace; for a Redis workspace a
file of the same form in this user's private cache folder (each worker keeps its own, from the
same truth, so every worker answers alike). When neither can be written (a read-only
workspace) the index is built in memory for the search: slower, the same answers.

A SQLite file holds what was indexed (``sources``) and every document's kind, place and text
(``docs``: the snippets); a ranking engine (``_engines``: Tantivy when the ``search`` extra is
installed, else SQLite FTS5 in the same file) ranks them.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import re
import secrets
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path

from ..errors import WorkspaceError
from ..messages import Message, Reminder, Text, Thinking, ToolCall, ToolResult, string_values
from ..rendering import REMINDER_LABEL
from ..workspace import (
    DIALOG_DIRNAME,
    MESSAGE_DIRNAME,
    TOOL_RESULT_DIRNAME,
    DictCodec,
    LocalStorage,
    Storage,
    SubStorage,
    private_cache_folder,
)
from ._engines import (
    ENGINES,
    RANK_WINDOW,
    CopyError,
    Engine,
    Fts5Engine,
    TantivyEngine,
    copy_folder,
    default_engine,
    remove_copies,
)
from ._looking import OUTPUT_INDEX_BYTES, IndexedHit, looked_up
from ._text import PART_SEPARATOR, Term

__all__ = ["INDEX_DIRNAME", "RANK_WINDOW", "HistoryIndex", "IndexedHit", "index_location"]

logger = logging.getLogger("agentscope_context_ext")

INDEX_DIRNAME = ".search"
"""The index's folder in a local workspace (``.search/index.sqlite``)."""
_INDEX_NAME = "index.sqlite"
_SCHEMA = "agentscope-context-ext history index 3"
"""With the engine's name: a file made by the other engine is rebuilt (never half-read)."""
_DIALOG_RE = re.compile(r"^\d{4}-\d{2}-\d{2}\.jsonl$")
_SAVED_RE = re.compile(r"^[0-9a-f]{32}\.txt$")
_BATCH = 500


def index_location(storage: Storage) -> Path:
    """Where the index of a conversation kept in ``storage`` lives (see the module's text)."""
    local = _local_root(storage)
    if local is not None:
        return local / INDEX_DIRNAME / _INDEX_NAME
    digest = hashlib.sha256(storage.location.encode("utf-8")).hexdigest()[:32]
    return private_cache_folder() / "search" / f"{digest}.sqlite"


def _local_root(storage: Storage) -> Path | None:
    if isinstance(storage, LocalStorage):
        return storage.root
    if isinstance(storage, SubStorage):
        base = _local_root(storage.base)
        return None if base is None else base / storage.folder
    return None


BUSY_TIMEOUT_SECONDS = 30.0
"""How long a search waits for another process's write to the index before it gives up (with
an error; the index is kept)."""


def _open(path: Path | str) -> sqlite3.Connection:
    # The tools search in a worker thread (one at a time, under their lock).
    db = sqlite3.connect(
        path, timeout=BUSY_TIMEOUT_SECONDS, isolation_level=None, check_same_thread=False
    )
    db.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_SECONDS * 1000)}")
    return db


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


def _corrupt(exc: BaseException) -> bool:
    """A damaged index file (rebuilt), as opposed to one that cannot be written now."""
    text = str(exc).lower()
    return not isinstance(exc, sqlite3.OperationalError) or any(
        word in text for word in ("malformed", "not a database", "no such table", "no such column")
    )


def _busy(exc: BaseException) -> bool:
    """SQLite's "database is locked" (or busy): another process writes the index."""
    return isinstance(exc, sqlite3.OperationalError) and (
        "locked" in str(exc) or "busy" in str(exc)
    )


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
    escapes, is replaced)."""
    return str(value).encode("utf-8", errors="replace").decode("utf-8")


class _Stale(Exception):
    """The truth changed in a way the index cannot follow by appending: rebuild."""


class HistoryIndex:
    """The searchable history of one conversation.

    Args:
        storage (`Storage`): The conversation's workspace (its ``dialog/`` and ``tool_result/``).
        path (`Path | None`): The index file (default: :func:`index_location`).
        progress (`Callable[[int], None] | None`): Told how many documents were added, while a
            long catch-up runs (the command line prints it).
        view (`Callable[[dict], Message] | None`): A saved record as the tools show it, so the
            index holds what ``read_dialog`` shows (not 2.x's ``state`` or ``finished_at``).
        engine (`str | None`): ``tantivy`` or ``fts5`` (default: Tantivy when the ``search``
            extra is installed, else FTS5).
    """

    def __init__(
        self,
        storage: Storage,
        path: Path | None = None,
        progress: Callable[[int], None] | None = None,
        view: Callable[[dict], Message] | None = None,
        engine: str | None = None,
    ) -> None:
        engine = engine or default_engine()
        if engine not in ENGINES:
            raise ValueError(f"engine must be one of {', '.join(ENGINES)}, got {engine!r}")
        self.engine: Engine = TantivyEngine() if engine == "tantivy" else Fts5Engine()
        self.storage = storage
        try:
            where: Path | None = path or index_location(storage)
        except WorkspaceError as exc:  # no private cache folder for a Redis workspace's index
            logger.info("no place for the history index (%s): searching in memory", exc)
            where = None
        self.path = where
        """The index file; ``None``: in memory (nowhere to keep it)."""
        self.progress = progress
        self.view = view
        """A saved record as the tools render it (the adapter's codec: ``decode`` then
        ``view``); ``None`` or a record it cannot read: every string of the record."""
        self._db: sqlite3.Connection | None = None
        self.in_memory = False
        """Whether the index could not be written where it belongs (built in memory)."""

    # ------------------------------------------------------------------ opening

    def _connect(self) -> sqlite3.Connection:
        if self._db is not None:
            return self._db
        db = None
        try:
            if self.path is None or self.in_memory:
                raise OSError("no place for the index file")
            folder = self.path.parent
            folder.mkdir(parents=True, exist_ok=True)
            if folder.is_symlink() or self.path.is_symlink():
                # never write (or delete) through a link: the index stays in its folder
                raise OSError(f"{self.path} is a link")
            db = _open(self.path)
            state = self._state(db)
            if state == "foreign":
                db.close()
                self._remove_file()
                db = _open(self.path)
            if state != "ours":
                self._create(db)
            self._open_engine(db, self.path)
        except (OSError, ValueError, sqlite3.Error) as exc:
            logger.info("history index at %s unusable (%s): searching in memory", self.path, exc)
            if db is not None:
                db.close()
            db = _open(":memory:")
            self._create(db)
            self._open_engine(db, None)
            self.in_memory = True
        self._db = db
        return db

    def _open_engine(self, db: sqlite3.Connection, path: Path | None) -> None:
        """Start the engine on ``db``; its own files (Tantivy's copy) beside ``path``, those of
        another generation (a file rebuilt since) removed, a copy it cannot open made anew
        (it is a cache of ``docs``)."""
        if path is None:
            self.engine.open(db, None)
            return
        row = db.execute("SELECT value FROM meta WHERE key = 'generation'").fetchone()
        folder = copy_folder(path, row[0] if row else "0")
        remove_copies(path, keep=folder)
        try:
            self.engine.open(db, folder)
        except ValueError as exc:  # Tantivy's error for a damaged folder
            logger.warning("history index copy %s unusable (%s): made anew", folder, exc)
            remove_copies(path)
            self.engine.open(db, folder)

    def _state(self, db: sqlite3.Connection) -> str:
        """``new`` (no tables), ``ours`` (an index of this schema) or ``foreign`` (another
        program's database, an older schema, a corrupt file: replaced)."""
        try:
            tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master")}
            if not tables:
                return "new"
            row = db.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
            ours = f"{_SCHEMA} {self.engine.name}"
            return "ours" if row is not None and row[0] == ours else "foreign"
        except sqlite3.Error as exc:
            if _busy(exc):
                raise  # another process holds it: ours, and not to be dropped
            return "foreign"

    def _create(self, db: sqlite3.Connection) -> None:
        # One transaction: a process opening the file meanwhile sees no tables or all of them
        # with their schema row, never a half-made index it would take for a foreign one.
        db.executescript(
            f"""
            BEGIN IMMEDIATE;
            CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT);
            INSERT OR IGNORE INTO meta VALUES ('schema', '{_SCHEMA} {self.engine.name}');
            INSERT OR IGNORE INTO meta VALUES ('generation', '{secrets.token_hex(8)}');
            CREATE TABLE IF NOT EXISTS sources(
                name TEXT PRIMARY KEY, lines INTEGER NOT NULL, version TEXT NOT NULL,
                head TEXT NOT NULL DEFAULT '');
            CREATE TABLE IF NOT EXISTS docs(
                id INTEGER PRIMARY KEY, kind TEXT NOT NULL, file TEXT NOT NULL,
                line INTEGER NOT NULL, msg_id TEXT UNIQUE, role TEXT, ts TEXT, body TEXT);
            """
        )
        try:
            self.engine.create(db)
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise

    def _remove_file(self) -> None:
        if self.path is None:
            return
        for suffix in ("", "-journal", "-wal", "-shm"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(f"{self.path}{suffix}")
        remove_copies(self.path)  # whichever engine made them

    def close(self) -> None:
        """Close the index file (reopened by the next search)."""
        self.engine.close()
        if self._db is not None:
            self._db.close()
            self._db = None

    def rebuild(self) -> int:
        """Forget the index and build it again from the files; the documents indexed."""
        self.close()
        if not self.in_memory:
            with contextlib.suppress(OSError):
                self._remove_file()
        self.in_memory = False
        return self.refresh()

    # ------------------------------------------------------------------ catching up

    def refresh(self) -> int:
        """Index what was saved since the last search; the documents added. Rebuilds the index
        when it is stale or corrupt; goes on in memory when it cannot be written (a full
        disk); raises ``sqlite3.OperationalError`` when another process holds it too long."""
        for attempt in (1, 2, 3):
            try:
                return self._refresh()
            except (_Stale, sqlite3.DatabaseError, CopyError) as exc:
                if attempt == 3 or _busy(exc):
                    raise  # another process holds the index: not a reason to drop the file
                self.close()
                if isinstance(exc, CopyError) and attempt == 1 and not self.in_memory:
                    # the engine's copy is a cache of ``docs``: made again, the file kept
                    logger.warning("history index copy of %s: %s; made again", self.path, exc)
                    if self.path is not None:
                        remove_copies(self.path)
                elif isinstance(exc, _Stale) or (not isinstance(exc, CopyError) and _corrupt(exc)):
                    logger.warning("rebuilding the history index %s: %s", self.path, exc)
                    if not self.in_memory:
                        self._remove_file()
                    self.in_memory = False
                else:  # full disk, read-only, I/O error: the file stays, this search in memory
                    logger.warning("history index %s: %s; searching in memory", self.path, exc)
                    self.in_memory = True
        return 0  # pragma: no cover - the loop returns or raises

    def _refresh(self) -> int:
        db = self._connect()
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
            raise _Stale(f"{gone[0]} was removed")
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
            raise _Stale(f"{key} is not the file that was indexed")
        added = 0
        rows: list[tuple] = []
        for line_no, raw in storage.lines(key, max(done, 1)):
            if line_no > count:
                break
            if line_no == done:
                # still the line indexed last: the file only grew (a backup restored and
                # appended to since has another line here)
                if _digest(raw) != last:
                    raise _Stale(f"{key} is not the file that was indexed")
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

    # ------------------------------------------------------------------ searching

    def search(
        self,
        terms: list[Term],
        limit: int,
        all_terms: bool = True,
        catch_up: bool = True,
        query: str = "",
    ) -> list[IndexedHit]:
        """The best ``limit`` documents holding every term (``all_terms``) or any of them, the
        query as typed and its words in a row first (:func:`looked_up`). ``catch_up``: index
        what was saved since first (off: it was, a moment ago, and the index is still open; a
        closed one, maybe in memory, is caught up anyway)."""
        if not terms:
            return []
        if catch_up or self._db is None:
            self.refresh()
        return looked_up(self.engine, self._connect(), self.storage, terms, limit, all_terms, query)

    def size(self) -> int:
        """Bytes of the index file (0 in memory)."""
        try:
            return 0 if self.in_memory or self.path is None else self.path.stat().st_size
        except FileNotFoundError:
            return 0

    def documents(self) -> Iterator[tuple[str, str, int]]:
        """``(kind, file, line)`` of every indexed document, for checks."""
        db = self._connect()
        yield from db.execute("SELECT kind, file, line FROM docs ORDER BY id")
