"""The in-memory layer of the context (SPEC 2.1): ``ContextMemory`` and ``CompactSummary``."""

from ..core.summary import SECTION_TITLES, CompactSummary, DialogRef
from ._context_memory import META_KEY, ContextMemory, has_tool_results, result_state
from ._summary import SUMMARY_MSG_NAME, summary_to_msg

__all__ = [
    "META_KEY",
    "SECTION_TITLES",
    "SUMMARY_MSG_NAME",
    "CompactSummary",
    "ContextMemory",
    "DialogRef",
    "has_tool_results",
    "result_state",
    "summary_to_msg",
]
