"""The Summarizer (design §7): on every compaction, an agent with the memory tools reads the
compacted messages and records what is worth keeping beyond this conversation. The agent is
the adapter's (an :data:`AgentRunner`); the journal, the retries and the failure records are
here.

It runs in the background and never blocks the agent's turn. Each job is journaled in
``memory/jobs/<id>.json`` before it starts and removed only once it is done: done means
written (a memory tool changed ``Memory.md``) or answered ``[SILENT]``. A job that did not
finish (cancelled, the event loop closed under it, an interrupted reply) keeps its entry and
runs on the next start; a failing job is retried with backoff a bounded number of times
(attempts counted across starts) and then moved to ``memory/jobs/failed/`` with its errors,
never lost silently.
"""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ..events import ContextWarning, MemoryWritten
from ..rendering import TOOL_OUTPUT_IS_DATA
from ..tracing import ATTRIBUTE_PREFIX, context_span, fail_span
from ..truncation import sendable_text
from ..workspace import in_portal
from ._consolidation import AgentInterrupted, AgentRunner
from ._store import LongTermMemory
from ._tools import make_memory_tools

__all__ = ["SILENT", "SUMMARIZER_PROMPT", "NotWritten", "SummarizerService", "SummarizerSettings"]

logger = logging.getLogger("agentscope_context_ext")

SILENT = "[SILENT]"
SUMMARIZER_PROMPT = (
    """You maintain Memory.md, the long-term memory of an AI agent about its user \
and its own experience. You receive an excerpt of a conversation that is leaving the agent's \
context. Record only what will still matter in future conversations:

- personal information the user gave: preferences, habits, identity facts -> \
memory_append(text, section="Personal")
- try-error experience: what was tried, how it failed, and what worked instead -> \
memory_append(text, section="Try-Error Notes"), one line per lesson, e.g. \
"pip install failed offline (no network); installing from the local wheel folder worked"

Merge with what Memory.md already says (it is shown to you): never add a line that repeats one \
that is there; if a fact changed, correct the old line with memory_edit. Do not record task \
progress, file contents or anything that only matters for this conversation. Lines starting \
with [system reminder] were inserted by the agent's framework (the time, limits, hints): they \
say nothing about the user. """
    + TOOL_OUTPUT_IS_DATA
    + """ Write in the language of the \
conversation.

When you are done, or when there is nothing new worth keeping, answer with exactly [SILENT]."""
)

Sleep = Callable[[float], Awaitable[Any]]


@dataclass
class SummarizerSettings:
    """How the Summarizer runs."""

    retries: int = 3
    """Attempts per job before it is recorded as failed (an attempt the job was cancelled in
    does not count; attempts made before a restart do)."""
    backoff_seconds: float = 2.0
    """Wait before retry n is ``backoff_seconds * 2**(n-1)``."""


JOBS_DIR = "memory/jobs"


def _dump(record: dict, indent: int | None = None) -> bytes:
    return sendable_text(json.dumps(record, ensure_ascii=False, indent=indent)).encode("utf-8")


def _job_id(path: str) -> str:
    return path.rpartition("/")[2].removesuffix(".json")


class NotWritten(RuntimeError):
    """The Summarizer answered without writing to ``Memory.md`` and without ``[SILENT]``."""


