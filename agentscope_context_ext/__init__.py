"""agentscope-context-ext: keep an AgentScope agent's context small, lossless and useful.

Public API (everything a user needs is importable from here):

- configuration: :class:`ContextConfig` and its sections, :func:`load_config`
- truncation engine: :func:`truncate_text_output`, ``TRUNCATION_NOTICE_MARKER``,
  ``DEFAULT_MAX_BYTES``, :class:`TruncationNotice`, :func:`split_notice`
- tokens: :func:`get_token_counter`, :class:`TokenCounter`
- workspace: :class:`ToolResultStore`, :class:`DialogStore`, :class:`DialogRef`
- tools: :func:`make_read_file_tool`, :func:`make_dialog_tools`, :func:`make_memory_tools`
- long-term memory: :class:`LongTermMemory`, :func:`consolidate`
- AgentScope integration: :func:`enable_context_management`, :class:`ContextManager`,
  :class:`ContextReActAgent`, :class:`ContextMemory`, :class:`CompactSummary`
- events: :class:`ContextEvent`, :class:`ContextStats`
- testing: ``agentscope_context_ext.testing.ScriptedChatModel``
"""

from importlib import import_module
from typing import Any

from ._version import __version__
from .core.config import (
    CompactionConfig,
    ContextConfig,
    LongTermMemoryConfig,
    ToolsConfig,
    TruncationConfig,
    load_config,
)
from .core.errors import ConfigError, ContextExtError, WorkspaceError, WorkspaceWriteError
from .core.events import ContextEvent, ContextStats
from .core.longterm import LongTermMemory
from .core.summary import CompactSummary
from .core.truncation import (
    DEFAULT_MAX_BYTES,
    TRUNCATION_NOTICE_MARKER,
    TruncationNotice,
    split_notice,
    truncate_text_output,
)
from .core.workspace import DialogRecord, DialogRef, ToolResultStore

# Names whose implementation depends on the AgentScope version: resolved on first use, so that
# importing the package (and its core) does not import AgentScope.
_ADAPTER_NAMES = (
    "ContextManager",
    "AtomicJSONSession",
    "ContextMemory",
    "ContextReActAgent",
    "DialogStore",
    "TokenCounter",
    "consolidate",
    "enable_context_management",
    "get_token_counter",
    "make_dialog_tools",
    "make_memory_tools",
    "make_read_file_tool",
)


def __getattr__(name: str) -> Any:
    if name == "build_agent":
        value = import_module(".agentfile", __name__).build_agent
        globals()[name] = value
        return value
    if name in _ADAPTER_NAMES:
        value = getattr(import_module(".agentscope1", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "DEFAULT_MAX_BYTES",
    "TRUNCATION_NOTICE_MARKER",
    "AtomicJSONSession",
    "CompactSummary",
    "CompactionConfig",
    "ConfigError",
    "ContextConfig",
    "ContextEvent",
    "ContextExtError",
    "ContextManager",
    "ContextMemory",
    "ContextReActAgent",
    "ContextStats",
    "DialogRecord",
    "DialogRef",
    "DialogStore",
    "LongTermMemory",
    "LongTermMemoryConfig",
    "TokenCounter",
    "ToolResultStore",
    "ToolsConfig",
    "TruncationConfig",
    "TruncationNotice",
    "WorkspaceError",
    "WorkspaceWriteError",
    "__version__",
    "build_agent",
    "consolidate",
    "enable_context_management",
    "get_token_counter",
    "load_config",
    "make_dialog_tools",
    "make_memory_tools",
    "make_read_file_tool",
    "split_notice",
    "truncate_text_output",
]
