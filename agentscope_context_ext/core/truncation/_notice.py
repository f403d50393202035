"""The truncation notice: how it is written and how it is read back (design §3.1).

The notice is the only state a truncated tool result carries. It must be machine-parsable,
because stage two re-cuts the excerpt and rewrites the continuation line without touching the
file path or the total line count, and a reader (human or model) must be able to continue
exactly where the excerpt stops.

Layout of a truncated result::

    <excerpt>[\\n]<<<TRUNCATED>>>
    The output above was truncated.
    The full content is saved to the file and contains {total_lines} lines in total.
    This excerpt starts at line {start_line} and covers the next {excerpt_bytes} bytes.
    If the current content is not enough, call `read_file` with file_path={path} start_line={n} to read more.

The headline says what the excerpt is: a cut output (above), a partial read of a file, an
output not shown at all (the excerpt is empty: the last resort before the window), or a user's
message cut like an output. When the excerpt ends inside a line, the continuation carries ``start_byte={k}`` (the byte
offset inside line ``n``) and a newline is inserted before the marker; when it ends at a line
boundary the excerpt already ends with a newline and nothing is inserted. So the excerpt is
recovered exactly from the text: everything before the marker line, minus the inserted newline
when ``start_byte`` is present.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

TRUNCATION_NOTICE_MARKER = "<<<TRUNCATED>>>"
"""The first line of every notice this package writes."""

_HEADLINES = {
    "truncated": "The output above was truncated.",
    "partial": "The output above is a partial read of the file.",
    "omitted": "The output is not shown here, to keep the prompt within the model's window.",
    "message": "The message above was truncated: whole, it would take too much of the window.",
}

_NOTICE_RE = re.compile(
    r"<<<TRUNCATED>>>\n"
    rf"(?P<headline>{'|'.join(re.escape(line) for line in _HEADLINES.values())})\n"
    r"The full content is saved to the file and contains (?P<total_lines>\d+) lines in total\.\n"
    r"This excerpt starts at line (?P<start_line>\d+)(?: byte (?P<first_byte>\d+))?"
    r" and covers the next (?P<excerpt_bytes>\d+) bytes\.\n"
    r"If the current content is not enough, call `read_file` with "
    r"file_path=(?P<file_path>[^\n]+?) start_line=(?P<next_line>\d+)"
    r"(?: start_byte=(?P<next_byte>\d+))? to read more\.\n?\Z",
)


@dataclass(frozen=True)
class TruncationNotice:
    """The facts a notice carries. Line numbers are 1-based; byte offsets are inside a line."""

    file_path: str
    """Where the full content is: ``tool_result/<32 hex>.txt`` (named by a hash of the content,
    so identical outputs share one file) or the source file of ``read_file``."""
    total_lines: int
    """Lines in the full content."""
    start_line: int
    """Line of the full content where the excerpt starts."""
    first_byte: int
    """Byte offset inside ``start_line`` where the excerpt starts (0 unless a read began mid-line)."""
    excerpt_bytes: int
    """Encoded size of the excerpt."""
    next_line: int
    """First line not fully shown: where reading continues."""
    next_byte: int
    """Byte offset inside ``next_line`` where reading continues (0 at a line boundary)."""
    partial_read: bool = False
    """The excerpt is a requested line range that fit, not a cut."""
    message: bool = False
    """What was cut is a user's message, not a tool's output."""

    def render(self) -> str:
        """The notice text, starting with the marker line and ending with a newline."""
        if self.message:
            headline = _HEADLINES["message"]
        elif self.partial_read:
            headline = _HEADLINES["partial"]
        else:
            headline = _HEADLINES["omitted" if self.excerpt_bytes == 0 else "truncated"]
        starts = f"line {self.start_line}"
        if self.first_byte:
            starts += f" byte {self.first_byte}"
        continuation = f"file_path={_one_line(self.file_path)} start_line={self.next_line}"
        if self.next_byte:
            continuation += f" start_byte={self.next_byte}"
        return (
            f"{TRUNCATION_NOTICE_MARKER}\n"
            f"{headline}\n"
            f"The full content is saved to the file and contains {self.total_lines} lines in total.\n"
            f"This excerpt starts at {starts} and covers the next {self.excerpt_bytes} bytes.\n"
            f"If the current content is not enough, call `read_file` with {continuation} "
            "to read more.\n"
        )


def attach_notice(excerpt: str, notice: TruncationNotice) -> str:
    """Join an excerpt and its notice so that :func:`split_notice` recovers both exactly."""
    separator = "\n" if notice.next_byte else ""
    return f"{excerpt}{separator}{notice.render()}"


def split_notice(text: str) -> tuple[str, TruncationNotice] | None:
    """Split text written by :func:`attach_notice` into (excerpt, notice).

    Returns ``None`` when the text does not end with a notice of ours, including text that merely
    mentions the marker (a source file, a log): such text is fresh, not already truncated.
    """
    position = text.rfind(TRUNCATION_NOTICE_MARKER)
    # The marker must start a line (or the text) to be ours.
    if position < 0 or (position > 0 and text[position - 1] != "\n"):
        return None
    match = _NOTICE_RE.match(text, position)
    if match is None:
        return None
    notice = TruncationNotice(
        file_path=match["file_path"],
        total_lines=int(match["total_lines"]),
        start_line=int(match["start_line"]),
        first_byte=int(match["first_byte"] or 0),
        excerpt_bytes=int(match["excerpt_bytes"]),
        next_line=int(match["next_line"]),
        next_byte=int(match["next_byte"] or 0),
        partial_read=match["headline"] == _HEADLINES["partial"],
        message=match["headline"] == _HEADLINES["message"],
    )
    excerpt = text[:position]
    if notice.next_byte:
        if not excerpt.endswith("\n"):
            return None
        excerpt = excerpt[:-1]
    return excerpt, notice


def _one_line(path: str) -> str:
    # A path with a newline would break the notice's line structure; show it escaped.
    return path.replace("\r", "\\r").replace("\n", "\\n")
