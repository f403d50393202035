"""The compaction model of a 2.x agent: one call of a 2.x ``ChatModelBase`` as plain text."""

from __future__ import annotations

import copy

from agentscope.message import SystemMsg, TextBlock, UserMsg
from agentscope.model import ChatModelBase

from ..core.pipeline import CallModel, final_response

__all__ = ["model_call", "model_name", "named_model"]


def model_name(model: object) -> str | None:
    """A 2.x model's name (its ``model`` attribute)."""
    name = getattr(model, "model", None)
    return name if isinstance(name, str) else None


def model_call(model: ChatModelBase, formatter: object = None) -> CallModel:
    """``await call(instruction, content)``: the model's answer text to a system instruction and
    one user message, streamed or not (a 2.x model formats its own input: ``formatter``, 1.x's
    argument, is not used)."""

    async def call(instruction: str, content: str) -> str:
        response = await model([SystemMsg("system", instruction), UserMsg("user", content)])
        response = await final_response(response)
        if response is None:
            return ""
        return "\n".join(b.text for b in response.content if isinstance(b, TextBlock))

    return call


def named_model(model: ChatModelBase, name: str | None) -> ChatModelBase:
    """The agent's model, or a copy of it pointed at another model name."""
    if not name or model_name(model) == name:
        return model
    clone = copy.copy(model)
    clone.model = name
    return clone
