"""``SummaryAhead``: the model's summary written before the compaction needs it (design §4.6).

A model-written summary takes a summary model 10-150 s; at the trigger the agent used to wait
for all of it. When the prompt nears the trigger, the pipeline starts the summary of what the
compaction will fold (the messages before the kept tail as it will be then) as a task of its
own, and the agent goes on. At the compaction:

- the summary is **ready** and still covers the start of what is folded: it is used, and the
  few messages folded beyond it (those that arrived between its start and the compaction) are
  added by extraction;
- it is **not ready**: the compaction waits for it only while the prompt may still grow safely
  (the pipeline moves its compaction point, never past the window's limit); past that, the
  compaction is extractive now and the model's summary is kept running. When it arrives it
  replaces the extractive one at the next compaction (the prefix breaks there anyway), or at
  once when the prompt is not cached (``prompt_cache_price: 1``: the swap costs nothing).

What a summary covers is saved before the model reads it (design §4.4) to a pending file
(``DialogStore.stage``), not ``dialog/``, which holds only messages that left the context: the
compaction that removes them writes them there; the pending file goes with the summary.

A summary model that failed twice in a row (an error, an unusable answer, the timeout) is not
waited for again until it answers once: the background attempts go on, compactions are
extractive meanwhile. A task that can no longer be used (a forced compaction, another
conversation loaded, the agent detached) is cancelled, which closes its model call. One left
running when a non-served reply ended goes on while the event loop lives (``asyncio.run``
ending cancels it, its call closed: the next step starts another); a result that arrived before
the loop ended is used. A served agent is rebuilt every turn: at a turn's end its summary is
kept, still running, on the worker's :class:`SummaryShelf` for the session's next turn, which
takes it up only if its context is the one it was kept from; one no turn takes is dropped
``summary_timeout_seconds`` after it was written.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Hashable, Sequence
from dataclasses import dataclass, field

from ..messages import Message
from ..summary import CompactSummary
from ..workspace import in_portal
from ._cut import CutItem, choose_cut, valid_boundaries
from ._port import ContextPort
from ._summary_writer import SummaryResult, SummaryWriter
from ._tally import PromptCount
from ._window_size import Window

__all__ = ["AHEAD_SHARE", "AheadStats", "KeptSummary", "SummaryAhead", "SummaryShelf"]

logger = logging.getLogger("agentscope_context_ext")

AHEAD_SHARE = 0.7
"""The summary is started when the prompt passes this share of the trigger (where counts are
exact when the compaction may wait, design §4.5)."""
UNRELIABLE_AFTER = 2
"""A summary model that failed this many times in a row is no longer waited for."""
RETRY_SHARE = 0.05
"""After a failed attempt, the next starts once the prompt grew by this share of the window."""
MIN_SHARE = 0.02
"""No summary is started for less than this share of the window (as for compaction)."""

Plan = Callable[[PromptCount], Awaitable[tuple[list[str], list[CutItem], int]]]
"""``await plan(count)``: the messages' ids, what the cut knows of them, the tail's budget."""
Save = Callable[[list[str]], Awaitable[str | None]]
"""``await save(ids)``: those messages written to a pending file, its key (``None``: the
write failed)."""
Discard = Callable[[str], None]
"""``discard(key)``: a pending file deleted."""


@dataclass
class AheadStats:
    """What the summaries written ahead came to (for benchmarks and ``inspect``)."""

    started: int = 0
    """Summary tasks started."""
    used: int = 0
    """Compactions (or swaps) that used one."""
    used_late: int = 0
    """Of those, summaries that arrived after an extractive compaction and replaced it."""
    dropped: int = 0
    """Tasks cancelled or results dropped unused (their tokens are spent for nothing)."""
    failed: int = 0
    """Tasks whose model failed (error, unusable answer, timeout)."""
    unused_answer_tokens: int = 0
    """Tokens the summary model wrote into results never used (a cancelled call's partial
    answer is not known here)."""
    gap_messages: int = 0
    """Messages folded by extraction beside a model summary (arrived after it started)."""


@dataclass
class _Task:
    """One summary being written: its base, what it covers, and what was folded since."""

    task: asyncio.Task[SummaryResult]
    base: str | None
    """The summary it extends, rendered (``None``: there was none)."""
    covered: tuple[str, ...]
    """The ids of the messages it summarises, oldest first."""
    folded_ids: list[str] = field(default_factory=list)
    """Messages compacted by extraction since it started (it is late), oldest first."""
    folded: list[Message] = field(default_factory=list)
    """Their views, to fold beside it when it arrives."""
    pending_file: str | None = None
    """Where the messages it covers were saved before the model saw them (design §4.4)."""


@dataclass
class KeptSummary:
    """A served turn's summary written ahead, taken out of its pipeline at the turn's end
    (:meth:`SummaryAhead.keep`) for the session's next turn (:meth:`SummaryAhead.adopt`)."""

    job: _Task | None
    """The summary being written (or answered), if any."""
    upgrade: tuple[str | None, CompactSummary] | None
    """A late model summary held to replace the summary in place, if any."""
    failures: int
    """The summary model's failures in a row."""
    ids: tuple[str, ...]
    """The messages in the context when it was kept, oldest first."""
    summary: str | None
    """The summary in place then, rendered."""
    timeout: float
    """How long it waits for the next turn once written (``summary_timeout_seconds``)."""
    discard: Discard
    """Deletes its pending file."""

    def drop(self) -> None:
        """No turn takes it: the task cancelled (its call closed), its pending file deleted."""
        job, self.job, self.upgrade = self.job, None, None
        if job is not None:
            _stop(job.task)
            if job.pending_file is not None:
                self.discard(job.pending_file)


