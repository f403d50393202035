"""The compaction model of a 1.x agent: which model, and one call of it as plain text."""

from __future__ import annotations

import copy

from agentscope.formatter import FormatterBase, OpenAIChatFormatter
from agentscope.message import Msg
from agentscope.model import ChatModelBase, GeminiChatModel, OllamaChatModel

from ..core.pipeline import CallModel, final_response

__all__ = ["model_call", "named_model"]


def model_call(
    model: ChatModelBase, formatter: FormatterBase | None = None, max_tokens: int | None = None
) -> CallModel:
    """``await call(instruction, content)``: the model's answer text to a system instruction and
    one user message (``formatter``: the model's, else OpenAI's layout).

    The call streams whatever the agent's model does, so that a call cancelled at its timeout
    closes a stream, which stops the server's generation (a server finishes an unstreamed
    answer nobody reads first; design §4.2); with ``max_tokens`` it is the call's output cap
    (``compaction.summary_output_tokens``), passed as the provider's client takes it."""
    formatter = formatter or OpenAIChatFormatter()

    async def call(instruction: str, content: str) -> str:
        prompt = await formatter.format(
            [Msg("system", instruction, "system"), Msg("user", content, "user")]
        )
        # A copy per call: the agent's model keeps its settings.
        summary_model = copy.copy(model)
        summary_model.stream = True
        response = await summary_model(prompt, **_output_cap(model, max_tokens))
        response = await final_response(response)
        if response is None:
            return ""
        return "\n".join(
            str(block.get("text", ""))
            for block in (response.content or [])
            if isinstance(block, dict) and block.get("type") == "text"
        )

    return call


def _output_cap(model: ChatModelBase, max_tokens: int | None) -> dict:
    """The keyword that caps a 1.x model's answer at ``max_tokens`` (1.x's clients take their
    options as keywords of the call; Ollama's sit in ``options``, as ``num_predict``)."""
    if max_tokens is None:
        return {}
    if isinstance(model, OllamaChatModel):
        return {"options": {**(model.options or {}), "num_predict": max_tokens}}
    if isinstance(model, GeminiChatModel):
        return {}  # its cap is a field of its config object, which an agent file never builds
    return {"max_tokens": max_tokens}


def named_model(model: ChatModelBase, name: str | None) -> ChatModelBase:
    """The agent's model, or a copy of it pointed at another model name."""
    if not name or getattr(model, "model_name", None) == name:
        return model
    clone = copy.copy(model)
    clone.model_name = name
    return clone
