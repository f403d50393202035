"""Stage two over the whole memory (SPEC 3.3): old tool results cut down, eagerly or in batches.

``eager`` re-truncates every result outside the last ``recent_n`` tool-result messages as soon
as it is old. ``batched`` (the default, benchmark B4) waits until the tokens it would free reach
``retruncate_min_gain_tokens`` or a compaction is due, so that the prompt stays a byte-identical
extension of the previous one between those moments (what provider prompt caching rewards).
"""

from __future__ import annotations

from ..config import TruncationConfig
from ..events import EventBus
from ._port import ContextPort
from ._slots import ResultChange, outcome_data
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
        self._gains: dict[tuple[str, str], int] = {}
        self._settled: set[str] = set()
        """Messages whose results are all through stage two: never looked at again."""

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

    async def run(self, force: bool = False, include_recent: bool = False) -> int:
        """Cut old results (``batched``: only if worth it or ``force``); returns tokens saved."""
        if not self.config.enabled:
            return 0
        old = [m for m in self.old_messages(include_recent) if m not in self._settled]
        candidates = [
            (msg_id, slot)
            for msg_id in old
            for slot in self.port.result_slots(msg_id)
            if self.truncator.needs_stage_two(slot)
        ]
        if not candidates:
            self._settled.update(old)
            return 0
        if not self.eager and not force:
            gains = [self._gain(msg_id, slot) for msg_id, slot in candidates]
            if sum(gains) < self.config.retruncate_min_gain_tokens:
                # Results with nothing to cut change no byte of the prompt: settle them now,
                # so they are not looked at again; the others wait until the gain is worth it.
                waiting = {m for (m, _), gain in zip(candidates, gains, strict=True) if gain}
                candidates = [c for c, gain in zip(candidates, gains, strict=True) if not gain]
                old = [m for m in old if m not in waiting]
        return await self._cut(old, candidates)

    async def _cut(self, old: list[str], candidates: list) -> int:
        saved = 0
        failed: set[str] = set()
        changes: dict[str, dict[str, ResultChange]] = {}
        outcomes = []
        for msg_id, slot in candidates:
            try:
                change, outcome = self.truncator.stage_two(slot)
            except Exception as exc:  # noqa: BLE001 - leave this result as it is
                failed.add(msg_id)
                await self.bus.emit("warning", where="stage_two", error=repr(exc)[:300])
                continue
            self._gains.pop((msg_id, slot.call_id), None)
            if change is not None:
                changes.setdefault(msg_id, {})[slot.call_id] = change
            if outcome is not None:
                saved += outcome.tokens_before - outcome.tokens_after
                outcomes.append(outcome)
        for msg_id, by_call in changes.items():
            self.port.apply(msg_id, by_call)
        for outcome in outcomes:
            await self.bus.emit("tool_result_retruncated", **outcome_data(outcome))
        self._settled.update(m for m in old if m not in failed)
        return saved

    def _gain(self, msg_id: str, slot) -> int:
        key = (msg_id, slot.call_id)
        if key not in self._gains:
            self._gains[key] = self.truncator.estimated_gain(slot)
        return self._gains[key]
