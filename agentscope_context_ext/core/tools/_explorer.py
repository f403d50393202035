"""File tools confined to a root, for the demo and agent files: ``list_dir`` and ``grep`` as
plain async functions returning text (``read_file`` is the package's own); each adapter wraps
them as its AgentScope's tools."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

from ..workspace import BOUNDARY_REFUSAL, ReadBoundary, is_within

_TEXT_SUFFIXES = {
    ".py",
    ".md",
    ".txt",
    ".toml",
    ".yaml",
    ".yml",
    ".json",
    ".cfg",
    ".ini",
    ".rst",
    ".pyi",
}


def make_explorer_functions(
    root: Path, boundary: ReadBoundary | None = None
) -> tuple[Callable[..., Coroutine[Any, Any, str]], ...]:
    """``(list_dir, grep)`` over ``root`` as plain async functions returning text.

    Args:
        root (`Path`): The folder they explore; nothing outside it (symlinks resolved) is
            listed, entered or read.
        boundary (`ReadBoundary | None`): A served session's: the folders inside ``root`` they
            must not list, enter or read (every other user's and session's), as if absent.
    """
    root = root.resolve()

    def inside(path: Path) -> bool:
        return is_within(path, root) and (boundary is None or boundary.shows(path))

    def resolve(path: str) -> Path | str:
        """The folder or file ``path`` names, or why not (one line)."""
        if not isinstance(path, str) or "\x00" in path:
            return f"Error: {path!r} is not a path"
        candidate = (root / path).resolve() if not os.path.isabs(path) else Path(path).resolve()
        if not is_within(candidate, root):
            return f"Error: {path} is outside the project"
        if boundary is not None and not boundary.shows(candidate):
            return f"Error: {path} {BOUNDARY_REFUSAL}"
        return candidate

    async def list_dir(path: str = ".") -> str:
        """List a directory of the explored project: sub-folders first, then files with sizes.

        Args:
            path (str): Folder relative to the project root.
        """
        folder = resolve(path)
        if isinstance(folder, str):
            return folder
        if not os.path.isdir(folder):  # also a name too long, not an exception
            return f"Error: {path} is not a directory"
        try:
            entries = sorted(
                (p for p in folder.iterdir() if inside(p)),
                key=lambda p: (not p.is_dir(), p.name),
            )
        except OSError as exc:
            return f"Error: cannot list {path}: {exc.strerror or exc}"
        lines = [
            line
            for line in map(entry_line, entries)
            if line is not None and not line.startswith(("__pycache__", "."))
        ]
        return f"{folder.relative_to(root).as_posix() or '.'}: {len(lines)} entries\n" + "\n".join(
            lines
        )

    def entry_line(entry: Path) -> str | None:
        try:
            return (
                f"{entry.name}/"
                if entry.is_dir()
                else f"{entry.name}  ({entry.stat().st_size:,} bytes)"
            )
        except OSError:  # a broken link, or gone meanwhile
            return None

    def readable(file: Path) -> bool:
        return is_within(file, root) and (boundary is None or boundary.allows(file))

    def files_under(start: Path) -> list[Path]:
        """The text files under ``start``, never walking into a folder it must not enter (a
        refusal of the start alone would let ``grep`` read a hidden folder from above)."""
        if os.path.isfile(start):
            return [start] if readable(start) else []
        found = []
        for folder, subfolders, names in os.walk(start):  # links to folders are not followed
            here = Path(folder)
            subfolders[:] = sorted(name for name in subfolders if inside(here / name))
            for name in names:
                file = here / name
                if file.suffix in _TEXT_SUFFIXES and readable(file) and file.is_file():
                    found.append(file)
        return sorted(found)

    async def grep(pattern: str, path: str = ".") -> str:
        """Search the project's text files for a regular expression; prints path:line: text.

        Args:
            pattern (str): A Python regular expression.
            path (str): Folder (or file) relative to the project root.
        """
        try:
            regex = re.compile(pattern)
        except (re.error, TypeError) as exc:
            return f"Error: invalid pattern: {exc}"
        start = resolve(path)
        if isinstance(start, str):
            return start
        hits = []
        for file in files_under(start):
            try:
                text = file.read_text(encoding="utf-8", errors="replace")
            except OSError:
                continue
            for number, line in enumerate(text.split("\n"), start=1):
                if regex.search(line):
                    hits.append(f"{file.relative_to(root).as_posix()}:{number}: {line.strip()}")
        return f"{len(hits)} match(es) for {pattern!r}\n" + "\n".join(hits)

    return list_dir, grep
