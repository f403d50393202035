"""Compaction and SaveDialog (design §4 steps 3-4, 4.1, 4.3, 4.4).

Keep the newest messages that fit in ``keep_recent_ratio`` of the window at a pair-safe boundary,
summarise the rest (with the previous summary) and move them to ``dialog/``. Order matters where
data could be lost: the raw messages are written to ``dialog/`` (flushed and fsync'ed) first,
then summarised, and removed from memory only after the summary is in place; a dialog write
that fails aborts the compaction before the model is called and keeps every message in memory
(a fault the pipeline reports, see ``SaveFaults``).

No thrashing: after a compaction the prompt must sit below the trigger with a margin; if it does
not, the kept tail's tool results are cut to stage two too (what runs when even that is not
enough is ``WindowGuard``'s). After a failure, compaction is retried only once the prompt has
grown by 5% of the window, or at once when the prompt is over the window. A summary that would
not be smaller than what it replaces is not used. A compaction cancelled while the summary is
being written (the caller gave up) stops there: the messages are still in memory, and their
copy in ``dialog/`` is a duplicate the reader recognises, never a loss.

One compaction at a time per agent: one asked for while another runs (``compact_now`` during a
reply's, a reply's during ``compact_now``, two ``compact_now``) waits for it, then counts again
and compacts if it is still due (a forced one: as asked). After every wait inside a compaction
the messages it folds must still be the oldest and the summary it extends still the one in
place; when they are not (a state loaded while the summary was written) it starts over, and its
dialog lines are duplicates, never a loss.

One module on purpose: the order of its steps is what keeps data safe (design §4.4), and it reads best
in one place.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import time
import weakref
from collections.abc import Awaitable, Callable, Sequence

from ..config import ContextConfig
from ..events import (
    CompactionFailed,
    CompactionFinished,
    CompactionStarted,
    ContextWarning,
    DialogSaved,
    EventBus,
)
from ..messages import Message
from ..summary import CompactSummary, merge_refs
from ..tokens import TokenCounter
from ..tracing import COMPACT_SPAN, SUMMARY_TEXT, context_span
from ..truncation import sendable_text
from ..workspace import DialogStore, ToolResultStore
from ._cut import CutItem, choose_cut
from ._faults import SaveFaults
from ._port import ContextPort
from ._stage_two import StageTwo
from ._summary_ahead import KeptSummary, SummaryAhead
from ._summary_writer import SummaryResult, SummaryWriter
from ._tally import PromptCount, TokenTally
from ._window_size import Window

__all__ = ["SUMMARY_FILE", "Compaction", "cut_item"]

logger = logging.getLogger("agentscope_context_ext")

SUMMARY_FILE = "summary.md"
"""The latest summary, rendered, in the workspace (the live one is in the agent's memory)."""
AFTER_COMPACTION_SHARE = 0.85
"""After a compaction the prompt must be below this share of the trigger (the no-thrash margin)."""
MIN_COMPACTABLE_SHARE = 0.02
"""Compaction is pointless when less than this share of the window could be removed."""
RETRY_GROWTH_SHARE = 0.05
"""After a failed compaction, retry only once the prompt grew by this share of the window."""
ATTEMPTS = 3
"""A compaction whose messages or summary changed under it starts over at most this often."""


class _Changed(enum.Enum):
    """What a compaction returns when the context changed under it (it starts over)."""

    CONTEXT = "context changed"


Notify = Callable[[str], Awaitable[None]]


class Compaction:
    """Compacts the oldest messages of one memory.

    Args:
        config (`ContextConfig`): ``compaction`` settings.
        port (`ContextPort`): The memory.
        tally (`TokenTally`): Per-message token counts, for the cut.
        count (`Callable`): ``await count(sys_prompt, tools)``: the pipeline's exact count.
        writer (`SummaryWriter`): Writes the summary.
        stage_two (`StageTwo`): Cuts the kept tail when it is still too big.
        dialog (`DialogStore`): Where the raw messages go.
        results (`ToolResultStore`): Saved outputs, read back whole for the summary.
        counter (`TokenCounter`): Forgets the counts of messages that left.
        bus (`EventBus`): Events.
        window (`Window`): The window prompts are fitted in.
        notify (`Callable | None`): Prints a notice (console, Studio).
        faults (`SaveFaults | None`): Where a failed dialog write is recorded (the pipeline's).
    """

    def __init__(
        self,
        config: ContextConfig,
        port: ContextPort,
        tally: TokenTally,
        count: Callable[..., Awaitable[PromptCount]],
        writer: SummaryWriter,
        stage_two: StageTwo,
        dialog: DialogStore,
        results: ToolResultStore,
        counter: TokenCounter,
        bus: EventBus,
        window: Window,
        notify: Notify | None = None,
        faults: SaveFaults | None = None,
    ) -> None:
        self.config = config
        self.faults = faults if faults is not None else SaveFaults()
        self.port = port
        self.tally = tally
        self.count = count
        self.writer = writer
        self.stage_two = stage_two
        self.dialog = dialog
        self.results = results
        self.counter = counter
        self.bus = bus
        self.window = window
        self.notify = notify
        self._failed_at: int | None = None
        self._lock: asyncio.Lock | None = None
        self._lock_loop: weakref.ref | None = None
        self._owner: asyncio.Task | None = None
        """The task whose compaction runs now."""
        self._runs = 0
        """Compactions run (or found not due): one that waited sees whether another ran."""
        self.ahead: SummaryAhead | None = None
        """The summary written ahead (``compaction.background_summary`` with a model)."""
        if config.compaction.background_summary and writer.call_model is not None:
            self.ahead = SummaryAhead(writer, port, results.read_text, window, dialog.unstage)

    @property
    def max_input_tokens(self) -> int:
        """The window now."""
        return self.window.tokens

    @property
    def trigger_tokens(self) -> int:
        """Compaction starts above this many prompt tokens."""
        return self.window.trigger_tokens

    @property
    def busy(self) -> bool:
        """Whether a compaction runs now (on this event loop)."""
        owner = self._owner
        return owner is not None and not owner.done() and owner.get_loop() is _running_loop()

    async def run(
        self,
        sys_prompt: str,
        tools: list[dict] | None,
        count: PromptCount,
        extra_instruction: str | None = None,
        force: bool = False,
        above: int | None = None,
    ) -> PromptCount:
        """Compact (if any message can go) and return the new count. One at a time: while
        another compaction runs this one waits, then counts again and goes on only if the
        prompt is still above ``above`` (a forced one goes on as asked).

        Args:
            force (`bool`): Keep only the newest message and what it needs (``compact_now``),
                and ignore the retry delay after a failure.
            above (`int | None`): The point the caller compacts above (default: the trigger).
        """
        if self._owner is not None and self._owner is _current_task():
            # asked from inside the compaction (an event's listener): waiting would never end
            await self._notice("[context] not compacted: a compaction is running in this step.")
            return count
        point = self.trigger_tokens if above is None else above
        runs = self._runs
        async with self._loop_lock():
            self._owner = _current_task()
            try:
                if self._runs != runs:  # another compaction ran while this one waited
                    count = await self.count(sys_prompt, tools)
                    if not force and count.total <= point:
                        return count
                for _ in range(ATTEMPTS):
                    after = await self._run(sys_prompt, tools, count, extra_instruction, force)
                    if not isinstance(after, _Changed):
                        return after
                    count = await self.count(sys_prompt, tools)  # start over
                    if not force and count.total <= point:
                        break
                return count
            finally:
                self._owner = None
                self._runs += 1

    def _loop_lock(self) -> asyncio.Lock:
        """The lock of the running event loop (a script's next ``asyncio.run`` is another loop,
        where the last one's lock cannot be waited for)."""
        loop = asyncio.get_running_loop()
        if self._lock is None or self._lock_loop is None or self._lock_loop() is not loop:
            self._lock, self._lock_loop = asyncio.Lock(), weakref.ref(loop)
        return self._lock

    async def _run(
        self,
        sys_prompt: str,
        tools: list[dict] | None,
        count: PromptCount,
        extra_instruction: str | None,
        force: bool,
    ) -> PromptCount | _Changed:
        """One attempt of :meth:`run` (under its lock)."""
        window = self.max_input_tokens
        if (
            not force
            and self._failed_at is not None
            and count.total < self._failed_at + RETRY_GROWTH_SHARE * window
            and count.total <= window
        ):
            return count
        if force and self.ahead is not None:
            self.ahead.drop()  # what it summarises is folded now, with the instruction given
        ids, items, budget = await self._plan(count)
        cut = choose_cut(items, 0 if force else max(budget, 0))
        if not force and self.ahead is not None:
            cut = self.ahead.cut_to_covered(ids, items, cut)
        compactable = sum(item.tokens for item in items[:cut])
        if cut == 0 or (not force and compactable < MIN_COMPACTABLE_SHARE * window):
            if force:
                await self._notice(
                    "[context] nothing to compact: the newest message is all there is."
                )
            return count
        # One span around the whole compaction (design §9.1); its events fill it in.
        with context_span(COMPACT_SPAN) as span:
            after = await self._compact(
                sys_prompt,
                tools,
                ids[:cut],
                count,
                compactable,
                len(ids) - cut,
                extra_instruction,
                force,
            )
            if isinstance(after, _Changed):
                return after
            if span is not None and after is not None and self.port.summary is not None:
                # what the model reads from now on in place of the compacted messages
                span.set_attribute(SUMMARY_TEXT, self.port.summary.render())
        if after is None:
            return count
        # No thrashing (design §4.3): still near the trigger -> cut the kept tail's results too.
        if after.total > self.trigger_tokens * AFTER_COMPACTION_SHARE and await self.stage_two.run(
            force=True, include_recent=True
        ):
            after = await self.count(sys_prompt, tools)
        return after

    async def _plan(self, count: PromptCount) -> tuple[list[str], list[CutItem], int]:
        """The messages, what the cut knows of them, and the kept tail's budget."""
        ids = self.port.message_ids()
        tokens = await self.tally.message_tokens(self.port)
        items = [cut_item(self.port.view(msg_id), tokens.get(msg_id, 0)) for msg_id in ids]
        # Keep the newest messages that fit in keep_recent_ratio of the window, and never so
        # much that system prompt + summary + tail would sit near the trigger again.
        fixed = count.system + count.tools + max(count.head, self.writer.budget_tokens)
        budget = min(
            int(self.config.compaction.keep_recent_ratio * self.max_input_tokens),
            int(self.trigger_tokens * AFTER_COMPACTION_SHARE) - fixed,
        )
        return ids, items, budget

    async def look_ahead(self, count: PromptCount) -> None:
        """Start the summary of the next fold near the trigger (``SummaryAhead.look_ahead``);
        nothing while a compaction runs (what it would cover is being folded)."""
        ahead = self.ahead
        if ahead is None or self.busy:
            return
        await ahead.look_ahead(count, self._plan, self._save_ahead)
        errors, ahead.errors = ahead.errors, []
        for error in errors:
            await self.bus.emit(ContextWarning(where="summary_ahead", error=error))

    async def _save_ahead(self, ids: list[str]) -> str | None:
        """The messages a summary written ahead covers, saved before the model sees them to a
        pending file (they are still in memory: not in ``dialog/``, design §4.6); ``None`` (a
        fault the pipeline reports) when the write failed."""
        try:
            pending_file = self.dialog.stage(self.port.native(ids))
        except Exception as exc:  # noqa: BLE001 - no summary then; nothing is lost
            self.faults.failed("dialog", "dialog", self.dialog.directory, exc)
            return None
        self.faults.saved("dialog")
        return pending_file

    def swap_late(self) -> None:
        """A late model summary in place of the extractive one now (``SummaryAhead.swap_late``),
        unless a compaction runs: it extends the summary in place, and swaps itself."""
        if self.ahead is not None and not self.busy:
            self.ahead.swap_late()

    def keep_ahead(self) -> KeptSummary | None:
        """The summary written ahead taken out, still running, for a served session's next
        turn (``SummaryAhead.keep``)."""
        return self.ahead.keep() if self.ahead is not None else None

    def adopt_ahead(self, kept: KeptSummary) -> bool:
        """Take up the summary a served session's last turn kept (``SummaryAhead.adopt``)."""
        if self.ahead is None:
            kept.drop()
            return False
        return self.ahead.adopt(kept)

    def stop_ahead(self) -> None:
        """Cancel the summary written ahead, if any (its model call is closed)."""
        if self.ahead is not None:
            self.ahead.drop()

    async def _summary(
        self,
        old: list[str],
        views: Sequence[Message],
        previous: CompactSummary | None,
        extra_instruction: str | None,
        forced: bool,
    ) -> SummaryResult:
        """The summary of one compaction: today's synchronous call (``background_summary``
        off, forced, with an instruction), else the one written ahead or, when it is not
        ready, extraction now (the one written ahead used when it arrives)."""
        if self.ahead is None or forced or extra_instruction:
            return await self.writer.summarize(views, previous, extra_instruction)
        return self.ahead.summary_for(old, views, previous)

    async def _compact(
        self,
        sys_prompt: str,
        tools: list[dict] | None,
        old: list[str],
        count: PromptCount,
        old_tokens: int,
        kept: int,
        extra_instruction: str | None,
        forced: bool,
    ) -> PromptCount | _Changed | None:
        """One compaction of ``old``; the count after it (``None`` when nothing changed,
        ``_Changed`` when the context changed under it: the caller starts over)."""
        started = time.perf_counter()
        await self.bus.emit(
            CompactionStarted(
                tokens_before=count.total,
                trigger_tokens=self.trigger_tokens,
                messages_to_compact=len(old),
                messages_kept=kept,
                forced=forced,
            )
        )
        why = (
            "compacting on request"
            if forced
            else f"{count.total:,} tokens is over the compaction trigger "
            f"({self.trigger_tokens:,} of a {self.max_input_tokens:,}-token window)"
        )
        await self._notice(
            f"[context] {why}: summarising {len(old)} older message(s), keeping the newest {kept}."
        )
        previous = self.port.summary
        if not self._folds(old, previous):
            return await self._changed(count)
        native = self.port.native(old)
        # SaveDialog (design §4.4): raw messages to disk first, durably, before the model is called
        # (a write that fails must not cost a summary) ...
        try:
            refs = self.dialog.append(native)
        except Exception as exc:  # noqa: BLE001 - compaction aborted, nothing is lost
            self._failed_at = count.total
            self.faults.failed("dialog", "dialog", self.dialog.directory, exc)
            await self.bus.emit(
                CompactionFailed(
                    reason="dialog write failed", error=repr(exc)[:300], tokens=count.total
                )
            )
            await self._notice(
                f"[context] compaction aborted: cannot save the dialog ({exc}); messages kept."
            )
            return None
        self.faults.saved("dialog")
        await self.bus.emit(DialogSaved(messages=len(old), refs=tuple(str(ref) for ref in refs)))
        if not self._folds(old, previous):
            return await self._changed(count)
        # ... then the summary, which reads truncated outputs whole again: it must not lose what
        # an excerpt cut. A cancellation here (the caller gave up waiting for the summary model)
        # leaves the messages in memory: their copy in dialog/ is a duplicate, never a loss ...
        views: Sequence[Message] = [self.port.view(m, self.results.read_text) for m in old]
        if not forced:
            if self.ahead is not None:  # a late model summary replaces the extractive one now
                self.ahead.swap_late()
            previous = self.port.summary
        try:
            result = await self._summary(old, views, previous, extra_instruction, forced)
        except Exception as exc:  # noqa: BLE001 - the writer has its own fallback; keep all
            # The messages stay in memory; their copy in dialog/ is written again (a duplicate,
            # never a loss) by the next compaction.
            self._failed_at = count.total
            await self.bus.emit(
                CompactionFailed(reason="summary failed", error=repr(exc)[:300], tokens=count.total)
            )
            return None
        if not self._folds(old, previous):  # another fold, or another state, meanwhile
            return await self._changed(count)
        # (the writer carried the previous references over) ...
        summary = result.summary.model_copy(
            update={"dialog_refs": merge_refs([*result.summary.dialog_refs, *refs])}
        )
        replaced = old_tokens + (self.counter.count_text(previous.render()) if previous else 0)
        summary_tokens = self.counter.count_text(summary.render())
        if summary_tokens >= replaced:
            # A summary that is not smaller than what it replaces only costs (a manual
            # compaction of 486 tokens once gave a summary of 1,149).
            self._failed_at = count.total
            await self.bus.emit(
                CompactionFailed(
                    reason="summary not smaller",
                    summary_tokens=summary_tokens,
                    replaced_tokens=replaced,
                    tokens=count.total,
                )
            )
            await self._notice(
                f"[context] nothing compacted: the summary ({summary_tokens:,} tokens) would not "
                f"be smaller than the {len(old)} message(s) it replaces ({replaced:,} tokens)."
            )
            return None
        self.port.set_summary(summary)
        self._write_summary_file(summary)
        # ... and only then remove them from memory.
        await self.port.remove(old)
        self.counter.forget(old)
        self._failed_at = None
        # The prompt as the model will get it: the dialog tools join the list from now on.
        after = await self.count(sys_prompt, tools)
        # Long-term memory listens for this event: the Summarizer reads ``messages``.
        await self.bus.emit(
            CompactionFinished(
                tokens_before=count.total,
                tokens_after=after.total,
                messages_compacted=len(old),
                messages_kept=kept,
                summary_source=summary.source,
                model_attempts=result.attempts,
                model_failures=len(result.failures),
                model_failure=result.failures[-1] if result.failures else "",
                dialog_refs=tuple(str(ref) for ref in refs),
                seconds=round(time.perf_counter() - started, 4),
                forced=forced,
                messages=tuple(views),
            )
        )
        where = ", ".join(str(ref) for ref in refs)
        by = "the model" if summary.source == "llm" else "extraction"
        if summary.source != "llm" and result.failures:
            by += f" (the model: {result.failures[-1][:160]})"
        await self._notice(
            f"[context] compacted{' on request' if forced else ''}: {count.total:,} -> "
            f"{after.total:,} tokens; {len(old)} message(s) saved to {where}, {kept} kept; "
            f"summary by {by}."
        )
        return after

    def _folds(self, old: Sequence[str], previous: CompactSummary | None) -> bool:
        """Whether a fold of ``old`` into ``previous`` is still about the context: they are
        still its oldest messages, and ``previous`` still the summary in place."""
        summary = self.port.summary
        if summary is not previous and (
            summary is None or previous is None or summary.render() != previous.render()
        ):
            return False
        return self.port.message_ids()[: len(old)] == list(old)

    async def _changed(self, count: PromptCount) -> _Changed:
        """The context changed under the compaction: said, and started over by the caller."""
        await self.bus.emit(CompactionFailed(reason=_Changed.CONTEXT.value, tokens=count.total))
        await self._notice("[context] the context changed while compacting: starting over.")
        return _Changed.CONTEXT

    def _write_summary_file(self, summary: CompactSummary) -> None:
        """``<workspace>/summary.md``: the latest summary, for people (``inspect``)."""
        try:
            self.dialog.storage.write(
                SUMMARY_FILE, (summary.render() + "\n").encode("utf-8", "replace")
            )
        except OSError as exc:
            logger.warning("cannot write %s: %s", SUMMARY_FILE, exc)

    async def _notice(self, text: str) -> None:
        if self.config.notices and self.notify is not None:
            try:
                # an error's text may hold a lone surrogate (a path of undecodable bytes)
                await self.notify(sendable_text(text))
            except Exception:
                logger.exception("could not print a context notice")


def cut_item(msg: Message, tokens: int) -> CutItem:
    """What the cut needs to know of one message: its tokens, its calls and results."""
    return CutItem(
        tokens,
        tuple(call.id for call in msg.tool_calls),
        tuple(result.id for result in msg.tool_results),
    )


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def _current_task() -> asyncio.Task | None:
    return asyncio.current_task() if _running_loop() is not None else None
