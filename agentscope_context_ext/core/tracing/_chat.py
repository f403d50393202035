"""The GenAI ``chat`` spans of the model calls the extension makes itself (the summary
model's, which no agent middleware sees), and the tools an agent's ``chat`` span shows
(design §9.1)."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from ._spans import clean_attributes, context_span, otel_trace, tracing_enabled

__all__ = ["chat_span", "correct_chat_span", "flat_tool_definitions", "record_chat_answer"]


def _text_messages(pairs: Sequence[tuple[str, str]]) -> str:
    return json.dumps(
        [{"role": role, "parts": [{"type": "text", "content": text}]} for role, text in pairs],
        ensure_ascii=False,
    )


@contextlib.contextmanager
def chat_span(
    model: str | None, provider: str | None, instruction: str, content: str
) -> Iterator[Any | None]:
    """The GenAI ``chat`` span of one call the extension makes itself (the summary model's,
    which no agent middleware sees), with its input as the model got it; ``None`` when
    tracing is off. :func:`record_chat_answer` adds the answer and usage."""
    if not tracing_enabled():  # the prompt is not even serialised
        yield None
        return
    with context_span(
        f"chat {model or 'model'}",
        {
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": model,
            "gen_ai.provider.name": provider,
            "gen_ai.input.messages": _text_messages([("system", instruction), ("user", content)]),
        },
    ) as span:
        yield span


def record_chat_answer(
    span: Any | None, text: str, input_tokens: int | None, output_tokens: int | None
) -> None:
    """The answer and the provider's usage on a :func:`chat_span`."""
    if span is None:
        return
    span.set_attributes(
        clean_attributes(
            {
                "gen_ai.output.messages": _text_messages([("assistant", text)]),
                "gen_ai.usage.input_tokens": input_tokens,
                "gen_ai.usage.output_tokens": output_tokens,
            }
        )
    )


def flat_tool_definitions(schemas: Sequence[Mapping[str, Any]]) -> str:
    """Tool schemas (``{"type": "function", "function": {...}}``) in the GenAI conventions'
    flat form, as JSON (what AgentScope's ``chat`` spans carry)."""
    flat = []
    for schema in schemas:
        function = schema.get("function") if isinstance(schema, Mapping) else None
        if not isinstance(function, Mapping):
            continue
        entry = {
            "type": schema.get("type", "function"),
            "name": function.get("name"),
            "description": function.get("description"),
            "parameters": function.get("parameters"),
        }
        flat.append({key: value for key, value in entry.items() if value is not None})
    return json.dumps(flat, ensure_ascii=False)


def correct_chat_span(tools: Sequence[Mapping[str, Any]]) -> None:
    """On the current ``chat`` span (an agent's tracing middleware placed outside ours opened
    it with the tools the agent has), the tools the model is actually sent."""
    if not tracing_enabled():
        return
    span = otel_trace.get_current_span()
    if not span.is_recording():
        return
    attributes = getattr(span, "attributes", None) or {}
    if attributes.get("gen_ai.operation.name") != "chat":
        return
    if "gen_ai.tool.definitions" in attributes or tools:
        span.set_attribute("gen_ai.tool.definitions", flat_tool_definitions(tools))
