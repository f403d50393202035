"""``read_file``: the tool that makes every truncation reversible (design §3.4, 6.1).

A truncation notice says ``call read_file with file_path=X start_line=N [start_byte=K]``; this
tool continues exactly there. Its own output is truncated at stage one too, but the notice
points at the source file itself, so no copy is ever saved. It reads only inside the allowed
roots (symlinks resolved), and every problem (missing, binary, directory, outside the roots,
bad range) is a one-line error string the agent can read, never an exception.
"""

from __future__ import annotations

import io
import os
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ..config import TruncationConfig
from ..truncation import TruncationNotice, attach_notice, truncate_fresh
from ..workspace import BOUNDARY_REFUSAL, ReadBoundary, is_within

__all__ = ["FileReader", "ReadFileError", "resolve_allowed_roots", "whole_number"]

_SCAN_CHUNK = 1 << 20
_BINARY_SNIFF_BYTES = 8192


_SAVED_RESULT_RE = re.compile(r"(?:^|/)tool_result/[0-9a-f]{32}\.\w+$")
_SAVED_MESSAGE_RE = re.compile(r"message/[0-9a-f]{32}\.txt")


class ReadFileError(ValueError):
    """A read the agent asked for cannot be done; the message is shown to the agent."""


def resolve_allowed_roots(
    workspace: str | os.PathLike[str],
    allowed_roots: Sequence[str | os.PathLike[str]] | None = None,
) -> list[Path]:
    """The roots ``read_file`` may read: the workspace first, then ``allowed_roots``.

    An empty ``allowed_roots`` means the current directory. The workspace is always included,
    because truncation notices point into it.
    """
    roots = [Path(workspace).absolute()]
    for root in allowed_roots or [os.getcwd()]:
        path = Path(root).expanduser().absolute()
        if path not in roots:
            roots.append(path)
    return roots


