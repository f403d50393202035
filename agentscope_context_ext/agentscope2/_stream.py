"""A tool's streamed output, shown as the model gets it.

2.x turns every ``ToolChunk`` an ``on_acting`` middleware yields into an event (what a UI of
``reply_stream`` shows) and writes only the final ``ToolResponse`` into the context; the
toolkit yields even a plain function's return value as one chunk first. Cutting only the
response would show a UI the whole output the model never got. So chunks pass while their text
stays within an allowance (half of stage one's byte limit and of its token budget: stage one
keeps an output's head, so what was shown is the start of what the model gets) and are held
past it; once the response is cut, the shown text is completed into exactly the cut text (its
notice included), or, when stage one left the output whole after all, the held chunks follow as
they were. A chunk's lone surrogates are replaced as the response's are (``sendable_text``): the
events carry what the model gets.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import Any

from agentscope.message import DataBlock, TextBlock
from agentscope.tool import ToolChunk, ToolResponse

from ..core.pipeline import StreamAllowance
from ..core.truncation import sendable_text
from ._convert import output_text

__all__ = ["shown_as_cut"]


async def shown_as_cut(
    items: AsyncGenerator,
    allowance: StreamAllowance | None,
    cut: Callable[[ToolResponse], Awaitable[ToolResponse]],
) -> AsyncGenerator:
    """``items`` (a tool's chunks, then its response) with the response cut by ``cut`` and
    the chunks held once ``allowance`` takes no more of their text (``None``: all pass, the
    output is never cut), so that the chunks' texts add up to the cut response's text."""
    shown: list[str] = []
    held: list[ToolChunk] = []
    async for item in items:
        if isinstance(item, ToolResponse):
            response = await cut(item)
            completion, held = _completion(response, item, "".join(shown), held), []
            for chunk in completion:
                yield chunk
            yield response
            continue
        if isinstance(item, ToolChunk):
            item = _sendable(item)
        if allowance is None or not isinstance(item, ToolChunk):
            yield item
            continue
        text = "".join(block.text for block in _texts(item.content))
        if held or not allowance.take(text):
            held.append(item)
            continue
        shown.append(text)
        yield item
    for chunk in held:  # a tool that ended without a response: show what it gave
        yield chunk


def _sendable(chunk: ToolChunk) -> ToolChunk:
    """``chunk``, or a copy whose texts hold no lone surrogate (the tool keeps its own)."""
    if all(sendable_text(block.text) is block.text for block in _texts(chunk.content)):
        return chunk
    content = [
        item.model_copy(update={"text": sendable_text(item.text)})
        if isinstance(item, TextBlock)
        else item
        for item in chunk.content
    ]
    return chunk.model_copy(update={"content": content})


def _texts(content: Any) -> list[Any]:
    return [item for item in content if isinstance(item, TextBlock)]


def _completion(
    response: ToolResponse, original: ToolResponse, shown: str, held: list[ToolChunk]
) -> list[ToolChunk]:
    """What follows the chunks already shown, once the tool's response is in: the held chunks
    as they were when stage one left the output whole, else the rest of the cut text (from
    where it parts from what was shown) and the held media."""
    if not held or response is original:
        return held
    final = output_text(response.content)
    common = next(
        (i for i, (a, b) in enumerate(zip(shown, final, strict=False)) if a != b),
        min(len(shown), len(final)),
    )
    media = [item for chunk in held for item in chunk.content if isinstance(item, DataBlock)]
    content: list[Any] = [TextBlock(text=final[common:])] if final[common:] else []
    return [ToolChunk(content=[*content, *media], state=held[-1].state)] if content or media else []
