"""Offline test support: a real scripted ``ChatModelBase`` for tests, demos and benchmarks, for
the installed AgentScope (1.x or 2.x; the same names on both)."""

from ..compat import agentscope_major

if agentscope_major() >= 2:
    from ._scripted_model2 import ModelCall, Reply, ScriptedChatModel, reply, tool_call
else:
    from ._scripted_model import ModelCall, Reply, ScriptedChatModel, reply, tool_call

__all__ = ["ModelCall", "Reply", "ScriptedChatModel", "reply", "tool_call"]