class FileReader:
    """Reads line ranges of text files inside allowed roots, truncated at stage one.

    Args:
        roots (`Sequence[Path]`): Allowed roots; relative paths are tried against each in order.
        truncation (`TruncationConfig`): Limits (Markdown files get the Markdown ones).
        max_bytes_cap (`int | None`): An upper bound on any excerpt (the window share).
        text_dirs (`Sequence[Path]`): Folders whose files are text whatever bytes they hold
            (saved tool results may legitimately contain NUL bytes).
        storage (`Storage | None`): A workspace that is not a folder (Redis), whose saved
            results and messages are read from it.
        held (`Callable | None`): ``ToolResultStore.held``.
        boundary (`ReadBoundary | None`): A served session's: what inside the roots it may not
            read (the service's other users' and sessions' folders).
    """

    def __init__(
        self,
        roots: Sequence[Path],
        truncation: TruncationConfig | None = None,
        max_bytes_cap: int | None = None,
        text_dirs: Sequence[Path] = (),
        storage: Any = None,
        held: Callable[[str], bytes | None] | None = None,
        boundary: ReadBoundary | None = None,
    ) -> None:
        if not roots:
            raise ValueError("read_file needs at least one allowed root")
        self.storage = storage
        """A workspace :class:`Storage` that is not a folder: its ``tool_result/`` paths are
        read from it (the agent sees the same text as from a local workspace)."""
        self.held = held
        """``ToolResultStore.held``: a result that could not be saved yet, read from memory."""
        self.roots = list(roots)
        self.boundary = boundary
        self.text_dirs = list(text_dirs)
        self.truncation = truncation or TruncationConfig()
        self.max_bytes_cap = max_bytes_cap

    def limit_for(self, file_path: str) -> int:
        """Stage-one byte budget for ``file_path``."""
        first, _ = self.truncation.limits_for(file_path)
        return min(first, self.max_bytes_cap) if self.max_bytes_cap else first

    def resolve(self, file_path: str) -> Path:
        """The allowed file ``file_path`` names, or :class:`ReadFileError`."""
        if not isinstance(file_path, str) or not file_path.strip():
            raise ReadFileError("file_path must be a non-empty path")
        if "\x00" in file_path:
            raise ReadFileError("file_path must not contain NUL characters")
        raw = Path(file_path.strip())
        if raw.is_absolute():
            candidate = raw
        else:
            candidates = [root / raw for root in self.roots]
            # a file there only where this session may not look is as good as absent: which
            # answer it gets must not tell whether another session has it
            seen = self.boundary.allows if self.boundary is not None else lambda _: True
            found = (c for c in candidates if os.path.lexists(c) and seen(c))
            candidate = next(found, candidates[0])
        if not any(is_within(candidate, root) for root in self.roots):
            roots = ", ".join(str(root) for root in self.roots)
            raise ReadFileError(
                f"{file_path} is outside the directories read_file may read ({roots})",
            )
        # before looking whether it exists: a refusal must not tell what is there
        if self.boundary is not None and not self.boundary.allows(candidate):
            raise ReadFileError(f"{file_path} {BOUNDARY_REFUSAL}")
        if not os.path.exists(candidate):
            if _SAVED_RESULT_RE.search(file_path.replace("\\", "/")):
                raise _expired(file_path)
            raise ReadFileError(f"file not found: {file_path}")
        if os.path.isdir(candidate):
            raise ReadFileError(f"{file_path} is a directory, not a file")
        if not os.path.isfile(candidate):
            raise ReadFileError(f"{file_path} is not a regular file")
        # the file checked, not whatever a link swapped in meanwhile points to
        return Path(os.path.realpath(candidate))

    def _stored(self, file_path: str) -> io.BytesIO | None:
        """A saved tool result or user text of a workspace that is not a folder (Redis), read
        whole; ``None`` for a path on disk."""
        if not isinstance(file_path, str):
            return None
        key = file_path.strip().replace("\\", "/")
        if self.held is not None and _SAVED_RESULT_RE.search(key):
            held = self.held(key[key.rfind("tool_result/") :])
            if held is not None:
                return io.BytesIO(held)
        if self.storage is None:
            return None
        if _SAVED_MESSAGE_RE.fullmatch(key):
            data = self._read_stored(key, file_path)
            if data is None:
                raise ReadFileError(f"file not found: {file_path}")
            return io.BytesIO(data)
        if not _SAVED_RESULT_RE.fullmatch(key) or not key.startswith("tool_result/"):
            return None
        data = self._read_stored(key, file_path)
        if data is None:
            raise _expired(file_path)
        return io.BytesIO(data)

    def _read_stored(self, key: str, file_path: str) -> bytes | None:
        try:
            return self.storage.read(key)
        except ValueError as exc:  # a key the store refuses (a link in its folder)
            raise ReadFileError(f"{file_path}: {exc}") from None

    def read(
        self,
        file_path: str,
        start_line: int = 1,
        end_line: int | None = None,
        start_byte: int = 0,
    ) -> str:
        """Lines ``start_line``..``end_line`` of ``file_path`` from byte ``start_byte`` of the first.

        Returns:
            `str`: The text, with a truncation notice when it was cut or when it stops before
            the end of the file.

        Raises:
            `ReadFileError`: With a message for the agent.
        """
        start_line, end_line, start_byte = _check_range(start_line, end_line, start_byte)
        stored = self._stored(file_path)
        path = None if stored is not None else self.resolve(file_path)
        try:
            with stored if stored is not None else open(path, "rb") as handle:
                known_text = stored is not None or any(
                    is_within(path, folder) for folder in self.text_dirs
                )
                if not known_text and b"\x00" in handle.read(_BINARY_SNIFF_BYTES):
                    raise ReadFileError(
                        f"{file_path} looks like a binary file (it contains NUL bytes); "
                        "read_file reads text files only",
                    )
                handle.seek(0)
                wanted = [start_line, start_line + 1]
                if end_line is not None:
                    wanted.append(end_line + 1)
                starts, total_lines, size = _scan_lines(handle, wanted)
                if size == 0:
                    return "(the file is empty)"
                if start_line > total_lines:
                    raise ReadFileError(
                        f"start_line {start_line} is past the end of {file_path} "
                        f"({total_lines} lines)",
                    )
                line_begin = starts[start_line]
                line_end = starts.get(start_line + 1, size)
                if line_begin + start_byte > line_end:
                    raise ReadFileError(
                        f"start_byte {start_byte} is past the end of line {start_line} "
                        f"({line_end - line_begin} bytes)",
                    )
                begin = line_begin + start_byte
                end = size
                if end_line is not None and end_line < total_lines:
                    end = starts[end_line + 1]
                limit = self.limit_for(file_path)
                handle.seek(begin)
                # A few bytes past the limit are enough for the cut to see where it falls.
                data = handle.read(min(end - begin, limit + 8))
        except ReadFileError:
            raise
        except OSError as exc:
            raise ReadFileError(f"cannot read {file_path}: {exc.strerror or exc}") from None
        text = data.decode("utf-8", errors="surrogateescape")
        if end - begin > limit:
            text = truncate_fresh(
                text,
                max_bytes=limit,
                file_path=file_path,
                start_line=start_line,
                total_lines=total_lines,
                start_byte=start_byte,
            )
        elif end < size:
            notice = TruncationNotice(
                file_path=file_path,
                total_lines=total_lines,
                start_line=start_line,
                first_byte=start_byte,
                excerpt_bytes=len(data),
                next_line=(end_line or total_lines) + 1,
                next_byte=0,
                partial_read=True,
            )
            text = attach_notice(text, notice)
        # Bytes that are not UTF-8 were kept as surrogates so offsets stay exact; the agent
        # gets replacement characters instead.
        return text.encode("utf-8", errors="surrogateescape").decode("utf-8", errors="replace")


