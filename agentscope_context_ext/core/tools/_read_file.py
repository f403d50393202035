"""``read_file`` as a tool function: plain async, returning text (each adapter wraps it)."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Coroutine, Sequence
from pathlib import Path
from typing import Any

from ..config import TruncationConfig
from ..workspace import TOOL_RESULT_DIRNAME, LocalStorage, ReadBoundary, Storage, portal
from ._reader import FileReader, ReadFileError, resolve_allowed_roots

__all__ = ["make_read_file"]

_SAVED_RE = re.compile(r"(?:tool_result|message)/[0-9a-f]{32}\.txt")


def make_read_file(
    workspace: str | os.PathLike[str] | Storage,
    truncation: TruncationConfig | None = None,
    allowed_roots: Sequence[str | os.PathLike[str]] | None = None,
    max_bytes_cap: int | None = None,
    held: Callable[[str], bytes | None] | None = None,
    sessions: Callable[[str], Storage | None] | None = None,
    boundary: ReadBoundary | None = None,
) -> Callable[..., Coroutine[Any, Any, str]]:
    """The ``read_file`` tool: reads inside the workspace and ``allowed_roots``.

    Args:
        workspace (`str | os.PathLike | Storage`): The workspace (always readable: notices
            point into it): a folder, or a :class:`Storage` (Redis) whose saved results it reads.
        truncation (`TruncationConfig | None`): Byte limits; defaults to the documented ones.
        allowed_roots (`Sequence[str] | None`): Extra readable roots; empty or ``None`` means
            the current directory.
        max_bytes_cap (`int | None`): Upper bound on one excerpt, e.g. the window share.
        held (`Callable | None`): ``ToolResultStore.held``: saved results still held in memory
            (a write failed) are read from there.
        sessions (`Callable | None`): ``HistoryScope.storage_of``: the folder of another of the
            user's sessions, whose saved outputs ``read_file(..., session=...)`` reads.
        boundary (`ReadBoundary | None`): A served session's: the folders inside the roots it
            may not read (every other user's and session's), refused in one line.

    Returns:
        An async function named ``read_file`` returning the text (or a one-line ``Error: ...``).
    """
    if isinstance(workspace, LocalStorage):
        workspace = workspace.root
    if isinstance(workspace, Storage):
        # Saved results come from the server; files from the allowed roots.
        roots = resolve_allowed_roots(os.getcwd(), allowed_roots)[1:] or [Path.cwd()]
        reader = FileReader(
            roots, truncation, max_bytes_cap, storage=workspace, held=held, boundary=boundary
        )
    else:
        reader = FileReader(
            resolve_allowed_roots(workspace, allowed_roots),
            truncation,
            max_bytes_cap,
            text_dirs=[Path(workspace).absolute() / TOOL_RESULT_DIRNAME],
            held=held,
            boundary=boundary,
        )

    def reader_of(session: str) -> FileReader:
        storage = sessions(session) if sessions is not None else None
        if storage is None:
            raise ReadFileError(f"no session {session!r} of this user to read")
        return FileReader([Path.cwd()], truncation, max_bytes_cap, storage=storage)

    def read(file_path, start_line, end_line, start_byte, session=None) -> str:
        try:
            if session is None:
                return reader.read(file_path, start_line, end_line, start_byte)
            if not isinstance(file_path, str) or not _SAVED_RE.fullmatch(file_path.strip()):
                raise ReadFileError(
                    "only a saved output (tool_result/<hash>.txt or message/<hash>.txt) of "
                    "another session can be read"
                )
            return reader_of(str(session)).read(file_path.strip(), start_line, end_line, start_byte)
        except ReadFileError as exc:
            return f"Error: {exc}"

    async def read_file(
        file_path: str,
        start_line: int = 1,
        end_line: int = 0,
        start_byte: int = 0,
    ) -> str:
        """Read a text file: an output a truncation notice saved (give its start_line and
        start_byte), or a project file.

        Args:
            file_path (str):
                The file_path given in a truncation notice, or a project file.
            start_line (int):
                First line, 1-based.
            end_line (int):
                Last line; 0 reads to the end.
            start_byte (int):
                Byte offset in start_line, from a notice.
        """
        return read(file_path, start_line, end_line or None, start_byte)

    if sessions is None:
        return portal(read_file)  # its workspace calls wait on the loop (design §2.3)

    async def read_file_of_session(
        file_path: str,
        start_line: int = 1,
        end_line: int = 0,
        start_byte: int = 0,
        session: str = "",
    ) -> str:
        # A served agent's read_file: the same, and ``session`` (its schema only there).
        return read(file_path, start_line, end_line or None, start_byte, session or None)

    read_file_of_session.__doc__ = (read_file.__doc__ or "").rstrip() + SESSION_ARG
    read_file_of_session.__name__ = read_file_of_session.__qualname__ = "read_file"
    return portal(read_file_of_session)


SESSION_ARG = """
            session (str):
                Another of your sessions, as search_dialog names it; empty: this one.
        """
