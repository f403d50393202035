"""The pre-reasoning pipeline (SPEC 3.2-4): truncation stages, token check, pair-safe cut,
compaction and dialog saving."""

from ._checker import ContextChecker, ContextCount
from ._compactor import CompactionResult, Compactor
from ..core.pipeline._cut import CutItem, choose_cut, tool_pairs, valid_boundaries
from ._pipeline import ContextPipeline, PipelineParts
from ._tool_results import ToolResultTruncator, TruncationOutcome

__all__ = [
    "CompactionResult",
    "Compactor",
    "ContextChecker",
    "ContextCount",
    "ContextPipeline",
    "CutItem",
    "PipelineParts",
    "ToolResultTruncator",
    "TruncationOutcome",
    "choose_cut",
    "tool_pairs",
    "valid_boundaries",
]
