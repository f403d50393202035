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
(``docs``: the snippets); a ranking engine (``_tantivy`` when the ``search`` extra is
installed, else ``_fts5``: SQLite FTS5 in the same file) ranks them. This module opens, makes
and repairs the file; ``_catch_up`` reads what was saved since into it.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import secrets
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path

from ..errors import WorkspaceError
from ..messages import Message
from ..workspace import (
    LocalStorage,
    Storage,
    SubStorage,
    private_cache_folder,
)
from ._catch_up import CatchUp, StaleIndex
from ._engines import ENGINES, RANK_WINDOW, CopyError, Engine, default_engine
from ._fts5 import Fts5Engine
from ._looking import IndexedHit, looked_up
from ._tantivy import TantivyEngine, copy_folder, remove_copies
from ._text import Term

__all__ = ["INDEX_DIRNAME", "RANK_WINDOW", "HistoryIndex", "IndexedHit", "index_location"]

logger = logging.getLogger("agentscope_context_ext")

INDEX_DIRNAME = ".search"
"""The index's folder in a local workspace (``.search/index.sqlite``)."""
_INDEX_NAME = "index.sqlite"
_SCHEMA = "agentscope-context-ext history index 3"
"""With the engine's name: a file made by the other engine is rebuilt (never half-read)."""


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
                return CatchUp(self.storage, self.engine, self.view, self.progress).run(
                    self._connect()
                )
            except (StaleIndex, sqlite3.DatabaseError, CopyError) as exc:
                if attempt == 3 or _busy(exc):
                    raise  # another process holds the index: not a reason to drop the file
                self.close()
                if isinstance(exc, CopyError) and attempt == 1 and not self.in_memory:
                    # the engine's copy is a cache of ``docs``: made again, the file kept
                    logger.warning("history index copy of %s: %s; made again", self.path, exc)
                    if self.path is not None:
                        remove_copies(self.path)
                elif isinstance(exc, StaleIndex) or (
                    not isinstance(exc, CopyError) and _corrupt(exc)
                ):
                    logger.warning("rebuilding the history index %s: %s", self.path, exc)
                    if not self.in_memory:
                        self._remove_file()
                    self.in_memory = False
                else:  # full disk, read-only, I/O error: the file stays, this search in memory
                    logger.warning("history index %s: %s; searching in memory", self.path, exc)
                    self.in_memory = True
        return 0  # pragma: no cover - the loop returns or raises

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
