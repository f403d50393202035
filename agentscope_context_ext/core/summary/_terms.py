"""Code-like terms of a conversation and how much they matter (pure functions).

A *term* is something a handover must keep verbatim: a file path, a function or module name, an
``@attribute``, a ``name/arity``, an issue id like ``proj-a1x.2``, an opaque id like ``4WQ150``, or a span the user or the
agent put in backticks. Terms are found with a few language-neutral patterns (they do not
depend on the conversation's human language), and ranked by *salience*: how often, and by
whom, a term is used. A term the user wrote or the agent acted on (a path it edited, a name in
its own prose or thinking) outranks one that only passed by in a tool's output.
"""

from __future__ import annotations

import functools
import math
import re
from collections import defaultdict
from collections.abc import Iterable, Sequence

from ..messages import Message, Reminder, Text, Thinking, ToolCall, ToolResult, string_values

__all__ = ["SOURCE_WEIGHTS", "Salience", "TextIndex", "code_terms", "mentions"]

_BACKTICKED = r"`([^`\n]{2,160})`"
_PATH = (
    r"((?:~|\.{1,2})?/?(?:[\w.@+-]+/)+[\w.@+-]*\w\.[A-Za-z][\w-]{0,7}"  # dir/file.ext
    r"|[\w-]+(?:\.[\w-]+)*\.(?:[a-z][a-z0-9]{0,4}))(?![\w(])"  # file.ext (lower-case ext)
)
_IDENT = r"([@$]?[A-Za-z_][\w!?]*(?:(?:\.|::|->|#)[A-Za-z_][\w!?]*)*(?:/\d+|\(\))?)"
_KEBAB = r"([a-z][a-z0-9]*(?:-[a-z0-9]+)+(?:\.\d+)*)"
_URL = r"(https?://[^\s'\"<>()\[\]`]+[^\s'\"<>()\[\]`.,;:])"
# An opaque id mixes letters and digits (``HAT028``, ``2FBBAH``, ``a3f9c21``): a record, a
# commit, a ticket the work refers to verbatim. Not a number with a unit (``100ms``), not a
# piece of a longer token (a UUID's groups, a timestamp's ``040Z``), not an encoded blob (over
# 16 characters, unless hexadecimal like a commit hash).
_ALNUM_ID = (
    r"(?<![\w.:/-])((?=[a-zA-Z]*\d)(?=\d*[a-zA-Z])(?!\d+[a-z]{1,3}\b)"
    r"(?:[0-9a-f]{7,40}|[A-Za-z0-9]{4,16}))(?![\w-])"
)
_BACKTICKED_RE = re.compile(_BACKTICKED)
_TERM_RE = re.compile(f"{_URL}|{_PATH}|{_KEBAB}|{_ALNUM_ID}|{_IDENT}")
_MIN_LEN, _MAX_LEN = 3, 160
_ARITY_RE = re.compile(r"(?:/\d+|\(\))$")
_DIGIT_OR_DOT_RE = re.compile(r"[\d.]")
_WORD_RE = re.compile(r"\w+")
_WORD_ONLY_RE = re.compile(r"\w+")
_CODE_SHAPE_RE = re.compile(r"/\d+$|\w\.\w|[a-z][A-Z]|^[A-Z][a-z0-9]+[A-Z]")
_LONG_ARGUMENT = 300
_COMMAND_KEYS = ("command", "cmd", "script", "shell", "bash", "code")
_PATH_KEYS = ("file_path", "path", "filepath", "filename", "file", "notebook_path", "target_file")
"""A tool argument at least this long (or with a newline) is content, not a name."""

SOURCE_WEIGHTS = {
    "user": 5.0,
    "assistant": 3.0,
    "argument": 3.0,
    "thinking": 2.0,
    "content": 1.0,
    "requested": 3.0,
    "result": 1.0,
    "reminder": 1.0,
}
"""Weight of one message's use of a term, by where the term appears: the user's words, the
agent's prose, a short tool argument (a path, a command), the agent's thinking, long tool
arguments (file contents, edits), the output of a call the user asked for (``Run gh issue view
42`` -> the output of ``gh issue view 42``: the task's own description), other tool output, a
framework's reminder (what a hook or the framework reported, like tool output). A file path
counts double: it is the identifier an agent most often needs again verbatim."""


FORMAT_WEIGHT = 0.25
"""A term of a tool's output format (:meth:`Salience._is_format`) counts a quarter: the same
key in every record says nothing about the task, the values it labels do."""
_OUTPUT_SOURCES = frozenset({"result", "requested", "reminder"})
_MIN_FORMAT_OUTPUTS = 3


