"""A transcript's records (1.x-shaped dict blocks, see ``core.transcripts``) as 2.x messages: the
context a 2.x agent would have built, one assistant message per reply holding its calls and
their results."""

from __future__ import annotations

import json
from typing import Any

from agentscope.message import (
    Msg,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    ToolResultBlock,
    ToolResultState,
    UserMsg,
)

from ..core.transcripts import Record

__all__ = ["output_of", "record_blocks", "records_to_msgs"]


def records_to_msgs(records: list[Record]) -> list[Msg]:
    """The context a 2.x agent builds from ``records``: each user message as it is, and every
    assistant record (with the tool results that answer its calls) up to the next user message
    folded into one assistant message, as 2.x keeps a whole reply (dated by its first record).
    A result whose call the records never made is dropped (2.x has no place for it)."""
    msgs: list[Msg] = []
    reply: Msg | None = None
    calls: dict[str, str] = {}
    for record in records:
        if record.role == "user" and not any(
            b.get("type") == "tool_result" for b in record.blocks()
        ):
            text = "\n".join(b.get("text", "") for b in record.blocks() if b.get("type") == "text")
            msg = UserMsg(record.name or "user", text)
            if record.id:
                msg.id = record.id
            if record.timestamp:  # the day it was said files it in dialog/, not today
                msg.created_at = record.timestamp
            msgs.append(msg)
            reply = None
            continue
        if reply is None:
            reply = Msg(name=record.name or "assistant", content=[], role="assistant")
            if record.id:
                reply.id = record.id
            if record.timestamp:  # a reply is dated by its first record
                reply.created_at = record.timestamp
            msgs.append(reply)
        for block in record.blocks():
            if block.get("type") == "tool_use":
                calls[str(block.get("id"))] = str(block.get("name"))
            elif block.get("type") == "tool_result" and str(block.get("id")) in calls:
                call_id = str(block.get("id"))
                reply.content.append(
                    ToolResultBlock(
                        id=call_id,
                        name=calls[call_id],
                        output=output_of(block.get("output")),
                        state=ToolResultState.SUCCESS,
                    )
                )
        reply.content.extend(record_blocks(record.blocks()))
    return [msg for msg in msgs if msg.content]


def output_of(output: Any) -> str:
    """A recorded tool output as text (recorded media as an ``[image]`` placeholder)."""
    if isinstance(output, str):
        return output
    if isinstance(output, list):
        return "\n".join(
            str(b.get("text", "")) if b.get("type") == "text" else "[image]"
            for b in output
            if isinstance(b, dict)
        )
    return "" if output is None else str(output)


def record_blocks(recorded: list[dict]) -> list[Any]:
    """An assistant record's text, thinking and tool calls as 2.x blocks."""
    made: list[Any] = []
    for block in recorded:
        kind = block.get("type")
        if kind == "text" and block.get("text"):
            made.append(TextBlock(text=str(block["text"])))
        elif kind == "thinking" and block.get("thinking"):
            made.append(ThinkingBlock(thinking=str(block["thinking"])))
        elif kind == "tool_use":
            arguments = block.get("input")
            if not isinstance(arguments, str):
                arguments = json.dumps(arguments or {}, ensure_ascii=False)
            made.append(
                ToolCallBlock(id=str(block["id"]), name=str(block["name"]), input=arguments)
            )
    return made
