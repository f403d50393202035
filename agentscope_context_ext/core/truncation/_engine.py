"""Cutting text to a byte budget without losing anything (design §3.1).

Pure functions, no I/O: the caller saves the full text first and passes its path. The
guarantee, checked by a property test: for any text and limit, the excerpt followed by what
``read_file`` returns from the notice's position reproduces the original exactly.

Lines are separated by ``"\\n"`` only (``"\\r\\n"`` lines keep their ``"\\r"``), the same
definition ``read_file`` uses, so line numbers in a notice always mean the same thing.
"""

from __future__ import annotations

import codecs
import re
from dataclasses import replace
from typing import Any

from ._notice import TRUNCATION_NOTICE_MARKER, TruncationNotice, attach_notice, split_notice

DEFAULT_MAX_BYTES = 51200
"""Default stage-one budget of a tool result, in encoded bytes."""

RETRUNCATE_SLACK_BYTES = 100
"""Stage two leaves an excerpt alone when it is at most this much over the new limit."""

REPLACEMENT = "\ufffd"
"""What a lone surrogate becomes in every text this package sends or stores (U+FFFD)."""

_NEWLINE = b"\n"
_MEASURE_CHUNK = 1 << 18  # characters per slice when measuring a long text's encoded size
_REPLACEMENT_BYTES = REPLACEMENT.encode("utf-8")
_SURROGATE_RE = re.compile("[\ud800-\udfff]")
_BYTELESS_RE = re.compile("[\ud800-\udc7f\udd00-\udfff]")
"""Surrogates that stand for no byte (``surrogateescape`` keeps bytes as U+DC80..U+DCFF)."""


def truncate_text_output(
    text: str,
    start_line: int = 1,
    total_lines: int = 0,
    max_bytes: int = DEFAULT_MAX_BYTES,
    file_path: str | None = None,
    encoding: str = "utf-8",
    *,
    start_byte: int = 0,
) -> str:
    """Truncate a tool output to ``max_bytes``, or re-truncate an already truncated one.

    Text that ends with a notice written by this package is re-cut (stage two): the excerpt is
    shortened, the byte count and the continuation line are rewritten, the file path and the
    total line count stay. Any other text, including text that merely mentions
    ``TRUNCATION_NOTICE_MARKER``, is truncated fresh (stage one).

    Args:
        text (`str`): The tool output.
        start_line (`int`): Line of the full content where ``text`` starts (a ``read_file``
            range may start later than 1).
        total_lines (`int`): Lines in the full content; ``0`` counts the lines of ``text``.
        max_bytes (`int`): Budget of the excerpt in encoded bytes.
        file_path (`str | None`): Where the full content is, named in the notice. ``None`` when
            the content was not saved; the notice then says so.
        encoding (`str`): An ASCII-compatible encoding to measure bytes in.
        start_byte (`int`): Byte offset inside ``start_line`` where ``text`` starts.

    Returns:
        `str`: ``text`` itself when it fits, otherwise excerpt + notice.
    """
    if split_notice(text) is not None:
        return retruncate(text, max_bytes=max_bytes, encoding=encoding)
    return truncate_fresh(
        text,
        max_bytes=max_bytes,
        file_path=file_path,
        start_line=start_line,
        total_lines=total_lines,
        start_byte=start_byte,
        encoding=encoding,
    )


def truncate_fresh(
    text: str,
    *,
    max_bytes: int = DEFAULT_MAX_BYTES,
    file_path: str | None = None,
    start_line: int = 1,
    total_lines: int = 0,
    start_byte: int = 0,
    encoding: str = "utf-8",
    message: bool = False,
) -> str:
    """Stage one without the dispatch: always treat ``text`` as new output.

    The post-tool hook uses this, so that a tool cannot forge a notice and make its output
    look already truncated (and point at a file of its choosing). With ``message``, the notice
    says that a user's message was cut, not a tool's output.
    """
    return _truncate_fresh(
        text, start_line, total_lines, max_bytes, file_path, encoding, start_byte, message=message
    )


def count_lines(data: bytes | str) -> int:
    """Lines in ``data``: newlines, plus one for a last line without a newline."""
    newline = _NEWLINE if isinstance(data, bytes) else "\n"
    if not data:
        return 0
    return data.count(newline) + (0 if data.endswith(newline) else 1)


