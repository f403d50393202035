"""The two truncation stages as decisions on one tool result (design §3.2-3.4).

Stage one runs the moment a result arrives: text over the limit is saved whole to
``tool_result/`` FIRST, then replaced by excerpt + notice. Stage two runs on results older
than the last ``recent_n`` tool-result messages and cuts them to ``second_max_bytes``. Each
result's record (a :class:`TruncationRecord` the adapter keeps with the message) says what was done, so a
result is processed once per stage, even after a session reload, and stage two re-cuts only
notices this package wrote: a forged notice in a tool's output is treated as fresh text.

A result of this package's ``read_file`` is never copied: its notice points at the source file.
When it was read whole (no notice at stage one), stage one records the source and the line it
started at, and stage two cuts it with a notice to the source file.

Both stages respect the window: one result never takes more than ``max_window_share`` of it.
The adapter builds a :class:`ResultSlot` per result and writes a :class:`ResultChange` back.

Beside it: a result's share of the window (``_result_budget``), a change and its measured
outcome (``_result_change``), old media to placeholders (``_media_placeholders``), a user's long
text (``_message_texts``), what a tool's arguments say (``_tool_input``), what may be shown of a
streamed output (``_stream_allowance``).
"""

from __future__ import annotations

import dataclasses
import logging
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any

from ..config import TruncationConfig
from ..messages import Media
from ..tokens import TokenCounter
from ..truncation import (
    RETRUNCATE_SLACK_BYTES,
    count_lines,
    encoded_size,
    notice_only,
    retruncate,
    sendable_text,
    split_notice,
    truncate_fresh,
)
from ..workspace import TOOL_RESULT_DIRNAME, ToolResultStore
from ._faults import SaveFaults
from ._media_placeholders import replace_media
from ._message_texts import PART_PLACEHOLDER, offload_message_texts
from ._result_budget import NOTICE_RESERVE_TOKENS, NOTICE_TOKENS, ResultBudget
from ._result_change import measured_change
from ._slots import ResultChange, ResultSlot, TextSlot, TruncationOutcome
from ._stream_allowance import StreamAllowance
from ._tool_input import read_position, source_path
from ._window_size import Window

__all__ = ["PART_PLACEHOLDER", "ResultTruncator", "StreamAllowance"]

logger = logging.getLogger("agentscope_context_ext")

MAX_EARLY_RECORDS = 1024
"""Results cut as they came out of the tool whose message has not reached the memory yet."""


