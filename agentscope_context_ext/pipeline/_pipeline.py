"""The pre-reasoning pipeline (SPEC 4): ToolCallResultCompact -> ContextChecker -> Compactor ->
SaveDialog, plus stage one for results whose ``post_acting`` hook did not fire.

Order matters where data could be lost (SPEC 4.4): the raw messages are written to ``dialog/``
(flushed and fsync'ed) before the summary is replaced, and removed from memory only after
both. A dialog write that fails aborts the compaction and keeps every message in memory.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from agentscope.message import Msg

from ..agentscope1._convert import to_views
from ..core.config import ContextConfig
from ..core.summary import merge_refs
from ..core.events import EventBus
from ..memory import ContextMemory
from ..rendering import output_text
from ..core.tokens import TokenCounter
from ..core.workspace import DialogStore, ToolResultStore, atomic_write_text
from ._checker import ContextChecker, ContextCount
from ._compactor import Compactor
from ..core.pipeline._cut import CutItem, choose_cut, valid_boundaries
from ._tool_results import ToolResultTruncator, TruncationOutcome

logger = logging.getLogger("agentscope_context_ext")

Notify = Callable[[str], Awaitable[None]]
SUMMARY_FILE = "summary.md"
"""The latest summary, rendered, in the workspace (the live one is in the agent's memory)."""

_AFTER_COMPACTION_SHARE = 0.85
"""After a compaction the prompt must be below this share of the trigger (the no-thrash margin)."""
_MIN_COMPACTABLE_SHARE = 0.02
"""Compaction is pointless when less than this share of the window could be removed."""
_RETRY_GROWTH_SHARE = 0.05
"""After a failed compaction, retry only once the prompt grew by this share of the window."""


@dataclass
class PipelineParts:
    """Everything the pipeline works with, built by ``enable_context_management``."""

    config: ContextConfig
    memory: ContextMemory
    counter: TokenCounter
    checker: ContextChecker
    truncator: ToolResultTruncator
    compactor: Compactor
    dialog_store: DialogStore
    tool_result_store: ToolResultStore
    bus: EventBus
    max_input_tokens: int


class ContextPipeline:
    """Runs the stages over one agent's memory. Each public method is safe to call every step."""

    def __init__(self, parts: PipelineParts, notify: Notify | None = None) -> None:
        self.parts = parts
        self.config = parts.config
        self.memory = parts.memory
        self.bus = parts.bus
        self.notify = notify
        self._gain_cache: dict[tuple[str, str], int] = {}
        self._stage_two_done: set[str] = set()
        self._failed_at: int | None = None
        self._overflow_state: tuple[int, int] | None = None
        self.last_raw_total = 0
        self.calibration = 0
        self.on_compacted: Callable[[list[Msg]], Awaitable[None]] | None = None
        """Called with the messages each successful compaction removed (the Summarizer)."""

    def record_usage(self, provider_input_tokens: int, ours: int) -> None:
        """Compare the provider's count of a prompt with ours (SPEC 5.1)."""
        if ours <= 0 or provider_input_tokens <= 0:
            return
        self.bus.stats.token_count_error = round(
            (ours - provider_input_tokens) / provider_input_tokens, 5
        )
        if self.config.calibrate_with_usage:
            self.calibration = provider_input_tokens - ours

    @property
    def trigger_tokens(self) -> int:
        """Compaction starts above this many prompt tokens."""
        return int(self.config.compaction.trigger_ratio * self.parts.max_input_tokens)

    # ---------------------------------------------------------------- stage one

    async def run_stage_one(self) -> list[TruncationOutcome]:
        """Stage one for every tool result that arrived since the last call."""
        if not self.config.truncation.enabled:
            self.memory.pending_results()
            return []
        done = []
        for msg in self.memory.pending_results():
            try:
                outcomes = self.parts.truncator.stage_one(msg, self.memory.tool_input)
            except Exception as exc:  # noqa: BLE001 - keep the result whole, retry next step
                self.memory.requeue(msg)
                await self.bus.emit("warning", where="stage_one", error=repr(exc)[:300])
                continue
            self.memory.touch(msg.id)
            for outcome in outcomes:
                await self._emit_truncation("tool_result_truncated", outcome)
            done.extend(outcomes)
        return done

    # ---------------------------------------------------------------- stage two

    def old_result_messages(self, include_recent: bool = False) -> list[Msg]:
        """Tool-result messages outside the last ``recent_n`` (all of them with ``include_recent``)."""
        result_msgs = self.memory.result_messages()
        recent = self.config.truncation.recent_n
        if include_recent or recent == 0:
            return result_msgs
        return result_msgs[:-recent]

    async def run_stage_two(self, force: bool = False, include_recent: bool = False) -> int:
        """Re-truncate old results; returns tokens saved.

        ``eager`` applies every step; ``batched`` only when ``force`` (a compaction is due) or
        when the estimated gain reaches ``retruncate_min_gain_tokens``, so that the prompt
        prefix stays byte-identical between those moments (provider prompt caching).
        """
        if not self.config.truncation.enabled:
            return 0
        truncator = self.parts.truncator
        # A message whose results all went through stage two never needs another look.
        old = [
            m for m in self.old_result_messages(include_recent) if m.id not in self._stage_two_done
        ]
        candidates = truncator.stage_two_candidates(old)
        if not candidates:
            self._stage_two_done.update(m.id for m in old)
            return 0
        if self.config.truncation.retruncate == "batched" and not force:
            gains = [self._estimated_gain(msg, block) for msg, block in candidates]
            if sum(gains) < self.config.truncation.retruncate_min_gain_tokens:
                # Blocks with nothing to cut change no byte of the prompt: settle them now, so
                # they are not looked at again; the others wait until the gain is worth it.
                waiting = {msg.id for (msg, _), gain in zip(candidates, gains, strict=True) if gain}
                candidates = [c for c, gain in zip(candidates, gains, strict=True) if not gain]
                old = [m for m in old if m.id not in waiting]
        saved = 0
        failed: set[str] = set()
        for msg, block in candidates:
            try:
                outcome = truncator.stage_two_block(
                    msg, block, self.memory.tool_input(str(block.get("id")))
                )
            except Exception as exc:  # noqa: BLE001 - leave this block as it is
                failed.add(msg.id)
                await self.bus.emit("warning", where="stage_two", error=repr(exc)[:300])
                continue
            self._gain_cache.pop((msg.id, str(block.get("id"))), None)
            if outcome is not None:
                self.memory.touch(msg.id)
                saved += outcome.tokens_before - outcome.tokens_after
                await self._emit_truncation("tool_result_retruncated", outcome)
        self._stage_two_done.update(m.id for m in old if m.id not in failed)
        return saved

    def _estimated_gain(self, msg: Msg, block: dict) -> int:
        key = (msg.id, str(block.get("id")))
        if key not in self._gain_cache:
            output = block.get("output")
            media = 0
            if isinstance(output, list):
                media = sum(
                    1
                    for b in output
                    if isinstance(b, dict) and b.get("type") in ("image", "audio", "video")
                )
            text = output_text(output)
            size = len(text.encode("utf-8", errors="replace"))
            limit = self.config.truncation.second_max_bytes
            gain = media * self.parts.counter.media_token_cost  # old media become placeholders
            if size > limit:
                tokens = self.parts.counter.count_text(text)
                gain += max(0, int(tokens * (1 - limit / size)) - 80)
            self._gain_cache[key] = gain
        return self._gain_cache[key]

    # ------------------------------------------------------------ check + compact

    async def before_reasoning(self, sys_prompt: str, tools: list[dict] | None) -> ContextCount:
        """The whole pipeline, as run before a model call."""
        await self.run_stage_one()
        await self._maybe_cleanup()
        if self.config.truncation.retruncate == "eager":
            await self.run_stage_two()
        count = await self.count(sys_prompt, tools, exact_above=self.trigger_tokens)
        if self.config.truncation.retruncate == "batched":
            due = count.total > self.trigger_tokens
            if await self.run_stage_two(force=due):
                count = await self.count(sys_prompt, tools, exact_above=self.trigger_tokens)
        if self.config.compaction.enabled and count.total > self.trigger_tokens:
            count = await self.compact(sys_prompt, tools, count)
        return count

    async def count(
        self, sys_prompt: str, tools: list[dict] | None, exact_above: int | None = None
    ) -> ContextCount:
        """Count the prompt now and record it in the stats.

        With ``exact_above``, new messages are only bounded while the total cannot pass it
        (see ``ContextChecker``); the stats record exact counts only.
        """
        count = await self.parts.checker.count(
            self.memory, sys_prompt, tools, exact_above=exact_above
        )
        if self.config.calibrate_with_usage and self.calibration:
            count = dataclasses.replace(count, calibration=self.calibration)
        if not count.estimated:
            self.last_raw_total = count.total - count.calibration
            stats = self.bus.stats
            stats.last_prompt_tokens = count.total
            stats.peak_prompt_tokens = max(stats.peak_prompt_tokens, count.total)
        return count

    async def compact(
        self,
        sys_prompt: str,
        tools: list[dict] | None,
        count: ContextCount | None = None,
        extra_instruction: str | None = None,
        force: bool = False,
    ) -> ContextCount:
        """Compact the oldest messages (if any can go) and return the new count."""
        count = count or await self.count(sys_prompt, tools)
        window = self.parts.max_input_tokens
        if (
            not force
            and self._failed_at is not None
            and count.total < self._failed_at + _RETRY_GROWTH_SHARE * window
        ):
            return await self._overflow_if_needed(count)
        msgs = self.memory.messages
        tokens = await self.parts.checker.message_tokens(self.memory)
        items = [_cut_item(msg, tokens.get(msg.id, 0)) for msg in msgs]
        # Keep the newest messages that fit in keep_recent_ratio of the window, and never so
        # much that system prompt + summary + tail would sit near the trigger again.
        fixed = count.system + count.tools + max(count.head, self.parts.compactor.budget_tokens)
        budget = min(
            int(self.config.compaction.keep_recent_ratio * window),
            int(self.trigger_tokens * _AFTER_COMPACTION_SHARE) - fixed,
        )
        # A forced compaction (compact_now) keeps only the newest message and what it needs.
        cut = choose_cut(items, 0 if force else max(budget, 0))
        compactable = sum(item.tokens for item in items[:cut])
        if cut == 0 or (not force and compactable < _MIN_COMPACTABLE_SHARE * window):
            return await self._overflow_if_needed(count)
        await self._compact_prefix(msgs[:cut], count, len(msgs) - cut, extra_instruction)
        count = await self.count(sys_prompt, tools)
        # No thrashing (SPEC 4.3): if still near the trigger, cut the kept tail's tool results
        # down too, the recent ones included.
        if count.total > self.trigger_tokens * _AFTER_COMPACTION_SHARE and await self.run_stage_two(
            force=True, include_recent=True
        ):
            count = await self.count(sys_prompt, tools)
        return await self._overflow_if_needed(count)

    async def _compact_prefix(
        self, old: list[Msg], count: ContextCount, kept: int, extra_instruction: str | None
    ) -> None:
        started = time.perf_counter()
        await self.bus.emit(
            "compaction_started",
            tokens_before=count.total,
            trigger_tokens=self.trigger_tokens,
            messages_to_compact=len(old),
            messages_kept=kept,
        )
        await self._notice(
            f"[context] {count.total:,} tokens is over the compaction trigger "
            f"({self.trigger_tokens:,} of a {self.parts.max_input_tokens:,}-token window): "
            f"summarising {len(old)} older message(s), keeping the newest {kept}."
        )
        previous = self.memory.compact_summary
        # The summary reads truncated outputs whole again: it must not lose what an excerpt cut.
        views = to_views(old, self.parts.tool_result_store.read_text)
        result = await self.parts.compactor.summarize(views, previous, extra_instruction)
        summary = result.summary
        # SaveDialog (SPEC 4.4): raw messages to disk first, durably ...
        try:
            refs = self.parts.dialog_store.append(old)
        except Exception as exc:  # noqa: BLE001 - compaction aborted, nothing is lost
            self._failed_at = count.total
            await self.bus.emit(
                "compaction_failed",
                reason="dialog write failed",
                error=repr(exc)[:300],
                tokens=count.total,
            )
            await self._notice(
                f"[context] compaction aborted: cannot save the dialog ({exc}); messages kept."
            )
            return
        await self.bus.emit(
            "dialog_saved",
            messages=len(old),
            refs=[str(ref) for ref in refs],
        )
        # ... then the summary ...
        # The compactor carried the previous summary's references over; add the new ones.
        summary = summary.model_copy(
            update={"dialog_refs": merge_refs([*summary.dialog_refs, *refs])}
        )
        self.memory.set_summary(summary)
        self._write_summary_file(summary)
        # ... and only then remove them from memory.
        removed_ids = [msg.id for msg in old]
        await self.memory.delete(removed_ids)
        self.parts.counter.forget(removed_ids)
        self._failed_at = None
        after = await self.parts.checker.count(self.memory, "", None)
        tokens_after = count.system + count.tools + after.head + after.messages
        await self.bus.emit(
            "compaction_finished",
            tokens_before=count.total,
            tokens_after=tokens_after,
            messages_compacted=len(old),
            messages_kept=kept,
            summary_source=summary.source,
            model_attempts=result.attempts,
            model_failures=len(result.failures),
            dialog_refs=[str(ref) for ref in refs],
            seconds=round(time.perf_counter() - started, 4),
        )
        if self.on_compacted is not None:
            try:
                await self.on_compacted(old)
            except Exception as exc:  # noqa: BLE001 - long-term notes must not undo a compaction
                await self.bus.emit("warning", where="on_compacted", error=repr(exc)[:300])
        where = ", ".join(str(ref) for ref in refs)
        await self._notice(
            f"[context] compacted: {count.total:,} -> {tokens_after:,} tokens; {len(old)} message(s) "
            f"saved to {where}, {kept} kept; summary by "
            f"{'the model' if summary.source == 'llm' else 'extraction'}."
        )

    def _write_summary_file(self, summary) -> None:
        """``<workspace>/summary.md``: the latest summary, for people (``agentscope-context inspect``)."""
        try:
            atomic_write_text(
                self.parts.dialog_store.workspace / SUMMARY_FILE, summary.render() + "\n"
            )
        except OSError as exc:
            logger.warning("cannot write %s: %s", SUMMARY_FILE, exc)

    async def _overflow_if_needed(self, count: ContextCount) -> ContextCount:
        if count.total <= self.trigger_tokens:
            self._overflow_state = None
            return count
        state = (count.total, len(self.memory.content))
        if self._overflow_state != state:
            self._overflow_state = state
            await self.bus.emit(
                "context_overflow",
                tokens=count.total,
                trigger_tokens=self.trigger_tokens,
                max_input_tokens=self.parts.max_input_tokens,
                messages=len(self.memory.content),
                compactable=_compactable_messages(self.memory.messages),
            )
        return count

    async def _maybe_cleanup(self) -> None:
        try:
            removed = self.parts.tool_result_store.maybe_cleanup()
        except Exception as exc:  # noqa: BLE001 - cleanup must never break a step
            await self.bus.emit("warning", where="ttl_cleanup", error=repr(exc)[:300])
            return
        if removed:
            await self.bus.emit("ttl_cleanup", removed=len(removed))

    async def _emit_truncation(self, kind: str, outcome: TruncationOutcome) -> None:
        await self.bus.emit(
            kind,  # type: ignore[arg-type]
            tool=outcome.tool,
            call_id=outcome.call_id,
            path=outcome.path,
            bytes_before=outcome.bytes_before,
            bytes_after=outcome.bytes_after,
            tokens_saved=outcome.tokens_before - outcome.tokens_after,
            bytes_offloaded=outcome.bytes_offloaded,
            media_replaced=outcome.media_replaced,
        )

    async def _notice(self, text: str) -> None:
        if self.config.notices and self.notify is not None:
            try:
                await self.notify(text)
            except Exception:
                logger.exception("could not print a context notice")


def _cut_item(msg: Msg, tokens: int) -> CutItem:
    uses, results = [], []
    if isinstance(msg.content, list):
        for block in msg.content:
            if isinstance(block, dict):
                if block.get("type") == "tool_use":
                    uses.append(str(block.get("id")))
                elif block.get("type") == "tool_result":
                    results.append(str(block.get("id")))
    return CutItem(tokens, tuple(uses), tuple(results))


def _compactable_messages(msgs: list[Msg]) -> int:
    valid = valid_boundaries([_cut_item(msg, 0) for msg in msgs])
    return max((i for i in range(len(msgs)) if valid[i]), default=0)
