"""The Tantivy ranking engine of the history index (design §6.2), the ``search`` extra: BM25 with
block-max WAND in an inverted index in a folder beside the SQLite file, kept a copy of ``docs``
by document id; and where those folders live and how they are removed.
"""

from __future__ import annotations

import contextlib
import shutil
import sqlite3
from pathlib import Path

from . import _engines
from ._engines import CopyError
from ._text import Term, index_text

__all__ = ["TantivyEngine", "copy_folder", "remove_copies"]

_WRITER_HEAP = 64_000_000
"""Bytes Tantivy buffers before it writes a segment (a build of 1M documents writes ~40)."""


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
        return (
            bool(tokens)
            and min(searcher.doc_freq("body", t) for t in tokens) <= _engines.PHRASE_DOCS
        )

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
                for word, _ in expanded[: _engines.PREFIX_EXPANSIONS]
            ]
            if len(expanded) > _engines.PREFIX_EXPANSIONS:  # the rest: matched, ranked below
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