class SummaryAhead:
    """The background summary of one pipeline.

    Args:
        writer (`SummaryWriter`): Writes the summary (its model and its timeout).
        port (`ContextPort`): The memory.
        read_text (`Callable`): Reads a saved output whole (the summary sees what an excerpt
            cut, as the compaction's does).
        window (`Window`): The window and the trigger.
        discard (`Callable`): Deletes a pending file (``DialogStore.unstage``).
    """

    def __init__(
        self,
        writer: SummaryWriter,
        port: ContextPort,
        read_text: Callable[[str], str | None],
        window: Window,
        discard: Discard,
    ) -> None:
        self.discard = discard
        self.writer = writer
        self.port = port
        self.read_text = read_text
        self.window = window
        self._retry_at = 0
        self.errors: list[str] = []
        """Why tasks failed with an exception, for the pipeline to report (then cleared)."""
        self._upgrade: tuple[str | None, CompactSummary] | None = None
        """A late model summary ready to replace the summary in place (its rendering)."""
        self.stats = AheadStats()
        self.failures = 0
        """Failures of the summary model in a row."""
        self._job: _Task | None = None

    @property
    def reliable(self) -> bool:
        """Whether the model is worth waiting for (it did not fail twice in a row)."""
        return self.failures < UNRELIABLE_AFTER

    @property
    def pending(self) -> bool:
        """Whether a summary is being written now."""
        return self._job is not None and not self._job.task.done()

    @property
    def active(self) -> bool:
        """Whether a summary is being written or waits to be used."""
        return self._job is not None

    @property
    def late(self) -> bool:
        """Whether an extractive compaction already folded part of what it covers."""
        return self._job is not None and bool(self._job.folded_ids)

    @property
    def covered(self) -> tuple[str, ...]:
        """What the summary covers (empty without one)."""
        return self._job.covered if self._job is not None else ()

    async def look_ahead(self, count: PromptCount, plan: Plan, save: Save) -> None:
        """Start the model's summary of what the compaction will fold, when the prompt
        (``count``) passes :data:`AHEAD_SHARE` of the trigger: the messages before the tail the
        cut will keep once the prompt has grown to the trigger. Nothing while one is written
        or ready and still fits the context, or soon after a failed attempt."""
        if self.active and not self.valid(self.port.message_ids(), self.port.summary):
            self.drop()
        self._hold_late()
        failures = self.failures
        self.outcome()  # a task that failed is counted and forgotten here
        if self.failures > failures:
            # try again once the prompt grew, not at every step
            self._retry_at = count.total + int(RETRY_SHARE * self.window.tokens)
        trigger = self.window.trigger_tokens
        if self.active or count.total < AHEAD_SHARE * trigger or count.total < self._retry_at:
            return
        ids, items, budget = await plan(count)
        # The tail at the trigger: the budget, less what arrives until then.
        cut = choose_cut(items, max(budget - max(trigger - count.total, 0), 0))
        if sum(item.tokens for item in items[:cut]) < MIN_SHARE * self.window.tokens:
            return
        old = ids[:cut]
        # The dialog first, as at a compaction: a write that fails costs no summary (§4.4).
        pending_file = await save(old)
        if pending_file is None:
            self._retry_at = count.total + int(RETRY_SHARE * self.window.tokens)
            return
        views = [self.port.view(m, self.read_text) for m in old]
        self.start(old, views, self.effective(self.port.summary))
        self._job.pending_file = pending_file
        self._retry_at = 0

    def wait_point(self, count: PromptCount, point: int, limit: int) -> int:
        """The compaction point while a summary is written: moved up to ``limit`` (as far as
        the prompt may safely grow) so the agent goes on instead of waiting; ``point`` when
        none is written, the model failed twice in a row, or the prompt is past the limit
        (the compaction is then extractive now and the summary used when it arrives)."""
        if not self.pending or not self.reliable or count.total > limit:
            return point
        return max(point, limit)

    def cut_to_covered(self, ids: Sequence[str], items: Sequence[CutItem], cut: int) -> int:
        """The cut moved to the end of what a ready summary covers, when it covers more than
        the cut folds (it is used whole), if that boundary is pair-safe and keeps the newest
        message."""
        job = self._job
        if job is None or self.pending or not self.valid(ids, self.port.summary):
            return cut
        end = len(job.covered) - len(job.folded_ids)
        if cut < end < len(ids) and valid_boundaries(items)[end]:
            return end
        return cut

    def effective(self, summary: CompactSummary | None) -> CompactSummary | None:
        """The summary in place as the next compaction will extend it: ``summary``, or the
        late model summary held to replace it (:meth:`swap_late`)."""
        upgrade = self._upgrade
        if upgrade is not None and upgrade[0] == _key(summary):
            return upgrade[1]
        return summary

    def _hold_late(self) -> None:
        """A late summary that arrived, every message it covers folded: kept to replace the
        summary in place at the next compaction (:meth:`swap_late`), the task's place freed so
        the next summary starts from it now."""
        job = self._job
        current = self.port.summary
        if job is None or not job.folded_ids or not job.task.done() or current is None:
            return
        if len(job.folded_ids) < len(job.covered):
            return  # it covers messages still in memory: the next compaction uses it
        result = self.use([], [], current)
        if result is not None:
            update = {"compactions": current.compactions, "dialog_refs": current.dialog_refs}
            self._upgrade = (_key(current), result.summary.model_copy(update=update))

    def swap_late(self) -> bool:
        """Put a model summary that arrived after its extractive compaction in place of the
        summary now (before the next compaction, whose prefix breaks anyway, or at once where a
        swap costs nothing: no prompt caching). Returns whether it swapped."""
        self._hold_late()
        upgrade, self._upgrade = self._upgrade, None
        if upgrade is None or upgrade[0] != _key(self.port.summary):
            return False
        self.port.set_summary(upgrade[1])
        return True

    def start(
        self, ids: Sequence[str], views: Sequence[Message], previous: CompactSummary | None
    ) -> None:
        """Start the model's summary of ``views`` (the messages ``ids``) merged with
        ``previous``; the one before, if any, is cancelled."""
        self.cancel()
        task = asyncio.ensure_future(self.writer.model_summary(list(views), previous))
        self._job = _Task(task, _key(previous), tuple(ids))
        self.stats.started += 1

    def valid(self, ids: Sequence[str], previous: CompactSummary | None) -> bool:
        """Whether the summary still fits the context (``ids``: the messages now,
        ``previous``: the summary in place): its base is what it extends, and what it covers is
        the start of what was folded since and what is in memory. A task started on another
        event loop (a script's earlier ``asyncio.run``) and not finished there is gone with
        that loop (cancelled when it ended); a result that arrived there is as good as any."""
        job = self._job
        if job is None:
            return False
        if job.task.get_loop() is not _running_loop() and not _answered(job.task):
            return False
        seq = (*job.folded_ids, *ids)
        n = len(job.covered)
        return len(seq) > n and seq[:n] == job.covered and self._extends(job, previous)

    def _extends(self, job: _Task, previous: CompactSummary | None) -> bool:
        """Whether ``job`` extends the summary in place (``previous``); after an extractive
        compaction folded beside it, the summary in place is that one's."""
        return bool(job.folded_ids) or job.base == _key(self.effective(previous))

    def outcome(self) -> SummaryResult | None:
        """The finished result (``None`` while it is written, or without one). A failed one
        is counted, and the task forgotten (the next is started by the pipeline)."""
        job = self._job
        if job is None or not job.task.done():
            return None
        if job.task.cancelled():
            self._end(dropped=True)  # the loop it ran on ended (``asyncio.run``)
            return None
        exc = job.task.exception()
        result = job.task.result() if exc is None else None
        if result is None or not result.written:
            self.failures += 1
            self.stats.failed += 1
            self._end()
            if exc is not None:
                self.errors.append(repr(exc)[:300])
            return None
        self.failures = 0  # it answered: worth waiting for again
        return result

    def use(
        self,
        old_ids: Sequence[str],
        old: Sequence[Message],
        previous: CompactSummary | None,
    ) -> SummaryResult | None:
        """The summary for a compaction folding ``old`` (the messages ``old_ids``) into
        ``previous``: the model's, with what it does not cover folded by extraction; ``None``
        when there is none ready that covers the start of what is folded (the caller extracts,
        and :meth:`fold_beside` keeps a running one usable later)."""
        result = self.outcome()
        job = self._job
        if result is None or job is None:
            return None
        seq = (*job.folded_ids, *old_ids)
        if seq[: len(job.covered)] != job.covered or not self._extends(job, previous):
            self.drop()
            return None
        gap = [*job.folded, *old][len(job.covered) :]
        summary = result.summary
        if gap:
            # Folded beside it: the messages that arrived after it started.
            summary = self.writer.extend(gap, summary).model_copy(update={"source": "llm"})
            self.stats.gap_messages += len(gap)
        self.stats.used += 1
        self.stats.used_late += bool(job.folded_ids)
        self._end()
        result.summary = summary
        return result

    def summary_for(
        self, old_ids: Sequence[str], old: Sequence[Message], previous: CompactSummary | None
    ) -> SummaryResult:
        """The summary of a compaction folding ``old`` into ``previous``: the one written
        ahead (:meth:`use`) or, when it is not ready, extraction now (a running one is kept,
        :meth:`fold_beside`, and used when it arrives)."""
        result = self.use(old_ids, old, previous)
        if result is None:
            if self.pending:
                self.fold_beside(old_ids, old)
            result = SummaryResult(self.writer.extend(old, previous))
            result.failures.append("the summary written ahead was not ready")
        result.summary = self.writer.following(result.summary, previous)
        return result

    def fold_beside(self, old_ids: Sequence[str], old: Sequence[Message]) -> None:
        """An extractive compaction folded ``old`` while the summary is written: remember
        them, so that the model's summary, when it arrives, replaces the extractive one."""
        if self._job is not None:
            self._job.folded_ids.extend(old_ids)
            self._job.folded.extend(old)

    def drop(self) -> None:
        """Forget a finished result unused, or cancel a running task (its call is closed)."""
        job = self._end(dropped=True)
        if job is not None:
            self.stats.unused_answer_tokens += _stop(job.task)

    cancel = drop

    def keep(self) -> KeptSummary | None:
        """The summary written ahead taken out, not cancelled, for the next turn of a served
        session (``None``: there is none, or its task is another event loop's)."""
        if self._job is not None and self._job.task.get_loop() is not _running_loop():
            self.drop()
        job, upgrade = self._job, self._upgrade
        if job is None and upgrade is None:
            return None
        self._job, self._upgrade = None, None
        return KeptSummary(
            job,
            upgrade,
            self.failures,
            tuple(self.port.message_ids()),
            _key(self.port.summary),
            self.writer.timeout,
            self.discard,
        )

    def adopt(self, kept: KeptSummary) -> bool:
        """Take up the summary the session's last turn kept, when this context is the one it
        was kept from: the same summary in place, the same messages first (more may follow).
        Else it is dropped: a summary is never used on a context it was not written for (a
        turn served by another worker in between, a session changed outside the service)."""
        ids = tuple(self.port.message_ids())
        if (
            self.active
            or self._upgrade is not None
            or kept.summary != _key(self.port.summary)
            or ids[: len(kept.ids)] != kept.ids
        ):
            kept.drop()
            return False
        self._job, self._upgrade, self.failures = kept.job, kept.upgrade, kept.failures
        kept.job, kept.upgrade = None, None
        return True

    def _end(self, dropped: bool = False) -> _Task | None:
        """Forget the job (counted ``dropped`` when unused), its pending file deleted."""
        job, self._job = self._job, None
        if job is not None:
            self.stats.dropped += dropped
            if job.pending_file is not None:
                self.discard(job.pending_file)
        return job

    async def close(self) -> None:
        """Cancel a running task and wait until its model call is closed."""
        job = self._job
        self.drop()
        if job is not None and not job.task.done() and job.task.get_loop() is _running_loop():
            await asyncio.wait({job.task})