def _expired(file_path: str) -> ReadFileError:
    """The error for a saved tool result that is gone (the TTL cleanup removed it)."""
    return ReadFileError(
        f"{file_path} has expired: saved tool results are deleted after the workspace's "
        "ttl_days once no live message or summary names them; the excerpt you have is what "
        "remains"
    )


def whole_number(value: Any, name: str) -> int:
    """``value`` as an int: ints, integral floats (``3.0``) and digit strings (``"3"``); anything
    else (``1.7``, ``inf``, ``nan``, ``True``, ``"x"``) is a :class:`ReadFileError` naming it."""
    if isinstance(value, bool):
        raise ReadFileError(f"{name} must be a whole number, got {value!r}")
    if isinstance(value, float):
        if not value.is_integer():  # also inf and nan
            raise ReadFileError(f"{name} must be a whole number, got {value!r}")
        return int(value)
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().lstrip("+-").isdigit():
        return int(value.strip())
    raise ReadFileError(f"{name} must be a whole number, got {value!r}")


def _check_range(start_line: Any, end_line: Any, start_byte: Any) -> tuple[int, int | None, int]:
    start_line = whole_number(start_line, "start_line")
    end_line = None if end_line is None else whole_number(end_line, "end_line")
    start_byte = whole_number(start_byte or 0, "start_byte")
    if start_line < 1:
        raise ReadFileError(f"start_line must be at least 1, got {start_line}")
    if end_line is not None and end_line < start_line:
        raise ReadFileError(f"end_line ({end_line}) must not be before start_line ({start_line})")
    if start_byte < 0:
        raise ReadFileError(f"start_byte must not be negative, got {start_byte}")
    return start_line, end_line, start_byte


def _scan_lines(handle, wanted: Sequence[int]) -> tuple[dict[int, int], int, int]:
    """One pass over a binary file: byte offsets where the ``wanted`` lines start, line count, size."""
    targets = sorted(set(wanted))
    starts: dict[int, int] = {1: 0} if 1 in targets else {}
    pending = [t for t in targets if t > 1]
    line = 1
    position = 0
    last = b""
    while chunk := handle.read(_SCAN_CHUNK):
        newlines = chunk.count(b"\n")
        if pending and line + newlines >= pending[0]:
            index = chunk.find(b"\n")
            while index != -1:
                line += 1
                if pending and line == pending[0]:
                    starts[line] = position + index + 1
                    pending.pop(0)
                index = chunk.find(b"\n", index + 1)
        else:
            line += newlines
        position += len(chunk)
        last = chunk[-1:]
    newline_count = line - 1
    total_lines = newline_count + (1 if last and last != b"\n" else 0)
    return starts, total_lines, position
