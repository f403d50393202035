"""AgentScope 1.x ``Msg`` -> the core's neutral :class:`~agentscope_context_ext.core.messages.Message`.

1.x content is a string or a list of ``TypedDict`` blocks (``text``, ``thinking``, ``tool_use``,
``tool_result``, ``image``/``audio``/``video``). Tool outputs may be a string, a list of blocks,
or anything a tool returned; non-text items are shown as JSON, never dropped. A text wrapped in
``<system-hint>`` (what ``ReActAgent`` adds as a user message) is a
:class:`~agentscope_context_ext.core.messages.Reminder` in the view.
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Awaitable, Callable, Sequence
from datetime import date
from typing import Any

from agentscope.message import Msg, TextBlock
from agentscope.tool import ToolResponse

from ..core.messages import (
    MEDIA_KINDS,
    Media,
    Message,
    Part,
    Text,
    Thinking,
    ToolCall,
    ToolResult,
    text_parts,
)
from ..core.truncation import split_notice
from ..core.workspace import DialogStore, Storage, in_portal

__all__ = [
    "MsgCodec",
    "as_tool",
    "media_block",
    "media_of",
    "open_dialog",
    "output_text",
    "to_view",
    "to_views",
]


SavedText = Callable[[str], str | None]
"""``tool_result/...`` path -> the saved full output (``None`` when it cannot be read)."""


def to_view(msg: Msg, saved_text: SavedText | None = None) -> Message:
    """The neutral view of one 1.x message.

    Args:
        msg (`Msg`): The message.
        saved_text (`Callable[[str], str | None] | None`): Reads a saved full output; when
            given, every tool result cut to an excerpt gets its ``full_text``.
    """
    content = msg.content
    parts: list[Part] = []
    if isinstance(content, str):
        parts.extend(text_parts(content))  # a <system-hint> message is a Reminder
    elif isinstance(content, list):
        for block in content:
            if isinstance(block, dict) and block.get("type") == "text":
                parts.extend(text_parts(str(block.get("text", ""))))
                continue
            part = _part(block, saved_text)
            if part is not None:
                parts.append(part)
    return Message(
        id=str(msg.id),
        role=str(msg.role),
        name=str(msg.name or ""),
        timestamp=str(msg.timestamp or ""),
        parts=tuple(parts),
    )


def to_views(msgs: Sequence[Msg], saved_text: SavedText | None = None) -> list[Message]:
    """:func:`to_view` of each message."""
    return [to_view(msg, saved_text) for msg in msgs]


def output_text(output: Any) -> str:
    """The text of a tool result's ``output``: a string, or its text items joined by newlines
    (non-text, non-media items as JSON). The one definition every stage measures and cuts."""
    if output is None:
        return ""
    if isinstance(output, str):
        return output
    if isinstance(output, list):
        texts = []
        for item in output:
            if isinstance(item, dict) and item.get("type") == "text":
                texts.append(str(item.get("text", "")))
            elif isinstance(item, dict) and item.get("type") in MEDIA_KINDS:
                continue
            elif isinstance(item, str):
                texts.append(item)
            else:
                texts.append(_as_text(item))
        return "\n".join(texts)
    return _as_text(output)


def media_of(output: Any) -> tuple[Media, ...]:
    """The media blocks of a tool result's ``output``, in order."""
    if not isinstance(output, list):
        return ()
    return tuple(
        media_block(item)
        for item in output
        if isinstance(item, dict) and item.get("type") in MEDIA_KINDS
    )


def _part(block: Any, saved_text: SavedText | None) -> Part | None:
    if not isinstance(block, dict):
        return Text(_as_text(block))
    kind = block.get("type")
    if kind == "thinking":
        return Thinking(str(block.get("thinking", "")))
    if kind == "tool_use":
        arguments = block.get("input")
        return ToolCall(
            str(block.get("id")),
            str(block.get("name")),
            dict(arguments) if isinstance(arguments, dict) else {},
        )
    if kind == "tool_result":
        output = block.get("output")
        media = media_of(output)
        text = output_text(output)
        full_text = None
        if saved_text is not None:
            parts = split_notice(text)
            if parts is not None:
                full_text = saved_text(parts[1].file_path)
        return ToolResult(str(block.get("id")), str(block.get("name")), text, media, full_text)
    if kind in MEDIA_KINDS:
        return media_block(block)
    return None


def media_block(block: dict) -> Media:
    """One 1.x media block as the core's :class:`Media`."""
    source = block.get("source") or {}
    if not isinstance(source, dict):
        return Media(str(block.get("type")))
    if source.get("type") == "base64":
        return Media(
            str(block.get("type")), str(source.get("media_type", "")), data=str(source.get("data"))
        )
    url = source.get("url")
    return Media(str(block.get("type")), str(source.get("media_type", "")), url=str(url))


def _as_text(value: Any) -> str:
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (RecursionError, ValueError, TypeError):
        try:
            return str(value)
        except RecursionError:
            return f"<{type(value).__name__} too deeply nested to show>"


def open_dialog(
    workspace: str | os.PathLike[str] | Storage, today: Callable[[], date] = date.today
) -> DialogStore[Msg]:
    """The ``dialog/`` of ``workspace`` with this AgentScope's messages as its records
    (:class:`MsgCodec`).

    Args:
        workspace (`str | os.PathLike | Storage`): A folder, a ``redis://`` URL or a storage.
        today (`Callable[[], date]`): Returns today's local date; tests inject one.
    """
    return DialogStore(workspace, today, MsgCodec())


class MsgCodec:
    """Dialog records of 1.x messages: ``Msg.to_dict()`` and ``Msg.from_dict()``."""

    def encode(self, msg: Msg) -> dict[str, Any]:
        return msg.to_dict()

    def decode(self, record: dict[str, Any]) -> Msg:
        return Msg.from_dict(record)

    def view(self, msg: Msg) -> Message:
        return to_view(msg)


def as_tool(function: Callable[..., Awaitable[str]]) -> Callable[..., Awaitable[ToolResponse]]:
    """A core tool (an async function returning text) as an AgentScope 1.x tool function: same
    name, signature and docstring (AgentScope reads the schema from them), a ``ToolResponse``;
    it runs in a portal (its workspace calls wait on the event loop)."""

    @functools.wraps(function)
    async def tool(*args: Any, **kwargs: Any) -> ToolResponse:
        text = await in_portal(function(*args, **kwargs))
        return ToolResponse(content=[TextBlock(type="text", text=text)])

    return tool
