"""``ContextMemory``: the in-memory layer of the context (design §2.1).

A drop-in ``MemoryBase`` with the whole contract ``ReActAgent`` uses (marks included, since
``ReActAgent`` deletes its hint messages by mark every step), plus what the pipeline needs:

- ``compact_summary`` — the structured summary, served as ONE user message at the head of
  ``get_memory()`` with a stable id, so the prompt prefix does not churn between compactions;
- the long-term memory (``Memory.md`` and the guide to its tools), served the same way just
  before it; it is derived from the file, so it is never part of the saved state;
- a change log (:meth:`drain_changes`) so token accounting touches only what changed;
- the list of messages whose tool results still await stage one (:meth:`pending_results`),
  because ``post_acting`` hooks do not fire for every call when tools run in parallel.

State round-trips through ``state_dict()``/``load_state_dict()`` (e.g. ``JSONSession``). The
summary is saved as the first message of ``content`` (the structured summary in its metadata),
so a session loaded into a plain agent first keeps it and enabling later restores it; the
per-result truncation state travels inside each message's ``metadata``, so it survives too.

One module on purpose: the whole ``MemoryBase`` contract and the change log must agree on every
mutation, so they live in one class.
"""

from __future__ import annotations

from copy import deepcopy
from typing import Any

from agentscope.memory import MemoryBase
from agentscope.message import Msg

from ..core.summary import CompactSummary
from ._messages import (
    compressed_summary_message,
    has_tool_results,
    long_term_message,
    make_sendable,
    summary_message,
    summary_of,
)