def _truncate_fresh(
    text: str,
    start_line: int,
    total_lines: int,
    max_bytes: int,
    file_path: str | None,
    encoding: str,
    start_byte: int = 0,
    partial_read: bool = False,
    message: bool = False,
) -> str:
    _check_args(max_bytes, start_line, start_byte)
    if encoded_size(text, encoding) <= max_bytes:
        return text
    if total_lines <= 0:
        total_lines = start_line - 1 + count_lines(text)
    # The cut only looks at the first max_bytes + 1 bytes; max_bytes + 1 characters encode to at
    # least that many. Encoding only this head keeps a 100 MB output from being copied whole.
    head = encode_text(text[: max_bytes + 1], encoding)
    where = TruncationNotice(
        file_path=file_path if file_path is not None else "(not saved)",
        total_lines=total_lines,
        start_line=start_line,
        first_byte=start_byte,
        excerpt_bytes=0,
        next_line=start_line,
        next_byte=0,
        partial_read=partial_read,
        message=message,
    )
    return _cut(head, max_bytes, encoding, where)


def retruncate(text: str, max_bytes: int, encoding: str = "utf-8") -> str:
    """Stage two: re-cut the excerpt of a text this package truncated to a smaller budget (no
    change within :data:`RETRUNCATE_SLACK_BYTES`); any other text is truncated fresh, with no
    file to point at."""
    parts = split_notice(text)
    if parts is None:  # not ours after all: a fresh cut is the safe answer
        return _truncate_fresh(text, 1, 0, max_bytes, None, encoding)
    excerpt, old = parts
    _check_args(max_bytes, old.start_line, old.first_byte)
    data = encode_text(excerpt, encoding)
    if len(data) <= max_bytes + RETRUNCATE_SLACK_BYTES:
        return text
    return _cut(data, max_bytes, encoding, replace(old, partial_read=False), replaced=True)


def notice_only(text: str) -> str | None:
    """A truncated text cut down to its notice alone: no excerpt, reading goes on where the
    excerpt started (the last resort before a prompt would go over the window). ``None`` when
    ``text`` carries no notice of ours; a text already cut to its notice comes back unchanged."""
    parts = split_notice(text)
    if parts is None:
        return None
    notice = replace(
        parts[1],
        excerpt_bytes=0,
        next_line=parts[1].start_line,
        next_byte=parts[1].first_byte,
        partial_read=False,
    )
    return attach_notice("", notice)


def _cut(
    data: bytes, max_bytes: int, encoding: str, where: TruncationNotice, replaced: bool = False
) -> str:
    """Cut ``data`` (longer than ``max_bytes``) and attach the notice: ``where`` says where the
    excerpt starts in the full content; the cut fills in its size and where reading goes on.

    ``replaced``: ``data`` is an excerpt as it was sent (:func:`sendable_text`), whose U+FFFD
    may each stand for one byte of the file: a cut inside a line then counts each as one byte,
    so that reading on never skips a byte (it may show up to two again)."""
    cut = _char_boundary(data, max_bytes, encoding)
    last_newline = data.rfind(_NEWLINE, 0, cut)
    # Back up to the last complete line, unless that throws away more than half the budget
    # (e.g. a short line followed by minified JSON): then cut inside the line; the notice
    # carries a byte offset so that continuing loses nothing.
    if last_newline >= 0 and last_newline + 1 >= cut // 2:
        cut = last_newline + 1
    excerpt_data = data[:cut]
    newlines = excerpt_data.count(_NEWLINE)
    if cut == last_newline + 1:
        next_byte = 0
    else:
        line_start = excerpt_data.rfind(_NEWLINE) + 1
        next_byte = cut - line_start + (where.first_byte if newlines == 0 else 0)
        if replaced and _is_utf8(encoding):
            next_byte -= 2 * excerpt_data.count(_REPLACEMENT_BYTES, line_start)
    notice = replace(
        where, excerpt_bytes=cut, next_line=where.start_line + newlines, next_byte=next_byte
    )
    return attach_notice(_decode(excerpt_data, encoding), notice)


