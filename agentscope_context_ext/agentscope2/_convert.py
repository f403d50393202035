"""AgentScope 2.x messages -> the core's neutral :class:`~agentscope_context_ext.core.messages.Message`.

2.x content is a list of pydantic blocks (``TextBlock``, ``ThinkingBlock``, ``HintBlock``,
``ToolCallBlock`` with its input as a JSON string, ``ToolResultBlock`` whose output is a string or
text and ``DataBlock`` items, ``DataBlock`` for every medium). A ``HintBlock``, and a text 2.x
wrapped in ``<system-reminder>``, is a :class:`~agentscope_context_ext.core.messages.Reminder`
in the view: sent to the model, but nobody's words. One reply is ONE assistant message
holding every reasoning step's text, tool calls and tool results, so the adapter works on
*segments*: one reasoning step and the results of its calls (:func:`segments`). A segment is what
the core sees as a message; its id is the message id and the id of its first block, stable while
the reply grows.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from datetime import date
from typing import Any

from agentscope.message import (
    Base64Source,
    DataBlock,
    HintBlock,
    Msg,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    ToolResultBlock,
)

from ..core.messages import (
    Media,
    Message,
    Part,
    Reminder,
    Thinking,
    ToolCall,
    ToolResult,
    text_parts,
)
from ..core.truncation import split_notice
from ..core.workspace import DialogStore, Storage

__all__ = [
    "MsgCodec",
    "Segment",
    "media_block",
    "media_kind",
    "media_of",
    "open_dialog",
    "output_text",
    "segments",
    "to_view",
    "to_views",
]

SavedText = Callable[[str], str | None]

SEGMENT_SEPARATOR = "~"
"""Between the message id and the first block's id in a segment id."""


class Segment:
    """One reasoning step of a message and the results of its calls: ``blocks[start:end]``."""

    __slots__ = ("end", "id", "msg", "start")

    def __init__(self, msg: Msg, start: int, end: int) -> None:
        self.msg = msg
        self.start = start
        self.end = end
        self.id = f"{msg.id}{SEGMENT_SEPARATOR}{_block_id(msg.content[start], start)}"

    @property
    def blocks(self) -> list[Any]:
        return self.msg.content[self.start : self.end]

    def as_msg(self) -> Msg:
        """The message holding this segment only, with the segment's id: what the dialog store
        saves (one record per segment, each with an id of its own). Its blocks are copies; the
        message's other fields are shared and only read. Only this segment is copied: a deep
        copy of the message would copy every other step of the reply, once per segment."""
        return self.msg.model_copy(
            update={
                "id": self.id,
                "content": [block.model_copy(deep=True) for block in self.blocks],
            }
        )


def _block_id(block: Any, index: int) -> str:
    return str(getattr(block, "id", None) or index)


def segments(msg: Msg) -> list[Segment]:
    """The segments of ``msg``: a new one starts at every block that is not a tool result and
    follows a tool result (a new reasoning step after the previous step's results). Parallel
    calls and their results stay in one segment; an empty message has none."""
    content = msg.content
    result: list[Segment] = []
    start = 0
    for index in range(1, len(content)):
        if isinstance(content[index - 1], ToolResultBlock) and not isinstance(
            content[index], ToolResultBlock
        ):
            result.append(Segment(msg, start, index))
            start = index
    if content:
        result.append(Segment(msg, start, len(content)))
    return result


def to_view(
    msg: Msg,
    saved_text: SavedText | None = None,
    blocks: Sequence[Any] | None = None,
    msg_id: str | None = None,
) -> Message:
    """The neutral view of a 2.x message (or of some of its blocks, for a segment).

    Args:
        msg (`Msg`): The message.
        saved_text (`Callable[[str], str | None] | None`): Reads a saved full output; when
            given, every tool result cut to an excerpt gets its ``full_text``.
        blocks (`Sequence | None`): The blocks to show (default: all of them).
        msg_id (`str | None`): The view's id (default: the message's).
    """
    parts: list[Part] = []
    for block in msg.content if blocks is None else blocks:
        if isinstance(block, TextBlock):
            parts.extend(text_parts(block.text))  # a <system-reminder> block is a Reminder
            continue
        part = _part(block, saved_text)
        if part is not None:
            parts.append(part)
    return Message(
        id=str(msg_id or msg.id),
        role=str(msg.role),
        name=str(msg.name or ""),
        timestamp=str(msg.created_at or "").replace("T", " "),
        parts=tuple(parts),
    )


