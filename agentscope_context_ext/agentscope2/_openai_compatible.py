"""2.x's OpenAI formatter and model, shaped for an OpenAI-compatible server by the agent file's
``model.compat`` (the shapes themselves: ``core/openai_compatible.py``; design §8).

Subclasses that change only the request's shape and the answer's text, nothing patched: the
real ``openai`` client and AgentScope's own streaming and parsing run underneath.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import logging
from collections.abc import AsyncGenerator
from typing import Any

import openai
from agentscope.formatter import OpenAIChatFormatter
from agentscope.message import Msg, TextBlock, ThinkingBlock, ToolCallBlock
from agentscope.model import ChatResponse, FinishedReason, OpenAIChatModel
from agentscope.tool import ToolChoice
from pydantic import Field

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

__all__ = ["OpenAICompatibleFormatter", "OpenAICompatibleModel", "is_empty", "with_input_of"]

logger = logging.getLogger("agentscope_context_ext")


class OpenAICompatibleFormatter(OpenAIChatFormatter):
    """2.x's OpenAI formatter with the message shapes ``compat`` asks for: each content one
    string (:func:`string_content`), tool results as user messages
    (:func:`tool_results_as_user`).

    Args:
        compat (`OpenAICompatibility`): The shapes (2.x's formatters are pydantic models: a
            field).
    """

    compat: OpenAICompatibility = Field(default_factory=OpenAICompatibility)

    async def format(self, msgs: list[Msg]) -> list[dict[str, Any]]:
        messages = await super().format(msgs)
        if self.compat.tool_results_as_user:
            messages = tool_results_as_user(messages)
        if self.compat.string_content:
            messages = string_content(messages)
        return messages


def is_empty(response: ChatResponse | None) -> bool:
    """No text (but blanks), no thinking and no tool call: an answer that says nothing. An
    interrupted answer (the caller cancelled it) is not empty, it was stopped."""
    if response is None:
        return True
    if response.finished_reason == FinishedReason.INTERRUPTED:
        return False
    for block in response.content:
        if isinstance(block, TextBlock) and block.text.strip():
            return False
        if isinstance(block, ThinkingBlock) and block.thinking.strip():
            return False
        if not isinstance(block, TextBlock | ThinkingBlock):
            return False
    return True


class OpenAICompatibleModel(OpenAIChatModel):
    """2.x's ``OpenAIChatModel`` speaking to an OpenAI-compatible server as ``compat`` says:
    ``tool_choice: "auto"`` with the tools when the caller sets none, the output cap as
    ``max_tokens``, answers unescaped; and a streamed answer cut short (no finish reason) is
    asked again without streaming: llama-cpp-python ends a streamed tool call so, with nothing
    sent (answers with tools are then not streamed at all), and cuts a stream short when
    another request waits for its single slot. An empty answer to a request with tools is
    asked again for text (``compat.empty_answer_retry``); any other empty answer is the
    model's own, passed on as it is.

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
        messages: list[Msg],
        tools: list[dict] | None = None,
        tool_choice: ToolChoice | None = None,
        **kwargs: Any,
    ) -> ChatResponse | AsyncGenerator[ChatResponse, None]:
        if tools and tool_choice is None and self.compat.tool_choice_auto:
            tool_choice = ToolChoice(mode="auto")
        if self.stream and tools and not self.streams_tool_calls:
            answer = await self._unstreamed(messages, tools, tool_choice, kwargs)
            return await self._text_instead(answer, messages, tools, tool_choice, kwargs)
        response = await super().__call__(messages, tools, tool_choice, **kwargs)
        if isinstance(response, ChatResponse):
            answer = self._unescaped(response)
            return await self._text_instead(answer, messages, tools, tool_choice, kwargs)
        return self._checked(response, messages, tools, tool_choice, kwargs)

    async def _call_api(
        self,
        model_name: str,
        messages: list[Msg],
        tools: list[dict] | None = None,
        tool_choice: ToolChoice | None = None,
        **generate_kwargs: Any,
    ) -> ChatResponse | AsyncGenerator[ChatResponse, None]:
        cap = self.parameters.max_tokens
        if cap is not None and self.compat.max_tokens:
            # AgentScope sends the cap as max_completion_tokens, which llama.cpp ignores (asked
            # for 5 tokens, it wrote 110): max_tokens instead, and the other name left out.
            generate_kwargs.setdefault("max_tokens", cap)
            generate_kwargs.setdefault("max_completion_tokens", openai.omit)
        return await super()._call_api(model_name, messages, tools, tool_choice, **generate_kwargs)

    async def _parse_stream_response(
        self, start_datetime: Any, response: Any
    ) -> AsyncGenerator[ChatResponse, None]:
        watched = FinishWatch(response)
        async for chunk in super()._parse_stream_response(start_datetime, watched):
            yield chunk
        if not watched.finished:
            raise StreamCutShort(
                f"the stream from {self.credential.base_url} ended with no finish reason"
            )

    async def _checked(
        self,
        stream: AsyncGenerator[ChatResponse, None],
        messages: list[Msg],
        tools: list[dict] | None,
        tool_choice: ToolChoice | None,
        kwargs: dict[str, Any],
    ) -> AsyncGenerator[ChatResponse, None]:
        """The stream, unescaped; when it is cut short (no finish reason), the answer asked
        again unstreamed (the chunks passed on so far stay passed on); an empty answer to a
        request with tools, asked again for text (:meth:`_text_instead`)."""
        said = False
        final = None
        cut = False
        try:
            async for chunk in stream:
                if chunk.is_last:
                    final = self._unescaped(chunk)
                    continue
                said = said or not is_empty(chunk)
                yield self._unescaped(chunk)
        except StreamCutShort:
            cut = True
            if tools and not said:  # a streamed tool call ends so there: stop streaming those
                self.streams_tool_calls = False
            logger.warning(STREAM_FALLBACK_NOTE, self.credential.base_url)
            final = await self._unstreamed(messages, tools, tool_choice, kwargs)
        if final is None:
            return
        answer = await self._text_instead(final, messages, tools, tool_choice, kwargs)
        if (cut or answer is not final) and answer.content:
            # a new answer: the agent builds its events from the chunks before the last
            yield dataclasses.replace(answer, is_last=False)
        yield dataclasses.replace(answer, is_last=True)

    async def _text_instead(
        self,
        answer: ChatResponse,
        messages: list[Msg],
        tools: list[dict] | None,
        tool_choice: ToolChoice | None,
        kwargs: dict[str, Any],
    ) -> ChatResponse:
        """``answer``, or when it is empty and the request offered tools with ``tool_choice:
        auto``, the answer to the same request with ``tool_choice: none``
        (``compat.empty_answer_retry``: llama-cpp-python lets a model that chose to answer in
        text write nothing)."""
        if not (
            self.compat.empty_answer_retry
            and tools
            and getattr(tool_choice, "mode", None) == "auto"
            and is_empty(answer)
        ):
            return answer
        logger.info(EMPTY_ANSWER_NOTE, self.credential.base_url)
        text = await self._unstreamed(messages, tools, ToolChoice(mode="none"), kwargs)
        return dataclasses.replace(text, usage=with_input_of(answer.usage, text.usage))

    async def _unstreamed(
        self,
        messages: list[Msg],
        tools: list[dict] | None,
        tool_choice: ToolChoice | None,
        kwargs: dict[str, Any],
    ) -> ChatResponse:
        unstreamed = copy.copy(self)
        unstreamed.stream = False
        answer = await OpenAIChatModel.__call__(unstreamed, messages, tools, tool_choice, **kwargs)
        assert isinstance(answer, ChatResponse)
        return self._unescaped(answer)

    def _unescaped(self, response: ChatResponse) -> ChatResponse:
        if not self.compat.unescape_html:
            return response
        return dataclasses.replace(response, content=[_unescaped(b) for b in response.content])


def _unescaped(block: Any) -> Any:
    if isinstance(block, TextBlock):
        return block.model_copy(update={"text": unescape_entities(block.text)})
    if isinstance(block, ThinkingBlock):
        return block.model_copy(update={"thinking": unescape_entities(block.thinking)})
    if isinstance(block, ToolCallBlock) and "&" in block.input:
        try:
            arguments = json.loads(block.input)
        except ValueError:  # a streamed call's arguments so far: unescaped in the last chunk
            return block
        return block.model_copy(
            update={"input": json.dumps(unescape_values(arguments), ensure_ascii=False)}
        )
    return block