def _char_boundary(data: bytes, limit: int, encoding: str) -> int:
    """The largest cut ``<= limit`` that does not split a character; at least one character."""
    if _is_utf8(encoding):
        cut = limit
        while cut > 0 and (data[cut] & 0xC0) == 0x80:
            cut -= 1
        if cut == 0:  # the first character alone is over the budget: keep it whole
            cut = 1
            while cut < len(data) and (data[cut] & 0xC0) == 0x80:
                cut += 1
        return cut
    decoder = codecs.getincrementaldecoder(encoding)(errors="surrogateescape")
    complete = decoder.decode(data[:limit], final=False)
    cut = len(encode_text(complete, encoding))
    if cut == 0:
        first = codecs.getincrementaldecoder(encoding)(errors="surrogateescape")
        for end in range(1, len(data) + 1):
            if first.decode(data[end - 1 : end], final=False):
                return end
    return cut


def encoded_size(text: str, encoding: str = "utf-8") -> int:
    """Size of ``text`` once encoded, measured in chunks (no copy of the whole text)."""
    if text.isascii():  # O(1) in CPython for ASCII-only strings
        return len(text)
    return sum(
        len(encode_text(text[i : i + _MEASURE_CHUNK], encoding))
        for i in range(0, len(text), _MEASURE_CHUNK)
    )


def sendable_text(text: str) -> str:
    """``text`` as it can be sent to a provider, kept in a framework's JSON state and written as
    UTF-8: each lone surrogate becomes U+FFFD (:data:`REPLACEMENT`); other text is returned as
    it is (the same object).

    Lone surrogates are bytes that were not valid text (kept by ``surrogateescape`` so that the
    saved file gets the original bytes, :func:`encode_text`), or a ``\\ud800`` a tool, a model
    or a user gave. One character each, so the replacement of a text is the replacement of its
    pieces, joined.
    """
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return _SURROGATE_RE.sub(REPLACEMENT, text)
    return text


def sendable_value(value: Any) -> Any:
    """``value`` with :func:`sendable_text` applied to every string in it (dict keys and values,
    list and tuple items, nested); anything else, and a value with nothing to replace, is
    returned as it is."""
    if isinstance(value, str):
        return sendable_text(value)
    if isinstance(value, dict):
        pairs = [(sendable_value(k), sendable_value(v)) for k, v in value.items()]
        if all(a is k and b is v for (a, b), (k, v) in zip(pairs, value.items(), strict=True)):
            return value
        return dict(pairs)
    if isinstance(value, list | tuple):
        items = [sendable_value(item) for item in value]
        if all(a is b for a, b in zip(items, value, strict=True)):
            return value
        return type(value)(items) if isinstance(value, tuple) else items
    return value


def encode_text(text: str, encoding: str = "utf-8") -> bytes:
    """Encode ``text`` for measuring and saving; never raises.

    Lone surrogates that stand for bytes (decoded with ``surrogateescape``) encode back to the
    original bytes, so offsets match the file on disk; other lone surrogates become U+FFFD, and
    anything else the encoding cannot hold ``?``.
    """
    try:
        return text.encode(encoding)
    except UnicodeEncodeError:
        pass
    try:
        return text.encode(encoding, errors="surrogateescape")
    except UnicodeEncodeError:
        kept = _BYTELESS_RE.sub(REPLACEMENT, text)
    try:
        return kept.encode(encoding, errors="surrogateescape")
    except UnicodeEncodeError:
        return kept.encode(encoding, errors="replace")


def _decode(data: bytes, encoding: str) -> str:
    return data.decode(encoding, errors="surrogateescape")


def _is_utf8(encoding: str) -> bool:
    return codecs.lookup(encoding).name == "utf-8"


def _check_args(max_bytes: int, start_line: int, start_byte: int) -> None:
    if max_bytes < 1:
        raise ValueError(f"max_bytes must be at least 1, got {max_bytes}")
    if start_line < 1:
        raise ValueError(f"start_line must be at least 1, got {start_line}")
    if start_byte < 0:
        raise ValueError(f"start_byte must not be negative, got {start_byte}")


__all__ = [
    "DEFAULT_MAX_BYTES",
    "REPLACEMENT",
    "RETRUNCATE_SLACK_BYTES",
    "TRUNCATION_NOTICE_MARKER",
    "count_lines",
    "encode_text",
    "encoded_size",
    "sendable_text",
    "sendable_value",
    "truncate_fresh",
    "truncate_text_output",
]
