"""The ranking engines of the history index (design §6.2): what turns terms into ranked rows.

Both rank the documents of the index's ``docs`` table (SQLite: every document's kind, place and
text) by BM25; they differ in what they read to do it.

- :class:`TantivyEngine` (the ``search`` extra: Tantivy's official Python bindings): an
  inverted index in a folder beside the SQLite file, with per-block maximum scores, so a top-10
  skips the blocks of a common word's posting list that cannot enter it (block-max WAND). It is
  a copy of ``docs`` kept by document id: caught up to it inside the catch-up's transaction, and
  a copy found ahead of it (a crash between its commit and SQLite's) is cut back.
- :class:`Fts5Engine` (no extra: Python's own ``sqlite3``): an FTS5 table in the same file.
  FTS5's BM25 reads every matching term's whole posting list before it answers, so a query
  matching more than :data:`RANK_WINDOW` documents is ranked over the newest that many.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
from pathlib import Path
from typing import Protocol

from ._text import Term, index_text

__all__ = [
    "ENGINES",
    "ENGINE_ENV",
    "RANK_WINDOW",
    "CopyError",
    "Engine",
    "Fts5Engine",
    "TantivyEngine",
    "default_engine",
    "tantivy_available",
]

ENGINES = ("tantivy", "fts5")
RANK_WINDOW = 10_000
"""FTS5 only: a query whose every term is in more documents than this together ranks the most
recently indexed this many of them. FTS5 ranks a match in about a microsecond, all of them
before the first is returned: a word in most of a million saved messages took 0.7 s (B11). Where
the newest matches start is found by reading them in rowid order, unranked (under a
millisecond). A query matching fewer is ranked over all of them, and so is the any-term fallback
(there a rare term's older documents must not be cut off by a common term's newer ones)."""
PREFIX_EXPANSIONS = 64
"""Tantivy: a prefix is searched as its most frequent this many words (BM25 over each); the
words beyond them are matched too, at a constant score below every ranked one."""
PHRASE_DOCS = 20_000
"""The words of a query in a row are ranked as a phrase over every document when one of them is
in at most this many (Tantivy), or all of them together are (FTS5); else they are looked for
among the best hits only (a phrase of two words each in 40% of a million messages took 36 ms
with Tantivy, 80 ms with FTS5, B11)."""
_WRITER_HEAP = 64_000_000
"""Bytes Tantivy buffers before it writes a segment (a build of 1M documents writes ~40)."""
_TANTIVY_BATCH = 5_000


class CopyError(Exception):
    """The engine's own copy of the index could not be written or read (Tantivy's error): it is
    made again from the SQLite file, or the search goes on in memory."""


def tantivy_available() -> bool:
    """Whether the ``search`` extra (``tantivy``) is installed."""
    try:
        import tantivy  # noqa: F401
    except ImportError:
        return False
    return True


ENGINE_ENV = "ACE_SEARCH_ENGINE"
"""``fts5`` keeps the SQLite index with Tantivy installed (``tantivy`` asks for it: an error
without the extra)."""


def default_engine() -> str:
    """The engine asked for in ``ACE_SEARCH_ENGINE``, else ``tantivy`` when its bindings are
    installed, else ``fts5``.

    Raises:
        `ValueError`: ``ACE_SEARCH_ENGINE`` names no engine, or ``tantivy`` without the extra.
    """
    asked = os.environ.get(ENGINE_ENV, "").strip().lower()
    if asked and asked not in ENGINES:
        raise ValueError(f"{ENGINE_ENV} must be one of {', '.join(ENGINES)}, got {asked!r}")
    if asked == "tantivy" and not tantivy_available():
        raise ValueError(
            f"{ENGINE_ENV}=tantivy needs the search extra: pip install 'agentscope-context-ext[search]'"
        )
    if asked:
        return asked
    return "tantivy" if tantivy_available() else "fts5"


class Engine(Protocol):
    """What the history index asks of a ranking engine."""

    name: str

    def create(self, db: sqlite3.Connection) -> None:
        """Make what the engine keeps in the SQLite file (inside the file's creation)."""

    def open(self, db: sqlite3.Connection, folder: Path | None) -> None:
        """Start on an index file (``folder``: where the engine may keep files of its own;
        ``None``: in memory)."""

    def added(self, db: sqlite3.Connection, rowid: int, text: str) -> None:
        """A document was just inserted into ``docs`` (inside the catch-up's transaction)."""

    def behind(self, db: sqlite3.Connection) -> bool:
        """Whether documents of ``docs`` are not searchable yet (cheap: every search asks)."""

    def prepare(self, db: sqlite3.Connection) -> None:
        """At the start of a catch-up's transaction, before documents are added: forget what
        the engine holds that ``docs`` does not (their ids are about to be given again)."""

    def sync(self, db: sqlite3.Connection) -> int:
        """Make every document of ``docs`` searchable (inside the catch-up's transaction,
        before it commits); the documents added."""

    def phrase_affordable(self, db: sqlite3.Connection, words: list[str]) -> bool:
        """Whether a phrase of ``words`` is cheap enough to rank over every document (a phrase
        of words that are each in most documents checks the positions of all of them)."""

    def ranked(
        self, db: sqlite3.Connection, terms: list[Term], limit: int, offset: int, all_terms: bool
    ) -> list[tuple[int, float]]:
        """``(rowid, score)`` of the best documents holding every term (or any), best first;
        lower scores are better (FTS5's convention)."""

    def close(self) -> None:
        """Let go of open files."""

    def remove(self, path: Path) -> None:
        """Delete the engine's own files of the index file ``path`` (a rebuild)."""


# ---------------------------------------------------------------------- FTS5


class Fts5Engine:
    """BM25 by SQLite FTS5 (``unicode61``, diacritics folded) in the index file itself."""

    name = "fts5"

    def create(self, db: sqlite3.Connection) -> None:
        db.execute(
            "CREATE VIRTUAL TABLE IF NOT EXISTS fts USING fts5("
            "body, content='', tokenize='unicode61 remove_diacritics 2')"
        )

    def open(self, db: sqlite3.Connection, folder: Path | None) -> None:
        return None  # everything is in the SQLite file

    def added(self, db: sqlite3.Connection, rowid: int, text: str) -> None:
        db.execute("INSERT INTO fts(rowid, body) VALUES (?, ?)", (rowid, index_text(text)))

    def behind(self, db: sqlite3.Connection) -> bool:
        return False  # indexed in the same transaction as ``docs``

    def prepare(self, db: sqlite3.Connection) -> None:
        return None  # in the same transaction as ``docs``: never ahead

    def sync(self, db: sqlite3.Connection) -> int:
        return 0

    def phrase_affordable(self, db: sqlite3.Connection, words: list[str]) -> bool:
        # No cheap document frequency here (fts5vocab reads the lists): whether the words
        # together are in more than PHRASE_DOCS documents, read in rowid order (unranked), as
        # the rank window is found.
        expression = " AND ".join(Term(word, (word,)).fts() for word in words)
        try:
            beyond = db.execute(
                "SELECT rowid FROM fts WHERE fts MATCH ? ORDER BY rowid DESC LIMIT 1 OFFSET ?",
                (expression, PHRASE_DOCS - 1),
            ).fetchone()
        except sqlite3.OperationalError:
            return True  # the ranked query reports it
        return beyond is None

    def ranked(
        self, db: sqlite3.Connection, terms: list[Term], limit: int, offset: int, all_terms: bool
    ) -> list[tuple[int, float]]:
        expression = (" AND " if all_terms else " OR ").join(term.fts() for term in terms)
        window = None
        try:
            if all_terms:
                window = db.execute(
                    "SELECT rowid FROM fts WHERE fts MATCH ? ORDER BY rowid DESC LIMIT 1 OFFSET ?",
                    (expression, RANK_WINDOW - 1),
                ).fetchone()
        except sqlite3.OperationalError as exc:  # our quoting makes this unexpected
            raise ValueError(f"the query cannot be searched: {exc}") from None
        since = 0 if window is None else window[0]  # 0: every match (rowids start at 1)
        rows = db.execute(
            "SELECT rowid, rank FROM fts WHERE fts MATCH ? AND rowid >= ? "
            "ORDER BY rank LIMIT ? OFFSET ?",
            (expression, since, limit, offset),
        ).fetchall()
        return [(rowid, float(score)) for rowid, score in rows]

    def close(self) -> None:
        return None

    def remove(self, path: Path) -> None:
        return None  # in the SQLite file


# ---------------------------------------------------------------------- Tantivy


class TantivyEngine:
    """BM25 with block-max WAND by Tantivy, in a folder beside the index file.

    The folder's name carries the index file's generation (a random id made with the file), so
    a rebuilt file never meets the copy of the file it replaced.
    """

    name = "tantivy"

    def __init__(self) -> None:
        import tantivy

        self._t = tantivy
        builder = tantivy.SchemaBuilder()
        builder.add_unsigned_field("id", indexed=True, fast=True)
        builder.add_text_field("body", tokenizer_name="ace", index_option="position")
        self.schema = builder.build()
        # Runs of letters and digits (Unicode), case and accents folded: FTS5's unicode61 with
        # ``remove_diacritics``, which the query's words go through too (:meth:`words`).
        self.analyzer = (
            tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.simple())
            .filter(tantivy.Filter.lowercase())
            .filter(tantivy.Filter.ascii_fold())
            .build()
        )
        self.index = None

    def create(self, db: sqlite3.Connection) -> None:
        return None  # the folder is made when the file is opened

    def open(self, db: sqlite3.Connection, folder: Path | None) -> None:
        t = self._t
        if folder is None:
            self.index = t.Index(self.schema)  # in memory
        else:
            if folder.is_symlink():
                raise OSError(f"{folder} is a link")
            folder.mkdir(exist_ok=True)
            self.index = t.Index(self.schema, path=str(folder))
        self.index.register_tokenizer("ace", self.analyzer)
        self.index.config_reader("manual")  # reloaded when ``docs`` is ahead (``behind``)

    def added(self, db: sqlite3.Connection, rowid: int, text: str) -> None:
        return None  # :meth:`sync` reads it from ``docs`` before the catch-up commits

    def _count(self) -> int:
        return self.index.searcher().num_docs

    def behind(self, db: sqlite3.Connection) -> bool:
        # ``docs`` ids are 1..N without gaps (rows are only ever added, in one transaction
        # each catch-up); the copy holds ids 1..M. Another process's commit: reload first.
        newest = db.execute("SELECT max(id) FROM docs").fetchone()[0] or 0
        if self._count() == newest:
            return False
        self.index.reload()
        return self._count() != newest

    def _ahead(self, newest: int) -> int:
        """Documents of the copy past ``newest`` (a range of the indexed ids: only those are
        read, where finding the copy's largest id read every document's, 1M at 1M)."""
        return self.index.searcher().search(self._past(newest), 1, count=True).count

    def _past(self, newest: int):
        t = self._t
        return t.Query.range_query(self.schema, "id", t.FieldType.Unsigned, newest + 1, 2**63)

    def prepare(self, db: sqlite3.Connection) -> None:
        try:
            self.index.reload()
            newest = db.execute("SELECT max(id) FROM docs").fetchone()[0] or 0
            if not self._ahead(newest):
                return  # the common case: one count of the ids past the file's
            writer = self.index.writer(heap_size=_WRITER_HEAP, num_threads=1)
            writer.delete_documents_by_query(self._past(newest))
            writer.commit()
            writer.wait_merging_threads()
            self.index.reload()
        except (ValueError, OSError) as exc:
            raise CopyError(str(exc)[:300]) from exc

    def sync(self, db: sqlite3.Connection) -> int:
        try:
            return self._sync(db)
        except (ValueError, OSError) as exc:  # Tantivy's I/O errors (a full disk, a lost file)
            raise CopyError(str(exc)[:300]) from exc

    def _sync(self, db: sqlite3.Connection) -> int:
        t = self._t
        self.index.reload()
        newest = db.execute("SELECT max(id) FROM docs").fetchone()[0] or 0
        # The copy holds ids 1..M (each commit adds the next ids, all or none), maybe past
        # ``newest`` (cut back: ``prepare`` does it before ids are given again).
        ahead = self._ahead(newest)
        have = self._count() - ahead
        if not ahead and have == newest:
            return 0
        writer = self.index.writer(heap_size=_WRITER_HEAP, num_threads=1)
        try:
            if ahead:
                writer.delete_documents_by_query(self._past(newest))
            added = 0
            for rowid, body in db.execute(
                "SELECT id, body FROM docs WHERE id > ? ORDER BY id", (have,)
            ):
                document = t.Document()
                document.add_unsigned("id", rowid)
                document.add_text("body", index_text(body or ""))
                writer.add_document(document)
                added += 1
            writer.commit()
            writer.wait_merging_threads()  # merges done: the next writer starts on few segments
        except BaseException:
            with contextlib.suppress(Exception):
                writer.rollback()
            raise
        self.index.reload()
        return added

    def phrase_affordable(self, db: sqlite3.Connection, words: list[str]) -> bool:
        searcher = self.index.searcher()
        tokens = [t for word in words for t in self.words(word)]
        return bool(tokens) and min(searcher.doc_freq("body", t) for t in tokens) <= PHRASE_DOCS

    def words(self, text: str) -> list[str]:
        """The index's tokens of ``text`` (accents folded as in the documents)."""
        return self.analyzer.analyze(index_text(text))

    def _term_query(self, term: Term, searcher):
        t = self._t
        words = [w for word in term.words for w in self.words(word)]
        if not words:
            return None
        if term.prefix:
            if len(words) > 1:
                return t.Query.phrase_prefix_query(self.schema, "body", words)
            expanded = searcher.terms_with_prefix("body", words[0])
            if not expanded:
                return t.Query.empty_query()
            expanded.sort(key=lambda item: -item[1])
            ranked = [
                (t.Occur.Should, t.Query.term_query(self.schema, "body", word))
                for word, _ in expanded[:PREFIX_EXPANSIONS]
            ]
            if len(expanded) > PREFIX_EXPANSIONS:  # the rest: matched, ranked below
                rest = t.Query.phrase_prefix_query(self.schema, "body", words)
                ranked.append((t.Occur.Should, t.Query.const_score_query(rest, 0.0)))
            return t.Query.boolean_query(ranked)
        if len(words) == 1:
            return t.Query.term_query(self.schema, "body", words[0])
        return t.Query.phrase_query(self.schema, "body", words)

    def ranked(
        self, db: sqlite3.Connection, terms: list[Term], limit: int, offset: int, all_terms: bool
    ) -> list[tuple[int, float]]:
        t = self._t
        searcher = self.index.searcher()
        occur = t.Occur.Must if all_terms else t.Occur.Should
        parts = [(occur, q) for term in terms if (q := self._term_query(term, searcher))]
        if not parts:
            return []
        query = parts[0][1] if len(parts) == 1 else t.Query.boolean_query(parts)
        hits = searcher.search(query, limit, count=False, offset=offset).hits
        if not hits:
            return []
        ids = searcher.fast_field_values("id", [address for _, address in hits])
        found = [(int(i), -float(score)) for (score, _), i in zip(hits, ids, strict=True)]
        # Equal scores come in the order of the copy's segments, which differ from worker to
        # worker (merges run when they run): newest first, so that every copy answers alike
        # (a tie across the ``limit``-th hit can still differ).
        found.sort(key=lambda item: (item[1], -item[0]))
        return found

    def close(self) -> None:
        self.index = None

    def remove(self, path: Path) -> None:
        remove_copies(path)


def copy_folder(path: Path, generation: str) -> Path:
    """Where Tantivy's copy of the index file ``path`` of ``generation`` lives."""
    return path.with_name(f"{path.name}.tantivy-{generation}")


def remove_copies(path: Path, keep: Path | None = None) -> None:
    """Delete every Tantivy copy of the index file ``path`` but ``keep`` (a link is removed,
    never followed)."""
    for folder in path.parent.glob(f"{path.name}.tantivy-*"):
        if keep is not None and folder == keep:
            continue
        if folder.is_symlink() or not folder.is_dir():
            with contextlib.suppress(OSError):
                folder.unlink()
        else:
            shutil.rmtree(folder, ignore_errors=True)
