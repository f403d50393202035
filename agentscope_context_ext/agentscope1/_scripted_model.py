"""``ScriptedChatModel``: a real AgentScope ``ChatModelBase`` that answers from a script.

For offline tests, demos and benchmarks: it receives exactly what a provider would (the
formatter's output and the tool schemas), records it, and answers with the next scripted reply,
or with whatever a function of the call returns. Tool calls, streaming with cumulative chunks
(as AgentScope's own models stream), structured output in ``metadata``, and ``usage`` with input
tokens counted by the exact Qwen counter are all supported.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncGenerator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from agentscope.message import TextBlock, ToolUseBlock
from agentscope.model import ChatModelBase, ChatResponse
from agentscope.model._model_usage import ChatUsage
from agentscope.tracing import trace_llm

from ..core.scripting import Scripted, prompt_text
from ..core.tokens import TokenCounter

Reply = str | ChatResponse | list | dict | BaseException | None
"""A scripted answer: text, a ``ChatResponse``, a list of content blocks, a dict (structured
output), an exception instance to raise, or ``None`` for an empty answer."""


@dataclass
class ModelCall:
    """One call the model received."""

    index: int
    """0 for the first call."""
    messages: list[dict]
    """The formatted prompt, as a provider would receive it."""
    tools: list[dict] | None
    """The tool JSON schemas it was given."""
    tool_choice: str | None = None
    """The tool choice mode."""
    structured_model: Any = None
    """The pydantic model of a structured-output request, if any."""
    kwargs: dict[str, Any] = field(default_factory=dict)
    """Any other keyword arguments."""

    @property
    def text(self) -> str:
        """All textual content of the prompt, for assertions and scripted decisions."""
        return prompt_text(self.messages)


Responder = Callable[[ModelCall], Reply | Awaitable[Reply]]


def tool_call(name: str, call_id: str | None = None, **arguments: Any) -> ToolUseBlock:
    """A tool-use block for a script: ``tool_call("read_file", file_path="a.txt")``."""
    return ToolUseBlock(
        type="tool_use",
        id=call_id or f"call_{uuid.uuid4().hex[:12]}",
        name=name,
        input=arguments,
        raw_input=json.dumps(arguments, ensure_ascii=False),
    )


def reply(text: str | None = None, *calls: ToolUseBlock) -> list:
    """Content blocks for a script step: optional text, then tool calls (parallel if several)."""
    blocks: list = [TextBlock(type="text", text=text)] if text else []
    return blocks + list(calls)


class ScriptedChatModel(Scripted, ChatModelBase):
    """A chat model that answers from a list of replies or a function of each call.

    Args:
        script (`Sequence[Reply] | Callable[[ModelCall], Reply]`): Replies in order, or a
            function (sync or async) returning the reply for a call.
        model_name (`str`): The name it reports (decides the token counter ``auto`` picks).
        stream (`bool`): Stream cumulative chunks, as AgentScope's streaming models do.
        chunk_chars (`int`): Text characters added per streamed chunk.
        when_exhausted (`str | None`): The reply once a list script is used up; ``None`` raises.
        counter (`TokenCounter | None`): Counts ``usage.input_tokens``; default: exact Qwen.

    Example:
        .. code-block:: python

            model = ScriptedChatModel([
                reply("Let me look.", tool_call("read_file", file_path="README.md")),
                "The README explains the set-up.",
            ])
            agent = ReActAgent(name="a", sys_prompt="...", model=model,
                               formatter=DashScopeChatFormatter(), toolkit=toolkit)
    """

    def __init__(
        self,
        script: Sequence[Reply] | Responder = (),
        *,
        model_name: str = "qwen-plus",
        stream: bool = False,
        chunk_chars: int = 16,
        when_exhausted: str | None = "Done.",
        counter: TokenCounter | None = None,
    ) -> None:
        super().__init__(model_name=model_name, stream=stream)
        self.chunk_chars = max(1, chunk_chars)
        self._set_script(script, when_exhausted, counter)

    @trace_llm  # as AgentScope's own models: a ``chat`` span when tracing is on
    async def __call__(
        self,
        messages: list[dict],
        tools: list[dict] | None = None,
        tool_choice: str | None = None,
        structured_model: Any = None,
        **kwargs: Any,
    ) -> ChatResponse | AsyncGenerator[ChatResponse, None]:
        call = ModelCall(len(self.calls), messages, tools, tool_choice, structured_model, kwargs)
        self.calls.append(call)
        answer = await self._next(call)
        if isinstance(answer, BaseException):
            raise answer
        response = self._to_response(answer, structured_model)
        response.usage = ChatUsage(
            input_tokens=self.counter.count_formatted(messages, tools),
            output_tokens=self.counter.count_text(_response_text(response)),
            time=0.0,
        )
        if self.stream:
            return self._stream(response)
        return response

    @staticmethod
    def _to_response(answer: Reply, structured_model: Any) -> ChatResponse:
        if isinstance(answer, ChatResponse):
            return answer
        if answer is None:
            return ChatResponse(content=[])
        if isinstance(answer, dict):
            return ChatResponse(
                content=[TextBlock(type="text", text=json.dumps(answer, ensure_ascii=False))],
                metadata=answer,
            )
        if isinstance(answer, str):
            metadata = None
            if structured_model is not None:
                try:
                    parsed = json.loads(answer)
                    metadata = parsed if isinstance(parsed, dict) else None
                except json.JSONDecodeError:
                    metadata = None
            return ChatResponse(content=[TextBlock(type="text", text=answer)], metadata=metadata)
        if isinstance(answer, list):
            return ChatResponse(content=list(answer))
        raise TypeError(f"unsupported scripted reply of type {type(answer).__name__}")

    async def _stream(self, response: ChatResponse) -> AsyncGenerator[ChatResponse, None]:
        """Cumulative chunks: text grows chunk by chunk; tool calls arrive with the last one."""
        text = _response_text(response)
        others = [
            b for b in response.content if not (isinstance(b, dict) and b.get("type") == "text")
        ]
        steps = list(range(self.chunk_chars, len(text), self.chunk_chars))
        for end in steps:
            yield ChatResponse(
                content=[TextBlock(type="text", text=text[:end])],
                id=response.id,
                usage=response.usage,
            )
        final = ([TextBlock(type="text", text=text)] if text else []) + others
        yield ChatResponse(
            content=final, id=response.id, usage=response.usage, metadata=response.metadata
        )


def _response_text(response: ChatResponse) -> str:
    return "".join(
        str(b.get("text", ""))
        for b in response.content
        if isinstance(b, dict) and b.get("type") == "text"
    )
