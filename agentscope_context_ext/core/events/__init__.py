"""Typed events and the statistics built from them (design §9).

Every action of the extension emits one event, an instance of one class per kind of action
(:class:`ToolResultTruncated`, :class:`CompactionFinished`, ...), each a frozen dataclass with
its numbers as fields. Listeners subscribe through ``manager.subscribe(callback)``; every event
also goes to the ``agentscope_context_ext`` logger, and :class:`ContextStats` folds them into
``manager.stats``. ``event.type`` names the kind (``"compaction_finished"``) and ``event.data``
is the numbers as a dict, for logs and reports.

The catalogue of events (``_catalogue``), the stats that fold them (``_stats``) and the bus that
delivers them (``_bus``).
"""

from ._bus import EventBus
from ._catalogue import (
    CompactionFailed,
    CompactionFinished,
    CompactionStarted,
    Consolidated,
    ContextError,
    ContextEvent,
    ContextOverflow,
    ContextWarning,
    DialogSaved,
    MemoryWritten,
    ProviderOverflowRecovered,
    SaveFailed,
    TokenCountJudged,
    ToolResultRetruncated,
    ToolResultTruncated,
    TtlCleanup,
    UsageIgnored,
    UserMessageOffloaded,
)
from ._stats import ContextStats

__all__ = [
    "CompactionFailed",
    "CompactionFinished",
    "CompactionStarted",
    "Consolidated",
    "ContextError",
    "ContextEvent",
    "ContextOverflow",
    "ContextStats",
    "ContextWarning",
    "DialogSaved",
    "EventBus",
    "MemoryWritten",
    "ProviderOverflowRecovered",
    "SaveFailed",
    "TokenCountJudged",
    "ToolResultRetruncated",
    "ToolResultTruncated",
    "TtlCleanup",
    "UsageIgnored",
    "UserMessageOffloaded",
]