class SummaryShelf:
    """The summaries written ahead that one served worker keeps between the turns of its
    sessions, one per session (``key``): a served agent is rebuilt every turn, and a summary
    slower than a turn would never be used if each turn's end cancelled it. One kept is
    dropped (its task cancelled, its pending file deleted) when the session's next turn does
    not take it within its ``timeout`` of being written (or kept, if later); one whose task its
    event loop cancelled (the worker stopping) is forgotten, its pending file left to
    ``DialogStore.sweep_pending``."""

    def __init__(self) -> None:
        self._kept: dict[Hashable, KeptSummary] = {}
        self._timers: dict[Hashable, asyncio.TimerHandle] = {}
        self._dropping: set[asyncio.Future] = set()

    def __len__(self) -> int:
        return len(self._kept)

    def put(self, key: Hashable, kept: KeptSummary) -> None:
        """Keep ``kept`` for the next turn of session ``key`` (one kept before is dropped)."""
        older = self.take(key)
        if older is not None:
            older.drop()
        if _running_loop() is None:
            kept.drop()
            return
        self._kept[key] = kept
        job = kept.job
        if job is not None and not job.task.done():
            job.task.add_done_callback(lambda _: self._written(key, kept))
        else:
            self._written(key, kept)

    def take(self, key: Hashable) -> KeptSummary | None:
        """The summary kept for session ``key``, off the shelf (``None``: none)."""
        timer = self._timers.pop(key, None)
        if timer is not None:
            timer.cancel()
        return self._kept.pop(key, None)

    def _written(self, key: Hashable, kept: KeptSummary) -> None:
        """``kept``'s task ended: it waits its timeout for the next turn from now."""
        if self._kept.get(key) is not kept:
            return
        job = kept.job
        if job is not None and job.task.cancelled():  # its loop ends: nothing can use it
            self.take(key)
            return
        loop = job.task.get_loop() if job is not None else asyncio.get_running_loop()
        self._timers[key] = loop.call_later(kept.timeout, self._expire, key, kept)

    def _expire(self, key: Hashable, kept: KeptSummary) -> None:
        if self._kept.get(key) is kept:
            self.take(key)
            # its pending file is deleted through the store, which must not block the loop
            dropping = asyncio.ensure_future(in_portal(_dropped(kept)))
            self._dropping.add(dropping)
            dropping.add_done_callback(self._dropping.discard)


async def _dropped(kept: KeptSummary) -> None:
    kept.drop()


def _stop(task: asyncio.Task[SummaryResult]) -> int:
    """Cancel ``task`` if it runs (its call is closed); the tokens of its answer when it
    answered (written for nothing)."""
    if not task.done():
        if task.get_loop() is _running_loop() or not task.get_loop().is_closed():
            task.cancel()
        return 0
    if not task.cancelled() and task.exception() is None:
        return task.result().answer_tokens
    return 0


def _key(summary: CompactSummary | None) -> str | None:
    return summary.render() if summary is not None else None


def _answered(task: asyncio.Task) -> bool:
    return task.done() and not task.cancelled() and task.exception() is None


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None
