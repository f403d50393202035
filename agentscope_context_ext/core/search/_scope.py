"""Which conversations a search covers, and the search over them (design §6.2).

- ``session`` (the default): this conversation's dialog and saved outputs.
- ``agent``: every conversation this user had with this agent.
- ``user``: every conversation this user had with any agent whose files are in the same place
  (a workspace shared by a user's agents, or one store).

They differ only for a served agent (design §11.3), whose sessions are written down when they
start, with their agent and user, in ``context_ext/sessions.jsonl`` at the root of the place
(the agent's 2.x workspace folder, or the store). A session never sees another user's
conversations, whatever the scope: a session is its first writer's. An agent that is not
served keeps one conversation in its workspace, and every scope is that one.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from typing import Literal

from ..workspace import Storage, SubStorage
from ._index import HistoryIndex, IndexedHit
from ._text import Term, parse_query

__all__ = [
    "SCOPES",
    "Conversation",
    "HistoryScope",
    "Scope",
    "SearchHit",
    "SearchResult",
    "search_history",
]

logger = logging.getLogger("agentscope_context_ext")

Scope = Literal["session", "agent", "user"]
SCOPES: tuple[str, ...] = ("session", "agent", "user")
REGISTRY_KEY = "context_ext/sessions.jsonl"
"""The log of a place's served sessions: one ``{"agent", "user", "session", "folder"}`` each."""


@dataclass
class Conversation:
    """One conversation's files, searchable."""

    storage: Storage
    session: str | None = None
    """Its session id (``None``: the one asking, or an agent that is not served)."""
    agent: str | None = None
    index: HistoryIndex | None = field(default=None, repr=False)

    def history(self) -> HistoryIndex:
        """Its index (made on first use)."""
        if self.index is None:
            self.index = HistoryIndex(self.storage)
        return self.index


@dataclass(frozen=True)
class SearchHit:
    """One hit: where it is, how it reads, and in which conversation."""

    kind: str
    file: str
    line: int
    snippet: str
    score: float
    role: str = ""
    timestamp: str = ""
    session: str | None = None
    """The session it is in; ``None``: the conversation that asked."""
    agent: str | None = None

    def as_dict(self) -> dict:
        return {
            "kind": self.kind,
            "file": self.file,
            "line": self.line,
            "session": self.session,
            "agent": self.agent,
            "role": self.role,
            "timestamp": self.timestamp,
            "score": round(self.score, 4),
            "snippet": self.snippet,
        }


@dataclass(frozen=True)
class SearchResult:
    hits: list[SearchHit]
    all_terms: bool
    """Every hit holds every term; ``False``: none did, these hold some of them."""
    terms: list[Term]
    searched: int
    """Conversations searched."""


def search_history(conversations: list[Conversation], query: str, limit: int = 10) -> SearchResult:
    """The best ``limit`` hits for ``query`` in ``conversations``: documents holding every term
    first (BM25), else those holding some.

    Raises:
        `ValueError`: The query has nothing to search for (no letters or digits), or ``limit``
            is not positive.
    """
    if limit < 1:
        raise ValueError(f"limit must be at least 1, got {limit}")
    terms = parse_query(str(query))
    if not terms:
        raise ValueError(f"the query has no words to search for: {str(query)[:80]!r}")
    for all_terms in (True, False):
        hits: list[SearchHit] = []
        for conversation in conversations:
            found: list[IndexedHit] = conversation.history().search(terms, limit, all_terms)
            hits += [
                SearchHit(
                    kind=h.kind,
                    file=h.file,
                    line=h.line,
                    snippet=h.snippet,
                    score=h.score,
                    role=h.role,
                    timestamp=h.timestamp,
                    session=conversation.session,
                    agent=conversation.agent,
                )
                for h in found
            ]
        if hits or len(terms) == 1:
            hits.sort(key=lambda h: h.score)
            return SearchResult(hits[:limit], all_terms, terms, len(conversations))
    return SearchResult([], True, terms, len(conversations))


@dataclass
class HistoryScope:
    """Where a served session's siblings are: the place's root and who is asking.

    Args:
        root (`Storage`): The place the sessions' folders are in (the 2.x workspace folder, or
            the store), holding :data:`REGISTRY_KEY`.
        agent_id, user_id, session_id (`str`): As ``create_app`` names them.
        folder (`str`): This session's folder under ``root``.
    """

    root: Storage
    agent_id: str
    user_id: str
    session_id: str
    folder: str

    def register(self) -> None:
        """Write this session down (once: a session already listed is left as it is)."""
        mine = self._entry()
        if any(
            e.get("session") == self.session_id and e.get("agent") == self.agent_id
            for e in self.sessions()
        ):
            return
        self.root.append_lines(REGISTRY_KEY, [json.dumps(mine).encode("utf-8")])

    def _entry(self) -> dict:
        return {
            "agent": self.agent_id,
            "user": self.user_id,
            "session": self.session_id,
            "folder": self.folder,
        }

    def sessions(self) -> list[dict]:
        """The registered sessions, each once (its first line: a session is its first
        writer's)."""
        seen: dict[tuple, dict] = {}
        for _, raw in self.root.lines(REGISTRY_KEY):
            try:
                entry = json.loads(raw)
            except ValueError:
                continue
            if not isinstance(entry, dict) or not all(
                isinstance(entry.get(k), str) for k in ("agent", "user", "session", "folder")
            ):
                continue
            seen.setdefault((entry["agent"], entry["session"]), entry)
        return list(seen.values())

    def conversations(self, scope: str, own: Conversation) -> list[Conversation]:
        """The conversations ``scope`` covers, the asking one first."""
        if scope == "session":
            return [own]
        found = [own]
        for entry in self.sessions():
            if entry["user"] != self.user_id:
                continue  # never another user's
            if entry["agent"] == self.agent_id and entry["session"] == self.session_id:
                continue
            if scope == "agent" and entry["agent"] != self.agent_id:
                continue
            try:
                storage = SubStorage(self.root, entry["folder"])
            except ValueError:
                continue
            found.append(Conversation(storage, entry["session"], entry["agent"]))
        return found

    def has_others(self) -> bool:
        """Whether this user has other sessions here (any agent)."""
        try:
            return len(self.conversations("user", Conversation(self.root))) > 1
        except Exception:  # noqa: BLE001 - a store that does not answer: nothing to offer
            return False

    def storage_of(self, session: str, agent: str | None = None) -> Storage | None:
        """The folder of ``session`` if this user may read it (one of the user's own)."""
        for entry in self.sessions():
            if (
                entry["session"] == session
                and entry["user"] == self.user_id
                and (agent is None or entry["agent"] == agent)
            ):
                try:
                    return SubStorage(self.root, entry["folder"])
                except ValueError:
                    return None
        return None
