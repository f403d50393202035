"""agentscope-context-ext: keep an AgentScope agent's context small, lossless and useful.

Public API (everything a user needs is importable from here):

- configuration: :class:`ContextConfig` and its sections, :func:`load_config`
- truncation engine: :func:`truncate_text_output`, ``TRUNCATION_NOTICE_MARKER``,
  ``DEFAULT_MAX_BYTES``, :class:`TruncationNotice`, :func:`split_notice`
- tokens: :func:`get_token_counter`, :class:`TokenCounter`
- workspace: :class:`ToolResultStore`, :class:`DialogStore` (:func:`open_dialog`: the
  installed AgentScope's messages), :class:`DialogRef`
- tools: :func:`make_read_file_tool`, :func:`make_dialog_tools`, :func:`make_memory_tools`
- long-term memory: :class:`LongTermMemory`, :func:`consolidate`
- AgentScope integration (the adapter of the installed version, imported here explicitly):
  :func:`enable_context_management`,
  :class:`ContextManager`; on 1.x :class:`ContextReActAgent`, :class:`ContextMemory`; on 2.x
  :class:`ContextMiddleware`, :class:`ContextOffloader` and, for ``create_app``,
  :func:`context_middleware_factory`; :class:`CompactSummary`
- events: :class:`ContextEvent`, :class:`ContextStats`
- traces: :func:`trace_to` (AgentScope Studio or any OTLP/HTTP receiver; design §9.1)
- errors: :class:`ContextExtError` and its subclasses (:class:`ConfigError`,
  :class:`WorkspaceError`, :class:`WorkspaceWriteError`, :class:`ContextOverflowError`)
- testing: ``agentscope_context_ext.testing.ScriptedChatModel``
"""

from typing import Any

# The installed AgentScope's adapter (imported once by ``adapter``, with a clear error when it
# cannot be), its names imported explicitly: go-to-definition lands in the adapter.
from . import adapter  # noqa: F401  (a submodule; ``adapter.installed`` is the adapter)
from ._version import __version__
from .compat import agentscope_major, agentscope_version
from .core.config import (
    CompactionConfig,
    ContextConfig,
    LongTermMemoryConfig,
    ToolsConfig,
    TruncationConfig,
    load_config,
)
from .core.errors import (
    ConfigError,
    ContextExtError,
    ContextOverflowError,
    TracingError,
    WorkspaceError,
    WorkspaceWriteError,
)
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
from .core.workspace import DialogRecord, DialogRef, DialogStore, ToolResultStore

if agentscope_major() >= 2:
    from .agentscope2 import (
        ContextManager,
        ContextMiddleware,
        ContextOffloader,
        TokenCounter,
        build_agent,
        consolidate,
        context_middleware_factory,
        enable_context_management,
        get_token_counter,
        make_dialog_tools,
        make_memory_tools,
        make_read_file_tool,
        open_dialog,
        trace_to,
    )
else:
    from .agentscope1 import (
        AtomicJSONSession,
        ContextManager,
        ContextMemory,
        ContextReActAgent,
        TokenCounter,
        build_agent,
        consolidate,
        enable_context_management,
        get_token_counter,
        make_dialog_tools,
        make_memory_tools,
        make_read_file_tool,
        open_dialog,
        trace_to,
    )

_ONLY = {
    "AtomicJSONSession": 1,
    "ContextMemory": 1,
    "ContextReActAgent": 1,
    "ContextMiddleware": 2,
    "ContextOffloader": 2,
    "context_middleware_factory": 2,
}
"""Names of one major version only (the concept does not exist on the other)."""


def __getattr__(name: str) -> Any:
    """Only an error: a name of the other AgentScope major says which major has it."""
    wanted = _ONLY.get(name)
    if wanted is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    installed = agentscope_version() or "not installed"
    hint = (
        " (on 2.x use ContextMiddleware or enable_context_management)"
        if wanted == 1
        else " (on 1.x use enable_context_management or ContextReActAgent)"
    )
    raise AttributeError(
        f"{name} is part of the AgentScope {wanted}.x integration; the installed AgentScope is "
        f"{installed}{hint}"
    )


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
    "ContextMiddleware",
    "ContextOffloader",
    "ContextOverflowError",
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
    "TracingError",
    "TruncationConfig",
    "TruncationNotice",
    "WorkspaceError",
    "WorkspaceWriteError",
    "__version__",
    "build_agent",
    "consolidate",
    "context_middleware_factory",
    "enable_context_management",
    "get_token_counter",
    "load_config",
    "make_dialog_tools",
    "make_memory_tools",
    "make_read_file_tool",
    "open_dialog",
    "split_notice",
    "trace_to",
    "truncate_text_output",
]
