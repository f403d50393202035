"""1.x's OpenAI formatter and model, shaped for an OpenAI-compatible server by the agent file's
``model.compat`` (the shapes themselves: ``core/openai_compatible.py``; design §8).

Subclasses that change only the request's shape and the answer's text, nothing patched: the
real ``openai`` client and AgentScope's own streaming and parsing run underneath. 1.x sends
``model.options`` as they are, so ``max_tokens`` already goes out under that name.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import logging
from collections.abc import AsyncGenerator
from typing import Any

from agentscope.formatter import OpenAIChatFormatter
from agentscope.model import ChatResponse, OpenAIChatModel

from ..core.agent_file import OpenAICompatibility
from ..core.openai_compatible import (
    EMPTY_ANSWER_NOTE,
    STREAM_FALLBACK_NOTE,
    FinishWatch,
    StreamCutShort,
    string_content,
    tool_results_as_user,
    unescape_entities,
    unescape_values,
    with_input_of,
)

__all__ = ["OpenAICompatibleFormatter", "OpenAICompatibleModel", "is_empty"]

logger = logging.getLogger("agentscope_context_ext")


class OpenAICompatibleFormatter(OpenAIChatFormatter):
    """AgentScope's OpenAI formatter with the message shapes ``compat`` asks for: each content
    one string (:func:`string_content`), tool results as user messages
    (:func:`tool_results_as_user`).

    Args:
        compat (`OpenAICompatibility`): The shapes.
    """

    def __init__(self, compat: OpenAICompatibility, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.compat = compat

    async def format(self, msgs: list, **kwargs: Any) -> list[dict[str, Any]]:
        messages = await super().format(msgs, **kwargs)
        if self.compat.tool_results_as_user:
            messages = tool_results_as_user(messages)
        if self.compat.string_content:
            messages = string_content(messages)
        return messages


def is_empty(response: ChatResponse | None) -> bool:
    """No text (but blanks), no thinking and no tool call: an answer that says nothing."""
    if response is None:
        return True
    for block in response.content or []:
        kind = block.get("type")
        if kind == "text" and str(block.get("text", "")).strip():
            return False
        if kind == "thinking" and str(block.get("thinking", "")).strip():
            return False
        if kind not in ("text", "thinking"):
            return False
    return True


class OpenAICompatibleModel(OpenAIChatModel):
    """AgentScope's ``OpenAIChatModel`` speaking to an OpenAI-compatible server as ``compat``
    says: ``tool_choice: "auto"`` with the tools when the caller sets none, the output cap as
    ``max_tokens`` (or, with ``compat.max_tokens: false``, as ``max_completion_tokens``),
    answers unescaped; and a streamed answer cut short (no finish reason) is asked again
    without streaming: llama-cpp-python ends a streamed tool call so, with nothing sent
    (answers with tools are then not streamed at all), and cuts a stream short when another
    request waits for its single slot. An empty answer to a request with tools is asked again
    for text (``compat.empty_answer_retry``); any other empty answer is the model's own.

    Args:
        compat (`OpenAICompatibility`): The shapes (``ModelSettings.openai_compat()``).
        *args, **kwargs: ``OpenAIChatModel``'s.
    """

    def __init__(self, *args: Any, compat: OpenAICompatibility, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.compat = compat
        self.streams_tool_calls = True
        """``False`` once a streamed answer with tools was cut short before it said anything."""

    async def __call__(
        self,
        messages: list[dict],
        tools: list[dict] | None = None,
        tool_choice: str | None = None,
        structured_model: Any = None,
        **kwargs: Any,
    ) -> Any:
        if tools and tool_choice is None and structured_model is None:
            tool_choice = "auto" if self.compat.tool_choice_auto else None
        model = self
        if not self.compat.max_tokens and "max_tokens" in {**self.generate_kwargs, **kwargs}:
            # Options go out as they are on 1.x: the cap under OpenAI's newer name instead.
            model = copy.copy(self)
            model.generate_kwargs = _renamed(self.generate_kwargs)
            kwargs = _renamed(kwargs)
        call = (model, messages, tools, tool_choice, structured_model, kwargs)
        if model.stream and tools and not self.streams_tool_calls:
            # 1.x's agent reads a streaming model's answer as a stream: one chunk, the answer
            return _one_chunk(await self._text_instead(await self._unstreamed(*call), *call))
        response = await OpenAIChatModel.__call__(
            model, messages, tools, tool_choice, structured_model, **kwargs
        )
        if isinstance(response, ChatResponse):
            return await self._text_instead(self._unescaped(response), *call)
        return self._checked(response, *call)

    async def _parse_openai_stream_response(
        self, start_datetime: Any, response: Any, structured_model: Any = None
    ) -> AsyncGenerator[ChatResponse, None]:
        watched = FinishWatch(response)
        async for chunk in super()._parse_openai_stream_response(
            start_datetime, watched, structured_model
        ):
            yield chunk
        if not watched.finished:
            raise StreamCutShort(
                f"the stream from {self.client.base_url} ended with no finish reason"
            )

    async def _checked(
        self,
        stream: AsyncGenerator[ChatResponse, None],
        model: OpenAIChatModel,
        messages: list[dict],
        tools: list[dict] | None,
        tool_choice: str | None,
        structured_model: Any,
        kwargs: dict[str, Any],
    ) -> AsyncGenerator[ChatResponse, None]:
        """The stream (1.x's chunks each hold the whole answer so far), unescaped; when it is
        cut short (no finish reason), the answer asked again unstreamed; an empty answer to a
        request with tools, asked again for text (:meth:`_text_instead`)."""
        call = (model, messages, tools, tool_choice, structured_model, kwargs)
        last = None
        try:
            async for chunk in stream:
                last = self._unescaped(chunk)
                yield last
        except StreamCutShort:
            if tools and is_empty(last):  # a streamed tool call ends so there: stop streaming those
                self.streams_tool_calls = False
            logger.warning(STREAM_FALLBACK_NOTE, self.client.base_url)
            last = await self._unstreamed(*call)
            yield last
        # 1.x's parser yields nothing for a stream without content
        seen = last if last is not None else ChatResponse(content=[])
        answer = await self._text_instead(seen, *call)
        if answer is not seen:
            yield answer

    async def _text_instead(
        self,
        answer: ChatResponse,
        model: OpenAIChatModel,
        messages: list[dict],
        tools: list[dict] | None,
        tool_choice: str | None,
        structured_model: Any,
        kwargs: dict[str, Any],
    ) -> ChatResponse:
        """``answer``, or when it is empty and the request offered tools with ``tool_choice:
        auto``, the answer to the same request with ``tool_choice: none``
        (``compat.empty_answer_retry``: llama-cpp-python lets a model that chose to answer in
        text write nothing)."""
        if not (
            self.compat.empty_answer_retry
            and tools
            and tool_choice == "auto"
            and structured_model is None
            and is_empty(answer)
        ):
            return answer
        logger.info(EMPTY_ANSWER_NOTE, self.client.base_url)
        text = await self._unstreamed(model, messages, tools, "none", structured_model, kwargs)
        return dataclasses.replace(text, usage=with_input_of(answer.usage, text.usage))

    async def _unstreamed(
        self,
        model: OpenAIChatModel,
        messages: list[dict],
        tools: list[dict] | None,
        tool_choice: str | None,
        structured_model: Any,
        kwargs: dict[str, Any],
    ) -> ChatResponse:
        unstreamed = copy.copy(model)
        unstreamed.stream = False
        answer = await OpenAIChatModel.__call__(
            unstreamed, messages, tools, tool_choice, structured_model, **kwargs
        )
        assert isinstance(answer, ChatResponse)
        return self._unescaped(answer)

    def _unescaped(self, response: ChatResponse) -> ChatResponse:
        if not self.compat.unescape_html:
            return response
        return dataclasses.replace(
            response, content=[_unescaped(block) for block in response.content or []]
        )


async def _one_chunk(answer: ChatResponse) -> AsyncGenerator[ChatResponse, None]:
    yield answer


def _renamed(options: dict[str, Any]) -> dict[str, Any]:
    renamed = dict(options)
    if "max_tokens" in renamed:
        renamed["max_completion_tokens"] = renamed.pop("max_tokens")
    return renamed


def _unescaped(block: dict) -> dict:
    kind = block.get("type")
    if kind == "text":
        return {**block, "text": unescape_entities(str(block.get("text", "")))}
    if kind == "thinking":
        return {**block, "thinking": unescape_entities(str(block.get("thinking", "")))}
    if kind == "tool_use":
        arguments = unescape_values(block.get("input", {}))
        unescaped = {**block, "input": arguments}
        if "raw_input" in block:  # its JSON anew: an unescaped &#34; would end a string early
            unescaped["raw_input"] = json.dumps(arguments, ensure_ascii=False)
        return unescaped
    return block
