"""``read_dialog`` and ``search_dialog``: the agent's way back into compacted conversation
(design §6.2). The summary's dialog path guide names the files and line ranges; these tools read
them, newest first by default, and render messages compactly. Plain async functions returning
text; each adapter wraps them into its framework's tool type."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

from ..rendering import render_message
from ..workspace import DialogStore
from ._reader import whole_number

__all__ = ["make_dialog_tools"]

_MESSAGE_CHARS = 2000
_MAX_LIMIT = 200


DialogTool = Callable[..., Coroutine[Any, Any, str]]


def make_dialog_tools(store: DialogStore) -> tuple[DialogTool, DialogTool]:
    """Build ``(read_dialog, search_dialog)`` over ``store``; its codec renders the messages.

    Args:
        store (`DialogStore`): The dialog files.
    """
    view = store.codec.view

    async def read_dialog(
        date: str | None = None, start_line: int | None = None, limit: int = 50
    ) -> str:
        """Read messages compaction saved to dialog/YYYY-MM-DD.jsonl: by default the newest
        file's last messages; start_line reads forward from a line the summary names.

        Args:
            date (str | None):
                The file's day, YYYY-MM-DD; omit for the newest.
            start_line (int | None):
                First line to read; omit for the last `limit` lines.
            limit (int):
                Messages to return (at most 200).
        """
        try:
            if date is not None and not isinstance(date, str):
                raise ValueError(f"date must be a string like 2026-12-03, got {date!r}")
            limit = max(1, min(whole_number(limit, "limit"), _MAX_LIMIT))
            start = None if start_line is None else whole_number(start_line, "start_line")
            file, records = store.read(date, start, limit)
        except (TypeError, ValueError) as exc:
            return f"Error: {exc}"
        if file is None:
            return "No dialog has been saved yet: nothing was compacted."
        if not records:
            available = ", ".join(store.files()) or "none"
            return f"Error: no messages in {file} at that position (dialog files: {available})"
        total = store.line_count(file)
        lines = [f"{file}, lines {records[0].line}-{records[-1].line} of {total}:"]
        lines += [f"[line {r.line}] {render_message(view(r.msg), _MESSAGE_CHARS)}" for r in records]
        first = records[0].line
        if first > 1:
            earlier = max(1, first - limit)
            lines.append(
                f"(earlier messages: read_dialog(date={file[7:17]!r}, start_line={earlier}, limit={first - earlier}))"
            )
        return "\n".join(lines)

    async def search_dialog(query: str, limit: int = 10) -> str:
        """Find compacted messages (saved in dialog/) holding every word of query, newest
        first.

        Args:
            query (str):
                Words to find (case-insensitive).
            limit (int):
                Messages to return (at most 200).
        """
        try:
            found = store.search(str(query), max(1, min(whole_number(limit, "limit"), _MAX_LIMIT)))
        except (TypeError, ValueError) as exc:
            return f"Error: {exc}"
        if not found:
            return f"No saved message contains all of: {query}"
        lines = [f"{len(found)} message(s), newest first:"]
        lines += [
            f"[{r.file} line {r.line}] {render_message(view(r.msg), _MESSAGE_CHARS)}" for r in found
        ]
        return "\n".join(lines)

    return read_dialog, search_dialog
