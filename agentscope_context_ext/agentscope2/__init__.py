"""The AgentScope 2.x adapter: the core behind 2.x's own extension points.

:class:`ContextMiddleware` (a ``MiddlewareBase``) cuts tool results in ``on_acting``, runs the
pipeline in ``on_compress_context`` (instead of 2.x's own compression) and adds ``Memory.md`` in
``on_system_prompt``; :class:`ContextOffloader` is the workspace as 2.x's ``Offloader``; the
core's tools become ``FunctionTool``\\ s; the Summarizer and consolidation agents are 2.x
``Agent``\\ s. :class:`AgentStateContext` is the agent's ``state`` as the core's port.
"""

from ..core.tokens import TokenCounter, get_token_counter
from ._context import META_KEY, AgentStateContext, result_record
from ._convert import DialogStore, MsgCodec, Segment, output_text, segments, to_view, to_views
from ._longterm import LongTermMemoryService, agent_runner, consolidate
from ._manager import ContextManager, ContextMiddleware, enable_context_management
from ._model import model_call, model_name, named_model
from ._offloader import ContextOffloader
from ._tools import as_tool, make_dialog_tools, make_memory_tools, make_read_file_tool

__all__ = [
    "META_KEY",
    "AgentStateContext",
    "ContextManager",
    "ContextMiddleware",
    "ContextOffloader",
    "DialogStore",
    "LongTermMemoryService",
    "MsgCodec",
    "Segment",
    "TokenCounter",
    "agent_runner",
    "as_tool",
    "consolidate",
    "enable_context_management",
    "get_token_counter",
    "make_dialog_tools",
    "make_memory_tools",
    "make_read_file_tool",
    "model_call",
    "model_name",
    "named_model",
    "output_text",
    "result_record",
    "segments",
    "to_view",
    "to_views",
]