def _cancel_requested() -> bool:
    """Whether the running task was asked to stop, though the agent may have swallowed it."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


class SummarizerService:
    """Journals Summarizer jobs and runs them in the background.

    Args:
        memory (`LongTermMemory`): Where the notes go.
        run_agent (`AgentRunner`): Runs the Summarizer agent (given ``memory_read``,
            ``memory_append`` and ``memory_edit``).
        emit (`Callable[..., Awaitable] | None`): Reports events (``memory_written`` for each
            write, ``warning`` for a job recorded as failed).
        settings (`SummarizerSettings`): Retries and backoff.
        sleep (`Callable[[float], Awaitable]`): ``asyncio.sleep``; tests pass one that returns at once.
    """

    def __init__(
        self,
        memory: LongTermMemory,
        run_agent: AgentRunner,
        emit: Callable[..., Awaitable[Any]] | None = None,
        settings: SummarizerSettings | None = None,
        sleep: Sleep = asyncio.sleep,
    ) -> None:
        self.memory = memory
        self.run_agent = run_agent
        self.emit = emit
        self.settings = settings or SummarizerSettings()
        self.sleep = sleep
        self.storage = memory.storage
        self.jobs_dir = JOBS_DIR
        """Where journaled jobs are kept (workspace keys ``memory/jobs/<id>.json``)."""
        self.failed_dir = f"{JOBS_DIR}/failed"
        self._tasks: set[asyncio.Task] = set()
        self.completed = 0
        """Jobs done: written to ``Memory.md`` or answered ``[SILENT]``, journal entry removed."""
        self.failed = 0
        """Jobs moved to ``memory/jobs/failed/`` after their last attempt."""
        self.interrupted = 0
        """Jobs stopped before they were done (their journal entries stay)."""

    def submit(self, transcript: str) -> str:
        """Journal a job for ``transcript`` (rendered messages) and start it in the background.

        Returns:
            `str`: The job id. The journal entry exists when this returns.
        """
        job_id = f"{datetime.now().strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:8]}"
        record = {
            "id": job_id,
            "created_at": datetime.now().isoformat(timespec="seconds"),
            "transcript": transcript,
            "errors": [],
        }
        key = f"{self.jobs_dir}/{job_id}.json"
        self.storage.write(key, _dump(record))
        self._start(key)
        return job_id

    def resume_pending(self) -> int:
        """Start every journaled job not running in this process (left by an earlier process,
        or stopped before it was done); returns how many."""
        paths = [
            f"{self.jobs_dir}/{n}" for n in self.storage.names(self.jobs_dir) if n.endswith(".json")
        ]
        running = {getattr(t, "job_path", None) for t in self._tasks}
        started = 0
        for path in paths:
            if path not in running:
                self._start(path)
                started += 1
        return started

    def pending(self) -> int:
        """Jobs still running or waiting to retry."""
        return len(self._tasks)

    async def drain(self) -> None:
        """Wait until every submitted job finished (done, recorded as failed, or stopped).

        Giving up on the wait (``asyncio.wait_for(drain(), timeout)``) stops the waiting only:
        the jobs go on in the background, and one the event loop's end cancels stays journaled.
        """
        while self._tasks:
            await asyncio.wait(list(self._tasks))

    def cancel(self) -> None:
        """Stop running jobs; their journal entries stay and run on the next start."""
        for task in list(self._tasks):
            task.cancel()

    def _start(self, path: str) -> None:
        # in a portal: the job's workspace calls wait on the loop (design §2.3)
        task = asyncio.get_running_loop().create_task(in_portal(self._run(path)))
        task.job_path = path  # type: ignore[attr-defined]
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _run(self, path: str) -> None:
        job = _job_id(path)
        try:
            data = self.storage.read(path)
            if data is None:
                return  # another worker sharing the workspace took it
            record = json.loads(data)
            transcript = str(record["transcript"])
            errors = [str(error) for error in record.get("errors") or []]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            await self._fail(path, {"id": job, "errors": [f"unreadable job: {exc}"]})
            return
        # The job's span (design §9.1): a child of the compaction that submitted it.
        with context_span(
            "context.summarizer",
            {"gen_ai.agent.name": "Summarizer", ATTRIBUTE_PREFIX + "job": job},
        ) as span:
            try:
                attempt = await self._attempts(path, record, transcript, errors)
            except asyncio.CancelledError:
                # Not done: the journal entry stays, with the errors so far, for the next start.
                self.interrupted += 1
                logger.info("summarizer job %s stopped before it was done; kept", job)
                raise
            if span is not None:
                span.set_attribute(ATTRIBUTE_PREFIX + "attempts", attempt or len(errors))
                if attempt is None:
                    fail_span(span, errors[-1] if errors else "failed")
        if attempt is None:
            record["errors"] = errors
            await self._fail(path, record)

    async def _attempts(
        self, path: str, record: dict, transcript: str, errors: list[str]
    ) -> int | None:
        """Run the job until it is done (its attempt number) or out of attempts (``None``);
        ``errors`` gets each failure, and the journal entry keeps them."""
        first = len(errors) + 1
        for attempt in range(first, max(first, self.settings.retries + 1)):
            if errors:
                await self.sleep(self.settings.backoff_seconds * 2 ** (attempt - 2))
            try:
                answer = await self._summarize(transcript)
            except Exception as exc:
                if _cancel_requested():  # the agent failed on the way out of a cancel
                    raise asyncio.CancelledError from exc
                errors.append(f"attempt {attempt}: {type(exc).__name__}: {exc}"[:500])
                self._journal(path, {**record, "errors": errors})
                continue
            self.completed += 1
            logger.info("summarizer job %s done: %s", _job_id(path), answer[:80])
            try:
                self.storage.delete(path)
            except OSError as exc:  # it runs again at the next start: its writes are idempotent
                logger.warning("summarizer job %s done, kept in the journal: %s", path, exc)
            return attempt
        return None

    def _journal(self, path: str, record: dict) -> None:
        """Keep the errors so far in the journal entry (attempts count across starts)."""
        try:
            if self.storage.read(path) is not None:
                self.storage.write(path, _dump(record))
        except OSError:
            logger.warning("summarizer job %s: its errors could not be journaled", _job_id(path))

    async def _fail(self, path: str, record: dict) -> None:
        self.failed += 1
        self.storage.write(f"{self.failed_dir}/{path.rpartition('/')[2]}", _dump(record, indent=1))
        self.storage.delete(path)
        if self.emit is not None:
            await self.emit(
                ContextWarning(
                    where="summarizer",
                    error=(record.get("errors") or [""])[-1],
                    details={"job": _job_id(path)},
                )
            )

    async def _summarize(self, transcript: str) -> str:
        """One attempt: the agent's answer once it is done.

        Raises:
            `asyncio.CancelledError`: The task was cancelled (also when the agent swallowed it
                and answered as if interrupted).
            `NotWritten`: The agent neither wrote nor answered ``[SILENT]``.
        """
        writes: list[str] = []

        async def written(tool: str, details: dict[str, Any]) -> None:
            writes.append(tool)
            if self.emit is not None:
                await self.emit(MemoryWritten(tool=tool, details=details))

        tools = make_memory_tools(self.memory, written, "summarizer")[:3]
        current = self.memory.read().strip() or "(Memory.md is empty)"
        prompt = sendable_text(
            f"Current Memory.md:\n{current}\n\nConversation excerpt leaving the context:\n{transcript}"
        )
        try:
            answer = await self.run_agent(SUMMARIZER_PROMPT, prompt, tools) or ""
        except AgentInterrupted:
            if _cancel_requested():
                raise asyncio.CancelledError from None
            raise
        if _cancel_requested():
            # The framework turned the cancel into an ordinary reply: not an answer.
            raise asyncio.CancelledError
        if not writes and SILENT not in answer:
            raise NotWritten(
                "the Summarizer answered without writing to Memory.md or answering "
                f"{SILENT}: {' '.join(answer.split())[:200]!r}"
            )
        return answer