def code_terms(text: str, *, prose: bool) -> frozenset[str]:
    """The code-like terms of ``text``.

    Args:
        text (`str`): Any text.
        prose (`bool`): Text written by a person or the agent: hyphenated words count only when
            they carry a digit or a dot (``proj-a1x.2``, not ``well-known``). In code and
            tool output every hyphenated id counts. Backticked spans count everywhere.
    """
    # The same texts are read by the salience, the work log and the model input of one
    # compaction: remember the last few hundred.
    return _code_terms(text, prose)


@functools.lru_cache(maxsize=512)
def _code_terms(text: str, prose: bool) -> frozenset[str]:
    found: set[str] = set()
    for span in _BACKTICKED_RE.findall(text):
        # A backticked span is an identifier someone marked as one, in prose and in Markdown
        # a tool printed alike; the names inside it count too.
        found.add(span.strip())
        found |= _code_terms(span, False)
    # No other term holds whitespace: look at each chunk between spaces, and skip plain words
    # ("the", "Word") without a regex; they are most of any text.
    for chunk in text.split():
        if chunk.isalpha() and (chunk.islower() or chunk[1:].islower()):
            continue
        for match in _TERM_RE.finditer(chunk):
            url, path, kebab, opaque, ident = match.groups()
            if url is not None or path is not None or opaque is not None:
                found.add(url or path or opaque)
            elif ident is not None:
                if _looks_like_code(ident):
                    found.add(ident)
            elif kebab is not None and (not prose or _DIGIT_OR_DOT_RE.search(kebab)):
                found.add(kebab)
    return frozenset(
        term for term in found if _MIN_LEN <= len(term) <= _MAX_LEN and not term.isdigit()
    )


def mentions(text: str, term: str) -> bool:
    """Whether ``text`` contains ``term`` as a whole: not as the middle of a longer name.

    ``load_config`` is not mentioned by ``load_configs``; ``parse_row`` is mentioned by
    ``parse_row/2``. A boundary is only required where ``term`` itself
    begins or ends with a word character.
    """
    if not term:
        return False
    start = r"(?<![\w])" if re.match(r"\w", term) else ""
    end = r"(?![\w])" if re.search(r"\w$", term) else ""
    return re.search(start + re.escape(term) + end, text) is not None


class TextIndex:
    """Answers :func:`mentions` for many terms over one (growing) text, fast: a term that is one
    word is a set lookup, and a term with a word the text lacks is rejected before any regex."""

    def __init__(self, text: str = "") -> None:
        self.text = ""
        self.words: set[str] = set()
        self.add(text)

    def add(self, text: str) -> None:
        """Append ``text`` (on a new line)."""
        self.text = f"{self.text}\n{text}" if self.text else text
        self.words.update(_WORD_RE.findall(text))

    def mentions(self, term: str) -> bool:
        """:func:`mentions` of ``term`` in the text."""
        if _WORD_ONLY_RE.fullmatch(term):
            return term in self.words
        if any(word not in self.words for word in _WORD_RE.findall(term)):
            return False
        return mentions(self.text, term)


