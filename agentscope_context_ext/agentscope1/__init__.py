"""The AgentScope 1.x adapter: the core behind 1.x's own extension points.

``ContextMemory`` (a ``MemoryBase``) holds the working memory and serves the summary and
``Memory.md`` as head messages; the ``post_acting`` and ``pre_reasoning`` instance hooks run the
core pipeline; the core's tools become 1.x tool functions; the Summarizer and consolidation
agents are ``ReActAgent``\\ s. :class:`Attachment` records every change made to an agent.

Both adapters offer the same facade to the layers above them (the commands, the demo, replay,
agent files, the tests): :class:`ManagedAgent`, the scripted model, ``replay_transcript`` and
``records_to_msgs``, ``build_agent``/``build_model``/``MODEL_APIS``, ``connect_studio``, ``trace_to``,
``consolidate``, the tools, the dialog codec.
"""

from ..core.manager import ContextManager
from ._agent import ContextReActAgent
from ._agent_file import MODEL_APIS, build_agent, build_model
from ._attachment import Attachment, adopt_memory
from ._context import MemoryPort
from ._convert import MsgCodec, as_tool, open_dialog, output_text, to_view, to_views
from ._longterm import agent_runner, consolidate
from ._managed import SESSIONS_DIRNAME, ManagedAgent, saved_session_texts
from ._manager import HOOK_NAME, ReActAgentManager, enable_context_management
from ._memory import ContextMemory
from ._messages import META_KEY, has_tool_results, result_state
from ._model import model_call, named_model
from ._replay import record_to_msg, records_to_msgs, replay_transcript
from ._scripted_model import ModelCall, Reply, ScriptedChatModel, reply, tool_call
from ._serve import serve_agent_file
from ._session import AtomicJSONSession
from ._studio import connect_studio, trace_to
from ._tokens import TokenCounter, get_token_counter
from ._tools import make_dialog_tools, make_memory_tools, make_read_file_tool
from ._usage import UsageTap

__all__ = [
    "HOOK_NAME",
    "META_KEY",
    "MODEL_APIS",
    "SESSIONS_DIRNAME",
    "AtomicJSONSession",
    "Attachment",
    "ContextManager",
    "ContextMemory",
    "ContextReActAgent",
    "ManagedAgent",
    "MemoryPort",
    "ModelCall",
    "MsgCodec",
    "ReActAgentManager",
    "Reply",
    "ScriptedChatModel",
    "TokenCounter",
    "UsageTap",
    "adopt_memory",
    "agent_runner",
    "as_tool",
    "build_agent",
    "build_model",
    "connect_studio",
    "consolidate",
    "enable_context_management",
    "get_token_counter",
    "has_tool_results",
    "make_dialog_tools",
    "make_memory_tools",
    "make_read_file_tool",
    "model_call",
    "named_model",
    "open_dialog",
    "output_text",
    "record_to_msg",
    "records_to_msgs",
    "replay_transcript",
    "reply",
    "result_state",
    "saved_session_texts",
    "serve_agent_file",
    "to_view",
    "to_views",
    "tool_call",
    "trace_to",
]
