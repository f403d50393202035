"""This package's records and edits in a 2.x message's blocks (design §1.6): each tool result's
truncation record in its ``ToolResultBlock.metadata``, each offloaded user text's in the
message's ``metadata``; the slots the pipeline decides on, read from one segment's blocks, and
its changes written back into them; and the lone surrogates of a message's other texts replaced
(:func:`make_sendable`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from agentscope.message import (
    DataBlock,
    HintBlock,
    Msg,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    ToolResultBlock,
)

from ..core.pipeline import ResultChange, ResultSlot, TextSlot, TruncationRecord
from ..core.truncation import sendable_text
from ._convert import Segment, has_text, media_of, output_text, tool_arguments

__all__ = [
    "META_KEY",
    "apply_results",
    "apply_texts",
    "changed_output",
    "make_sendable",
    "result_record",
    "result_slots",
    "user_text_slots",
]

META_KEY = "agentscope_context_ext"
"""Key of this package's records in ``ToolResultBlock.metadata`` and ``state.middle_context``."""


def result_record(block: ToolResultBlock) -> TruncationRecord:
    """The truncation record of one tool result, as its ``metadata`` keeps it."""
    metadata = block.metadata if isinstance(block.metadata, dict) else {}
    return TruncationRecord.from_dict(metadata.get(META_KEY))


def _keep_record(block: ToolResultBlock, record: TruncationRecord) -> None:
    if not isinstance(block.metadata, dict):
        block.metadata = {}
    block.metadata[META_KEY] = record.to_dict()


def result_slots(segment: Segment) -> list[ResultSlot]:
    """A slot for each tool result of ``segment``, with its call's arguments and its record."""
    calls = {b.id: b for b in segment.blocks if isinstance(b, ToolCallBlock)}
    slots = []
    for block in segment.blocks:
        if not isinstance(block, ToolResultBlock):
            continue
        call = calls.get(block.id)
        slots.append(
            ResultSlot(
                call_id=str(block.id),
                tool=str(block.name),
                text=output_text(block.output) if has_text(block.output) else None,
                media=media_of(block.output),
                tool_input=tool_arguments(call) if call is not None else {},
                record=result_record(block),
            )
        )
    return slots


def apply_results(
    segment: Segment, slots: Sequence[ResultSlot], changes: Mapping[str, ResultChange]
) -> bool:
    """Keep each slot's record on its block and write ``changes`` (by call id) into the
    outputs; an output holding text a provider refuses is made sendable too. Whether an output
    was edited."""
    records = {slot.call_id: slot.record for slot in slots}
    edited = False
    for block in segment.blocks:
        if not isinstance(block, ToolResultBlock):
            continue
        if str(block.id) in records:
            _keep_record(block, records[str(block.id)])
        change = changes.get(str(block.id))
        if change is not None:
            block.output = changed_output(block.output, change)
            edited = True
        elif not _is_clean(block.output):
            block.output = changed_output(
                block.output, ResultChange(output_text(block.output), media_of(block.output))
            )
            edited = True
    return edited


def user_text_slots(segment: Segment, msg_id: str) -> list[TextSlot]:
    """A slot for each text block of a user's ``segment`` (keyed ``<msg_id>#<index>``)."""
    if segment.msg.role != "user":
        return []
    places = [
        i
        for i in range(segment.start, segment.end)
        if isinstance(segment.msg.content[i], TextBlock)
    ]
    if not places:
        return []
    states = _text_records(segment.msg)
    return [
        TextSlot(
            f"{msg_id}#{i}",
            segment.msg.content[i].text,
            TruncationRecord.from_dict(states.get(str(segment.msg.content[i].id or i))),
        )
        for i in places
    ]


def apply_texts(segment: Segment, slots: Sequence[TextSlot], changes: Mapping[str, str]) -> None:
    """Keep each slot's record in the message's metadata and write ``changes`` (by slot key)
    into its text blocks."""
    states = _text_records(segment.msg)
    for slot in slots:
        index = int(slot.key.rsplit("#", 1)[1])
        states[str(segment.msg.content[index].id or index)] = slot.record.to_dict()
    for key, text in changes.items():
        block = segment.msg.content[int(key.rsplit("#", 1)[1])]
        block.text = sendable_text(text)


def _text_records(msg: Msg) -> dict[str, dict]:
    """The records of ``msg``'s offloaded text parts, by block id (created on first use)."""
    return msg.metadata.setdefault(META_KEY, {}).setdefault("texts", {})


def changed_output(output: Any, change: ResultChange) -> Any:
    """The new output: a string stays a string; otherwise a text block, then the media in
    order, each kept or replaced by its placeholder text."""
    text = sendable_text(change.text)
    if isinstance(output, str) and not change.media:
        return text
    originals = [item for item in output if isinstance(item, DataBlock)] if output else []
    blocks: list[Any] = [TextBlock(text=text)] if text else []
    for index, item in enumerate(change.media):
        if isinstance(item, str):
            blocks.append(TextBlock(text=item))
        elif index < len(originals):
            blocks.append(originals[index])
    return blocks


def _is_clean(output: Any) -> bool:
    if isinstance(output, str):
        return output == sendable_text(output)
    for item in output or []:
        if isinstance(item, TextBlock) and item.text != sendable_text(item.text):
            return False
    return True


_TEXT_FIELDS = {TextBlock: "text", ThinkingBlock: "thinking", ToolCallBlock: "input"}


def make_sendable(msg: Msg) -> bool:
    """Replace the lone surrogates of ``msg``'s texts, thinking, hints and tool-call arguments
    (a user's text or a model's answer may hold one; its tool results are the stages', which
    save their bytes first): 2.x cannot send them nor save its state with them. Whether
    anything changed."""
    changed = False
    for block in msg.content:
        name = _TEXT_FIELDS.get(type(block))
        if name is not None:
            value = getattr(block, name)
            if isinstance(value, str) and sendable_text(value) is not value:
                setattr(block, name, sendable_text(value))
                changed = True
        elif isinstance(block, HintBlock):
            if isinstance(block.hint, str):
                if sendable_text(block.hint) is not block.hint:
                    block.hint, changed = sendable_text(block.hint), True
            else:
                for item in block.hint:
                    if isinstance(item, TextBlock) and sendable_text(item.text) is not item.text:
                        item.text, changed = sendable_text(item.text), True
    return changed
