"""Where the agent looks in a conversation's index: the ranked hits of a query, the query as
typed and its words in a row first, each with a snippet of its best match (design §6.2)."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

from ..workspace import Storage
from ._engines import Engine
from ._text import Term, Typed, holds_literal, in_a_row, literal_pattern, locate, snippet

__all__ = ["CANDIDATES", "LITERAL_POOL", "OUTPUT_INDEX_BYTES", "IndexedHit", "looked_up"]

OUTPUT_INDEX_BYTES = 2 * 1024 * 1024
"""Bytes of a saved output the index reads (the head of a 100 MB log; the rest stays readable
through ``read_file``)."""
LONG_LINE_BYTES = 1000
"""A match further than this into its line gets a ``start_byte`` to read on from."""
CANDIDATES = 30
"""Documents ranked before the query as typed and its words in a row are preferred among them
(:func:`looked_up`)."""
LITERAL_POOL = 300
"""A query with punctuation (``#row-id``, ``f(x) :: t``) looks this far down the ranking for
where it stands as typed (its words are common, its punctuation is not indexed)."""


@dataclass(frozen=True)
class IndexedHit:
    """One ranked document of one conversation's index."""

    score: float
    """BM25, lower is better (FTS5's sign; Tantivy's negated), rewritten to follow the order of
    :func:`looked_up`."""
    kind: str
    """``message`` (a saved dialog line) or ``output`` (a saved tool output or user text)."""
    file: str
    """Workspace-relative: ``dialog/2026-12-03.jsonl`` or ``tool_result/<hash>.txt``."""
    line: int
    """The dialog line; for an output, the line of the output the match is on."""
    snippet: str
    role: str = ""
    timestamp: str = ""
    start_byte: int = 0
    """For an output: the byte in its line where reading should start to see the match, when
    the line is long (``read_file``'s ``start_byte``); else 0."""


def looked_up(
    engine: Engine,
    db: sqlite3.Connection,
    storage: Storage,
    terms: list[Term],
    limit: int,
    all_terms: bool = True,
    query: str = "",
) -> list[IndexedHit]:
    """The best ``limit`` documents of an index (``db``, ranked by ``engine``) holding every
    term (``all_terms``) or any of them.

    Where the agent looks first: among the engine's best :data:`CANDIDATES`, documents holding
    ``query`` as typed (``mix credo --help``, ``#row-id``: punctuation the engine does not see)
    come first, then those holding its words in a row (ranked as a phrase over every document
    when the engine can afford it), then the rest, each group in BM25 order."""
    literal = literal_pattern(query, terms) if query else None
    pool = max(limit, CANDIDATES)
    ranked: dict[int, float] = {}
    together = len(terms) > 1 and all_terms and not any(t.prefix for t in terms)
    words = [w for t in terms for w in t.words]
    phrased: set[int] | None = set()
    if together and engine.phrase_affordable(db, words):
        # the words in a row, ranked over every document: a phrase of them all
        phrase = Term(" ".join(t.text for t in terms), tuple(words))
        ranked.update(engine.ranked(db, [phrase], pool, 0, True))
        phrased = set(ranked)
    elif together:
        phrased = None  # each word in too many documents: looked for among the best only
    found = engine.ranked(db, terms, pool, 0, all_terms)
    for rowid, score in found:
        ranked.setdefault(rowid, score)
    order = list(ranked)
    if literal is not None and len(order) >= pool:
        # more match: a wider pool, checked in SQL first
        for rowid, score in engine.ranked(db, terms, LITERAL_POOL, 0, all_terms):
            ranked.setdefault(rowid, score)
        order = list(ranked)
    if phrased is None:
        phrased = _holding(db, order[:pool], in_a_row(terms), max(words, key=len))
    typed = set() if literal is None else _holding(db, order, literal, query)
    order.sort(key=lambda rowid: (rowid not in typed, rowid not in phrased))
    hits: list[IndexedHit] = []
    offset = len(found)
    # scores follow the order (lower is better): a merge of conversations by score keeps it
    floor = min(ranked.values(), default=0.0)
    while True:
        for rowid in order:
            floor = max(floor, ranked[rowid])
            hit = _hit(db, storage, rowid, floor, terms, literal)
            if hit is not None:
                hits.append(hit)
            if len(hits) >= limit:
                return hits
        if len(found) < pool:
            return hits  # no more documents match
        # some were expired outputs: the next page of the every-term (or any-term) ranking
        found = engine.ranked(db, terms, pool, offset, all_terms)
        offset += len(found)
        order = [rowid for rowid, _ in found if rowid not in ranked]
        ranked.update(found)


def _holding(db: sqlite3.Connection, rowids: list[int], wanted: Typed, text: str) -> set[int]:
    """Which of ``rowids`` hold ``wanted`` (the query as typed, or its words in a row):
    SQLite's ``LIKE`` on the longest piece of ``text`` first (ASCII: case-insensitive; only
    the bodies that pass come to Python), then the pattern."""
    if not rowids:
        return set()
    piece = max(text.replace('"', " ").split(), key=len, default="")
    sql = f"SELECT id, body FROM docs WHERE id IN ({','.join('?' * len(rowids))})"
    args: list[object] = list(rowids)
    if piece.isascii():
        escaped = piece.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        sql += " AND body LIKE ? ESCAPE '\\'"
        args.append(f"%{escaped}%")
    return {rowid for rowid, body in db.execute(sql, args) if holds_literal(body or "", wanted)}


def _hit(
    db: sqlite3.Connection,
    storage: Storage,
    rowid: int,
    score: float,
    terms: list[Term],
    literal: Typed | None = None,
) -> IndexedHit | None:
    row = db.execute(
        "SELECT kind, file, line, role, ts, body FROM docs WHERE id = ?", (rowid,)
    ).fetchone()
    if row is None:
        return None
    kind, file, line, role, ts, body = row
    if kind == "output":
        data = storage.read(file, OUTPUT_INDEX_BYTES)
        if data is None:
            return None  # expired since it was indexed: the next hits take its place
        body = data.decode("utf-8", errors="replace")
    body = body or ""
    position = length = None
    if kind == "output":
        position, length = locate(body, terms, literal)
    excerpt, at = snippet(body, terms, at=position, literal=literal, length=length or 0)
    start_byte = 0
    if position is not None:
        begins = body.rfind("\n", 0, position) + 1
        if len(body[begins:position].encode("utf-8")) > LONG_LINE_BYTES:
            start_byte = len(body[begins : max(begins, position - 80)].encode("utf-8"))
    return IndexedHit(
        score=score,
        kind=kind,
        file=file,
        line=line if kind == "message" else at,
        snippet=excerpt,
        role=role or "",
        timestamp=ts or "",
        start_byte=start_byte,
    )
