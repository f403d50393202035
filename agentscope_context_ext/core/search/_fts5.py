"""The FTS5 ranking engine of the history index (design §6.2): BM25 by SQLite FTS5 in the index
file itself, with Python's own ``sqlite3`` (no extra). FTS5's BM25 reads every matching term's
whole posting list before it answers, so a query matching more than ``_engines.RANK_WINDOW``
documents is ranked over the newest that many.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from . import _engines
from ._text import Term, index_text

__all__ = ["Fts5Engine"]


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
                (expression, _engines.PHRASE_DOCS - 1),
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
                    (expression, _engines.RANK_WINDOW - 1),
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
