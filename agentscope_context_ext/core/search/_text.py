"""What the history index reads and what a query asks for (design §6.2).

The index tokenizes with SQLite FTS5's ``unicode61``: runs of letters and digits, case and
diacritics folded. Two things it cannot do by itself are done here, the same way for the text
and for the query, so that both meet:

- **CJK text** has no spaces, so ``unicode61`` would make a whole sentence one token. Each run of
  Chinese, Japanese or Korean characters becomes its overlapping pairs (``数据库`` -> ``数据 据库``;
  a run of one character stays itself): a word of two or more characters is found inside any
  sentence, as a phrase of its pairs.
- **Queries are never FTS5 syntax.** Each word, or each ``"quoted phrase"``, becomes one quoted
  FTS5 phrase: ``my_var``, ``foo.bar/baz`` and ``AND`` are text to find, not operators, and a
  stray quote or ``*`` is a character, never a syntax error. A trailing ``*`` asks for a prefix.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

__all__ = [
    "PART_SEPARATOR",
    "Term",
    "Typed",
    "first_match",
    "holds_literal",
    "in_a_row",
    "index_text",
    "literal_pattern",
    "locate",
    "parse_query",
    "shown",
    "snippet",
]

PART_SEPARATOR = "\x1e"
"""Between the parts of a message's text (a snippet stays within one part and keeps its
label, e.g. ``[system reminder]``)."""

_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af"
_CJK_RUN_RE = re.compile(f"[{_CJK}]+")
_PIECE_RE = re.compile(r"[^\W_]+", re.UNICODE)
_CONTROL_RE = re.compile(r"[\x00-\x08\x0e-\x1f\x7f-\x9f]")
"""Control characters (not whitespace): a snippet never carries a terminal escape."""
_PUNCTUATION_RE = re.compile(r"[^\w\s]|_")
_QUERY_RE = re.compile(r'"([^"]*)"?|(\S+)')

MAX_TERMS = 32
"""Words of a query beyond these are ignored (a pasted page is not a query)."""
MAX_QUERY_CHARS = 2000
"""Characters of a query read (the rest is ignored)."""


def _pairs(run: str) -> str:
    if len(run) == 1:
        return f" {run} "
    return " " + " ".join(run[i : i + 2] for i in range(len(run) - 1)) + " "


def index_text(text: str) -> str:
    """``text`` as the index reads it: CJK runs turned into their overlapping pairs."""
    if not _CJK_RUN_RE.search(text):
        return text
    return _CJK_RUN_RE.sub(lambda m: _pairs(m.group()), text)


@dataclass(frozen=True)
class Term:
    """One thing a query looks for: a word, an identifier or a quoted phrase."""

    text: str
    """As the user wrote it (without quotes and the prefix ``*``)."""
    words: tuple[str, ...]
    """Its tokens, lower case, CJK as pairs: what must follow each other in the text."""
    prefix: bool = False
    """The last token may be the start of a longer one (``config*``)."""

    def fts(self) -> str:
        """The term as one quoted FTS5 phrase (never an operator, never a syntax error)."""
        phrase = '"' + " ".join(self.words).replace('"', '""') + '"'
        return phrase + ("*" if self.prefix else "")

    def pattern(self, whole: bool = False) -> re.Pattern[str]:
        """Where the term is in the original text: its pieces in order, anything that is not a
        letter or digit between them (``my var`` finds ``my_var`` and ``my/var`` too, as the
        index does). ``whole``: not inside a longer word, as the index matches (``error`` is
        not in ``errors``; a prefix may end inside one; CJK is matched inside its runs)."""
        pieces = _PIECE_RE.findall(fold(self.text))
        expression = r"[\W_]+".join(map(re.escape, pieces)) or re.escape(self.text)
        if whole and pieces:
            if not _CJK_RUN_RE.match(pieces[0][0]):
                expression = r"(?<![^\W_])" + expression
            if not self.prefix and not _CJK_RUN_RE.match(pieces[-1][-1]):
                expression += r"(?![^\W_])"
        return re.compile(expression, re.IGNORECASE)


def parse_query(query: str) -> list[Term]:
    """The terms of ``query``: words and quoted phrases, each with its tokens; a term with no
    letters or digits (``"``, ``*``, ``-->``) is dropped. At most :data:`MAX_TERMS`."""
    terms: list[Term] = []
    for match in _QUERY_RE.finditer(query[:MAX_QUERY_CHARS]):
        raw = match.group(1) if match.group(1) is not None else match.group(2)
        prefix = raw.endswith("*") and match.group(2) is not None
        raw = raw.rstrip("*") if prefix else raw
        words = tuple(_PIECE_RE.findall(index_text(raw).lower()))  # the index's tokens
        if not words:
            continue
        term = Term(raw.strip(), words, prefix)
        if term not in terms:
            terms.append(term)
        if len(terms) >= MAX_TERMS:
            break
    return terms


def shown(query: str, chars: int = 80) -> str:
    """A query as an answer repeats it: one line, at most ``chars`` characters."""
    text = " ".join(query.split())
    return text if len(text) <= chars else text[:chars] + "…"


def snippet(
    text: str,
    terms: list[Term],
    width: int = 240,
    at: int | None = None,
    literal: Typed | None = None,
    length: int = 0,
) -> tuple[str, int]:
    """A one-line excerpt of ``text`` around its best match, and the 1-based line of ``text``
    the match is on (the first line when no term is found).

    The best match is the query as typed (``literal``, see :func:`literal_pattern`), else the
    query's words in a row, else its first term (``at`` and ``length``, when the caller found
    it already); the excerpt is widened to show the whole of it (an identifier is never cut in
    two).
    """
    if PART_SEPARATOR in text:
        return _part_snippet(text, terms, width, literal), 1
    if at is None:
        at, length = locate(text, terms, literal)
    start = max(0, at - width // 3)
    end = min(len(text), max(start + width, at + length + width // 6))
    excerpt = " ".join(_CONTROL_RE.sub("?", text[start:end]).split())
    excerpt = ("…" if start > 0 else "") + excerpt + ("…" if end < len(text) else "")
    return excerpt, text.count("\n", 0, at) + 1


@dataclass(frozen=True)
class Typed:
    """The query as the agent typed it (see :func:`literal_pattern`)."""

    pattern: re.Pattern[str]
    """Its words as written, any blanks between them; case ignored; not followed by a letter or
    digit when it ends with one."""
    alone: bool
    """It starts with a letter or digit: it must not follow one (checked by hand: a look-behind
    at the start of a pattern makes ``re`` try every position of a 2 MB output)."""

    def find(self, folded: str) -> tuple[int, int] | None:
        """Where it first stands in ``folded`` (text with accents folded), if it does."""
        for match in self.pattern.finditer(folded):
            at = match.start()
            if not self.alone or at == 0 or not _word_character(folded[at - 1]):
                return at, match.end()
        return None


def _word_character(character: str) -> bool:
    return character.isalnum() or character == "_"


def literal_pattern(query: str, terms: list[Term]) -> Typed | None:
    """The query as the agent typed it, to prefer where it stands as written: ``None`` without
    punctuation (its terms, and its words in a row, find the same). Case and accents ignored;
    not inside a longer word (``probe_key_2`` is not in ``probe_key_24``)."""
    text = " ".join(query.strip().split())
    if len(text) >= 2 and text[0] == text[-1] == '"':
        text = text[1:-1].strip()
    if len(terms) == 1 and terms[0].prefix:
        return None
    if not text or not _PUNCTUATION_RE.search(text):
        return None  # words only: the words in a row (a phrase of them) is what it asks
    expression = r"\s+".join(re.escape(word) for word in fold(text).split())
    if _word_character(text[-1]):
        expression += r"(?!\w)"
    return Typed(re.compile(expression, re.IGNORECASE), _word_character(text[0]))


def in_a_row(terms: list[Term]) -> Typed:
    """The words of ``terms`` in a row, anything that is not a letter or digit between them (as
    a phrase of them matches in the index), not inside a longer word (CJK: inside its runs)."""
    pieces = [p for term in terms for p in _PIECE_RE.findall(fold(term.text))]
    expression = r"[\W_]+".join(map(re.escape, pieces)) or re.escape(terms[0].text)
    if pieces and not _CJK_RUN_RE.match(pieces[-1][-1]):
        expression += r"(?![^\W_])"
    alone = bool(pieces) and not _CJK_RUN_RE.match(pieces[0][0])
    return Typed(re.compile(expression, re.IGNORECASE), alone)


def locate(text: str, terms: list[Term], literal: Typed | None = None) -> tuple[int, int]:
    """Where the best match of a query is in ``text`` and how long it is: the query as typed
    (``literal``), else all its words in a row (``a b`` finds ``a_b``), else its first term
    (0, 0 when none is)."""
    folded = fold(text)
    if literal is not None and (span := literal.find(folded)):
        return span[0], span[1] - span[0]
    together = len(terms) > 1 and not any(t.prefix for t in terms)
    if together and (span := in_a_row(terms).find(folded)):
        return span[0], span[1] - span[0]
    return first_match(text, terms, folded), 0


def first_match(text: str, terms: list[Term], folded: str | None = None) -> int:
    """Where the first term is in ``text`` (0 when none is), accents ignored as the index ignores
    them (``cafe`` is in ``café``; the folding keeps every position; ``folded``: done already)."""
    folded = fold(text) if folded is None else folded
    for whole in (True, False):  # a whole word first, as the index matched it
        found = [m.start() for term in terms if (m := term.pattern(whole).search(folded))]
        if found:
            return min(found)
    return 0


def holds_literal(text: str, literal: Typed) -> bool:
    """Whether ``text`` holds the query as typed (see :func:`literal_pattern`)."""
    return literal.find(fold(text)) is not None


def _part_snippet(text: str, terms: list[Term], width: int, literal: Typed | None) -> str:
    """The snippet of the part holding the best match, its label kept."""
    parts = text.split(PART_SEPARATOR)
    part = None
    if literal is not None:
        part = next((p for p in parts if holds_literal(p, literal)), None)
    if part is None:
        part = next(
            (p for p in parts if any(t.pattern().search(fold(p)) for t in terms)),
            parts[0],
        )
    excerpt, _ = snippet(part, terms, width, literal=literal)
    label = _LABEL_RE.match(part)
    if label and not excerpt.startswith(label.group()):
        excerpt = label.group() + excerpt
    return excerpt


def _fold_table() -> dict[int, str]:
    """Each accented Latin, Greek or Cyrillic letter to its base letter, one character for one
    (``é`` -> ``e``), as SQLite's ``remove_diacritics`` folds them for the index."""
    table = {}
    for block in ((0x00C0, 0x0250), (0x0370, 0x0530), (0x1E00, 0x1F00)):
        for code in range(*block):
            base = "".join(
                c for c in unicodedata.normalize("NFD", chr(code)) if not unicodedata.combining(c)
            )
            if len(base) == 1 and base != chr(code):
                table[code] = base
    return table


_FOLD = _fold_table()


_FOLDABLE_RE = re.compile("[" + "".join(map(chr, sorted(_FOLD))) + "]")


def fold(text: str) -> str:
    """``text`` with accents folded, one character for one; text with nothing to fold as it is
    (no copy: a saved output of 2 MB is not translated character by character for every hit)."""
    if text.isascii() or not _FOLDABLE_RE.search(text):
        return text
    return text.translate(_FOLD)


_LABEL_RE = re.compile(r"^\[[a-z_ ]+\] ")
