"""The in-memory layer of the context (SPEC 2.1): ``ContextMemory`` and ``CompactSummary``."""

from ._context_memory import META_KEY, ContextMemory, has_tool_results, result_state
from ._summary import SECTION_TITLES, SUMMARY_MSG_NAME, CompactSummary, DialogRange

__all__ = [
    "META_KEY",
    "SECTION_TITLES",
    "SUMMARY_MSG_NAME",
    "CompactSummary",
    "ContextMemory",
    "DialogRange",
    "has_tool_results",
    "result_state",
]
