"""Listening to the provider (design §4.3, 5.1).

``UsageTap`` wraps the agent's chat model. It passes on the tool schemas the manager offers (the
dialog tools once there is a dialog, as 2.x's ``on_model_call`` does), reports
``ChatResponse.usage.input_tokens`` of every call (streamed or not) with the call's tools and
tool choice (the manager compares like calls with its own count: ``stats.token_count_error``
and, with ``calibrate_with_usage``, the shift), and when the provider rejects a call for its
length, asks the manager to compact and retries once with the prompt formatted again (a second
rejection is raised as it is).

AgentScope 1.x keeps no usage where a hook could read it and calls the model straight from
``_reasoning``, so wrapping the model is the only way to see both; the wrapper is a proper
``ChatModelBase`` whose ``model_name`` and ``stream`` are the wrapped model's (``ReActAgent``
flips ``stream`` during knowledge retrieval), and detaching the manager puts the original model
back.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import Any

from agentscope.model import ChatModelBase, ChatResponse

from ..core.provider_errors import (
    LengthRejection,
    length_rejection,
    relay_stream,
    with_first_chunk,
)
from ..core.workspace import portal

logger = logging.getLogger("agentscope_context_ext")


def _forwarded(name: str) -> property:
    """An attribute read from and written to the wrapped model."""
    return property(
        lambda self: getattr(self.inner, name),
        lambda self, value: setattr(self.inner, name, value),
        doc=f"The wrapped model's ``{name}``.",
    )


class UsageTap(ChatModelBase):
    """A transparent wrapper of a chat model that reports input-token usage and recovers from
    a length rejection once.

    Args:
        inner (`ChatModelBase`): The real model.
        on_usage (`Callable`): Called (and awaited, if async) with ``usage.input_tokens`` of
            each response, the tool schemas the call was given and its tool choice.
        offer_tools (`Callable[[list[dict]], list[dict]] | None`): The tool schemas the model
            is shown, from those the agent passes (``ManagerBase.offered_tools``).
        on_rejected (`Callable | None`): Called with the provider's length rejection of a
            call with tools (a reasoning call); returns the prompt to retry with, formatted
            again after a compaction (``None``: nothing about the prompt can help).
        on_late_rejection (`Callable | None`): Called with a length rejection that came after
            the answer began streaming (learned from, not retried).
    """

    def __init__(
        self,
        inner: ChatModelBase,
        on_usage: Callable[[int, list[dict] | None, Any], Any],
        offer_tools: Callable[[list[dict]], list[dict]] | None = None,
        on_rejected: Callable[[LengthRejection], Awaitable[list[dict] | None]] | None = None,
        on_late_rejection: Callable[[LengthRejection], Awaitable[None]] | None = None,
    ) -> None:
        self.inner = inner
        self._on_usage = on_usage
        self._offer_tools = offer_tools
        self._on_rejected = on_rejected
        self._on_late_rejection = on_late_rejection
        super().__init__(model_name=inner.model_name, stream=inner.stream)

    model_name = _forwarded("model_name")
    stream = _forwarded("stream")

    @portal
    async def __call__(self, *args: Any, **kwargs: Any) -> Any:
        tools = given = kwargs.get("tools")
        if self._offer_tools is not None and isinstance(tools, list):
            tools = kwargs["tools"] = self._offer_tools(tools)
        try:
            response = await with_first_chunk(await self.inner(*args, **kwargs))
        except Exception as exc:
            rejection = length_rejection(exc)
            # Only the reasoning call (the one with tools) is the agent's memory formatted
            # as it stands; another call's prompt cannot be built again here.
            if rejection is None or self._on_rejected is None or not isinstance(tools, list):
                raise
            prompt = await self._on_rejected(rejection)
            if prompt is None:  # nothing about the prompt can help
                raise
            if args:
                args = (prompt, *args[1:])
            else:
                kwargs["messages"] = prompt
            if self._offer_tools is not None:  # the agent's list: the compaction may have
                tools = kwargs["tools"] = self._offer_tools(given)  # opened the dialog
            response = await self.inner(*args, **kwargs)  # a second rejection is raised
        tool_choice = kwargs.get("tool_choice")
        if inspect.isasyncgen(response):
            return self._relay(response, tools, tool_choice)
        await self._report(response, tools, tool_choice)
        return response

    def _relay(
        self, chunks: AsyncGenerator[ChatResponse, None], tools: Any, tool_choice: Any
    ) -> AsyncGenerator[ChatResponse, None]:
        return relay_stream(
            chunks,
            lambda last: self._report(last, tools, tool_choice),
            self._on_late_rejection,
        )

    async def _report(self, response: Any, tools: Any, tool_choice: Any) -> None:
        usage = getattr(response, "usage", None)
        tokens = getattr(usage, "input_tokens", None)
        if isinstance(tokens, int) and tokens > 0:
            # Bookkeeping must never break a model call.
            try:
                result = self._on_usage(
                    tokens, tools if isinstance(tools, list) else None, tool_choice
                )
                if inspect.isawaitable(result):
                    await result
            except Exception:
                logger.exception("usage callback failed")
