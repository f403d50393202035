"""The compaction model of a 1.x agent: which model, and one call of it as plain text."""

from __future__ import annotations

import copy

from agentscope.formatter import FormatterBase, OpenAIChatFormatter
from agentscope.message import Msg
from agentscope.model import ChatModelBase

from ..core.pipeline import CallModel, final_response

__all__ = ["model_call", "named_model"]


def model_call(model: ChatModelBase, formatter: FormatterBase | None = None) -> CallModel:
    """``await call(instruction, content)``: the model's answer text to a system instruction and
    one user message, streamed or not (``formatter``: the model's, else OpenAI's layout)."""
    formatter = formatter or OpenAIChatFormatter()

    async def call(instruction: str, content: str) -> str:
        prompt = await formatter.format(
            [Msg("system", instruction, "system"), Msg("user", content, "user")]
        )
        response = await model(prompt)
        response = await final_response(response)
        if response is None:
            return ""
        return "\n".join(
            str(block.get("text", ""))
            for block in (response.content or [])
            if isinstance(block, dict) and block.get("type") == "text"
        )

    return call


def named_model(model: ChatModelBase, name: str | None) -> ChatModelBase:
    """The agent's model, or a copy of it pointed at another model name."""
    if not name or getattr(model, "model_name", None) == name:
        return model
    clone = copy.copy(model)
    clone.model_name = name
    return clone
