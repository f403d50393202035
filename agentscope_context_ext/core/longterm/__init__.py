"""Long-term memory (design §7), independent of the framework: ``Memory.md`` and daily notes, the
memory tools, the Summarizer's journal, daily consolidation and its scheduler. The agents that
write the notes are the adapters' (:data:`AgentRunner`)."""

from ._consolidation import (
    CONSOLIDATOR_PROMPT,
    AgentInterrupted,
    AgentRunner,
    ConsolidationResult,
    consolidate,
    interrupted_reply,
)
from ._guide import MemoryView, bounded_by_tokens, memory_block
from ._schedule import ConsolidationScheduler, last_consolidation, read_state, write_state
from ._service import CONSOLIDATOR_MAX_ITERS, SUMMARIZER_MAX_ITERS, LongTermService
from ._store import (
    DEFAULT_SECTIONS,
    MAX_ENTRY_CHARS,
    MEMORY_FILE,
    NOTES_DIRNAME,
    LongTermMemory,
    MemoryInputError,
    clean_entry,
    normalise,
)
from ._summarizer import (
    SILENT,
    SUMMARIZER_PROMPT,
    NotWritten,
    SummarizerService,
    SummarizerSettings,
)
from ._tools import MemoryTool, make_memory_tools

__all__ = [
    "CONSOLIDATOR_MAX_ITERS",
    "CONSOLIDATOR_PROMPT",
    "DEFAULT_SECTIONS",
    "MAX_ENTRY_CHARS",
    "MEMORY_FILE",
    "NOTES_DIRNAME",
    "SILENT",
    "SUMMARIZER_MAX_ITERS",
    "SUMMARIZER_PROMPT",
    "AgentInterrupted",
    "AgentRunner",
    "ConsolidationResult",
    "ConsolidationScheduler",
    "LongTermMemory",
    "LongTermService",
    "MemoryInputError",
    "MemoryTool",
    "MemoryView",
    "NotWritten",
    "SummarizerService",
    "SummarizerSettings",
    "bounded_by_tokens",
    "clean_entry",
    "consolidate",
    "interrupted_reply",
    "last_consolidation",
    "make_memory_tools",
    "memory_block",
    "normalise",
    "read_state",
    "write_state",
]
