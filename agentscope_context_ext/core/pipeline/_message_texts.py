"""A user's long text saved whole and cut (design §3.4): the text parts of one user message saved
in ONE file under ``message/`` (kept for good) and replaced by a head excerpt with one notice,
every other part by :data:`PART_PLACEHOLDER`.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence

from ..config import TruncationConfig
from ..truncation import encoded_size, truncate_fresh
from ..workspace import ToolResultStore
from ._faults import SaveFaults
from ._result_budget import ResultBudget
from ._result_change import measured_change
from ._slots import ResultSlot, TextSlot, TruncationOutcome

__all__ = ["PART_PLACEHOLDER", "offload_message_texts"]

logger = logging.getLogger("agentscope_context_ext")

PART_PLACEHOLDER = "[…]"
"""What a part of a user's message becomes when it was saved with others and their one notice
is in an earlier part of the message (a text part is never left empty: providers refuse
those)."""


def offload_message_texts(
    slots: Sequence[TextSlot],
    tokens: int | None,
    config: TruncationConfig,
    store: ToolResultStore,
    faults: SaveFaults,
    budget: ResultBudget,
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
        config (`TruncationConfig`): Stage one's byte limit.
        store (`ToolResultStore`): Where the parts are saved.
        faults (`SaveFaults`): Where a failed save is recorded.
        budget (`ResultBudget`): The window share, and the counter.

    Returns:
        `tuple[dict[str, str], TruncationOutcome] | None`: The new text of each part by
        slot key, and the outcome; ``None`` when there is nothing to cut or the file
        cannot be saved (a fault is recorded and every text stays whole).
    """
    slots = [slot for slot in slots if not slot.record.path and slot.text]
    if not slots:
        return None
    texts = [slot.text for slot in slots]
    if len(slots) == 1 and budget.tokens_fit(texts[0], encoded_size(texts[0])):
        return None
    try:
        path, starts = store.save_message_parts(texts)
    except Exception as exc:  # noqa: BLE001 - any failure to save keeps the texts whole
        logger.warning("cannot save a user's text (%s); keeping it whole", exc)
        faults.failed("message", slots[0].key, store.directory, exc)
        return None
    for slot, start in zip(slots, starts, strict=True):
        faults.saved(slot.key)
        slot.record.stage, slot.record.path = 1, path
        slot.record.bytes, slot.record.start_line = encoded_size(slot.text), start
    whole = "".join(t if t.endswith("\n") else t + "\n" for t in texts[:-1]) + texts[-1]
    size = encoded_size(whole)
    cap = budget.max_result_tokens if tokens is None else max(tokens, 1)
    limit = min(config.first_max_bytes, budget.max_result_bytes, cap * 4)
    cut = truncate_fresh(whole, max_bytes=limit, file_path=path, message=True)
    cut = budget.fit(cut, limit, cap)
    result = ResultSlot(slots[0].key, "", whole, record=dataclasses.replace(slots[0].record))
    changes = {slots[0].key: cut} | {slot.key: PART_PLACEHOLDER for slot in slots[1:]}
    shown = "".join(changes.values())
    _, outcome = measured_change(budget.counter, result, shown, (), 1, path, size, size)
    return changes, outcome
