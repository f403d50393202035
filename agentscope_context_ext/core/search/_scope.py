"""Which conversations a search covers, and the search over them (design §6.2).

- ``session`` (the default): this conversation's dialog and saved outputs.
- ``agent``: every conversation this user had with this agent.
- ``user``: every conversation this user had with any agent whose files are in the same place
  (a workspace shared by a user's agents, or one store).

They differ only for a served agent (design §11.3), whose sessions are written down when they
start, with their agent and user, in ``context_ext/sessions.jsonl`` at the root of the place
(the agent's 2.x workspace folder, or the store). A session never sees another user's
conversations, whatever the scope: a session is its first writer's. The list is not trusted
further than it can be: a line's folder must be where its session's files are (never another
folder, a link, a path outside), and in a 2.x workspace folder, which the agent's own tools can
write, each line is signed with a key in this user's private cache folder (an agent cannot add
or reorder an owner). An agent that is not served keeps one conversation in its workspace, and
every scope is that one.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import os
import re
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from ..messages import Message
from ..workspace import Storage, SubStorage, private_cache_folder
from ._index import HistoryIndex, IndexedHit
from ._text import Term, parse_query, shown

__all__ = [
    "SCOPES",
    "Conversation",
    "HistoryScope",
    "Scope",
    "SearchHit",
    "SearchResult",
    "history_key",
    "listed_session",
    "safe_id",
    "search_history",
    "session_folders",
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
    view: Callable[[dict], Message] | None = field(default=None, repr=False)
    """A saved record as the tools show it (see :class:`HistoryIndex`)."""
    index: HistoryIndex | None = field(default=None, repr=False)

    def history(self) -> HistoryIndex:
        """Its index (made on first use)."""
        if self.index is None:
            self.index = HistoryIndex(self.storage, view=self.view)
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
    where: int = 0
    """Which of the conversations searched (their position in the list)."""
    start_byte: int = 0
    """For an output, where in its line the match starts, when that line is long."""

    def as_dict(self) -> dict:
        return {
            "kind": self.kind,
            "file": self.file,
            "line": self.line,
            "start_byte": self.start_byte,
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


def search_history(conversations: list[Conversation], query: str, limit: int = 10) -> SearchResult:
    """The best ``limit`` hits for ``query`` in ``conversations``: documents holding every term
    first, else those holding some.

    One conversation's hits are in BM25 order. Several conversations' are merged by their score
    relative to the best of their own conversation (each index has its own statistics: a small
    session's exact hit would otherwise rank below a big session's passing mentions), ties in
    the order of ``conversations`` (the asking one first). Every index but the first is closed
    after its search (a user may have more sessions than a process may open files).

    Raises:
        `ValueError`: The query has nothing to search for (no letters or digits), or ``limit``
            is not positive.
    """
    if limit < 1:
        raise ValueError(f"limit must be at least 1, got {limit}")
    terms = parse_query(str(query))
    if not terms:
        raise ValueError(f"the query has no words to search for: {shown(str(query))!r}")
    for all_terms in (True, False):
        ranked: list[tuple[float, int, int, SearchHit]] = []
        for where, conversation in enumerate(conversations):
            index = conversation.history()
            try:
                # the every-term pass caught the index up: the any-term pass need not again
                found: list[IndexedHit] = index.search(
                    terms, limit, all_terms, all_terms, query=str(query)
                )
            finally:
                if where:
                    index.close()
            best = min((h.score for h in found), default=0.0)
            for rank, h in enumerate(found):
                relative = h.score / best if best < 0 else 1.0
                hit = SearchHit(
                    **vars(h), session=conversation.session, agent=conversation.agent, where=where
                )
                ranked.append((-relative, where, rank, hit))
        if ranked or len(terms) == 1:
            hits = [item[3] for item in sorted(ranked, key=lambda item: item[:3])]
            return SearchResult(hits[:limit], all_terms, terms)
    return SearchResult([], True, terms)


# ---------------------------------------------------------------------- served sessions

_ID_RE = re.compile(r"^[A-Za-z0-9_.\-]{1,128}$")
MAX_ID_CHARS = 512
"""A listed session with a longer id is not one of ours (ignored)."""
SESSIONS_DIRNAME = "sessions"
CONTEXT_DIRNAME = "context_ext"


def safe_id(value: str) -> str:
    """``value`` as one path segment: itself when it is one that no file system folds into
    another (lower case, digits, ``_ . -``; not of the digests' form), else ``id-`` and a
    digest of it, so that two ids never share a folder (``Alice`` and ``alice`` included)."""
    text = str(value)
    if (
        _ID_RE.fullmatch(text)
        and text == text.lower()
        and text not in (".", "..")
        and not text.startswith("id-")
    ):
        return text
    return "id-" + hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


def session_folders(agent: str, session: str) -> tuple[str, str]:
    """Where a served session's files are under its place: in the agent's 2.x workspace
    (``sessions/<session>/context_ext``), or in a store (``agents/<agent>/sessions/...``)."""
    inner = f"{SESSIONS_DIRNAME}/{safe_id(session)}/{CONTEXT_DIRNAME}"
    return inner, f"agents/{safe_id(agent)}/{inner}"


def history_key() -> bytes:
    """The key that signs the sessions list of a 2.x workspace folder: 32 random bytes in this
    user's private cache folder (0600), made once. The agent's tools work in that workspace and
    could write the list; they cannot sign a line."""
    path = private_cache_folder() / "history.key"
    try:
        key = path.read_bytes()
    except FileNotFoundError:
        key = b""
    if len(key) == 32:
        return key
    fresh = secrets.token_bytes(32)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:  # another process made it meanwhile, or a damaged one is there
        key = path.read_bytes()
        if len(key) == 32:
            return key
        path.unlink()
        return history_key()
    with os.fdopen(fd, "wb") as handle:
        handle.write(fresh)
    return fresh


@dataclass
class HistoryScope:
    """Where a served session's siblings are: the place's root and who is asking.

    Args:
        root (`Storage`): The place the sessions' folders are in (the 2.x workspace folder, or
            the store), holding :data:`REGISTRY_KEY`.
        agent_id, user_id, session_id (`str`): As ``create_app`` names them.
        folder (`str`): This session's folder under ``root`` (one of :func:`session_folders`).
        key (`bytes | None`): Signs each line (:func:`history_key`), for a list the agent's
            tools could write; lines without a valid signature are then ignored.
    """

    root: Storage
    agent_id: str
    user_id: str
    session_id: str
    folder: str
    key: bytes | None = field(default=None, repr=False)

    def register(self) -> None:
        """Write this session down (once: a session already listed is left as it is)."""
        if any(
            e["session"] == self.session_id and e["agent"] == self.agent_id for e in self.sessions()
        ):
            return
        entry = {
            "agent": self.agent_id,
            "user": self.user_id,
            "session": self.session_id,
            "folder": self.folder,
        }
        if self.key is not None:
            entry["sig"] = _sign(self.key, entry)
        self.root.append_lines(REGISTRY_KEY, [json.dumps(entry).encode("utf-8")])

    def sessions(self) -> list[dict]:
        """The sessions listed, each once (its first valid line: a session is its first
        writer's). A line is valid when its ids are strings of reasonable length, its folder is
        where such a session's files are, and (with a key) its signature is right."""
        seen: dict[tuple, dict] = {}
        for _, raw in self.root.lines(REGISTRY_KEY):
            entry = listed_session(raw, self.key)
            if entry is not None:
                seen.setdefault((entry["agent"], entry["session"]), entry)
        return list(seen.values())

    def conversations(self, scope: str, own: Conversation) -> list[Conversation]:
        """The conversations ``scope`` covers, the asking one first."""
        if scope == "session":
            return [own]
        found = [own]
        folders = {self.folder}
        for entry in self.sessions():
            if entry["user"] != self.user_id:
                continue  # never another user's
            if scope == "agent" and entry["agent"] != self.agent_id:
                continue
            if entry["folder"] in folders:
                continue  # this session, or one listed twice
            folders.add(entry["folder"])
            storage = SubStorage(self.root, entry["folder"])
            found.append(Conversation(storage, entry["session"], entry["agent"], own.view))
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
                return SubStorage(self.root, entry["folder"])
        return None


def listed_session(raw: bytes, key: bytes | None = None) -> dict | None:
    """One line of a sessions list, if valid (see :meth:`HistoryScope.sessions`)."""
    try:
        entry = json.loads(raw)
    except (ValueError, RecursionError):  # not JSON, or nested past the parser's depth
        return None
    fields = ("agent", "user", "session", "folder")
    if not isinstance(entry, dict) or not all(
        isinstance(entry.get(k), str) and 0 < len(entry[k]) <= MAX_ID_CHARS for k in fields
    ):
        return None
    if entry["folder"] not in session_folders(entry["agent"], entry["session"]):
        return None  # a folder no served session has (another session's, outside, a link)
    if key is not None:
        sig = entry.get("sig")
        plain = {k: entry[k] for k in fields}
        if not isinstance(sig, str) or not hmac.compare_digest(sig, _sign(key, plain)):
            return None
    return {k: entry[k] for k in fields}


def _sign(key: bytes, entry: dict) -> str:
    text = json.dumps([entry[k] for k in ("agent", "user", "session", "folder")])
    return hmac.new(key, text.encode("utf-8"), hashlib.sha256).hexdigest()