def to_views(msgs: Sequence[Msg], saved_text: SavedText | None = None) -> list[Message]:
    """:func:`to_view` of each message."""
    return [to_view(msg, saved_text) for msg in msgs]


def output_text(output: Any) -> str:
    """The text of a ``ToolResultBlock.output``: the string, or its text blocks joined by
    newlines (media are not text). The one definition every stage measures and cuts."""
    if output is None:
        return ""
    if isinstance(output, str):
        return output
    texts = []
    for item in output:
        if isinstance(item, TextBlock):
            texts.append(item.text)
        elif isinstance(item, DataBlock):
            continue
        else:
            texts.append(_as_text(item))
    return "\n".join(texts)


def has_text(output: Any) -> bool:
    """Whether an output holds any text at all (a list of media holds none)."""
    if isinstance(output, str):
        return True
    return any(not isinstance(item, DataBlock) for item in output or [])


def media_kind(block: DataBlock) -> str:
    """``image``, ``audio`` or ``video`` from the block's media type (``image`` when unknown)."""
    head = (block.source.media_type or "").split("/", 1)[0]
    return head if head in ("image", "audio", "video") else "image"


def media_of(output: Any) -> tuple[Media, ...]:
    """The media blocks of a tool result's output, in order."""
    if isinstance(output, str) or not output:
        return ()
    return tuple(media_block(item) for item in output if isinstance(item, DataBlock))


def media_block(block: DataBlock) -> Media:
    """One data block as the core's :class:`Media`."""
    source = block.source
    if isinstance(source, Base64Source):
        return Media(media_kind(block), source.media_type, data=source.data)
    return Media(media_kind(block), source.media_type, url=str(source.url))


def tool_arguments(block: ToolCallBlock) -> dict[str, Any]:
    """The parsed arguments of a tool call (``{}`` when its input is not a JSON object)."""
    try:
        value = json.loads(block.input) if block.input else {}
    except (TypeError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


_FAILED_STATES = ("error", "denied", "interrupted")
"""States of a 2.x tool result that say the call failed (``success`` does not say it worked:
a tool may return ``"Error: ..."`` as its text)."""


def _part(block: Any, saved_text: SavedText | None) -> Part | None:
    if isinstance(block, ThinkingBlock):
        return Thinking(block.thinking)
    if isinstance(block, HintBlock):
        # Always the framework's or a middleware's (runtime state, a limit reached, retrieved
        # memory), whatever its wrapper: it is sent to the model, but the agent never said it.
        return Reminder(block.hint if isinstance(block.hint, str) else output_text(block.hint))
    if isinstance(block, ToolCallBlock):
        return ToolCall(str(block.id), str(block.name), tool_arguments(block))
    if isinstance(block, ToolResultBlock):
        text = output_text(block.output)
        full_text = None
        if saved_text is not None:
            parts = split_notice(text)
            if parts is not None:
                full_text = saved_text(parts[1].file_path)
        failed = True if str(block.state) in _FAILED_STATES else None
        return ToolResult(
            str(block.id), str(block.name), text, media_of(block.output), full_text, failed
        )
    if isinstance(block, DataBlock):
        return media_block(block)
    return None


def _as_text(value: Any) -> str:
    if hasattr(value, "model_dump"):
        value = value.model_dump(mode="json")
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (RecursionError, ValueError, TypeError):
        return str(value)


class MsgCodec:
    """Dialog records of 2.x messages: ``Msg.model_dump(mode="json")`` plus a ``timestamp``
    (the message's ``created_at``, which files it by date); ``Msg.model_validate`` back."""

    def encode(self, msg: Msg) -> dict[str, Any]:
        record = msg.model_dump(mode="json")
        record["timestamp"] = str(msg.created_at or "").replace("T", " ")
        return record

    def decode(self, record: dict[str, Any]) -> Msg:
        fields = {key: value for key, value in record.items() if key != "timestamp"}
        try:
            return Msg.model_validate(fields)
        except Exception as exc:  # pydantic's ValidationError is a ValueError
            raise ValueError(str(exc)) from exc

    def view(self, msg: Msg) -> Message:
        return to_view(msg)


def open_dialog(
    workspace: str | os.PathLike[str] | Storage, today: Callable[[], date] = date.today
) -> DialogStore[Msg]:
    """The ``dialog/`` of ``workspace`` with 2.x messages as its records (one reasoning step
    per line, :class:`MsgCodec`).

    Args:
        workspace (`str | os.PathLike | Storage`): A folder, a ``redis://`` URL or a storage.
        today (`Callable[[], date]`): Returns today's local date; tests inject one.
    """
    return DialogStore(workspace, today, MsgCodec())
