"""What every ranking engine of the history index shares (design §6.2): the protocol the index
asks of an engine, the choice of engine, and the limits both rank within.

Both engines rank the documents of the index's ``docs`` table (SQLite: every document's kind, place and
text) by BM25; they differ in what they read to do it.

- ``TantivyEngine`` (``_tantivy``; the ``search`` extra: Tantivy's official Python bindings): an
  inverted index in a folder beside the SQLite file, with per-block maximum scores, so a top-10
  skips the blocks of a common word's posting list that cannot enter it (block-max WAND). It is
  a copy of ``docs`` kept by document id: caught up to it inside the catch-up's transaction, and
  a copy found ahead of it (a crash between its commit and SQLite's) is cut back.
- ``Fts5Engine`` (``_fts5``; no extra: Python's own ``sqlite3``): an FTS5 table in the same file.
  FTS5's BM25 reads every matching term's whole posting list before it answers, so a query
  matching more than :data:`RANK_WINDOW` documents is ranked over the newest that many.

The limits below are read by the engines at each query (``_engines.RANK_WINDOW``), so that they
are tuned in one place, for both engines.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import Protocol

from ._text import Term

__all__ = [
    "ENGINES",
    "ENGINE_ENV",
    "RANK_WINDOW",
    "CopyError",
    "Engine",
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
