"""The core pipeline's view of a 2.x agent's ``state``: :class:`StatePort` implements
:class:`~agentscope_context_ext.core.pipeline.ContextPort` over ``agent.state.context``.

The agent owns the list and grows it in place (one assistant message per reply, extended block
by block), so changes are found by comparing each segment's fingerprint with the previous one;
replacing ``agent.state`` (a state loaded into the agent) or its ``context`` list starts a new
epoch. Each tool result's truncation record and the structured summary live in
``state.middle_context`` (``_result_blocks.Records``), beside the context and never in its
messages, so they travel with the agent's state and 2.x's messages stay as 2.x made them; the
rendered summary is ``state.summary``, which 2.x itself puts in front of the context.
Counting goes through the model's own formatter, one segment at a time.

The port's methods share the segment view and its change log, so they stay here; what is read
from and written into one segment's blocks is ``_result_blocks``'s.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from agentscope.message import (
    DataBlock,
    Msg,
    SystemMsg,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    UserMsg,
)

from ..core.messages import Media, Message
from ..core.pipeline import (
    ResultChange,
    ResultSlot,
    SavedText,
    TextSlot,
    message_bound,
)
from ..core.summary import CompactSummary
from ..core.tokens import TokenCounter
from ._convert import Segment, media_block, output_text, segments, to_view, tool_arguments
from ._result_blocks import (
    META_KEY,
    Records,
    apply_results,
    apply_texts,
    changed_output,
    make_sendable,
    result_slots,
    user_text_slots,
)

__all__ = ["META_KEY", "StatePort", "changed_output"]

logger = logging.getLogger("agentscope_context_ext")


def _unprocessed(segment: Segment, records: Records) -> bool:
    return any(
        isinstance(block, ToolResultBlock) and not records.result(segment.msg, block).stage
        for block in segment.blocks
    )


class StatePort:
    """A 2.x agent's state, its model's formatter and a token counter, as a port.

    Args:
        agent: The 2.x ``Agent`` (its ``state`` is read at every call: a state loaded into the
            agent is picked up).
        counter (`TokenCounter`): The vocabulary.
    """

    def __init__(self, agent: Any, counter: TokenCounter) -> None:
        self.agent = agent
        self.counter = counter
        self._epoch = 0
        self._state: Any = None
        self._context: list[Msg] | None = None
        self._order: list[str] = []
        self._segments: dict[str, Segment] = {}
        self._prints: dict[str, tuple] = {}
        self._msg_cache: dict[int, tuple[Msg, str, tuple, list[Segment]]] = {}
        self._changed: set[str] = set()
        self._removed: set[str] = set()
        self._pending: list[str] = []
        self._touched: dict[str, int] = {}
        self._summary: CompactSummary | None = None
        self._sendable: dict[int, tuple[Msg, int, Any]] = {}
        """Message id -> (the message, how many of its blocks were made sendable, the last)."""
        self._in_step = False
        self._settled: tuple | None = None

    # ------------------------------------------------------------------ sync

    @contextlib.contextmanager
    def one_step(self) -> Iterator[None]:
        """The pipeline's step before a reasoning: within it the view is brought up to date
        with the context once, then again only after a change of ours or one that grows or
        shrinks the context (an append while the summary call waits), not at every read. A
        block replaced in place by someone else meanwhile is seen at the next step."""
        self._in_step, self._settled = True, None
        try:
            yield
        finally:
            self._in_step, self._settled = False, None

    def sync(self) -> None:
        """Bring the view up to date with ``agent.state`` (cheap when nothing changed)."""
        state = self.agent.state
        if self._settled is not None and self._current() and self._settled == _shape(state):
            return
        self._settled = None
        if not self._current():
            self._new_epoch(state)
        live: dict[str, Segment] = {}
        order: list[str] = []
        cache: dict[int, tuple[Msg, str, tuple, list[Segment]]] = {}
        for msg in state.context:
            # A message's segments depend on its id and its blocks alone. The blocks are held
            # and compared as a tuple: the same objects compare at C speed, and others only
            # match when equal by value (whose segments are the same).
            blocks = tuple(msg.content)
            cached = self._msg_cache.get(id(msg))
            if (
                cached is not None
                and cached[0] is msg
                and cached[1] == msg.id
                and cached[2] == blocks
            ):
                parts = cached[3]
            else:
                parts = segments(msg)
            cache[id(msg)] = (msg, msg.id, blocks, parts)
            for segment in parts:
                live[segment.id] = segment
                order.append(segment.id)
        self._msg_cache = cache
        prints: dict[str, tuple] = {}
        records = Records(state)
        for seg_id, segment in live.items():
            blocks = segment.msg.content
            fingerprint = (
                id(segment.msg),
                segment.start,
                segment.end,
                id(blocks[segment.end - 1]),
                self._touched.get(seg_id, 0),
            )
            prints[seg_id] = fingerprint
            if self._prints.get(seg_id) != fingerprint:
                self._changed.add(seg_id)
                if seg_id not in self._pending and _unprocessed(segment, records):
                    self._pending.append(seg_id)
        gone = self._prints.keys() - prints.keys()
        for seg_id in gone:
            self._removed.add(seg_id)
            self._touched.pop(seg_id, None)
        if gone:
            records.prune(state.context)
        self._prints = prints
        self._segments = live
        self._order = order
        if self._in_step:
            self._settled = _shape(state)

    def _current(self) -> bool:
        """Whether the view is of the agent's present state and context list (a loaded state
        or a replaced list starts a new epoch)."""
        state = self.agent.state
        return state is self._state and state.context is self._context

    def _new_epoch(self, state: Any) -> None:
        self._epoch += 1
        self._state = state
        self._context = state.context
        self._prints = {}
        self._msg_cache = {}
        self._changed = set()
        self._removed = set()
        self._pending = []
        self._touched = {}
        self._summary = self._load_summary(state)

    def _load_summary(self, state: Any) -> CompactSummary | None:
        """Ours when ``middle_context`` holds the summary that ``state.summary`` shows; a summary
        written by something else (2.x's own compression, the user) is moved to the front of the
        context as the user message 2.x sends it as: the prompt is byte-identical and a later
        compaction saves it to ``dialog/`` instead of overwriting it."""
        record = state.middle_context.get(META_KEY)
        dump = record.get("summary") if isinstance(record, dict) else None
        if isinstance(dump, dict):
            try:
                summary = CompactSummary.model_validate(dump)
            except ValueError:
                summary = None
            if summary is not None and _summary_text(state.summary) == summary.render():
                return summary
        if state.summary:
            text = _summary_text(state.summary)
            digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]
            content = state.summary if isinstance(state.summary, list) else text
            state.context.insert(0, UserMsg("user", content, id=f"summary-{digest}"))
            state.summary = ""
        return None

    # ---------------------------------------------------------------- messages

    @property
    def summary(self) -> CompactSummary | None:
        self._ensure_state()
        return self._summary

    def set_summary(self, summary: CompactSummary | None) -> None:
        self._ensure_state()
        state = self.agent.state
        self._summary = summary
        ours = state.middle_context.get(META_KEY)
        if not isinstance(ours, dict):
            ours = state.middle_context[META_KEY] = {}
        if summary is None:
            state.summary = ""
            ours.pop("summary", None)
            return
        state.summary = summary.render()
        ours["summary"] = summary.model_dump(mode="json")

    def message_ids(self) -> list[str]:
        self.sync()
        return list(self._order)

    def view(self, msg_id: str, saved_text: SavedText | None = None) -> Message:
        segment = self._get(msg_id)
        return to_view(segment.msg, saved_text, segment.blocks, msg_id)

    def native(self, msg_ids: Sequence[str]) -> list[Msg]:
        records = Records(self.agent.state)
        copies = []
        for msg_id in msg_ids:
            segment = self._get(msg_id)
            copy = segment.as_msg()
            records.attach(segment, copy)  # a dialog line says how its parts were cut
            copies.append(copy)
        return copies

    async def remove(self, msg_ids: Sequence[str]) -> None:
        doomed: dict[int, set[int]] = {}
        for msg_id in msg_ids:
            segment = self._get(msg_id)
            doomed.setdefault(id(segment.msg), set()).update(range(segment.start, segment.end))
        context = self.agent.state.context
        kept_msgs = []
        for msg in context:
            drop = doomed.get(id(msg))
            if drop:
                msg.content = [b for i, b in enumerate(msg.content) if i not in drop]
                if not msg.content:
                    continue
            kept_msgs.append(msg)
        context[:] = kept_msgs  # the agent's own list: no new epoch
        self._settled = None
        self.sync()
        await _forget_reads(self.agent.state, kept_msgs)

    def drain_changes(self) -> tuple[int, set[str], set[str]]:
        self.sync()
        changed, removed = self._changed, self._removed
        self._changed, self._removed = set(), set()
        return self._epoch, changed, removed

    @property
    def epoch(self) -> int:
        if not self._current():  # a loaded state or a replaced context list
            self.sync()
        return self._epoch

    # ------------------------------------------------------------ tool results

    def pending_results(self) -> list[str]:
        self.sync()
        pending, self._pending = self._pending, []
        return [seg_id for seg_id in pending if seg_id in self._segments]

    def requeue(self, msg_id: str) -> None:
        if msg_id in self._segments and msg_id not in self._pending:
            self._pending.append(msg_id)

    def result_message_ids(self) -> list[str]:
        self.sync()
        return [
            seg_id
            for seg_id in self._order
            if any(isinstance(b, ToolResultBlock) for b in self._segments[seg_id].blocks)
        ]

    def result_slots(self, msg_id: str) -> list[ResultSlot]:
        return result_slots(self._get(msg_id), Records(self.agent.state))

    def apply(
        self, msg_id: str, slots: Sequence[ResultSlot], changes: Mapping[str, ResultChange]
    ) -> None:
        if apply_results(self._get(msg_id), slots, changes, Records(self.agent.state)):
            # an untouched segment keeps its token count
            self._touched[msg_id] = self._touched.get(msg_id, 0) + 1
            self._changed.add(msg_id)
            self._settled = None

    def user_text_slots(self, msg_id: str) -> list[TextSlot]:
        return user_text_slots(self._get(msg_id), msg_id, Records(self.agent.state))

    def apply_texts(
        self, msg_id: str, slots: Sequence[TextSlot], changes: Mapping[str, str]
    ) -> None:
        apply_texts(self._get(msg_id), slots, changes, Records(self.agent.state))
        if changes:
            self._touched[msg_id] = self._touched.get(msg_id, 0) + 1
            self._changed.add(msg_id)
            self._settled = None

    def user_media(self, msg_id: str) -> list[tuple[str, Media]]:
        segment = self._get(msg_id)
        if segment.msg.role != "user":
            return []
        return [
            (f"{msg_id}#{i}", media_block(segment.msg.content[i]))
            for i in range(segment.start, segment.end)
            if isinstance(segment.msg.content[i], DataBlock)
        ]

    def replace_user_media(self, msg_id: str, placeholders: Mapping[str, str]) -> None:
        segment = self._get(msg_id)
        for key, text in placeholders.items():
            segment.msg.content[int(key.rsplit("#", 1)[1])] = TextBlock(text=text)
        if placeholders:
            self._touched[msg_id] = self._touched.get(msg_id, 0) + 1
            self._changed.add(msg_id)
            self._settled = None

    def make_sendable(self) -> None:
        """Replace the lone surrogates of the context's texts (a user's message, a model's
        answer: :func:`make_sendable`), so that 2.x can send them and save its state; a
        message changed counts as changed."""
        checked = self._sendable
        seen: dict[int, tuple[Msg, int, Any]] = {}
        changed = []
        for msg in self.agent.state.context:
            # Only the blocks added since the last look (2.x appends to a reply's message): a
            # message whose last looked-at block is no longer where it was is looked at again.
            content = msg.content
            known = checked.get(id(msg))
            start = 0
            if (
                known is not None
                and known[0] is msg
                and 0 < known[1] <= len(content)
                and content[known[1] - 1] is known[2]
            ):
                start = known[1]
            if start < len(content) and make_sendable(msg, start):
                changed.append(msg)
            if content:
                seen[id(msg)] = (msg, len(content), content[-1])
        self._sendable = seen
        if changed:
            self.touch_messages(changed)

    def touch_messages(self, msgs: Sequence[Msg]) -> None:
        """Mark every segment of ``msgs`` changed (their blocks were replaced in place, which
        the fingerprints do not see: e.g. 2.x's image limit)."""
        wanted = {id(msg) for msg in msgs}
        self.sync()
        for seg_id, segment in self._segments.items():
            if id(segment.msg) in wanted:
                self._touched[seg_id] = self._touched.get(seg_id, 0) + 1
        self._settled = None
        self.sync()

    # ---------------------------------------------------------------- counting

    async def count(self, msg_id: str) -> int:
        segment = self._get(msg_id)
        return await self._count_msg(segment.msg.model_copy(update={"content": segment.blocks}))

    def bound(self, msg_id: str) -> int:
        if msg_id not in self._segments:
            raise KeyError(msg_id)
        return message_bound(
            self.view(msg_id), self.counter.media_token_cost, self.counter.known_count
        )

    def head_key(self) -> tuple:
        self._ensure_state()
        return (_summary_text(self.agent.state.summary),)

    async def count_head(self) -> int:
        self._ensure_state()
        summary = self.agent.state.summary
        if not summary:
            return 0
        return await self._count_msg(UserMsg("user", summary))

    async def count_system(self, text: str) -> int:
        return await self._count_msg(SystemMsg("system", text))

    async def _count_msg(self, msg: Msg) -> int:
        formatter = getattr(self.agent.model, "formatter", None)
        if formatter is not None:
            try:
                return self.counter.count_formatted(await formatter.format([msg]))
            except Exception as exc:  # noqa: BLE001 - any formatter quirk: count it neutrally
                logger.debug("formatter could not format %s alone (%s)", msg.id, exc)
        return self.counter.count_view(to_view(msg))

    def _ensure_state(self) -> None:
        if not self._current():
            self.sync()

    def _get(self, msg_id: str) -> Segment:
        segment = self._segments.get(msg_id)
        if segment is None:
            self.sync()
            segment = self._segments.get(msg_id)
        if segment is None:
            raise KeyError(f"no message {msg_id} in the agent's context")
        return segment


async def _forget_reads(state: Any, kept: Sequence[Msg]) -> None:
    """Drop 2.x's read cache of every file whose ``Read`` call left the context, as 2.x's own
    compression does: its ``Edit`` and ``Write`` accept a file only while the agent has read
    it, and a read that was compacted away is no read the model can see."""
    tool_context = getattr(state, "tool_context", None)
    clean = getattr(tool_context, "clean_file_cache", None)
    if clean is None:
        return
    kept_reads = {
        path
        for msg in kept
        for block in msg.content
        if isinstance(block, ToolCallBlock) and block.name == "Read"
        for path in [tool_arguments(block).get("file_path")]
        if isinstance(path, str)
    }
    await clean(reserved_file_paths=kept_reads)


def _shape(state: Any) -> tuple:
    """What an append to or a removal from the context changes: its length and its last
    message (which 2.x grows block by block)."""
    context = state.context
    last = context[-1] if context else None
    return (len(context), id(last), len(last.content) if last is not None else 0)


def _summary_text(summary: Any) -> str:
    if isinstance(summary, str):
        return summary
    return output_text(summary or [])
