"""``ScriptedChatModel`` on AgentScope 2.x: a real 2.x ``ChatModelBase`` that answers from a script.

The same idea as the 1.x one: it receives what a provider would (its formatter's output of the
``Msg`` list, and the tool schemas), records it, and answers with the next scripted reply or
whatever a function of the call returns. Tool calls, streaming (2.x models stream increments),
structured output (as the forced ``generate_structured_output`` tool call 2.x asks for) and
``usage`` with input tokens counted by the exact Qwen counter are supported.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncGenerator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from agentscope.credential import CredentialBase
from agentscope.formatter import OpenAIChatFormatter
from agentscope.message import Msg, TextBlock, ToolCallBlock
from agentscope.model import ChatModelBase, ChatResponse, ChatUsage
from pydantic import BaseModel

from ..core.scripting import Scripted, prompt_text
from ..core.tokens import TokenCounter

__all__ = ["ModelCall", "Reply", "ScriptedChatModel", "reply", "tool_call"]

Reply = str | ChatResponse | list | dict | BaseException | None
"""A scripted answer: text, a ``ChatResponse``, a list of content blocks, a dict (structured
output), an exception instance to raise, or ``None`` for an empty answer."""

STRUCTURED_TOOL = "generate_structured_output"


@dataclass
class ModelCall:
    """One call the model received."""

    index: int
    """0 for the first call."""
    messages: list[dict]
    """The formatted prompt, as a provider would receive it."""
    tools: list[dict] | None
    """The tool JSON schemas it was given."""
    tool_choice: Any = None
    """The tool choice."""
    msgs: list[Msg] = field(default_factory=list)
    """The 2.x messages before formatting."""
    kwargs: dict[str, Any] = field(default_factory=dict)

    @property
    def structured(self) -> bool:
        """Whether this call asks for structured output (2.x's forced tool call)."""
        return any(
            (tool.get("function") or {}).get("name") == STRUCTURED_TOOL for tool in self.tools or []
        )

    @property
    def text(self) -> str:
        """All textual content of the prompt, for assertions and scripted decisions."""
        return prompt_text(self.messages)


Responder = Callable[[ModelCall], Reply | Awaitable[Reply]]


def tool_call(name: str, call_id: str | None = None, **arguments: Any) -> ToolCallBlock:
    """A tool-call block for a script: ``tool_call("read_file", file_path="a.txt")``."""
    return ToolCallBlock(
        id=call_id or f"call_{uuid.uuid4().hex[:12]}",
        name=name,
        input=json.dumps(arguments, ensure_ascii=False),
    )


def reply(text: str | None = None, *calls: ToolCallBlock) -> list:
    """Content blocks for a script step: optional text, then tool calls (parallel if several)."""
    blocks: list = [TextBlock(text=text)] if text else []
    return blocks + list(calls)


class _ScriptedCredential(CredentialBase):
    """No key: the scripted model calls nothing."""


class ScriptedChatModel(Scripted, ChatModelBase):
    """A 2.x chat model that answers from a list of replies or a function of each call.

    Args:
        script (`Sequence[Reply] | Callable[[ModelCall], Reply]`): Replies in order, or a
            function (sync or async) returning the reply for a call.
        model_name (`str`): The name it reports (decides the token counter ``auto`` picks).
        stream (`bool`): Stream the text in increments, as 2.x's models do.
        chunk_chars (`int`): Text characters per streamed increment.
        when_exhausted (`str | None`): The reply once a list script is used up; ``None`` raises.
        counter (`TokenCounter | None`): Counts ``usage.input_tokens``; default: exact Qwen.
        context_size (`int`): The window 2.x (and this package) manage.

    Example:
        .. code-block:: python

            model = ScriptedChatModel([
                reply("Let me look.", tool_call("read_file", file_path="README.md")),
                "The README explains the set-up.",
            ])
            agent = Agent(name="a", system_prompt="...", model=model, toolkit=toolkit)
    """

    class Parameters(BaseModel):
        """No parameters."""

    def __init__(
        self,
        script: Sequence[Reply] | Responder = (),
        *,
        model_name: str = "qwen-plus",
        stream: bool = False,
        chunk_chars: int = 16,
        when_exhausted: str | None = "Done.",
        counter: TokenCounter | None = None,
        context_size: int = 131072,
    ) -> None:
        super().__init__(
            credential=_ScriptedCredential(),
            model=model_name,
            parameters=self.Parameters(),
            stream=stream,
            max_retries=0,
            retry_delay=0.0,
            context_size=context_size,
        )
        self.formatter = OpenAIChatFormatter()
        self.chunk_chars = max(1, chunk_chars)
        self._set_script(script, when_exhausted, counter)

    @property
    def model_name(self) -> str:
        """The model name (2.x calls it ``model``)."""
        return self.model

    async def _call_api(
        self,
        model_name: str,
        messages: list[Msg],
        tools: list[dict] | None = None,
        tool_choice: Any = None,
        **kwargs: Any,
    ) -> ChatResponse | AsyncGenerator[ChatResponse, None]:
        formatted = await self.formatter.format(messages)
        call = ModelCall(len(self.calls), formatted, tools, tool_choice, list(messages), kwargs)
        self.calls.append(call)
        answer = await self._next(call)
        if isinstance(answer, BaseException):
            raise answer
        response = self._to_response(answer, call.structured)
        response.usage = ChatUsage(
            input_tokens=self.counter.count_formatted(formatted, tools),
            output_tokens=self.counter.count_text(_response_text(response)),
            time=0.0,
        )
        if self.stream:
            return self._stream(response)
        return response

    @staticmethod
    def _to_response(answer: Reply, structured: bool) -> ChatResponse:
        if isinstance(answer, ChatResponse):
            return answer
        if answer is None:
            return ChatResponse(content=[], is_last=True)
        if isinstance(answer, dict):
            return ChatResponse(
                content=[tool_call(STRUCTURED_TOOL, **answer)], is_last=True, metadata=answer
            )
        if isinstance(answer, str):
            if structured:
                try:
                    parsed = json.loads(answer)
                except json.JSONDecodeError:
                    parsed = None
                if isinstance(parsed, dict):
                    return ChatResponse(
                        content=[tool_call(STRUCTURED_TOOL, **parsed)], is_last=True
                    )
            return ChatResponse(content=[TextBlock(text=answer)], is_last=True)
        if isinstance(answer, list):
            return ChatResponse(content=list(answer), is_last=True)
        raise TypeError(f"unsupported scripted reply of type {type(answer).__name__}")

    async def _stream(self, response: ChatResponse) -> AsyncGenerator[ChatResponse, None]:
        """Increments of text (2.x accumulates them), then the other blocks; usage on the last."""
        text = _response_text(response)
        text_id = next((b.id for b in response.content if isinstance(b, TextBlock)), None)
        for start in range(0, len(text), self.chunk_chars):
            yield ChatResponse(
                content=[TextBlock(id=text_id, text=text[start : start + self.chunk_chars])],
                id=response.id,
                is_last=False,
            )
        others = [b for b in response.content if not isinstance(b, TextBlock)]
        yield ChatResponse(content=others, id=response.id, is_last=False, usage=response.usage)


def _response_text(response: ChatResponse) -> str:
    return "".join(b.text for b in response.content if isinstance(b, TextBlock))
