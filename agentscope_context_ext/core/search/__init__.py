"""History search (design §6.2): a ranked full-text index (SQLite FTS5, BM25) beside each
conversation's dialog and saved outputs, and the scopes a search covers."""

from ._index import INDEX_DIRNAME, HistoryIndex, IndexedHit, index_location
from ._scope import (
    REGISTRY_KEY,
    SCOPES,
    Conversation,
    HistoryScope,
    Scope,
    SearchHit,
    SearchResult,
    history_key,
    listed_session,
    safe_id,
    search_history,
    session_folders,
)
from ._text import Term, parse_query, shown

__all__ = [
    "INDEX_DIRNAME",
    "REGISTRY_KEY",
    "SCOPES",
    "Conversation",
    "HistoryIndex",
    "HistoryScope",
    "IndexedHit",
    "Scope",
    "SearchHit",
    "SearchResult",
    "Term",
    "history_key",
    "index_location",
    "listed_session",
    "parse_query",
    "safe_id",
    "search_history",
    "session_folders",
    "shown",
]