class ContextMemory(MemoryBase):
    """Working memory with a compact summary, change tracking and the MemoryBase contract."""

    def __init__(self) -> None:
        super().__init__()
        self.content: list[tuple[Msg, list[str]]] = []
        self.compact_summary: CompactSummary | None = None
        self._index: dict[str, Msg] = {}
        self._summary_msg: Msg | None = None
        self._long_term_msg: Msg | None = None
        self._changed: set[str] = set()
        self._removed: set[str] = set()
        self._epoch = 0
        self._pending: list[str] = []
        self._tool_inputs: dict[str, dict[str, Any]] = {}
        self._result_ids: dict[str, None] = {}

    # ------------------------------------------------------------ MemoryBase

    async def add(
        self,
        memories: Msg | list[Msg] | None,
        marks: str | list[str] | None = None,
        allow_duplicates: bool = False,
        **kwargs: Any,
    ) -> None:
        """Add message(s), each a private copy, with optional mark(s) (as ``InMemoryMemory``)."""
        if memories is None:
            return
        if isinstance(memories, Msg):
            memories = [memories]
        marks = _normalise_marks(marks)
        for msg in memories:
            if not isinstance(msg, Msg):
                raise TypeError(f"memory accepts Msg objects, got {type(msg).__name__}")
            if not allow_duplicates and msg.id in self._index:
                continue
            self._append(deepcopy(msg), list(marks))

    async def delete(self, msg_ids: list[str], **kwargs: Any) -> int:
        """Remove messages by id; returns how many were removed."""
        wanted = set(msg_ids)
        return self._remove_where(lambda msg, _marks: msg.id in wanted)

    async def delete_by_mark(self, mark: str | list[str], *args: Any, **kwargs: Any) -> int:
        """Remove messages carrying any of ``mark``; returns how many were removed."""
        marks = _normalise_marks(mark)
        if not marks:
            return 0
        return self._remove_where(lambda _msg, msg_marks: any(m in msg_marks for m in marks))

    async def size(self) -> int:
        """Number of messages (the summary is not counted)."""
        return len(self.content)

    async def clear(self) -> None:
        """Remove every message and the summary."""
        self.content.clear()
        self._index.clear()
        self.compact_summary = None
        self._summary_msg = None
        self._compressed_summary = ""
        self._pending.clear()
        self._tool_inputs.clear()
        self._result_ids.clear()
        self._reset_tracking()

    async def get_memory(
        self,
        mark: str | None = None,
        exclude_mark: str | None = None,
        prepend_summary: bool = True,
        **kwargs: Any,
    ) -> list[Msg]:
        """Messages filtered by mark, with the summary message first (as the agent sees them)."""
        if not (mark is None or isinstance(mark, str)):
            raise TypeError(f"The mark should be a string or None, but got {type(mark)}.")
        if not (exclude_mark is None or isinstance(exclude_mark, str)):
            raise TypeError(
                f"The exclude_mark should be a string or None, but got {type(exclude_mark)}."
            )
        msgs = [
            msg
            for msg, marks in self.content
            if (mark is None or mark in marks)
            and (exclude_mark is None or exclude_mark not in marks)
        ]
        if not prepend_summary:
            return msgs
        return self.head_messages() + msgs

    async def update_messages_mark(
        self,
        new_mark: str | None,
        old_mark: str | None = None,
        msg_ids: list[str] | None = None,
    ) -> int:
        """Add, replace or remove a mark on messages (same semantics as ``InMemoryMemory``)."""
        updated = 0
        for msg, marks in self.content:
            if msg_ids is not None and msg.id not in msg_ids:
                continue
            if old_mark is not None and old_mark not in marks:
                continue
            if new_mark is None:
                if old_mark in marks:
                    marks.remove(old_mark)
                    updated += 1
            else:
                if old_mark is not None and old_mark in marks:
                    marks.remove(old_mark)
                if new_mark not in marks:
                    marks.append(new_mark)
                    updated += 1
        return updated

    @property
    def compressed_summary(self) -> str:
        """AgentScope's own compression summary (empty unless something set one)."""
        return self._compressed_summary

    async def update_compressed_summary(self, summary: str) -> None:
        """AgentScope's own compression summary (kept and shown after ours, if ever used)."""
        self._compressed_summary = summary
        self._changed.add("__compressed_summary__")

    # --------------------------------------------------------------- summary

    def set_summary(self, summary: CompactSummary | None) -> None:
        """Replace the compact summary (the summary message gets a new stable id)."""
        self.compact_summary = summary
        self._summary_msg = None
        self._changed.add("__summary__")

    def summary_msg(self) -> Msg | None:
        """The summary rendered as one user message, cached until the summary changes."""
        if self.compact_summary is None:
            return None
        if self._summary_msg is None:
            self._summary_msg = summary_message(self.compact_summary)
        return self._summary_msg

    def set_long_term(self, text: str | None) -> None:
        """Show ``text`` (the long-term memory block) before the summary; ``None`` hides it."""
        current = self._long_term_msg.content if self._long_term_msg is not None else None
        if text == current:
            return
        self._long_term_msg = None if text is None else long_term_message(text)
        self._changed.add("__long_term__")

    def head_messages(self) -> list[Msg]:
        """What precedes the messages in the prompt: the long-term memory, our summary, then
        AgentScope's own compression summary, if any."""
        head = [self._long_term_msg] if self._long_term_msg is not None else []
        summary = self.summary_msg()
        if summary is not None:
            head.append(summary)
        if self._compressed_summary:
            head.append(compressed_summary_message(self._compressed_summary))
        return head

    # ------------------------------------------------------ pipeline support

    @property
    def messages(self) -> list[Msg]:
        """The live messages, oldest first (references, not copies)."""
        return [msg for msg, _ in self.content]

    def get(self, msg_id: str) -> Msg | None:
        """The stored message with this id, or ``None``."""
        return self._index.get(msg_id)

    def marks_of(self, msg_id: str) -> list[str]:
        """Marks of one message (empty if unknown)."""
        return next((marks for msg, marks in self.content if msg.id == msg_id), [])

    def touch(self, msg_id: str) -> None:
        """Record that a stored message was edited in place (e.g. truncated)."""
        self._changed.add(msg_id)

    @property
    def epoch(self) -> int:
        """Bumped when the whole content was replaced (clear, load)."""
        return self._epoch

    def drain_changes(self) -> tuple[int, set[str], set[str]]:
        """Return and reset (epoch, changed ids, removed ids) since the last call.

        The epoch changes when the whole content was replaced (clear, load): then every count
        must be rebuilt.
        """
        # Copied and cleared in place: assigning attributes of a StateModule costs a lookup of
        # its registered state on every call, and this runs every step.
        changed, removed = set(self._changed), set(self._removed)
        self._changed.clear()
        self._removed.clear()
        return self._epoch, changed, removed

    def pending_results(self) -> list[Msg]:
        """Messages with tool results not yet through stage one, oldest first; clears the list."""
        if not self._pending:
            return []
        pending = list(self._pending)
        self._pending.clear()
        return [self._index[msg_id] for msg_id in pending if msg_id in self._index]

    def requeue(self, msg: Msg) -> None:
        """Put a message back on the stage-one list (its processing did not complete)."""
        if msg.id not in self._pending:
            self._pending.append(msg.id)

    def result_messages(self) -> list[Msg]:
        """Messages carrying tool results, oldest first (kept as an index, not scanned)."""
        return [self._index[msg_id] for msg_id in self._result_ids]

    def knows_call(self, call_id: str) -> bool:
        """Whether a ``tool_use`` with this id is in the memory (a call of this agent)."""
        return call_id in self._tool_inputs

    def tool_input(self, call_id: str) -> dict[str, Any]:
        """The input of the most recent ``tool_use`` with this id (empty if unknown)."""
        return self._tool_inputs.get(call_id, {})

    # ----------------------------------------------------------------- state

    def state_dict(self) -> dict:
        """Messages with marks (the compact summary first, as a message) and AgentScope's
        summary string: the layout of ``InMemoryMemory``, so either memory loads it."""
        content = [[msg.to_dict(), list(marks)] for msg, marks in self.content]
        summary = self.summary_msg()
        if summary is not None:
            content.insert(0, [summary.to_dict(), []])
        return {"_compressed_summary": self._compressed_summary, "content": content}

    def load_state_dict(self, state_dict: dict, strict: bool = True) -> None:
        """Restore from :meth:`state_dict` (an ``InMemoryMemory`` state also loads)."""
        if strict and "content" not in state_dict:
            raise KeyError("The state_dict does not contain 'content' required by ContextMemory.")
        self.content = []
        self._index = {}
        self._pending = []
        self._tool_inputs = {}
        self._result_ids = {}
        summary: CompactSummary | None = None
        for item in state_dict.get("content", []):
            if isinstance(item, list | tuple) and len(item) == 2:
                msg_dict, marks = item
            elif isinstance(item, dict):
                msg_dict, marks = item, []
            else:
                raise ValueError("Invalid item format in state_dict for ContextMemory.")
            msg = Msg.from_dict(msg_dict)
            carried = summary_of(msg)
            if carried is not None:
                summary = carried  # the summary message, wherever a plain memory put it
                continue
            self._append(msg, list(marks))
        if summary is None and state_dict.get("compact_summary"):  # files saved by earlier versions
            summary = CompactSummary.model_validate(state_dict["compact_summary"])
        self.compact_summary = summary
        self._summary_msg = None
        self._compressed_summary = state_dict.get("_compressed_summary", "") or ""
        self._reset_tracking()

    # -------------------------------------------------------------- internals

    def _append(self, msg: Msg, marks: list[str]) -> None:
        make_sendable(msg)  # its own copy: a user's text or a model's answer, sendable
        self.content.append((msg, marks))
        self._index[msg.id] = msg
        self._changed.add(msg.id)
        if isinstance(msg.content, list):
            for block in msg.content:
                if isinstance(block, dict) and block.get("type") == "tool_use":
                    self._tool_inputs[str(block.get("id"))] = dict(block.get("input") or {})
        if has_tool_results(msg):
            self._pending.append(msg.id)
            self._result_ids[msg.id] = None

    def _remove_where(self, predicate) -> int:
        kept = []
        removed = 0
        for msg, marks in self.content:
            if predicate(msg, marks):
                removed += 1
                self._index.pop(msg.id, None)
                self._result_ids.pop(msg.id, None)
                self._removed.add(msg.id)
                self._changed.discard(msg.id)
            else:
                kept.append((msg, marks))
        self.content = kept
        return removed

    def _reset_tracking(self) -> None:
        self._epoch += 1
        self._changed = set()
        self._removed = set()


def _normalise_marks(marks: str | list[str] | None) -> list[str]:
    if marks is None:
        return []
    if isinstance(marks, str):
        return [marks]
    if isinstance(marks, list) and all(isinstance(m, str) for m in marks):
        return marks
    raise TypeError(
        f"The mark should be a string, a list of strings, or None, but got {type(marks)}."
    )
