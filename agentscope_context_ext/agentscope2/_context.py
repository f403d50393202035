"""The core pipeline's view of a 2.x agent's ``state``: :class:`StatePort` implements
:class:`~agentscope_context_ext.core.pipeline.ContextPort` over ``agent.state.context``.

The agent owns the list and grows it in place (one assistant message per reply, extended block
by block), so changes are found by comparing each segment's fingerprint with the previous one;
replacing ``agent.state`` (a state loaded into the agent) or its ``context`` list starts a new
epoch. Each tool result's truncation record lives in its ``ToolResultBlock.metadata`` and the
structured summary in ``state.middle_context``, so both travel with the agent's state; the
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
    Msg,
    SystemMsg,
    ToolResultBlock,
    UserMsg,
)

from ..core.messages import Message
from ..core.pipeline import (
    ResultChange,
    ResultSlot,
    SavedText,
    TextSlot,
    message_bound,
)
from ..core.summary import CompactSummary
from ..core.tokens import TokenCounter
from ._convert import Segment, output_text, segments, to_view
from ._result_blocks import (
    META_KEY,
    apply_results,
    apply_texts,
    changed_output,
    make_sendable,
    result_record,
    result_slots,
    user_text_slots,
)

__all__ = ["META_KEY", "StatePort", "changed_output", "result_record"]

logger = logging.getLogger("agentscope_context_ext")


def _unprocessed(segment: Segment) -> bool:
    return any(
        isinstance(block, ToolResultBlock) and not result_record(block).stage
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
                if seg_id not in self._pending and _unprocessed(segment):
                    self._pending.append(seg_id)
        for seg_id in self._prints.keys() - prints.keys():
            self._removed.add(seg_id)
            self._touched.pop(seg_id, None)
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
        if summary is None:
            state.summary = ""
            state.middle_context.pop(META_KEY, None)
            return
        state.summary = summary.render()
        state.middle_context[META_KEY] = {"summary": summary.model_dump(mode="json")}

    def message_ids(self) -> list[str]:
        self.sync()
        return list(self._order)

    def view(self, msg_id: str, saved_text: SavedText | None = None) -> Message:
        segment = self._get(msg_id)
        return to_view(segment.msg, saved_text, segment.blocks, msg_id)

    def native(self, msg_ids: Sequence[str]) -> list[Msg]:
        return [self._get(msg_id).as_msg() for msg_id in msg_ids]

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
        return result_slots(self._get(msg_id))

    def apply(
        self, msg_id: str, slots: Sequence[ResultSlot], changes: Mapping[str, ResultChange]
    ) -> None:
        if apply_results(self._get(msg_id), slots, changes):
            # an untouched segment keeps its token count
            self._touched[msg_id] = self._touched.get(msg_id, 0) + 1
            self._changed.add(msg_id)
            self._settled = None

    def user_text_slots(self, msg_id: str) -> list[TextSlot]:
        return user_text_slots(self._get(msg_id), msg_id)

    def apply_texts(
        self, msg_id: str, slots: Sequence[TextSlot], changes: Mapping[str, str]
    ) -> None:
        apply_texts(self._get(msg_id), slots, changes)
        if changes:
            self._touched[msg_id] = self._touched.get(msg_id, 0) + 1
            self._changed.add(msg_id)
            self._settled = None

    def make_sendable(self) -> None:
        """Replace the lone surrogates of the context's texts (a user's message, a model's
        answer: :func:`make_sendable`), so that 2.x can send them and save its state; a
        message changed counts as changed."""
        changed = [msg for msg in self.agent.state.context if make_sendable(msg)]
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
