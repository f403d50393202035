"""Listening to the provider's own token count (SPEC 5.1).

``UsageTap`` wraps the agent's chat model and reports ``ChatResponse.usage.input_tokens`` of
every call (streamed or not) to a callback, and passes on the tool schemas the manager offers
(the dialog tools once there is a dialog, as 2.x's ``on_model_call`` does); the manager compares it with its own count
(``stats.token_count_error``) and, with ``calibrate_with_usage``, shifts its budget by the gap.
AgentScope 1.x keeps no usage where a hook could read it, so wrapping the model is the only way
to see it; the wrapper is a proper ``ChatModelBase`` whose ``model_name`` and ``stream`` are the
wrapped model's (``ReActAgent`` flips ``stream`` during knowledge retrieval), and detaching the
manager puts the original model back.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import AsyncGenerator, Callable
from typing import Any

from agentscope.model import ChatModelBase, ChatResponse

logger = logging.getLogger("agentscope_context_ext")


def _forwarded(name: str) -> property:
    """An attribute read from and written to the wrapped model."""
    return property(
        lambda self: getattr(self.inner, name),
        lambda self, value: setattr(self.inner, name, value),
        doc=f"The wrapped model's ``{name}``.",
    )


class UsageTap(ChatModelBase):
    """A transparent wrapper of a chat model that reports input-token usage.

    Args:
        inner (`ChatModelBase`): The real model.
        on_usage (`Callable[[int], Any]`): Called (and awaited, if async) with
            ``usage.input_tokens`` of each response.
        offer_tools (`Callable[[list[dict]], list[dict]] | None`): The tool schemas the model
            is shown, from those the agent passes (``ManagerBase.offered_tools``).
    """

    def __init__(
        self,
        inner: ChatModelBase,
        on_usage: Callable[[int], Any],
        offer_tools: Callable[[list[dict]], list[dict]] | None = None,
    ) -> None:
        self.inner = inner
        self._on_usage = on_usage
        self._offer_tools = offer_tools
        super().__init__(model_name=inner.model_name, stream=inner.stream)

    model_name = _forwarded("model_name")
    stream = _forwarded("stream")

    async def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self._offer_tools is not None and isinstance(kwargs.get("tools"), list):
            kwargs["tools"] = self._offer_tools(kwargs["tools"])
        response = await self.inner(*args, **kwargs)
        if inspect.isasyncgen(response):
            return self._relay(response)
        await self._report(response)
        return response

    async def _relay(
        self, chunks: AsyncGenerator[ChatResponse, None]
    ) -> AsyncGenerator[ChatResponse, None]:
        last = None
        async for chunk in chunks:
            last = chunk
            yield chunk
        await self._report(last)

    async def _report(self, response: Any) -> None:
        usage = getattr(response, "usage", None)
        tokens = getattr(usage, "input_tokens", None)
        if isinstance(tokens, int) and tokens > 0:
            # Bookkeeping must never break a model call.
            try:
                result = self._on_usage(tokens)
                if inspect.isawaitable(result):
                    await result
            except Exception:
                logger.exception("usage callback failed")