class Salience:
    """Accumulates, message by message, how much each term is used and by whom.

    A term's score is, for each kind of place it appears in (:data:`SOURCE_WEIGHTS`), the
    place's weight times ``log2(1 + messages)``: using a name in more messages counts, but with
    diminishing returns, so a name the agent acted on once outranks one that recurs in ten file
    reads. Paths count double; later messages weigh slightly more, so that what the work is
    about *now* wins ties.
    """

    def __init__(self) -> None:
        self.first_seen: dict[str, int] = {}
        self._uses: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
        self._cache: dict[str, float] | None = None
        self._count = 0
        self._requests: list[str] = []
        self._requested: set[str] = set()
        self._outputs: dict[str, int] = defaultdict(int)
        """Outputs seen per tool."""
        self._in_outputs: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        """Per term, how many outputs of each tool hold it."""

    def add(self, msg: Message) -> None:
        """Fold one message in."""
        self._count += 1
        self._cache = None
        if msg.role == "user" and msg.text:
            self._requests.append(" ".join(msg.text.split()))
        for call in msg.tool_calls:
            if _asked_for(call, self._requests):
                self._requested.add(call.id)
        places: dict[str, set[str]] = defaultdict(set)
        for source, text, prose in _places(msg, self._requested):
            for term in code_terms(text, prose=prose):
                places[term].add(source)
        for result in msg.tool_results:
            self._outputs[result.name] += 1
            for term in code_terms(result.complete_text, prose=False):
                self._in_outputs[term][result.name] += 1
        recency = 1.0 + 0.01 * self._count
        for term, sources in places.items():
            uses = self._uses[term]
            for source in sources:
                uses[source] += recency
            self.first_seen.setdefault(term, self._count)

    def extend(self, msgs: Iterable[Message]) -> Salience:
        """Fold several messages in; returns ``self``."""
        for msg in msgs:
            self.add(msg)
        return self

    @property
    def scores(self) -> dict[str, float]:
        """Every term's own score."""
        if self._cache is None:
            self._cache = {
                term: sum(SOURCE_WEIGHTS[s] * math.log2(1 + n) for s, n in uses.items())
                * (2.0 if _is_path(term) else 1.0)
                * (FORMAT_WEIGHT if self._is_format(term, uses) else 1.0)
                for term, uses in self._uses.items()
            }
        return self._cache

    def _is_format(self, term: str, uses: dict[str, float]) -> bool:
        """Whether ``term`` belongs to a tool's output format rather than to its data: nobody
        but the tool uses it, and most outputs of that tool (three or more) hold it, like a
        JSON key (``first_name``) or a header every answer repeats."""
        if any(source not in _OUTPUT_SOURCES for source in uses):
            return False
        return any(
            n >= _MIN_FORMAT_OUTPUTS and n * 2 > self._outputs[tool]
            for tool, n in self._in_outputs.get(term, {}).items()
        )

    def only_output(self, term: str) -> bool:
        """Whether nobody but a tool (or a framework's reminder) used ``term``: its words are
        a tool's, not the user's or the agent's."""
        uses = self._uses.get(term)
        return bool(uses) and all(source in _OUTPUT_SOURCES for source in uses)

    def score(self, term: str) -> float:
        """The salience of ``term``; a ``name/arity`` or ``name()`` form scores at least as much
        as its bare name (it is the same function, named more precisely)."""
        scores = self.scores
        own = scores.get(term, 0.0)
        base = _ARITY_RE.sub("", term)
        return max(own, scores.get(base, 0.0)) if base != term else own

    def ranked(self) -> list[str]:
        """Terms, most salient first (ties: first seen first)."""
        return sorted(self.scores, key=lambda t: (-self.score(t), self.first_seen[t], t))


def _places(msg: Message, requested: set[str]) -> Iterable[tuple[str, str, bool]]:
    """(source, text, is prose) for each place of ``msg`` that can hold terms."""
    speaker = "user" if msg.role == "user" else "assistant"
    for part in msg.parts:
        if isinstance(part, Reminder):  # nobody's words: weighed like a tool's output
            yield "reminder", part.body, True
        elif isinstance(part, Text):
            yield speaker, part.text, True
        elif isinstance(part, Thinking):
            yield "thinking", part.text, True
        elif isinstance(part, ToolCall):
            for value in string_values(dict(part.arguments)):
                if len(value) < _LONG_ARGUMENT and "\n" not in value:
                    yield "argument", value, False
                else:
                    yield "content", value, False
                    # What the agent put in backticks in what it wrote (a plan, a doc, a
                    # docstring) it singled out as a name, as in its own prose.
                    marked = " ".join(f"`{span}`" for span in _BACKTICKED_RE.findall(value))
                    if marked:
                        yield "assistant", marked, True
        elif isinstance(part, ToolResult):
            yield ("requested" if part.id in requested else "result"), part.complete_text, False


def _asked_for(call: ToolCall, requests: Sequence[str]) -> bool:
    """Whether a user message named this call: most of its command (``gh issue view 42`` for
    ``gh issue view 42 --comments``), or the file name it reads."""
    for key in _COMMAND_KEYS:
        value = call.arguments.get(key)
        if isinstance(value, str) and value.strip():
            command = " ".join(value.split())
            prefix = command[: max(6, math.ceil(0.8 * len(command)))]
            return any(prefix in request for request in requests)
    for key in _PATH_KEYS:
        value = call.arguments.get(key)
        if isinstance(value, str) and value.strip():
            name = value.replace("\\", "/").rstrip("/").rpartition("/")[2]
            return len(name) >= 5 and any(mentions(request, name) for request in requests)
    return False


def _is_path(term: str) -> bool:
    return "/" in term and re.search(r"\.[A-Za-z][\w-]{0,7}$", term) is not None


def _looks_like_code(token: str) -> bool:
    """A bare word is prose; a name with ``_``, ``@``, ``::``, ``/arity``, ``()``, an inner dot or
    inner capitals is code."""
    if token.isalpha() and (token.islower() or token[1:].islower()):
        return False  # "word", "Word": the common case, decided without a regex
    if any(mark in token for mark in ("_", "::", "->", "()", "#")) or token[0] in "@$":
        return True
    return _CODE_SHAPE_RE.search(token) is not None
