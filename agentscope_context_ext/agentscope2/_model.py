"""The compaction model of a 2.x agent: one call of a 2.x ``ChatModelBase`` as plain text."""

from __future__ import annotations

import copy

from agentscope.message import SystemMsg, TextBlock, UserMsg
from agentscope.model import ChatModelBase

from ..core.pipeline import CallModel, final_response
from ..core.tracing import chat_span, record_chat_answer

__all__ = ["model_call", "model_name", "named_model"]


def model_name(model: object) -> str | None:
    """A 2.x model's name (its ``model`` attribute)."""
    name = getattr(model, "model", None)
    return name if isinstance(name, str) else None


def model_call(
    model: ChatModelBase, formatter: object = None, max_tokens: int | None = None
) -> CallModel:
    """``await call(instruction, content)``: the model's answer text to a system instruction and
    one user message (a 2.x model formats its own input: ``formatter``, 1.x's argument, is not
    used).

    The call streams whatever the agent's model does, so that a call cancelled at its timeout
    closes a stream, which stops the server's generation (a server finishes an unstreamed
    answer nobody reads first; design §4.2); with ``max_tokens`` it is the call's output cap
    (``compaction.summary_output_tokens``), in the model's own ``Parameters``, which the
    provider's class sends the way it sends any cap."""

    provider = type(model).__name__.removesuffix("ChatModel").lower() or None

    async def call(instruction: str, content: str) -> str:
        # A copy per call: the agent's model keeps its settings, and a copy made once would
        # miss a change made to the model after the agent was built.
        summary_model = copy.copy(model)
        summary_model.stream = True
        parameters = getattr(model, "parameters", None)
        if max_tokens is not None and "max_tokens" in type(parameters).model_fields:
            summary_model.parameters = parameters.model_copy(update={"max_tokens": max_tokens})
        # No agent middleware sees this call: its ``chat`` span is ours (design §9.1).
        with chat_span(model_name(model), provider, instruction, content) as span:
            messages = [SystemMsg("system", instruction), UserMsg("user", content)]
            response = await summary_model(messages)
            response = await final_response(response)
            if response is None:
                return ""
            text = "\n".join(b.text for b in response.content if isinstance(b, TextBlock))
            usage = getattr(response, "usage", None)
            record_chat_answer(
                span,
                text,
                getattr(usage, "input_tokens", None),
                getattr(usage, "output_tokens", None),
            )
            return text

    return call


def named_model(model: ChatModelBase, name: str | None) -> ChatModelBase:
    """The agent's model, or a copy of it pointed at another model name."""
    if not name or model_name(model) == name:
        return model
    clone = copy.copy(model)
    clone.model = name
    return clone
