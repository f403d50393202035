"""File tools confined to a root, for the demo and agent files: ``list_dir`` and ``grep`` as
plain async functions returning text (``read_file`` is the package's own); each adapter wraps
them as its AgentScope's tools."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

from ..workspace import is_within

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


def make_explorer_functions(root: Path) -> tuple[Callable[..., Coroutine[Any, Any, str]], ...]:
    """``(list_dir, grep)`` over ``root`` as plain async functions returning text."""
    root = root.resolve()

    def resolve(path: str) -> Path | None:
        candidate = (root / path).resolve() if not os.path.isabs(path) else Path(path).resolve()
        return candidate if is_within(candidate, root) else None

    async def list_dir(path: str = ".") -> str:
        """List a directory of the explored project: sub-folders first, then files with sizes.

        Args:
            path (str): Folder relative to the project root.
        """
        folder = resolve(path)
        if folder is None:
            return f"Error: {path} is outside the project"
        if not folder.is_dir():
            return f"Error: {path} is not a directory"
        entries = sorted(folder.iterdir(), key=lambda p: (not p.is_dir(), p.name))
        lines = [
            f"{p.name}/" if p.is_dir() else f"{p.name}  ({p.stat().st_size:,} bytes)"
            for p in entries
            if not p.name.startswith(("__pycache__", "."))
        ]
        return f"{folder.relative_to(root).as_posix() or '.'}: {len(lines)} entries\n" + "\n".join(
            lines
        )

    async def grep(pattern: str, path: str = ".") -> str:
        """Search the project's text files for a regular expression; prints path:line: text.

        Args:
            pattern (str): A Python regular expression.
            path (str): Folder (or file) relative to the project root.
        """
        try:
            regex = re.compile(pattern)
        except re.error as exc:
            return f"Error: invalid pattern: {exc}"
        start = resolve(path)
        if start is None:
            return f"Error: {path} is outside the project"
        files = (
            [start]
            if start.is_file()
            else sorted(p for p in start.rglob("*") if p.suffix in _TEXT_SUFFIXES and p.is_file())
        )
        hits = []
        for file in files:
            try:
                text = file.read_text(encoding="utf-8", errors="replace")
            except OSError:
                continue
            for number, line in enumerate(text.split("\n"), start=1):
                if regex.search(line):
                    hits.append(f"{file.relative_to(root).as_posix()}:{number}: {line.strip()}")
        return f"{len(hits)} match(es) for {pattern!r}\n" + "\n".join(hits)

    return list_dir, grep
