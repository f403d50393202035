"""``read_dialog`` and ``search_dialog``: the agent's way back into compacted conversation
(design §6.2). The summary's dialog path guide names the files and line ranges; ``read_dialog``
reads them, newest first by default, and renders messages compactly; ``search_dialog`` ranks the
saved history (the index of ``core.search``) and says where to read on. Plain async functions returning
text; each adapter wraps them into its framework's tool type."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable, Coroutine
from typing import Any

from ..messages import Message
from ..rendering import render_message
from ..search import SCOPES, Conversation, HistoryScope, SearchHit, search_history, shown
from ..workspace import DialogStore, portal
from ._read_file import SESSION_ARG
from ._reader import whole_number

__all__ = ["make_dialog_tools", "record_view"]

logger = logging.getLogger("agentscope_context_ext")

_MESSAGE_CHARS = 2000
_MAX_LIMIT = 200


DialogTool = Callable[..., Coroutine[Any, Any, str]]


def make_dialog_tools(
    store: DialogStore, history: HistoryScope | None = None
) -> tuple[DialogTool, DialogTool]:
    """Build ``(read_dialog, search_dialog)`` over ``store``; its codec renders the messages.

    Args:
        store (`DialogStore`): The dialog files.
        history (`HistoryScope | None`): A served session's place among the user's others:
            the ``agent`` and ``user`` scopes, and ``session=`` to read one of them.
    """
    view = store.codec.view

    def read(date: Any, start_line: Any, limit: Any, session: Any = None) -> str:
        source = store
        if session is not None:
            other = history.storage_of(str(session)) if history is not None else None
            if other is None:
                return f"Error: no session {session!r} of this user to read"
            source = DialogStore(other, codec=store.codec)
        try:
            if date is not None and not isinstance(date, str):
                raise ValueError(f"date must be a string like 2026-12-03, got {date!r}")
            limit = max(1, min(whole_number(limit, "limit"), _MAX_LIMIT))
            start = None if start_line is None else whole_number(start_line, "start_line")
            file, records = source.read(date, start, limit)
        except (TypeError, ValueError) as exc:
            return f"Error: {exc}"
        if file is None:
            return "No dialog has been saved yet: nothing was compacted."
        if not records:
            available = ", ".join(source.files()) or "none"
            return f"Error: no messages in {file} at that position (dialog files: {available})"
        total = source.line_count(file)
        lines = [f"{file}, lines {records[0].line}-{records[-1].line} of {total}:"]
        lines += [f"[line {r.line}] {render_message(view(r.msg), _MESSAGE_CHARS)}" for r in records]
        first = records[0].line
        if first > 1:
            earlier = max(1, first - limit)
            lines.append(
                f"(earlier messages: read_dialog(date={file[7:17]!r}, start_line={earlier}, "
                f"limit={first - earlier}{'' if session is None else f', session={session!r}'}))"
            )
        return "\n".join(lines)

    async def read_dialog(date: str = "", start_line: int = 0, limit: int = 50) -> str:
        """Read messages compaction saved to dialog/: the newest file's last messages, or
        forward from a line the summary names.

        Args:
            date (str):
                The file's day, YYYY-MM-DD; empty: the newest.
            start_line (int):
                First line; 0: the last `limit` messages.
            limit (int):
                Messages to return, at most 200.
        """
        return read(date or None, start_line or None, limit)

    async def read_dialog_of_session(
        date: str = "", start_line: int = 0, limit: int = 50, session: str = ""
    ) -> str:
        # A served agent's read_dialog: the same, and ``session`` (its schema only there).
        return read(date or None, start_line or None, limit, session or None)

    read_dialog_of_session.__doc__ = (read_dialog.__doc__ or "").rstrip() + SESSION_ARG
    read_dialog_of_session.__name__ = read_dialog_of_session.__qualname__ = "read_dialog"

    own = Conversation(store.storage, view=record_view(store))
    others: dict[tuple, Conversation] = {}
    lock = threading.Lock()

    def conversations(scope: str) -> list[Conversation]:
        if history is None:
            return [own]
        found = []
        for conversation in history.conversations(scope, own):
            key = (conversation.agent, conversation.session)
            found.append(
                conversation if key == (None, None) else others.setdefault(key, conversation)
            )
        return found

    def search(query: str, limit: int, scope: str) -> str:
        with lock:  # one search at a time per agent: its indexes are caught up in place
            result = search_history(conversations(scope), query, limit)
        where = _WHERE[scope] if history is not None else "this conversation"
        if not result.hits:
            return f"No saved message or output in {where} matches: {shown(query)}"
        head = (
            f"{len(result.hits)} hit(s) in {where}, best first"
            if result.all_terms
            else f"Nothing in {where} holds every word; {len(result.hits)} hit(s) holding some"
        )
        lines = [head + ":"]
        for number, hit in enumerate(result.hits, 1):
            lines.append(f"{number}. [{_place(hit)}] {hit.snippet}")
            lines.append(f"   read on: {_read_on(hit)}")
        return "\n".join(lines)

    async def run(query: Any, limit: Any, scope: Any = "session") -> str:
        try:
            if scope not in SCOPES:
                raise ValueError(f"scope must be one of {', '.join(SCOPES)}, got {scope!r}")
            count = max(1, min(whole_number(limit, "limit"), _MAX_LIMIT))
            return await asyncio.to_thread(search, str(query), count, scope)
        except (TypeError, ValueError) as exc:
            return f"Error: {exc}"
        except Exception as exc:  # noqa: BLE001 - a store that does not answer: one line
            logger.warning("search_dialog failed: %r", exc)
            return f"Error: the history cannot be searched now: {str(exc)[:200]}"

    async def search_dialog(query: str, limit: int = 10) -> str:
        """Search the saved messages and full tool outputs, best first.

        Args:
            query (str):
                Words, "a phrase", prefix*, identifiers.
            limit (int):
                Hits to return, at most 200.
        """
        return await run(query, limit)

    async def search_dialog_in_scope(query: str, limit: int = 10, scope: str = "session") -> str:
        # A served agent's search_dialog: the same, and ``scope`` (its schema only there).
        return await run(query, limit, scope)

    search_dialog_in_scope.__doc__ = (search_dialog.__doc__ or "").rstrip() + SCOPE_ARG
    search_dialog_in_scope.__name__ = search_dialog_in_scope.__qualname__ = "search_dialog"

    # in portals: their workspace calls wait on the loop (design §2.3)
    if history is None:
        return portal(read_dialog), portal(search_dialog)
    return portal(read_dialog_of_session), portal(search_dialog_in_scope)


SCOPE_ARG = """
            scope (str):
                "session" (this conversation), "agent" (yours with this user), "user" (this
                user's with every agent here).
        """

_WHERE = {
    "session": "this conversation",
    "agent": "your conversations with this user",
    "user": "this user's conversations",
}


def _place(hit: SearchHit) -> str:
    where = f"session {hit.session}: " if hit.session else ""
    if hit.kind == "message":
        return f"{where}{hit.file} line {hit.line}, {hit.role or '?'} {hit.timestamp[:19]}".rstrip()
    return f"{where}saved output {hit.file} line {hit.line}"


def _read_on(hit: SearchHit) -> str:
    session = f", session={hit.session!r}" if hit.session else ""
    if hit.kind == "message":
        day = hit.file[len("dialog/") : len("dialog/") + 10]
        return f"read_dialog(date={day!r}, start_line={hit.line}, limit=5{session})"
    at = f", start_byte={hit.start_byte}" if hit.start_byte else ""
    return f"read_file(file_path={hit.file!r}, start_line={hit.line}{at}{session})"


def record_view(store: DialogStore) -> Callable[[dict], Message]:
    """A saved record of ``store`` as its tools show it (its codec's ``decode``, then
    ``view``): what the history index reads (design §6.2)."""
    codec = store.codec
    return lambda record: codec.view(codec.decode(record))
