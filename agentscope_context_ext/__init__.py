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

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ._version import __version__
from .compat import agentscope_major, agentscope_version

if TYPE_CHECKING:
    # What ``__getattr__`` resolves, named explicitly: go-to-definition and type checkers land
    # on the definitions (the 2.x adapter's, the default install; 1.x's own three from 1.x).
    from . import adapter  # noqa: F401  (a submodule; ``adapter.installed``)
    from .agentscope1 import AtomicJSONSession, ContextMemory, ContextReActAgent
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

# Importing AgentScope costs seconds (2.x: 2.6 s of ``agentscope.agent``), so the package
# resolves its public names on first use (PEP 562): ``import agentscope_context_ext`` and the
# command line's ``--help`` pay for neither AgentScope nor pydantic (design §10).
_CORE = {
    ".core.config": (
        "CompactionConfig",
        "ContextConfig",
        "LongTermMemoryConfig",
        "ToolsConfig",
        "TruncationConfig",
        "load_config",
    ),
    ".core.errors": (
        "ConfigError",
        "ContextExtError",
        "ContextOverflowError",
        "TracingError",
        "WorkspaceError",
        "WorkspaceWriteError",
    ),
    ".core.events": ("ContextEvent", "ContextStats"),
    ".core.longterm": ("LongTermMemory",),
    ".core.summary": ("CompactSummary",),
    ".core.truncation": (
        "DEFAULT_MAX_BYTES",
        "TRUNCATION_NOTICE_MARKER",
        "TruncationNotice",
        "split_notice",
        "truncate_text_output",
    ),
    ".core.workspace": ("DialogRecord", "DialogRef", "DialogStore", "ToolResultStore"),
}
_MODULE_OF = {name: module for module, names in _CORE.items() for name in names}
"""Public name -> the core module that defines it."""

_ADAPTER = frozenset(
    {
        "ContextManager",
        "TokenCounter",
        "build_agent",
        "consolidate",
        "enable_context_management",
        "get_token_counter",
        "make_dialog_tools",
        "make_memory_tools",
        "make_read_file_tool",
        "open_dialog",
        "trace_to",
    }
)
"""Public names of the installed AgentScope's adapter (both majors have them)."""

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
    """A public name, imported on first use (then kept in the module: ``__getattr__`` is not
    asked again). A name of the other AgentScope major says which major has it."""
    if name in _MODULE_OF:
        value = getattr(importlib.import_module(_MODULE_OF[name], __name__), name)
    elif name == "adapter":
        value = importlib.import_module(".adapter", __name__)
    elif name in _ADAPTER or name in _ONLY:
        wanted = _ONLY.get(name)
        if wanted is not None and wanted != min(agentscope_major(), 2):
            raise AttributeError(_other_major(name, wanted))
        installed = importlib.import_module(".adapter", __name__).installed
        value = getattr(installed, name)
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


def _other_major(name: str, wanted: int) -> str:
    installed = agentscope_version() or "not installed"
    hint = (
        " (on 2.x use ContextMiddleware or enable_context_management)"
        if wanted == 1
        else " (on 1.x use enable_context_management or ContextReActAgent)"
    )
    return (
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
