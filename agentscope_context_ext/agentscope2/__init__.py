"""The AgentScope 2.x adapter: the core behind 2.x's own extension points.

:class:`ContextMiddleware` (a ``MiddlewareBase``) cuts tool results in ``on_acting``, runs the
pipeline in ``on_compress_context`` (instead of 2.x's own compression) and adds ``Memory.md`` in
``on_system_prompt``; :class:`ContextOffloader` is the workspace as 2.x's ``Offloader``; the
core's tools become ``FunctionTool``\\ s; the Summarizer and consolidation agents are 2.x
``Agent``\\ s. :class:`StatePort` is the agent's ``state`` as the core's port.

Both adapters offer the same facade to the layers above them (the commands, the demo, replay,
agent files, the tests): :class:`ManagedAgent`, the scripted model, ``replay_transcript`` and
``records_to_msgs``, ``build_agent``/``build_model``/``MODEL_APIS``, ``connect_studio``, ``trace_to``,
``consolidate``, the tools, the dialog codec, ``serve_agent_file``.
"""

from ..core.manager import ContextManager
from ..core.tokens import TokenCounter, get_token_counter
from ._agent_file import MODEL_APIS, build_agent, build_model
from ._context import META_KEY, StatePort
from ._convert import MsgCodec, Segment, open_dialog, output_text, segments, to_view, to_views
from ._enable import enable_context_management
from ._longterm import agent_runner, consolidate
from ._managed import SESSIONS_DIRNAME, ManagedAgent, saved_session_texts
from ._manager import AgentManager
from ._middleware import ContextMiddleware
from ._model import model_call, model_name, named_model
from ._offloader import ContextOffloader
from ._records import records_to_msgs
from ._refusal import RefusedTurn
from ._replay import replay_transcript
from ._scripted_model import ModelCall, Reply, ScriptedChatModel, reply, tool_call
from ._serve import serve_agent_file
from ._served import CONTEXT_DIRNAME, context_middleware_factory, served_placement
from ._served_model import SERVED_CREDENTIALS
from ._tool_filter import ToolFilter
from ._tools import as_tool, make_dialog_tools, make_memory_tools, make_read_file_tool
from ._tracing import connect_studio, trace_to, traced

__all__ = [
    "CONTEXT_DIRNAME",
    "META_KEY",
    "MODEL_APIS",
    "SERVED_CREDENTIALS",
    "SESSIONS_DIRNAME",
    "AgentManager",
    "ContextManager",
    "ContextMiddleware",
    "ContextOffloader",
    "ManagedAgent",
    "ModelCall",
    "MsgCodec",
    "RefusedTurn",
    "Reply",
    "ScriptedChatModel",
    "Segment",
    "StatePort",
    "TokenCounter",
    "ToolFilter",
    "agent_runner",
    "as_tool",
    "build_agent",
    "build_model",
    "connect_studio",
    "consolidate",
    "context_middleware_factory",
    "enable_context_management",
    "get_token_counter",
    "make_dialog_tools",
    "make_memory_tools",
    "make_read_file_tool",
    "model_call",
    "model_name",
    "named_model",
    "open_dialog",
    "output_text",
    "records_to_msgs",
    "replay_transcript",
    "reply",
    "saved_session_texts",
    "segments",
    "serve_agent_file",
    "served_placement",
    "to_view",
    "to_views",
    "tool_call",
    "trace_to",
    "traced",
]
