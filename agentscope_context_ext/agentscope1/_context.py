"""The core pipeline's view of a 1.x agent's memory: :class:`MemoryPort` implements
:class:`~agentscope_context_ext.core.pipeline.ContextPort` over a :class:`ContextMemory`.

Counting goes through the agent's own formatter, one message at a time, so the count is that of
what is sent. Tool results are read into slots (their truncation state lives in the message's
``metadata``, so it travels with session state) and the stages' changes written back into the
``tool_result`` blocks, media kept in place.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from agentscope.formatter import FormatterBase
from agentscope.message import Msg, TextBlock

from ..core.messages import MEDIA_KINDS, Media, Message
from ..core.pipeline import (
    ResultChange,
    ResultSlot,
    SavedText,
    TextSlot,
    TruncationRecord,
    message_bound,
)
from ..core.summary import CompactSummary
from ..core.tokens import TokenCounter
from ..core.truncation import sendable_text
from ._convert import media_block, media_of, output_text, to_view
from ._memory import ContextMemory
from ._messages import result_state, text_state

__all__ = ["MemoryPort"]

logger = logging.getLogger("agentscope_context_ext")


class MemoryPort:
    """A :class:`ContextMemory`, its agent's formatter and a token counter, as a port.

    Args:
        memory (`ContextMemory`): The managed memory.
        formatter (`FormatterBase | None`): The agent's formatter (``None``: a neutral layout).
        counter (`TokenCounter`): The vocabulary.
    """

    def __init__(
        self, memory: ContextMemory, formatter: FormatterBase | None, counter: TokenCounter
    ) -> None:
        self.memory = memory
        self.formatter = formatter
        self.counter = counter

    # ---------------------------------------------------------------- messages

    @property
    def summary(self) -> CompactSummary | None:
        return self.memory.compact_summary

    def set_summary(self, summary: CompactSummary | None) -> None:
        self.memory.set_summary(summary)

    def message_ids(self) -> list[str]:
        return [msg.id for msg in self.memory.messages]

    def view(self, msg_id: str, saved_text: SavedText | None = None) -> Message:
        return to_view(self._get(msg_id), saved_text)

    def native(self, msg_ids: Sequence[str]) -> list[Msg]:
        return [self._get(msg_id) for msg_id in msg_ids]

    async def remove(self, msg_ids: Sequence[str]) -> None:
        await self.memory.delete(list(msg_ids))

    def drain_changes(self) -> tuple[int, set[str], set[str]]:
        return self.memory.drain_changes()

    @property
    def epoch(self) -> int:
        return self.memory.epoch

    def one_step(self) -> contextlib.nullcontext[None]:
        return contextlib.nullcontext()  # the memory keeps its own change log

    # ------------------------------------------------------------ tool results

    def pending_results(self) -> list[str]:
        return [msg.id for msg in self.memory.pending_results()]

    def requeue(self, msg_id: str) -> None:
        msg = self.memory.get(msg_id)
        if msg is not None:
            self.memory.requeue(msg)

    def result_message_ids(self) -> list[str]:
        return [msg.id for msg in self.memory.result_messages()]

    def result_slots(self, msg_id: str) -> list[ResultSlot]:
        msg = self._get(msg_id)
        states = result_state(msg)
        slots = []
        for block in _result_blocks(msg):
            call_id = str(block.get("id"))
            output = block.get("output")
            # The raw text: undecodable bytes (lone surrogates) reach the saved file as the
            # original bytes; what goes back into the message is made sendable (apply).
            text = output_text(output) if _has_text(output) else None
            slots.append(
                ResultSlot(
                    call_id=call_id,
                    tool=str(block.get("name")),
                    text=text,
                    media=media_of(output),
                    tool_input=self.memory.tool_input(call_id),
                    record=TruncationRecord.from_dict(states.get(call_id)),
                )
            )
        return slots

    def output_slot(self, call_id: str, tool: str, output: Any, tool_input: Any) -> ResultSlot:
        """A result that is not in a message yet (a tool's output as it comes out)."""
        return ResultSlot(
            call_id=call_id,
            tool=tool,
            text=output_text(output) if _has_text(output) else None,
            media=media_of(output),
            tool_input=dict(tool_input) if isinstance(tool_input, dict) else {},
        )

    @staticmethod
    def changed_output(output: Any, change: ResultChange) -> Any:
        """``output`` with ``change`` written into it, as :meth:`apply` writes it."""
        return _rebuild(output, ResultChange(sendable_text(change.text), change.media))

    def apply(
        self, msg_id: str, slots: Sequence[ResultSlot], changes: Mapping[str, ResultChange]
    ) -> None:
        msg = self._get(msg_id)
        states = result_state(msg)
        for slot in slots:
            states[slot.call_id] = slot.record.to_dict()
        edited = False
        for block in _result_blocks(msg):
            change = changes.get(str(block.get("id")))
            output = block.get("output")
            if change is not None:
                block["output"] = self.changed_output(output, change)
                edited = True
            elif not _is_clean(output):
                # Outputs of any shape (non-text items, bare strings in a list) become what
                # the formatters expect: text blocks, then the media.
                text = output_text(output)
                block["output"] = _rebuild(
                    output, ResultChange(sendable_text(text), _media(output))
                )
                edited = True
        if edited:  # an untouched message keeps its token count
            self.memory.touch(msg_id)

    # ------------------------------------------------------------ user texts

    def user_text_slots(self, msg_id: str) -> list[TextSlot]:
        msg = self._get(msg_id)
        if msg.role != "user":
            return []
        if isinstance(msg.content, str):
            places = [(0, msg.content)]
        else:
            places = [
                (i, block["text"])
                for i, block in enumerate(msg.content)
                if isinstance(block, dict)
                and block.get("type") == "text"
                and isinstance(block.get("text"), str)
            ]
        states = text_state(msg) if places else {}
        return [
            TextSlot(f"{msg_id}#{index}", text, TruncationRecord.from_dict(states.get(str(index))))
            for index, text in places
        ]

    def apply_texts(
        self, msg_id: str, slots: Sequence[TextSlot], changes: Mapping[str, str]
    ) -> None:
        msg = self._get(msg_id)
        states = text_state(msg)
        for slot in slots:
            states[slot.key.rsplit("#", 1)[1]] = slot.record.to_dict()
        for key, text in changes.items():
            index = int(key.rsplit("#", 1)[1])
            if isinstance(msg.content, str):
                msg.content = sendable_text(text)
            else:
                msg.content[index]["text"] = sendable_text(text)
        if changes:
            self.memory.touch(msg_id)

    def user_media(self, msg_id: str) -> list[tuple[str, Media]]:
        msg = self._get(msg_id)
        if msg.role != "user" or isinstance(msg.content, str):
            return []
        return [
            (f"{msg_id}#{i}", media_block(block))
            for i, block in enumerate(msg.content)
            if isinstance(block, dict) and block.get("type") in MEDIA_KINDS
        ]

    def replace_user_media(self, msg_id: str, placeholders: Mapping[str, str]) -> None:
        msg = self._get(msg_id)
        for key, text in placeholders.items():
            msg.content[int(key.rsplit("#", 1)[1])] = TextBlock(type="text", text=text)
        if placeholders:
            self.memory.touch(msg_id)

    # ---------------------------------------------------------------- counting

    async def count(self, msg_id: str) -> int:
        return await self._count_msg(self._get(msg_id))

    def bound(self, msg_id: str) -> int:
        return message_bound(
            self.view(msg_id), self.counter.media_token_cost, self.counter.known_count
        )

    def head_key(self) -> tuple:
        return tuple(f"{msg.id}:{hash(msg.content)}" for msg in self.memory.head_messages())

    async def count_head(self) -> int:
        return sum([await self._count_msg(msg) for msg in self.memory.head_messages()])

    async def count_system(self, text: str) -> int:
        return await self._count_msg(Msg("system", text, "system"))

    async def _count_msg(self, msg: Msg) -> int:
        if self.formatter is not None:
            try:
                return self.counter.count_formatted(await self.formatter.format([msg]))
            except Exception as exc:  # noqa: BLE001 - any formatter quirk: count it neutrally
                logger.debug("formatter could not format %s alone (%s)", msg.id, exc)
        return self.counter.count_view(to_view(msg))

    def _get(self, msg_id: str) -> Msg:
        msg = self.memory.get(msg_id)
        if msg is None:
            raise KeyError(f"no message {msg_id} in memory")
        return msg


def _result_blocks(msg: Msg) -> list[dict]:
    if not isinstance(msg.content, list):
        return []
    return [b for b in msg.content if isinstance(b, dict) and b.get("type") == "tool_result"]


def _has_text(output: Any) -> bool:
    """Whether an output holds any text at all (a list of media only holds none)."""
    if isinstance(output, list):
        return any(not (isinstance(i, dict) and i.get("type") in MEDIA_KINDS) for i in output)
    return output is not None


def _media(output: Any) -> tuple[dict, ...]:
    if not isinstance(output, list):
        return ()
    return tuple(i for i in output if isinstance(i, dict) and i.get("type") in MEDIA_KINDS)


def _rebuild(output: Any, change: ResultChange) -> Any:
    """The new output: a string stays a string; otherwise text block(s), then the media in
    order, each kept or replaced by its placeholder text."""
    if isinstance(output, str) and not change.media:
        return change.text
    originals = list(_media(output))
    blocks: list[Any] = [TextBlock(type="text", text=change.text)] if change.text else []
    for index, item in enumerate(change.media):
        if isinstance(item, str):
            blocks.append(TextBlock(type="text", text=item))
        elif index < len(originals):
            blocks.append(originals[index])
    return blocks


def _is_clean(output: Any) -> bool:
    """Whether ``output`` already has the shape the formatters expect."""
    if isinstance(output, str):
        return output == sendable_text(output)
    if not isinstance(output, list):
        return output is None
    for item in output:
        if not isinstance(item, dict) or item.get("type") not in ("text", *MEDIA_KINDS):
            return False
        if item.get("type") == "text" and (
            not isinstance(item.get("text"), str) or item["text"] != sendable_text(item["text"])
        ):
            return False
    return True
