"""Request and answer shapes for OpenAI-compatible servers (the agent file's ``model.compat``,
design §8), as plain functions on formatted messages and answer text; each AgentScope major
applies them in its own formatter and model subclass (``_openai_compatible.py``).

llama-cpp-python's server (0.3.36, ``--chat_format chatml-function-calling``, B12 runs it) is
the case they were written for: its chat templates take a message's ``content`` as a string, so
a list of parts (AgentScope's format for system and user messages) or a ``null`` content (an
assistant turn with only tool calls) fails with HTTP 500; it offers the tools to its model only
when ``tool_choice`` is ``"auto"``; it obeys ``max_tokens`` and ignores
``max_completion_tokens``; its template HTML-escapes the prompt, so its model answers with
``&#39;`` and ``&#34;``; a streamed request whose answer is a tool call ends empty after HTTP
200 ("Automatic streaming tool choice is not supported"); and a stream is cut short (``[DONE]``
with no finish reason) as soon as another request waits for the server's single slot
(``--interrupt_requests``, on by default). The model subclasses meet the last two by asking
again without streaming (:data:`STREAM_FALLBACK_NOTE`).
"""

from __future__ import annotations

import dataclasses
import html
from collections.abc import AsyncGenerator
from typing import Any

__all__ = [
    "EMPTY_ANSWER_NOTE",
    "STREAM_FALLBACK_NOTE",
    "FinishWatch",
    "StreamCutShort",
    "string_content",
    "tool_results_as_user",
    "unescape_entities",
    "unescape_values",
    "with_input_of",
]

STREAM_FALLBACK_NOTE = (
    "the server at %s cut a streamed answer short (no finish reason); asked again without "
    "streaming (llama-cpp-python cannot stream a tool call, and cuts a stream when another "
    "request waits)"
)
"""Logged when a streamed answer was cut short and asked again."""

EMPTY_ANSWER_NOTE = (
    "the server at %s answered a request with tools with nothing; asked again with "
    'tool_choice "none" (llama-cpp-python lets a model that chose to answer in text write '
    "nothing)"
)
"""Logged (info) when an empty answer to a request with tools is asked again for text."""


class StreamCutShort(Exception):
    """A stream ended without a finish reason: the server stopped it (llama-cpp-python's
    server ends a stream as soon as another request waits for its single slot, and ends a
    streamed tool call before its first chunk)."""


class FinishWatch:
    """An ``openai`` stream passed through as it is, noting whether a chunk gave a finish
    reason (every complete OpenAI stream does)."""

    def __init__(self, stream: Any) -> None:
        self.stream = stream
        self.finished = False

    async def __aenter__(self) -> FinishWatch:
        await self.stream.__aenter__()
        return self

    async def __aexit__(self, *exc: object) -> Any:
        return await self.stream.__aexit__(*exc)

    def __aiter__(self) -> AsyncGenerator[Any, None]:
        return self._chunks()

    async def _chunks(self) -> AsyncGenerator[Any, None]:
        async for chunk in self.stream:
            if any(choice.finish_reason for choice in chunk.choices or []):
                self.finished = True
            yield chunk


def string_content(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``messages`` (OpenAI chat format) with each content a string: a list of text parts
    joined by newlines, ``None`` as ``""``. A list holding an image or audio part stays a list,
    since no string can carry it."""
    plain = []
    for message in messages:
        content = message.get("content")
        if content is None:
            message = {**message, "content": ""}
        elif isinstance(content, list) and all(
            isinstance(part, dict) and part.get("type") == "text" for part in content
        ):
            message = {**message, "content": "\n".join(str(part["text"]) for part in content)}
        plain.append(message)
    return plain


def tool_results_as_user(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``messages`` with each ``tool`` message a ``user`` message headed ``[tool result:
    NAME, call ID]`` (the name from the assistant's call of that id), for a server whose chat
    template drops ``tool`` messages. String content stays a string; a list of parts gets the
    header as a first text part."""
    names = {
        call.get("id"): (call.get("function") or {}).get("name", "tool")
        for message in messages
        for call in message.get("tool_calls") or []
        if isinstance(call, dict)
    }
    shaped = []
    for message in messages:
        if message.get("role") != "tool":
            shaped.append(message)
            continue
        call_id = message.get("tool_call_id", "")
        header = f"[tool result: {names.get(call_id, 'tool')}, call {call_id}]"
        content = message.get("content")
        if isinstance(content, list):
            content = [{"type": "text", "text": header}, *content]
        else:
            content = f"{header}\n{content or ''}"
        shaped.append({"role": "user", "content": content})
    return shaped


def unescape_entities(text: str) -> str:
    """``text`` with HTML entities (``&#39;``, ``&quot;``, ``&amp;``) as the characters they
    stand for: what a model shown an HTML-escaped prompt writes, turned back."""
    return html.unescape(text) if "&" in text else text


def unescape_values(value: Any) -> Any:
    """Every string inside ``value`` (a tool call's parsed arguments: dicts, lists, strings)
    unescaped; the JSON around them is never touched (an unescaped ``&#34;`` would end a JSON
    string early)."""
    if isinstance(value, str):
        return unescape_entities(value)
    if isinstance(value, dict):
        return {key: unescape_values(item) for key, item in value.items()}
    if isinstance(value, list):
        return [unescape_values(item) for item in value]
    return value


def with_input_of(asked: Any, answered: Any) -> Any:
    """The usage of a text answer asked again, with the input count of the request asked
    first: the pipeline compares the provider's count with its own of the prompt it counted,
    tools included, and the second request left the tools out (a +585% "error" otherwise)."""
    if asked is None or answered is None or not getattr(asked, "input_tokens", None):
        return answered
    return dataclasses.replace(answered, input_tokens=asked.input_tokens)
