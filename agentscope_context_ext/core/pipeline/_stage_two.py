"""Stage two over the whole memory (design §3.3): old tool results cut down, eagerly or in batches.

``eager`` re-truncates every result outside the last ``recent_n`` tool-result messages as soon
as it is old. ``batched`` (the default, benchmark B4) waits until the tokens it would free reach
``retruncate_min_gain_tokens`` or a compaction is due, so that the prompt stays a byte-identical
extension of the previous one between those moments (what provider prompt caching rewards).
"""

from __future__ import annotations

from ..config import TruncationConfig
from ..events import ContextWarning, EventBus, ToolResultRetruncated
from ._port import ContextPort
from ._slots import ResultChange, ResultSlot, outcome_data
from ._tool_results import ResultTruncator

__all__ = ["StageTwo"]


class StageTwo:
    """Re-truncates old tool results.

    Args:
        config (`TruncationConfig`): ``recent_n``, ``retruncate``, ``retruncate_min_gain_tokens``.
        truncator (`ResultTruncator`): The per-result decisions.
        port (`ContextPort`): The memory.
        bus (`EventBus`): Where ``tool_result_retruncated`` events go.
    """

    def __init__(
        self, config: TruncationConfig, truncator: ResultTruncator, port: ContextPort, bus: EventBus
    ) -> None:
        self.config = config
        self.truncator = truncator
        self.port = port
        self.bus = bus
        self._settled: set[str] = set()
        """Messages whose results are all through stage two: never looked at again."""
        self._waiting: dict[str, int] = {}
        """``batched``: old messages with something to cut, and the tokens it would free."""
        self._epoch: int | None = None
        """The port's epoch both are of: a loaded session starts them over (its messages may
        be earlier versions of settled ones, under the same ids)."""

    @property
    def eager(self) -> bool:
        """Whether stage two runs every step."""
        return self.config.retruncate == "eager"

    def old_messages(self, include_recent: bool = False) -> list[str]:
        """Tool-result messages outside the last ``recent_n`` (all with ``include_recent``)."""
        ids = self.port.result_message_ids()
        recent = self.config.recent_n
        if include_recent or recent == 0:
            return ids
        return ids[:-recent]

    async def run(
        self, force: bool = False, include_recent: bool = False, keep_recent_media: bool = False
    ) -> int:
        """Cut old results (``batched``: only if worth it or ``force``); returns tokens saved.
        ``keep_recent_media``: with ``include_recent``, the recent results keep their media
        blocks (only their text is cut)."""
        if not self.config.enabled:
            return 0
        epoch = self.port.epoch
        if epoch != self._epoch:
            self._epoch, self._settled, self._waiting = epoch, set(), {}
        old = [m for m in self.old_messages(include_recent) if m not in self._settled]
        if self.eager or force:
            recent = set(old) - set(self.old_messages()) if keep_recent_media else set()
            return await self._cut(old, self._candidates(old), keep_media=recent)
        # batched: the gains of waiting messages are known; look only at newly old ones.
        self._waiting = {m: self._waiting[m] for m in old if m in self._waiting}
        fresh = [m for m in old if m not in self._waiting]
        if not fresh and sum(self._waiting.values()) < self.config.retruncate_min_gain_tokens:
            return 0  # nothing newly old, and what waits is still not worth a change
        candidates = self._candidates(fresh)
        previews = [self.truncator.stage_two_preview(slot) for _, slot in candidates]
        if (
            sum(self._waiting.values()) + sum(g for _, g in previews)
            >= self.config.retruncate_min_gain_tokens
        ):
            return await self._cut(old, self._candidates(old))
        # Results stage two would leave byte for byte as they are are settled now, so they are
        # not looked at again; every other one waits for the batch, even one whose cut frees
        # next to nothing: cutting it now would change the prompt's prefix for nothing.
        for (msg_id, _), (changes, gain) in zip(candidates, previews, strict=True):
            if changes:
                self._waiting[msg_id] = self._waiting.get(msg_id, 0) + gain
        unchanged = [c for c, (changes, _) in zip(candidates, previews, strict=True) if not changes]
        return await self._cut([m for m in fresh if m not in self._waiting], unchanged)

    def _candidates(self, msg_ids: list[str]) -> list:
        """(message id, slot) of each result in ``msg_ids`` that stage two still has to see."""
        return [
            (msg_id, slot)
            for msg_id in msg_ids
            for slot in self.port.result_slots(msg_id)
            if self.truncator.needs_stage_two(slot)
        ]

    async def _cut(
        self, old: list[str], candidates: list, keep_media: set[str] = frozenset()
    ) -> int:
        saved = 0
        failed: set[str] = set()
        by_msg: dict[str, tuple[list[ResultSlot], dict[str, ResultChange]]] = {}
        outcomes = []
        for msg_id, slot in candidates:
            slots, changes = by_msg.setdefault(msg_id, ([], {}))
            slots.append(slot)
            try:
                change, outcome = self.truncator.stage_two(slot, keep_media=msg_id in keep_media)
            except Exception as exc:  # noqa: BLE001 - leave this result as it is
                failed.add(msg_id)
                await self.bus.emit(ContextWarning(where="stage_two", error=repr(exc)[:300]))
                continue
            if self.truncator.needs_stage_two(slot):
                failed.add(msg_id)  # a save failed: the result stays as it is, tried again later
            if change is not None:
                changes[slot.call_id] = change
            if outcome is not None:
                saved += outcome.tokens_before - outcome.tokens_after
                outcomes.append(outcome)
        for msg_id, (slots, changes) in by_msg.items():
            self.port.apply(msg_id, slots, changes)
        for outcome in outcomes:
            await self.bus.emit(ToolResultRetruncated(**outcome_data(outcome)))
        for msg_id in old:
            if msg_id not in failed:
                self._settled.add(msg_id)
                self._waiting.pop(msg_id, None)
        return saved
