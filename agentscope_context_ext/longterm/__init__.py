"""Long-term memory (SPEC 7): ``Memory.md``, daily notes, the Summarizer and consolidation."""

from ._consolidation import (
    ConsolidationResult,
    ConsolidationScheduler,
    consolidate,
    last_consolidation,
)
from ._store import (
    DEFAULT_SECTIONS,
    MAX_ENTRY_CHARS,
    MEMORY_FILE,
    LongTermMemory,
    MemoryInputError,
    clean_entry,
    normalise,
)
from ._summarizer import SILENT, SUMMARIZER_PROMPT, SummarizerService, SummarizerSettings

__all__ = [
    "DEFAULT_SECTIONS",
    "MAX_ENTRY_CHARS",
    "MEMORY_FILE",
    "SILENT",
    "SUMMARIZER_PROMPT",
    "ConsolidationResult",
    "ConsolidationScheduler",
    "LongTermMemory",
    "MemoryInputError",
    "SummarizerService",
    "SummarizerSettings",
    "clean_entry",
    "consolidate",
    "last_consolidation",
    "normalise",
]