class ResultTruncator:
    """Decides stage one and stage two for tool results.

    Args:
        config (`TruncationConfig`): Limits and policies.
        store (`ToolResultStore`): Where full texts (and old media) are saved.
        counter (`TokenCounter`): Measures the window share.
        window (`Window`): The window; one result takes at most ``max_window_share`` of it.
        read_file_name (`str | None`): Name of this package's ``read_file`` tool (``None``:
            it is off).
        faults (`SaveFaults | None`): Where failed saves are recorded (the pipeline's).
    """

    def __init__(
        self,
        config: TruncationConfig,
        store: ToolResultStore,
        counter: TokenCounter,
        window: Window,
        read_file_name: str | None = "read_file",
        faults: SaveFaults | None = None,
    ) -> None:
        self.config = config
        self.store = store
        self.faults = faults if faults is not None else SaveFaults()
        self.counter = counter
        self.window = window
        self.read_file_name = read_file_name
        self.budget = ResultBudget(config, counter, window)
        self._early: OrderedDict[str, tuple[str | None, dict[str, Any]]] = OrderedDict()

    @property
    def max_result_tokens(self) -> int:
        """The tokens one result may take now (its share of the window)."""
        return self.budget.max_result_tokens

    def window_changed(self) -> None:
        """Take the window's size now: a result's token cap is its share of it."""
        self.budget.window_changed()

    # ------------------------------------------------------------------ stage one

    def stage_one_early(
        self, slot: ResultSlot
    ) -> tuple[ResultChange | None, TruncationOutcome | None]:
        """Stage one on a result as it comes out of the tool, before anyone sees it (the console,
        AgentScope Studio, the memory). The cut is remembered, so that :meth:`stage_one` adopts
        it when the same text reaches the memory instead of cutting it again."""
        change, outcome = self.stage_one(slot)
        if slot.record.stage >= 1:
            self._early[slot.call_id] = (
                change.text if change else slot.text,
                dataclasses.replace(slot.record),
            )
            self._early.move_to_end(slot.call_id)
            while len(self._early) > MAX_EARLY_RECORDS:
                self._early.popitem(last=False)
        return change, outcome

    def stage_one(self, slot: ResultSlot) -> tuple[ResultChange | None, TruncationOutcome | None]:
        """Stage one for a result not processed yet (else nothing)."""
        record = slot.record
        if record.stage >= 1:
            return None, None
        early = self._early.pop(slot.call_id, None)
        if early is not None and slot.text in (
            early[0],
            None if early[0] is None else sendable_text(early[0]),
        ):
            # Cut when it left the tool (stage_one_early): the same text, so the same record. A
            # text that differs (a forged notice, an edit) is processed afresh below.
            slot.record = record = dataclasses.replace(early[1])
            return None, None
        source = source_path(slot.tool_input)
        markdown = self.config.is_markdown(source)
        if slot.tool in self.config.exempt_tools:
            record.stage, record.exempt = 1, True
            return None, None
        record.stage, record.markdown = 1, markdown
        text = slot.text
        if text is None:
            return None, None
        limit, size, due = self._first_cut(text, source)
        if slot.tool == self.read_file_name and source:
            return self._stage_one_read(slot, text, source, limit, size)
        if not due:
            return None, None
        path = self._save(slot, text)
        if path is None:
            # Never lose the result: it stays whole in memory and is tried again next step.
            record.stage = 0
            return None, None
        record.path, record.bytes = path, size
        cut = self.budget.fit(truncate_fresh(text, max_bytes=limit, file_path=path), limit)
        return measured_change(self.counter, slot, cut, slot.media, 1, path, size, size)

    def stage_one_excerpt(self, slot: ResultSlot) -> str | None:
        """The text stage one would leave of a fresh result, nothing saved (the notice names
        a path of the real one's length); ``None`` when it would leave the result whole."""
        text = slot.text
        source = source_path(slot.tool_input)
        if text is None or slot.tool in self.config.exempt_tools:
            return None
        if slot.tool == self.read_file_name and source:
            return None  # a read of a file: its notice names the file, nothing is cut here
        limit, _, due = self._first_cut(text, source)
        if not due:
            return None
        placeholder = f"{TOOL_RESULT_DIRNAME}/{'0' * 32}.txt"
        return self.budget.fit(truncate_fresh(text, max_bytes=limit, file_path=placeholder), limit)

    def _first_cut(self, text: str, source: str | None) -> tuple[int, int, bool]:
        """Stage one's byte limit for ``text`` (a result of ``source``), its size, and whether
        it must be cut (over the bytes, or over the excerpt's token budget)."""
        first_limit, _ = self.config.limits_for(source)
        limit = min(first_limit, self.budget.max_result_bytes)
        size = encoded_size(text)
        return limit, size, not (size <= limit and self.budget.tokens_fit(text, size))

    def stream_allowance(self, tool: str, tool_input: Mapping[str, Any]) -> StreamAllowance | None:
        """What of an output of ``tool`` called with ``tool_input`` may be shown while it
        streams, before stage one has seen the whole (``None``: all of it, an exempt tool):
        half of stage one's byte limit and half of the excerpt's token budget, so that what
        was shown is the start of what the model gets (stage one keeps an output's head; a
        token-dense text, digits say, is cut by the token budget well below the byte limit)."""
        if tool in self.config.exempt_tools:
            return None
        first_limit, _ = self.config.limits_for(source_path(tool_input))
        excerpt_tokens = max(self.max_result_tokens - NOTICE_RESERVE_TOKENS, 1)
        return StreamAllowance(
            min(first_limit, self.budget.max_result_bytes) // 2, excerpt_tokens // 2, self.counter
        )

    def _stage_one_read(
        self, slot: ResultSlot, text: str, source: str, limit: int, size: int
    ) -> tuple[ResultChange | None, TruncationOutcome | None]:
        """``read_file`` output: never copied; its notice (now or at stage two) names the source."""
        notice = split_notice(text)
        if notice is not None and notice[1].file_path == source:
            slot.record.path, slot.record.source_file = source, True
            fitted = self.budget.fit(text, limit)
            if fitted == text:
                return None, None
            return measured_change(self.counter, slot, fitted, slot.media, 1, source, size, 0)
        if notice is None and not text.startswith("Error: "):
            # Read whole: remember where it came from, so that stage two can cut it with a
            # notice to the source file instead of saving a copy.
            start_line, start_byte = read_position(slot.tool_input)
            record = slot.record
            record.path, record.source_file = source, True
            record.start_line, record.start_byte = start_line, start_byte
        return None, None

    # ------------------------------------------------------------------ stage two

    def needs_stage_two(self, slot: ResultSlot) -> bool:
        """Whether stage two has anything to look at in this (old) result."""
        exempt = slot.record.exempt or slot.tool in self.config.exempt_tools
        return not exempt and slot.record.stage < 2

    def stage_two_cut(self, slot: ResultSlot) -> str | None:
        """How stage two cuts this result's text: ``"notice"`` (re-cut an excerpt of ours),
        ``"source"`` (a ``read_file`` result read whole: cut with a notice to its file),
        ``"save"`` (saved first, then cut), or ``None`` (it fits, or it has no text). The one
        decision both :meth:`stage_two` and :meth:`stage_two_preview` follow."""
        text = slot.text
        if not text:
            return None
        limit = self._stage_two_limit(slot)
        record = slot.record
        if record.path and split_notice(text) is not None:
            return "notice" if retruncate(text, max_bytes=limit) != text else None
        size = encoded_size(text)
        if record.source_file:
            return "source" if size > limit + RETRUNCATE_SLACK_BYTES else None
        return "save" if size > limit else None

    def stage_two(
        self, slot: ResultSlot, keep_media: bool = False
    ) -> tuple[ResultChange | None, TruncationOutcome | None]:
        """Cut one old result down to the stage-two limit; replace its media by placeholders
        (unless ``keep_media``: then the result is looked at again later). Results of exempt
        tools are never touched."""
        if not self.needs_stage_two(slot):
            return None, None
        record = slot.record
        limit = self._stage_two_limit(slot)
        media, replaced = (
            (tuple(slot.media), 0) if keep_media else replace_media(slot, self.store, self.faults)
        )
        # A media block that could not be saved is kept, and the result looked at again later.
        done = not any(isinstance(item, Media) for item in media)
        text = slot.text or ""
        size = encoded_size(text)
        path = record.path
        offloaded = 0
        how = self.stage_two_cut(slot)
        if how == "notice":
            new_text = retruncate(text, max_bytes=limit)
        elif how == "source":
            new_text = truncate_fresh(
                text,
                max_bytes=limit,
                file_path=path,
                start_line=record.start_line,
                total_lines=record.start_line - 1 + count_lines(text),
                start_byte=record.start_byte,
            )
        elif how == "save":
            path = self._save(slot, text)
            if path is None:
                return None, None  # not cut; stage two looks at it again later
            offloaded = size
            record.path = path
            new_text = truncate_fresh(text, max_bytes=limit, file_path=path)
        else:
            new_text = text
        if done:
            record.stage = 2
        if new_text == text and not replaced:
            return None, None
        if slot.text is None:  # media only
            return ResultChange("", media), TruncationOutcome(
                2, slot.call_id, slot.tool, None, 0, 0, 0, 0, 0, replaced
            )
        return measured_change(
            self.counter, slot, new_text, media, 2, path, size, offloaded, replaced
        )

    def stage_two_preview(self, slot: ResultSlot) -> tuple[bool, int]:
        """What :meth:`stage_two` would do to this result, without doing it: whether it would
        change a byte of the prompt, and about how many tokens it would free.

        The two differ: a result just over its limit is changed (excerpt and notice) and frees
        next to nothing, which is why the batched policy waits on the first, not the second."""
        if not self.needs_stage_two(slot):
            return False, 0
        media = sum(1 for item in slot.media if isinstance(item, Media))
        changes, gain = media > 0, media * self.counter.media_token_cost
        if self.stage_two_cut(slot) is not None:
            text = slot.text or ""
            limit, size = self._stage_two_limit(slot), encoded_size(text)
            tokens = self.budget.estimated_tokens(text)
            changes = True
            gain += max(0, int(tokens * (1 - limit / size)) - NOTICE_TOKENS)
        return changes, gain

    # ------------------------------------------------------- the last resort

    def notice_only(self, slot: ResultSlot) -> tuple[ResultChange | None, TruncationOutcome | None]:
        """Cut a result down to its notice alone (where it is, how to read on): the last
        resort when the prompt would otherwise go over the window. Stage two runs first (media
        to placeholders); a result that was never saved is saved now. One that cannot be saved,
        or that still holds media that could not be saved, stays as it is. Exempt results are
        never touched."""
        record = slot.record
        if record.exempt or slot.tool in self.config.exempt_tools or record.stage >= 3:
            return None, None
        change, outcome = self.stage_two(slot)
        text, media = (change.text, change.media) if change is not None else (slot.text, slot.media)
        if not text or any(isinstance(item, Media) for item in media):
            return change, outcome  # nothing to cut, or a media block that must stay
        offloaded = outcome.bytes_offloaded if outcome is not None else 0
        path = record.path
        if path is None:
            path = self._save(slot, text)
            if path is None:
                return change, outcome
            record.path = path
            offloaded = encoded_size(text)
        if split_notice(text) is None:  # whole until now: cut it with a notice first
            text = truncate_fresh(
                text,
                max_bytes=1,
                file_path=path,
                start_line=record.start_line,
                total_lines=record.start_line - 1 + count_lines(text),
                start_byte=record.start_byte,
            )
        cut = notice_only(text)
        if cut is None:
            return change, outcome
        record.stage = 3
        bytes_before = (
            outcome.bytes_before if outcome is not None else encoded_size(slot.text or "")
        )
        replaced = outcome.media_replaced if outcome is not None else 0
        new_change, new_outcome = measured_change(
            self.counter, slot, cut, media, 3, path, bytes_before, offloaded, replaced
        )
        new_outcome.notice_only = True
        return new_change, new_outcome

    def offload_message_texts(
        self, slots: Sequence[TextSlot], tokens: int | None = None
    ) -> tuple[dict[str, str], TruncationOutcome] | None:
        """The text parts of one user message saved in one file and cut
        (:func:`~._message_texts.offload_message_texts`, with this truncator's config, store,
        faults and budget)."""
        return offload_message_texts(
            slots, tokens, self.config, self.store, self.faults, self.budget
        )

    def _stage_two_limit(self, slot: ResultSlot) -> int:
        markdown = slot.record.markdown
        if markdown is None:
            markdown = self.config.is_markdown(source_path(slot.tool_input))
        return self.config.markdown_second_max_bytes if markdown else self.config.second_max_bytes

    # ------------------------------------------------------------------ internals

    def _save(self, slot: ResultSlot, text: str) -> str | None:
        """Save ``text`` whole; ``None`` (and a recorded fault) when the workspace refuses."""
        try:
            path = self.store.save(text)
        except Exception as exc:  # noqa: BLE001 - any failure to save keeps the text whole
            logger.warning("cannot save tool result %s (%s); keeping it whole", slot.call_id, exc)
            slot.record.save_failed = str(exc)[:300]
            self.faults.failed("tool_result", slot.call_id, self.store.directory, exc)
            return None
        slot.record.save_failed = None
        self.faults.saved(slot.call_id)
        return path
