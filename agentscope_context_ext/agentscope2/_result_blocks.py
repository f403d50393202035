"""This package's records beside a 2.x agent's context (design §1.6): each tool result's
truncation record and each offloaded user text's, in ``state.middle_context`` under
:data:`META_KEY`, never in the messages (2.x's message equality, its stored messages and its
clients see the messages exactly as 2.x made them); the slots the pipeline decides on, read from
one segment's blocks, and its changes written back into them; and the lone surrogates of a
message's other texts replaced (:func:`make_sendable`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
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
    "Records",
    "apply_results",
    "apply_texts",
    "changed_output",
    "make_sendable",
    "result_slots",
    "user_text_slots",
]

META_KEY = "agentscope_context_ext"
"""Key of this package's part of ``state.middle_context`` (the summary and the records)."""


def result_key(msg: Msg, block: ToolResultBlock) -> str:
    """Which result a record is of: its message, call id and creation time (a call id may be
    reused; a result keeps its creation time through edits, saves and loads)."""
    return f"{msg.id}/{block.id}/{block.created_at}"


class Records:
    """The records of one agent state: ``state.middle_context[META_KEY]``'s ``results`` (by
    :func:`result_key`) and ``texts`` (by message id, then text block id or index). A record
    an earlier release kept in a block's or message's ``metadata`` is read from there and moved
    here when next written."""

    def __init__(self, state: Any) -> None:
        self.state = state

    def _part(self, name: str, create: bool = False) -> dict[str, Any]:
        ours = self.state.middle_context.get(META_KEY)
        if not isinstance(ours, dict):
            if not create:
                return {}
            ours = self.state.middle_context[META_KEY] = {}
        part = ours.get(name)
        if not isinstance(part, dict):
            if not create:
                return {}
            part = ours[name] = {}
        return part

    def result(self, msg: Msg, block: ToolResultBlock) -> TruncationRecord:
        """The truncation record of one tool result (a fresh one when it has none)."""
        data = self._part("results").get(result_key(msg, block))
        if data is None and isinstance(block.metadata, dict):
            data = block.metadata.get(META_KEY)
        return TruncationRecord.from_dict(data)

    def keep_result(self, msg: Msg, block: ToolResultBlock, record: TruncationRecord) -> None:
        self._part("results", create=True)[result_key(msg, block)] = record.to_dict()
        if isinstance(block.metadata, dict):
            block.metadata.pop(META_KEY, None)

    def texts(self, msg: Msg) -> dict[str, Any]:
        """The records of ``msg``'s offloaded text parts, by block id (or index)."""
        found = self._part("texts").get(str(msg.id))
        if found is None and isinstance(msg.metadata, dict):
            legacy = msg.metadata.get(META_KEY)
            found = legacy.get("texts") if isinstance(legacy, dict) else None
        return found if isinstance(found, dict) else {}

    def keep_texts(self, msg: Msg, records: dict[str, Any]) -> None:
        self._part("texts", create=True)[str(msg.id)] = records
        if isinstance(msg.metadata, dict):
            msg.metadata.pop(META_KEY, None)

    def prune(self, context: Iterable[Msg]) -> None:
        """Forget the records of results and messages no longer in ``context``."""
        results, texts = self._part("results"), self._part("texts")
        if not results and not texts:
            return
        live_results: set[str] = set()
        live_msgs: set[str] = set()
        for msg in context:
            live_msgs.add(str(msg.id))
            for block in msg.content:
                if isinstance(block, ToolResultBlock):
                    live_results.add(result_key(msg, block))
        for key in results.keys() - live_results:
            del results[key]
        for key in texts.keys() - live_msgs:
            del texts[key]

    def attach(self, segment: Segment, copy: Msg) -> None:
        """Write the records of ``segment`` into ``copy`` (its saved copy, e.g. a dialog line):
        a saved message tells how its parts were cut, as the live one's records do."""
        for original, block in zip(segment.blocks, copy.content, strict=True):
            if isinstance(original, ToolResultBlock):
                record = self.result(segment.msg, original)
                if record.stage:
                    metadata = dict(block.metadata) if isinstance(block.metadata, dict) else {}
                    block.metadata = {**metadata, META_KEY: record.to_dict()}
        texts = self.texts(segment.msg)
        if texts:
            copy.metadata = {**(copy.metadata or {}), META_KEY: {"texts": dict(texts)}}


def result_slots(segment: Segment, records: Records) -> list[ResultSlot]:
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
                record=records.result(segment.msg, block),
            )
        )
    return slots


def apply_results(
    segment: Segment,
    slots: Sequence[ResultSlot],
    changes: Mapping[str, ResultChange],
    records: Records,
) -> bool:
    """Keep each slot's record on its block and write ``changes`` (by call id) into the
    outputs; an output holding text a provider refuses is made sendable too. Whether an output
    was edited."""
    kept = {slot.call_id: slot.record for slot in slots}
    edited = False
    for block in segment.blocks:
        if not isinstance(block, ToolResultBlock):
            continue
        if str(block.id) in kept:
            records.keep_result(segment.msg, block, kept[str(block.id)])
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


def user_text_slots(segment: Segment, msg_id: str, records: Records) -> list[TextSlot]:
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
    states = records.texts(segment.msg)
    return [
        TextSlot(
            f"{msg_id}#{i}",
            segment.msg.content[i].text,
            TruncationRecord.from_dict(states.get(str(segment.msg.content[i].id or i))),
        )
        for i in places
    ]


def apply_texts(
    segment: Segment,
    slots: Sequence[TextSlot],
    changes: Mapping[str, str],
    records: Records,
) -> None:
    """Keep each slot's record beside the context and write ``changes`` (by slot key) into its
    text blocks."""
    states = dict(records.texts(segment.msg))
    for slot in slots:
        index = int(slot.key.rsplit("#", 1)[1])
        states[str(segment.msg.content[index].id or index)] = slot.record.to_dict()
    records.keep_texts(segment.msg, states)
    for key, text in changes.items():
        block = segment.msg.content[int(key.rsplit("#", 1)[1])]
        block.text = sendable_text(text)


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


def make_sendable(msg: Msg, start: int = 0) -> bool:
    """Replace the lone surrogates of ``msg``'s texts, thinking, hints and tool-call arguments
    (a user's text or a model's answer may hold one; its tool results are the stages', which
    save their bytes first) from block ``start`` on: 2.x cannot send them nor save its state
    with them. Whether anything changed."""
    changed = False
    for block in msg.content[start:]:
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
