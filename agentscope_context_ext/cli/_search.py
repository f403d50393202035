"""``agentscope-context search WORKSPACE QUERY``: ranked search of saved history (design §6.2).

WORKSPACE is one conversation's workspace (a folder with ``dialog/``, or a ``redis://`` URL),
a served agent's place (its 2.x workspace folder, or a store: they list their sessions in
``context_ext/sessions.jsonl``), or a folder of served agents' workspaces (``serve
--workspaces``). The operator sees every session there; ``--scope`` with ``--agent``,
``--user`` or ``--session`` narrows it.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from ..core.messages import Message
from ..core.search import (
    REGISTRY_KEY,
    Conversation,
    HistoryIndex,
    HistoryScope,
    SearchHit,
    search_history,
    shown,
)
from ..core.tools import record_view
from ..core.workspace import (
    DIALOG_DIRNAME,
    LocalStorage,
    Storage,
    SubStorage,
    is_storage_url,
    open_storage,
)

__all__ = ["SearchError", "search_workspace"]

CLI_SCOPES = ("all", "session", "agent", "user")
MAX_LIMIT = 10_000
_CONTROL_RE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


class SearchError(ValueError):
    """A search that cannot be run as asked (the command line's exit code 2)."""


@dataclass
class _Found:
    conversation: Conversation
    folder: str
    """Where it is, for the reader: a path under WORKSPACE (or ``""`` for WORKSPACE itself)."""
    user: str | None = None


def search_workspace(
    workspace: str,
    query: str,
    *,
    scope: str = "all",
    agent: str | None = None,
    user: str | None = None,
    session: str | None = None,
    limit: int = 10,
    as_json: bool = False,
    rebuild: bool = False,
    stream: TextIO | None = None,
    progress: TextIO | None = None,
) -> list[SearchHit]:
    """Print the best ``limit`` hits of ``query`` in ``workspace`` (see the module's text);
    return them.

    Raises:
        `SearchError`: A scope that needs ``--agent``/``--user``/``--session`` without it, a
            WORKSPACE with nothing to search, a query with no words, a limit below 1.
    """
    out = stream or sys.stdout
    err = progress or sys.stderr
    if scope not in CLI_SCOPES:
        raise SearchError(f"--scope must be one of {', '.join(CLI_SCOPES)}, got {scope!r}")
    if not 1 <= limit <= MAX_LIMIT:
        raise SearchError(f"--limit must be between 1 and {MAX_LIMIT:,}, got {limit}")
    needed = {"session": session, "agent": agent, "user": user}.get(scope, "")
    if needed is None:
        raise SearchError(f"--scope {scope} needs --{scope}")
    found = _conversations(workspace)
    chosen = [
        f
        for f in found
        if (agent is None or f.conversation.agent == agent)
        and (user is None or f.user == user)
        and (session is None or f.conversation.session == session)
    ]
    if not chosen:
        raise SearchError(
            f"{workspace}: no conversation matches"
            + "".join(
                f" --{name} {value}"
                for name, value in (("agent", agent), ("user", user), ("session", session))
                if value is not None
            )
        )
    counted = [0]

    def tell(added: int) -> None:
        before, counted[0] = counted[0], counted[0] + added
        if before // 10_000 != counted[0] // 10_000:
            print(f"indexing: {counted[0]:,} message(s) and output(s)...", file=err, flush=True)

    view = _installed_view(chosen[0].conversation.storage)
    for item in chosen:
        conversation = item.conversation
        conversation.view = view
        try:
            conversation.index = HistoryIndex(conversation.storage, progress=tell, view=view)
        except ValueError as exc:  # ACE_SEARCH_ENGINE naming no engine (or one not installed)
            raise SearchError(str(exc)) from None
        if rebuild:
            item.conversation.index.rebuild()
    try:
        result = search_history([f.conversation for f in chosen], query, limit)
    except ValueError as exc:
        raise SearchError(str(exc)) from None
    if as_json:
        rows = []
        for hit in result.hits:
            where = chosen[hit.where]
            rows.append({**hit.as_dict(), "user": where.user, "path": _path(where, hit)})
        print(json.dumps({"query": query, "all_terms": result.all_terms, "hits": rows}), file=out)
        return result.hits
    searched = f"{len(chosen)} conversation(s)" if len(chosen) > 1 else "1 conversation"
    if not result.hits:
        print(f"nothing in {searched} matches: {shown(query)}", file=out)
        return []
    head = "best first" if result.all_terms else "none holds every word; these hold some"
    print(f"{len(result.hits)} hit(s) in {searched}, {head}:", file=out)
    for number, hit in enumerate(result.hits, 1):
        where = chosen[hit.where]
        who = (
            f"session {hit.session} (agent {hit.agent}, user {where.user}) " if hit.session else ""
        )
        said = f" [{hit.role} {hit.timestamp[:19]}]".rstrip() if hit.kind == "message" else ""
        column = f" (byte {hit.start_byte:,} of the line)" if hit.start_byte else ""
        print(_plain(f"{number}. {who}{_path(where, hit)}:{hit.line}{column}{said}"), file=out)
        print(_plain(f"   {hit.snippet}"), file=out)
    return result.hits


def _plain(line: str) -> str:
    """``line`` without control characters: saved text never drives the terminal."""
    return _CONTROL_RE.sub("?", line)


def _path(where: _Found, hit: SearchHit) -> str:
    return f"{where.folder}/{hit.file}" if where.folder else hit.file


def _conversations(workspace: str) -> list[_Found]:
    """Every conversation WORKSPACE holds (see the module's text)."""
    if not is_storage_url(workspace) and not Path(workspace).is_dir():
        raise SearchError(f"{workspace}: not a workspace directory")
    storage = open_storage(workspace)
    places = [("", storage)]
    if isinstance(storage, LocalStorage) and not _registered(storage) and not _own(storage):
        # a folder of agents' workspaces (serve --workspaces): each of them
        places = [
            (child.name, LocalStorage(child))
            for child in sorted(Path(workspace).iterdir())
            if child.is_dir() and (child / REGISTRY_KEY).is_file()
        ]
    found: list[_Found] = []
    for prefix, place in places:
        entries = HistoryScope(place, "", "", "", "").sessions()  # none: no list
        for entry in entries:
            sub = SubStorage(place, entry["folder"])
            folder = f"{prefix}/{entry['folder']}" if prefix else entry["folder"]
            found.append(
                _Found(Conversation(sub, entry["session"], entry["agent"]), folder, entry["user"])
            )
        if not entries and _own(place):
            found.append(_Found(Conversation(place), prefix))
    if not found:
        raise SearchError(
            f"{workspace}: no saved history here (no dialog/ or tool_result/, and no served "
            f"sessions listed in {REGISTRY_KEY})"
        )
    return found


def _registered(storage: Storage) -> bool:
    return storage.line_count(REGISTRY_KEY) > 0


def _own(storage: Storage) -> bool:
    """Whether ``storage`` is one conversation's workspace (it has saved history)."""
    return bool(storage.names(DIALOG_DIRNAME) or storage.names("tool_result"))


def _installed_view(storage: Storage) -> Callable[[dict], Message]:
    """The installed AgentScope's view of a saved dialog record, imported at the first record
    to index: a search whose index is up to date does not pay seconds for AgentScope."""
    views: list[Callable[[dict], Message]] = []

    def view(record: dict) -> Message:
        if not views:
            from ..adapter import installed

            views.append(record_view(installed.open_dialog(storage)))
        return views[0](record)

    return view
