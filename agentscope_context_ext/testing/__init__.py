"""Offline test support: a real scripted ``ChatModelBase`` for tests, demos and benchmarks, of
the installed AgentScope (the same names on 1.x and 2.x)."""

from ..adapter import installed

ModelCall = installed.ModelCall
Reply = installed.Reply
ScriptedChatModel = installed.ScriptedChatModel
reply = installed.reply
tool_call = installed.tool_call

__all__ = ["ModelCall", "Reply", "ScriptedChatModel", "reply", "tool_call"]
