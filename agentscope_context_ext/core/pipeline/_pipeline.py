"""The pre-reasoning pipeline (design §4), for any framework behind a :class:`ContextPort`.

Before each model call, in the design's order:

0. stage one for results whose post-tool hook did not run (parallel tool calls), and the TTL
   cleanup of ``tool_result/`` at most hourly;
1. **ToolCallResultCompact**: stage two (:class:`StageTwo`);
2. **TokenTally**: the prompt's tokens (:class:`TokenTally`);
3. **SummaryWriter** and 4. **SaveDialog** above the trigger (:class:`Compaction`);
5. never over the window (:class:`WindowGuard`): every result to stage two, then results down to
   their notices, then large user texts offloaded, and a refusal
   (:class:`ContextOverflowError`) when what is left still does not fit.

A save that fails keeps the data in memory (:class:`SaveFaults`); it is reported once as a
``save_failed`` event, and when the prompt would then exceed the window the call is refused with
:class:`WorkspaceWriteError` (and an ``error`` event) rather than sent. When the provider itself
rejects a call for its length, :meth:`ContextPipeline.recover_overflow` compacts for the retry
and learns the gap, so that the next compaction comes earlier.

One module on purpose: the order of the steps before a model call, and the recovery from a
rejected call, read in one place; the parts are built in ``_build.py``, the count in
``_prompt_counter.py``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..config import ContextConfig
from ..events import (
    ContextWarning,
    EventBus,
    ProviderOverflowRecovered,
    SaveFailed,
    ToolResultTruncated,
    TtlCleanup,
)
from ..provider_errors import LengthRejection
from ..tokens import TokenCounter
from ..truncation import sendable_text
from ..workspace import DialogStore, ToolResultStore, saved_paths
from ._compaction import Compaction
from ._faults import SaveFaults
from ._offer import ToolOffer, tool_name
from ._port import ContextPort
from ._prefix_cost import PrefixCost
from ._prompt_counter import PromptCounter
from ._refusal import live_keys, refuse_on_faults, refuse_unchecked
from ._slots import ResultChange, ResultSlot, outcome_data
from ._stage_two import StageTwo
from ._summary_ahead import AHEAD_SHARE
from ._tally import PromptCount, TokenTally
from ._tool_results import ResultTruncator, StreamAllowance
from ._window import WindowGuard
from ._window_size import Window

__all__ = ["ContextPipeline", "Notify", "PipelineParts"]

Notify = Callable[[str], Awaitable[None]]


@dataclass
class PipelineParts:
    """What a pipeline is made of (see :func:`build_pipeline`)."""

    config: ContextConfig
    port: ContextPort
    counter: TokenCounter
    tally: TokenTally
    count: PromptCounter
    truncator: ResultTruncator
    stage_two: StageTwo
    compaction: Compaction
    dialog_store: DialogStore
    tool_result_store: ToolResultStore
    bus: EventBus
    window: Window
    faults: SaveFaults
    guard: WindowGuard
    offer: ToolOffer
    cost: PrefixCost


class ContextPipeline:
    """Runs the steps over one agent's memory. Each public method is safe to call every step."""

    def __init__(self, parts: PipelineParts) -> None:
        self.parts = parts
        self.config = parts.config
        self.port = parts.port
        self.bus = parts.bus
        self.count = parts.count
        """``await pipeline.count(sys_prompt, tools)``: the prompt's tokens now (of the tools
        the model is shown, see :meth:`offered_tools`)."""
        self.offered_tools = parts.offer
        """``pipeline.offered_tools(schemas)``: the schemas the model should be shown now."""
        self.counted_tools: tuple[str, ...] | None = None
        """Names of the tools the last count before a model call was made with."""
        self._cost_epoch: int | None = None
        """The port's epoch the cost model learned from (a loaded session starts it over)."""

    @property
    def trigger_tokens(self) -> int:
        """Compaction starts above this many prompt tokens."""
        return self.parts.compaction.trigger_tokens

    @property
    def window(self) -> int:
        """The window prompts are fitted in now (the configured one, or the provider's when
        it showed it is smaller)."""
        return self.parts.window.tokens

    async def before_reasoning(self, sys_prompt: str, tools: list[dict] | None) -> PromptCount:
        """The whole pipeline, as run before a model call."""
        self.count.call_made()
        await self.run_stage_one()
        await self.cleanup(due_only=True)
        stage_two = self.parts.stage_two
        if stage_two.eager:
            await stage_two.run()
        cost = self._cost()
        compaction = self.parts.compaction
        if cost.price >= 1.0:
            compaction.swap_late()  # no prompt caching: a late model summary in at once
        # Exact from where the cost model learns the pace (below the trigger when it may wait,
        # or when a summary is written ahead: how far the prompt may grow while it is).
        exact_above = cost.exact_above
        if compaction.ahead is not None:
            exact_above = min(exact_above, int(self.trigger_tokens * AHEAD_SHARE))
        count = await self.count(sys_prompt, tools, exact_above=exact_above)
        if self.config.compaction.enabled:
            try:
                await compaction.look_ahead(count)  # the summary written ahead (§4.6)
            except Exception as exc:  # noqa: BLE001 - optional: never costs the step
                await self.bus.emit(ContextWarning(where="summary_ahead", error=repr(exc)[:300]))
        point = self._point(cost, count)
        if not stage_two.eager:
            due = count.total > point
            # Past the trigger the compaction is near: a batch of stage two waits for it (the
            # compaction re-reads the prompt anyway) instead of breaking the prefix first.
            waiting = not due and count.total > self.trigger_tokens
            if not waiting and await stage_two.run(force=due):
                count = await self.count(sys_prompt, tools, exact_above=exact_above)
                point = self._point(cost, count)
        compactions = self.bus.stats.compactions
        if self.config.compaction.enabled and count.total > point:
            count = await compaction.run(sys_prompt, tools, count, above=point)
        compacted = self.bus.stats.compactions != compactions
        if compacted:
            cost.after_compaction = count.total
        count = await self._within_window(sys_prompt, tools, count, above=point)
        cost.observe(count, compacted)
        return count

    def _point(self, cost: PrefixCost, count: PromptCount) -> int:
        """Where to compact: where it is cheapest (§4.5: the trigger, or later under prompt
        caching), or later still while a summary is written ahead and the prompt may grow."""
        point = cost.compaction_point(count, self.parts.compaction.writer.budget_tokens)
        ahead = self.parts.compaction.ahead
        return point if ahead is None else ahead.wait_point(count, point, cost.wait_limit())

    async def stop_background(self) -> None:
        """Cancel the summary written ahead and wait until its model call is closed."""
        if self.parts.compaction.ahead is not None:
            await self.parts.compaction.ahead.close()

    def _cost(self) -> PrefixCost:
        """The cost model, started over when the port was loaded (another conversation)."""
        cost = self.parts.cost
        if self.port.epoch != self._cost_epoch:
            self._cost_epoch = self.port.epoch
            cost.forget()
        return cost

    async def _within_window(
        self,
        sys_prompt: str,
        tools: list[dict] | None,
        count: PromptCount,
        above: int | None = None,
    ) -> PromptCount:
        """The last steps before a call: fit under ``above`` (the compaction point; default
        the trigger) and the window, or refuse (design §4.3)."""
        guard = self.parts.guard
        count = await guard.fit(sys_prompt, tools, count, above)
        await self._report_faults()
        if self.parts.faults.open and count.floor > self.parts.window.tokens:
            await self._refuse(sys_prompt, tools)
        await guard.check(sys_prompt, tools, count, above)
        self.counted_tools = tuple(tool_name(tool) for tool in self.offered_tools(tools))
        return count

    async def recover_overflow(
        self, sys_prompt: str, tools: list[dict] | None, rejection: LengthRejection
    ) -> PromptCount | None:
        """The provider rejected the last call for its length: learn what it said (the next
        compaction comes earlier, see :meth:`PromptCounter.learn_rejection`), then compact as
        far as a pair-safe cut allows and fit the window, for one retry. ``None`` when nothing
        about the prompt can help (the caller raises the provider's error). Raises
        :class:`ContextOverflowError` when even a compacted prompt cannot fit."""
        before = await self.count(sys_prompt, tools)
        window_before = self.parts.window.tokens
        if not await self.count.learn_rejection(rejection, before.floor, self.parts.window):
            return None
        if self.parts.window.tokens != window_before:
            self.parts.truncator.window_changed()
        before = await self.count(sys_prompt, tools)  # the same prompt, as we count it now
        await self.parts.stage_two.run(force=True, include_recent=True)
        if self.config.compaction.enabled:
            count = await self.parts.compaction.run(sys_prompt, tools, before, force=True)
        else:
            count = await self.count(sys_prompt, tools)
        count = await self._within_window(sys_prompt, tools, count)
        await self.bus.emit(
            ProviderOverflowRecovered(
                tokens_before=before.total,
                tokens_after=count.total,
                provider_tokens=rejection.prompt_tokens,
                provider_limit=rejection.limit_tokens,
                shift=self.count.overflow_shift,
                window=self.parts.window.tokens,
                error=rejection.message,
            )
        )
        return count

    async def learn_rejection(self, ours: int, rejection: LengthRejection) -> None:
        """A rejection that came too late to retry (after the answer began): learn from it
        only, so that the next calls fit (``ours``: our count of that prompt, unshifted)."""
        if await self.count.learn_rejection(rejection, ours, self.parts.window):
            self.parts.truncator.window_changed()

    async def _report_faults(self) -> None:
        for fault in self.parts.faults.unreported():
            await self.bus.emit(
                SaveFailed(what=fault.what, key=fault.key, path=fault.path, error=fault.error)
            )

    async def _refuse(self, sys_prompt: str, tools: list[dict] | None) -> None:
        faults = self.parts.faults
        faults.forget_unless(live_keys(self.port))  # only what still weighs on this prompt
        count = await self.count(sys_prompt, tools)  # exact: never refuse on a bound
        await refuse_on_faults(faults, count, self.parts.window.tokens, self.bus)

    async def refuse_unchecked(
        self, sys_prompt: str, tools: list[dict] | None, failure: OSError
    ) -> None:
        """A step failed on the workspace (``failure``) where no save-failure path caught it:
        refuse a prompt over the window (:func:`refuse_unchecked`, invariant 6)."""
        count = await self.count(sys_prompt, tools)  # exact, and with no store call
        await refuse_unchecked(count, self.parts.window.tokens, self.bus, failure)

    async def stage_one_now(self, slot: ResultSlot) -> ResultChange | None:
        """Stage one on one result as it leaves the tool, before it is printed, streamed to
        AgentScope Studio or stored (the adapter calls this from inside the tool call). What it
        returns is what everyone sees; the memory later adopts the same record. A failure keeps
        the result whole (the memory's own stage one tries again). A result left whole that
        holds a lone surrogate comes back made sendable (:func:`sendable_text`): the framework
        cannot send it or save its state otherwise; a cut one was saved with its bytes first."""
        change = None
        if self.config.truncation.enabled:
            try:
                change, outcome = self.parts.truncator.stage_one_early(slot)
            except Exception as exc:  # noqa: BLE001 - keep the result whole
                await self.bus.emit(ContextWarning(where="stage_one", error=repr(exc)[:300]))
                outcome = None
            if outcome is not None:
                await self.bus.emit(ToolResultTruncated(**outcome_data(outcome)))
        if change is None and slot.text is not None and sendable_text(slot.text) != slot.text:
            change = ResultChange(sendable_text(slot.text), slot.media)
        return change

    def stage_one_excerpt(self, slot: ResultSlot) -> str | None:
        """What stage one would leave of ``slot`` (nothing saved, no event); ``None``: it
        would leave it whole (or truncation is off)."""
        if not self.config.truncation.enabled:
            return None
        return self.parts.truncator.stage_one_excerpt(slot)

    def stream_allowance(self, tool: str, tool_input: Mapping[str, Any]) -> StreamAllowance | None:
        """What of a tool's output may be shown while it streams (as events, on a console),
        before stage one has seen the whole (:class:`StreamAllowance`: half of stage one's
        limits, so that what was shown is the start of what the model gets). ``None``: show
        everything, the output is never cut (truncation off, an exempt tool)."""
        if not self.config.truncation.enabled:
            return None
        return self.parts.truncator.stream_allowance(tool, tool_input)

    async def run_stage_one(self) -> None:
        """Stage one for every tool result that arrived since the last call (and the texts the
        workspace could not take yet saved now, see ``ToolResultStore.save_or_hold``)."""
        faults = self.parts.faults
        for key, exc in self.parts.tool_result_store.flush_held():
            if exc is None:
                faults.saved(f"held:{key}")
            else:
                faults.failed("held", f"held:{key}", key, exc)
        port = self.port
        if not self.config.truncation.enabled:
            port.pending_results()
            return
        truncator = self.parts.truncator
        for msg_id in port.pending_results():
            changes: dict[str, ResultChange] = {}
            outcomes = []
            try:
                retry = False
                slots = port.result_slots(msg_id)
                for slot in slots:
                    change, outcome = truncator.stage_one(slot)
                    if change is not None:
                        changes[slot.call_id] = change
                    if outcome is not None:
                        outcomes.append(outcome)
                    retry = retry or (
                        slot.record.stage == 0 and slot.record.save_failed is not None
                    )
                port.apply(msg_id, slots, changes)
                if retry:  # a save failed: the result stays whole, saved again next step
                    port.requeue(msg_id)
            except Exception as exc:  # noqa: BLE001 - keep the result whole, retry next step
                port.requeue(msg_id)
                await self.bus.emit(ContextWarning(where="stage_one", error=repr(exc)[:300]))
                continue
            for outcome in outcomes:
                await self.bus.emit(ToolResultTruncated(**outcome_data(outcome)))

    async def compact(
        self,
        sys_prompt: str,
        tools: list[dict] | None,
        extra_instruction: str | None = None,
        force: bool = False,
    ) -> PromptCount:
        """Compact now (as far as a pair-safe cut allows) and return the new count."""
        await self.run_stage_one()
        count = await self.count(sys_prompt, tools)
        count = await self.parts.compaction.run(
            sys_prompt, tools, count, extra_instruction=extra_instruction, force=force
        )
        return await self._within_window(sys_prompt, tools, count)

    async def record_usage(self, provider_input_tokens: int, ours: int) -> None:
        """Compare the provider's count of a like prompt with ours (design §5.1)."""
        await self.count.record_usage(provider_input_tokens, ours)

    def referenced_results(self) -> set[str]:
        """Saved results that live messages or the summary still name (never expired)."""
        port = self.port
        paths: set[str] = set()
        for msg_id in port.result_message_ids():
            for slot in port.result_slots(msg_id):
                if slot.record.path:
                    paths.add(slot.record.path)
                paths |= saved_paths(slot.text or "")  # media copies are named in the text
        if port.summary is not None:
            paths |= saved_paths(port.summary.render())
        return paths

    async def cleanup(self, due_only: bool = False) -> list[str]:
        """The TTL cleanup of saved results, keeping what the context still names
        (:meth:`referenced_results`); with ``due_only``, only if an hour has passed since the
        last one. Returns the deleted paths; a failure is a ``warning``, never raised."""
        store = self.parts.tool_result_store
        try:
            if due_only:
                removed = store.maybe_cleanup(self.referenced_results) or []
            else:
                removed = store.cleanup(keep=self.referenced_results())
        except Exception as exc:  # noqa: BLE001 - cleanup must never break a step
            await self.bus.emit(ContextWarning(where="ttl_cleanup", error=repr(exc)[:300]))
            return []
        if removed:
            await self.bus.emit(TtlCleanup(removed=len(removed)))
        return removed
