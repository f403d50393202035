"""Recognising a provider's "the prompt is too long" answer (design §4.3), whatever the client.

Our count and the provider's differ now and then (another tokenizer, an image priced
differently, a window smaller than configured, room the provider keeps for the answer), and
the provider then rejects the call. Each one words it its own way; :func:`length_rejection`
reads the exception (its message, its ``code``/``body``/``response`` text when the client keeps
them, and the exceptions it was raised from) and, when it is a length rejection, the numbers
the provider gave: its count of the prompt, its window and the room it keeps for the answer,
when it says them. Only a specific wording counts (an error code, or a sentence with the
provider's numbers): an error that merely quotes the user's words is not a length rejection.
"""

from __future__ import annotations

import inspect
import re
import warnings
from collections.abc import AsyncGenerator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["LengthRejection", "length_rejection", "relay_stream", "with_first_chunk"]

_NUMBER = r"(\d[\d,]*)"
_REJECTIONS = (
    # Each names a prompt-length rejection specifically (an error code, or a wording with the
    # numbers the provider gives), so that an error which merely quotes the user's words ("what
    # is the maximum context length of gpt-4o?") is not taken for one.
    r"context_length_exceeded",  # OpenAI's error code
    rf"maximum context length is {_NUMBER}",  # OpenAI, vLLM, DeepSeek
    r"exceed_context_size_error",  # llama.cpp server's error type
    rf"exceeds the available context size \(?{_NUMBER}",  # llama.cpp server
    rf"prompt is too long: {_NUMBER}",  # Anthropic
    rf"exceed context limit: {_NUMBER}",  # Anthropic, with max_tokens
    r"input length exceeds (?:the )?maximum context length",  # Ollama
    rf"range of input length should be \[\d+, ?{_NUMBER}\]",  # DashScope
    rf"input token count \({_NUMBER}\) exceeds",  # Gemini
    r"input is too long for requested model",  # Bedrock
    rf"too large for model with {_NUMBER} maximum context length",  # Mistral
)
_PROMPT_PATTERNS = (
    rf"messages resulted in {_NUMBER} tokens",  # OpenAI
    rf"\({_NUMBER} in the messages",  # OpenAI, vLLM: "you requested N tokens (M in the messages, ..."
    rf"prompt is too long: {_NUMBER} tokens",  # Anthropic
    rf"exceed context limit: {_NUMBER} \+",  # Anthropic: "... 188240 + 21333 > 200000"
    rf"input token count \({_NUMBER}\)",  # Gemini
    rf"request \({_NUMBER} tokens\)",  # llama.cpp
    rf"prompt contains {_NUMBER} tokens",  # Mistral
    rf"n_prompt_tokens\W+{_NUMBER}",  # llama.cpp's JSON body
)
_COMPLETION_PATTERNS = (
    rf"{_NUMBER} in the completion",  # OpenAI, vLLM
    rf"exceed context limit: \d[\d,]* \+ {_NUMBER}",  # Anthropic
)
_LIMIT_PATTERNS = (
    rf"maximum context length is {_NUMBER}",  # OpenAI, vLLM, DeepSeek
    rf"tokens > {_NUMBER} maximum",  # Anthropic
    rf"exceed context limit: \d[\d,]* \+ \d[\d,]* > {_NUMBER}",  # Anthropic, with max_tokens
    rf"maximum number of tokens allowed \({_NUMBER}\)",  # Gemini
    rf"available context size \({_NUMBER}",  # llama.cpp
    rf"range of input length should be \[\d+, ?{_NUMBER}\]",  # DashScope
    rf"with {_NUMBER} maximum context length",  # Mistral
    rf"n_ctx\W+{_NUMBER}",  # llama.cpp's JSON body
)


@dataclass(frozen=True)
class LengthRejection:
    """A provider refused a call because the prompt was too long."""

    message: str
    """What it said (one line, shortened)."""
    prompt_tokens: int | None = None
    """Its count of the prompt, when it says it."""
    limit_tokens: int | None = None
    """Its window, when it says it."""
    completion_tokens: int | None = None
    """The room it keeps for the answer (``max_tokens``), when it says it."""


def length_rejection(exc: BaseException) -> LengthRejection | None:
    """The length rejection ``exc`` is, or ``None`` for any other failure."""
    text = _error_text(exc)
    lowered = text.lower()
    if not any(re.search(pattern, lowered) for pattern in _REJECTIONS):
        return None
    return LengthRejection(
        message=" ".join(text.split())[:300],
        prompt_tokens=_first_number(_PROMPT_PATTERNS, lowered),
        limit_tokens=_first_number(_LIMIT_PATTERNS, lowered),
        completion_tokens=_first_number(_COMPLETION_PATTERNS, lowered),
    )


def _error_text(exc: BaseException) -> str:
    """The message of ``exc`` and of the exceptions it came from, with what HTTP clients keep
    beside the message (``code``, ``body``, the response text)."""
    texts: list[str] = []
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen and len(seen) < 8:
        seen.add(id(current))
        texts.append(str(current))
        with warnings.catch_warnings():  # e.g. aiohttp's deprecated ``code`` property
            warnings.simplefilter("ignore", DeprecationWarning)
            values = [getattr(current, name, None) for name in ("code", "body", "message", "error")]
        texts.extend(
            str(value) for value in values if isinstance(value, str | dict | list) and value
        )
        try:
            body = getattr(getattr(current, "response", None), "text", None)
        except Exception:  # noqa: BLE001 - e.g. a streamed response not read: no body then
            body = None
        if isinstance(body, str) and body:
            texts.append(body)
        current = current.__cause__ or current.__context__
    return "\n".join(texts)


def _first_number(patterns: tuple[str, ...], text: str) -> int | None:
    for pattern in patterns:
        match = re.search(pattern, text)
        if match:
            return int(match.group(1).replace(",", ""))
    return None


async def with_first_chunk(response: Any) -> Any:
    """A streamed response with its first chunk already received, as a stream again (a client
    that streams may only raise the provider's rejection then, and a retry is only possible
    before anything was passed on); anything else as it is."""
    if not inspect.isasyncgen(response):
        return response
    try:
        first = await response.__anext__()
    except StopAsyncIteration:
        return _replay(None, response)
    return _replay(first, response)


async def _replay(first: Any, rest: AsyncGenerator) -> AsyncGenerator[Any, None]:
    if first is None:
        return
    yield first
    async for chunk in rest:
        yield chunk


async def relay_stream(
    chunks: AsyncGenerator,
    on_last: Callable[[Any], Awaitable[Any]],
    on_rejection: Callable[[LengthRejection], Awaitable[Any]] | None = None,
) -> AsyncGenerator[Any, None]:
    """Pass a streamed response through and call ``on_last(last_chunk)`` once it ended (the
    last chunk carries the usage). A length rejection after the answer began cannot be retried:
    ``on_rejection`` learns from it, then it is raised."""
    last = None
    try:
        async for chunk in chunks:
            last = chunk
            yield chunk
    except Exception as exc:
        rejection = length_rejection(exc)
        if rejection is not None and on_rejection is not None:
            await on_rejection(rejection)
        raise
    if last is not None:
        await on_last(last)
