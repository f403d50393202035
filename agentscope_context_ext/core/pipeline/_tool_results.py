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

One module on purpose: every decision on one result (stage one, stage two, the notice alone, a
user's text) shares the save-first, fit-to-the-window and record helpers of
:class:`ResultTruncator`.
"""

from __future__ import annotations

import base64
import binascii
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
from ..workspace import ToolResultStore
from ._faults import SaveFaults
from ._slots import ResultChange, ResultSlot, TextSlot, TruncationOutcome
from ._window_size import Window

__all__ = ["PART_PLACEHOLDER", "ResultTruncator", "StreamAllowance"]

logger = logging.getLogger("agentscope_context_ext")

PATH_ARGUMENTS = ("file_path", "path", "filepath", "filename", "file")
_MAX_FIT_ROUNDS = 8
NOTICE_RESERVE_TOKENS = 160
"""Tokens kept free for the truncation notice when fitting an excerpt under the window cap."""
NOTICE_TOKENS = 80
"""About what a truncation notice costs, taken off a cut's estimated gain."""
PART_PLACEHOLDER = "[…]"
"""What a part of a user's message becomes when it was saved with others and their one notice
is in an earlier part of the message (a text part is never left empty: providers refuse
those)."""
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
        self.window_changed()
        self._early: OrderedDict[str, tuple[str | None, dict[str, Any]]] = OrderedDict()

    def window_changed(self) -> None:
        """Take the window's size now: a result's token cap is its share of it."""
        self.max_result_tokens = max(64, self.config.result_tokens(self.window.tokens))
        # A token cap turns into a byte budget only loosely (1 token is 1 to ~6 bytes): start
        # from 4 bytes per token and correct by measuring (_fit).
        self._max_result_bytes = self.max_result_tokens * 4

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
        source = _source_path(slot.tool_input)
        markdown = self.config.is_markdown(source)
        if slot.tool in self.config.exempt_tools:
            record.stage, record.exempt = 1, True
            return None, None
        record.stage, record.markdown = 1, markdown
        text = slot.text
        if text is None:
            return None, None
        first_limit, _ = self.config.limits_for(source)
        limit = min(first_limit, self._max_result_bytes)
        size = encoded_size(text)
        if slot.tool == self.read_file_name and source:
            return self._stage_one_read(slot, text, source, limit, size)
        if size <= limit and self._tokens_fit(text, size):
            return None, None
        path = self._save(slot, text)
        if path is None:
            # Never lose the result: it stays whole in memory and is tried again next step.
            record.stage = 0
            return None, None
        record.path, record.bytes = path, size
        cut = self._fit(truncate_fresh(text, max_bytes=limit, file_path=path), limit)
        return self._change(slot, cut, slot.media, 1, path, size, size)

    def stream_allowance(self, tool: str, tool_input: Mapping[str, Any]) -> StreamAllowance | None:
        """What of an output of ``tool`` called with ``tool_input`` may be shown while it
        streams, before stage one has seen the whole (``None``: all of it, an exempt tool):
        half of stage one's byte limit and half of the excerpt's token budget, so that what
        was shown is the start of what the model gets (stage one keeps an output's head; a
        token-dense text, digits say, is cut by the token budget well below the byte limit)."""
        if tool in self.config.exempt_tools:
            return None
        first_limit, _ = self.config.limits_for(_source_path(tool_input))
        excerpt_tokens = max(self.max_result_tokens - NOTICE_RESERVE_TOKENS, 1)
        return StreamAllowance(
            min(first_limit, self._max_result_bytes) // 2, excerpt_tokens // 2, self.counter
        )

    def _stage_one_read(
        self, slot: ResultSlot, text: str, source: str, limit: int, size: int
    ) -> tuple[ResultChange | None, TruncationOutcome | None]:
        """``read_file`` output: never copied; its notice (now or at stage two) names the source."""
        notice = split_notice(text)
        if notice is not None and notice[1].file_path == source:
            slot.record.path, slot.record.source_file = source, True
            fitted = self._fit(text, limit)
            if fitted == text:
                return None, None
            return self._change(slot, fitted, slot.media, 1, source, size, 0)
        if notice is None and not text.startswith("Error: "):
            # Read whole: remember where it came from, so that stage two can cut it with a
            # notice to the source file instead of saving a copy.
            start_line, start_byte = _read_position(slot.tool_input)
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
        media, replaced = (tuple(slot.media), 0) if keep_media else self._replace_media(slot)
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
        return self._change(slot, new_text, media, 2, path, size, offloaded, replaced)

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
            tokens = self._estimated_tokens(text)
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
        new_change, new_outcome = self._change(
            slot, cut, media, 3, path, bytes_before, offloaded, replaced
        )
        new_outcome.notice_only = True
        return new_change, new_outcome

    def offload_message_texts(
        self, slots: Sequence[TextSlot], tokens: int | None = None
    ) -> tuple[dict[str, str], TruncationOutcome] | None:
        """Text parts of one user message saved whole in ONE file (``message/``, kept for good,
        never expired like outputs) and cut: the first part to a head excerpt of that file with
        one notice, like a tool result at stage one (``read_file`` reads on), every other part
        to :data:`PART_PLACEHOLDER` (300 parts once kept 300 notices, 76,772 tokens of them).
        Each slot's record says where its part is: ``path``, ``start_line``, ``bytes``.

        Args:
            slots (`Sequence[TextSlot]`): The parts to cut, in message order; those cut before
                or empty are left alone. A single part is cut only when over the window share.
            tokens (`int | None`): What the excerpt and its notice may take (default: the
                share).

        Returns:
            `tuple[dict[str, str], TruncationOutcome] | None`: The new text of each part by
            slot key, and the outcome; ``None`` when there is nothing to cut or the file
            cannot be saved (a fault is recorded and every text stays whole).
        """
        slots = [slot for slot in slots if not slot.record.path and slot.text]
        if not slots:
            return None
        texts = [slot.text for slot in slots]
        if len(slots) == 1 and self._tokens_fit(texts[0], encoded_size(texts[0])):
            return None
        try:
            path, starts = self.store.save_message_parts(texts)
        except Exception as exc:  # noqa: BLE001 - any failure to save keeps the texts whole
            logger.warning("cannot save a user's text (%s); keeping it whole", exc)
            self.faults.failed("message", slots[0].key, self.store.directory, exc)
            return None
        for slot, start in zip(slots, starts, strict=True):
            self.faults.saved(slot.key)
            slot.record.stage, slot.record.path = 1, path
            slot.record.bytes, slot.record.start_line = encoded_size(slot.text), start
        whole = "".join(t if t.endswith("\n") else t + "\n" for t in texts[:-1]) + texts[-1]
        size = encoded_size(whole)
        cap = self.max_result_tokens if tokens is None else max(tokens, 1)
        limit = min(self.config.first_max_bytes, self._max_result_bytes, cap * 4)
        cut = truncate_fresh(whole, max_bytes=limit, file_path=path, message=True)
        cut = self._fit(cut, limit, cap)
        result = ResultSlot(slots[0].key, "", whole, record=dataclasses.replace(slots[0].record))
        changes = {slots[0].key: cut} | {slot.key: PART_PLACEHOLDER for slot in slots[1:]}
        shown = "".join(changes.values())
        _, outcome = self._change(result, shown, (), 1, path, size, size)
        return changes, outcome

    def _stage_two_limit(self, slot: ResultSlot) -> int:
        markdown = slot.record.markdown
        if markdown is None:
            markdown = self.config.is_markdown(_source_path(slot.tool_input))
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

    def _change(
        self,
        slot: ResultSlot,
        new_text: str,
        media: tuple[Media | str, ...],
        stage: int,
        path: str | None,
        bytes_before: int,
        offloaded: int,
        replaced: int = 0,
    ) -> tuple[ResultChange, TruncationOutcome]:
        bytes_after = encoded_size(new_text)
        tokens_after = self.counter.count_text(new_text)
        tokens_before = round(tokens_after * bytes_before / bytes_after) if bytes_after else 0
        outcome = TruncationOutcome(
            stage=stage,
            call_id=slot.call_id,
            tool=slot.tool,
            path=path,
            bytes_before=bytes_before,
            bytes_after=bytes_after,
            tokens_before=max(tokens_before, tokens_after),
            tokens_after=tokens_after,
            bytes_offloaded=offloaded,
            media_replaced=replaced,
        )
        return ResultChange(new_text, media), outcome

    def _estimated_tokens(self, text: str) -> int:
        """About the tokens of ``text``: of a truncated output, its excerpt's (which stage one
        counted when it fitted it, so the counter knows it) plus its notice's."""
        parts = split_notice(text)
        if parts is None:
            return self.counter.count_text(text)
        excerpt = parts[0]
        return self.counter.count_text(excerpt) + self.counter.count_text(text[len(excerpt) :])

    def _tokens_fit(self, text: str, size: int) -> bool:
        # Cheap first: a text of at most max_tokens bytes cannot exceed max_tokens tokens.
        return (
            size <= self.max_result_tokens
            or self.counter.count_text(text) <= self.max_result_tokens
        )

    def _fit(self, text: str, limit: int, cap: int | None = None) -> str:
        """Re-cut an excerpt + notice until it is within the token cap (default: the window
        share).

        Only the excerpt is measured, against the cap minus a fixed reserve for the notice: the
        notice names a file whose token count varies, and the cut must not depend on it (the
        same session must give the same prompts).
        """
        cap = self.max_result_tokens if cap is None else cap
        budget = max(cap - NOTICE_RESERVE_TOKENS, 1)
        for _ in range(_MAX_FIT_ROUNDS):
            parts = split_notice(text)
            if parts is None:
                return text
            excerpt, notice = parts
            tokens = self.counter.count_text(excerpt)
            if tokens <= budget or notice.excerpt_bytes <= 1:
                return text
            target = int(notice.excerpt_bytes * budget / tokens * 0.95)
            target = max(1, min(target, notice.excerpt_bytes - RETRUNCATE_SLACK_BYTES - 1))
            text = retruncate(text, max_bytes=target)
        return text

    def _replace_media(self, slot: ResultSlot) -> tuple[tuple[Media | str, ...], int]:
        """Each media block as a placeholder naming its saved copy; a block that cannot be
        saved stays as it is (nothing leaves the context before it is on disk)."""
        replaced = tuple(
            self._placeholder(media, f"{slot.call_id}#media{index}")
            for index, media in enumerate(slot.media)
        )
        return replaced, sum(1 for item in replaced if isinstance(item, str))

    def _placeholder(self, media: Media, key: str) -> Media | str:
        if media.data is None:
            return f"[{media.kind} removed from the context to save tokens; source: {media.url}]"
        data = media.data.split(",", 1)[1] if media.data.startswith("data:") else media.data
        media_type = media.media_type or "application/octet-stream"
        try:
            try:
                raw = base64.b64decode("".join(data.split()), validate=True)
            except (binascii.Error, ValueError):
                # Not base64 after all: keep exactly what the block held, as text.
                path = self.store.save(media.data)
                self.faults.saved(key)
                return (
                    f"[{media.kind} ({media_type}) removed from the context; its data was not "
                    f"valid base64 and is saved as text: {path}]"
                )
            path = self.store.save_media(raw, media_type)
        except OSError as exc:
            logger.warning("cannot save an old %s block (%s); keeping it", media.kind, exc)
            self.faults.failed("tool_result", key, self.store.directory, exc)
            return media
        self.faults.saved(key)
        return (
            f"[{media.kind} ({media_type}, {len(raw)} bytes) removed from the context to "
            f"save tokens; saved copy: {path}]"
        )


def _source_path(tool_input: Mapping[str, Any]) -> str | None:
    for key in PATH_ARGUMENTS:
        value = tool_input.get(key)
        if isinstance(value, str) and value.strip():
            return value
    return None


def _read_position(tool_input: Mapping[str, Any]) -> tuple[int, int]:
    """(start_line, start_byte) a read began at, from its arguments (1 and 0 when absent)."""
    try:
        start_line = int(tool_input.get("start_line") or 1)
        start_byte = int(tool_input.get("start_byte") or 0)
    except (TypeError, ValueError, OverflowError):
        return 1, 0
    return max(start_line, 1), max(start_byte, 0)


class StreamAllowance:
    """The part of one streamed output that may be shown before it is whole: chunks are
    taken while their texts stay within ``max_bytes`` UTF-8 bytes and ``max_tokens`` tokens
    (counted chunk by chunk: the sum is never below the count of the joined text by more than
    a token a chunk, and the halved budgets leave room for that).

    Args:
        max_bytes (`int`): UTF-8 bytes that may be shown.
        max_tokens (`int`): Tokens that may be shown.
        counter (`TokenCounter`): Counts a chunk's text.
    """

    def __init__(self, max_bytes: int, max_tokens: int, counter: TokenCounter) -> None:
        self.max_bytes = max_bytes
        self.max_tokens = max_tokens
        self._counter = counter
        self._bytes = 0
        self._tokens = 0

    def take(self, text: str) -> bool:
        """Whether ``text`` (the next chunk's) still fits; if it does, it is counted as shown."""
        size = encoded_size(text)
        if self._bytes + size > self.max_bytes:
            return False
        tokens = self._counter.count_text(text) if text else 0
        if self._tokens + tokens > self.max_tokens:
            return False
        self._bytes += size
        self._tokens += tokens
        return True
