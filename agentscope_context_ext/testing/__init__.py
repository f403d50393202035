"""Offline test support: a real scripted ``ChatModelBase`` for tests, demos and benchmarks."""

from ._scripted_model import ModelCall, Reply, ScriptedChatModel, reply, tool_call

__all__ = ["ModelCall", "Reply", "ScriptedChatModel", "reply", "tool_call"]
