"""``read_file`` as a tool function: plain async, returning text (each adapter wraps it)."""

from __future__ import annotations

import os
from collections.abc import Callable, Coroutine, Sequence
from pathlib import Path
from typing import Any

from ..config import TruncationConfig
from ..workspace import TOOL_RESULT_DIRNAME, LocalStorage, Storage
from ._reader import FileReader, ReadFileError, resolve_allowed_roots

__all__ = ["make_read_file"]


def make_read_file(
    workspace: str | os.PathLike[str] | Storage,
    truncation: TruncationConfig | None = None,
    allowed_roots: Sequence[str | os.PathLike[str]] | None = None,
    max_bytes_cap: int | None = None,
    held: Callable[[str], bytes | None] | None = None,
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

    Returns:
        An async function named ``read_file`` returning the text (or a one-line ``Error: ...``).
    """
    if isinstance(workspace, LocalStorage):
        workspace = workspace.root
    if isinstance(workspace, Storage):
        # Saved results come from the server; files from the allowed roots.
        roots = resolve_allowed_roots(os.getcwd(), allowed_roots)[1:] or [Path.cwd()]
        reader = FileReader(roots, truncation, max_bytes_cap, storage=workspace, held=held)
    else:
        reader = FileReader(
            resolve_allowed_roots(workspace, allowed_roots),
            truncation,
            max_bytes_cap,
            text_dirs=[Path(workspace).absolute() / TOOL_RESULT_DIRNAME],
            held=held,
        )

    async def read_file(
        file_path: str,
        start_line: int = 1,
        end_line: int | None = None,
        start_byte: int = 0,
    ) -> str:
        """Read lines of a text file: the saved output a truncation notice names (pass the
        start_line and start_byte it gives), or a file of the project.

        Args:
            file_path (str):
                The file_path given in a truncation notice, or a project file's path.
            start_line (int):
                First line, 1-based.
            end_line (int | None):
                Last line (inclusive); omit to read to the end.
            start_byte (int):
                Byte offset in start_line, when a notice gives one.
        """
        try:
            return reader.read(file_path, start_line, end_line, start_byte)
        except ReadFileError as exc:
            return f"Error: {exc}"

    return read_file
