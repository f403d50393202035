"""When daily consolidation runs: its bookkeeping and the in-process scheduler (design §7).

``memory/.consolidation.json`` records the last run and the last merged note day.
:class:`ConsolidationScheduler` runs a consolidation every day at ``consolidation_time`` local
time inside the process, and catches up once at start when the last run is more than a day old.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from datetime import date, datetime, time, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from ..workspace import in_portal
from ._store import NOTES_DIRNAME, LongTermMemory

__all__ = [
    "STATE_FILE",
    "ConsolidationScheduler",
    "last_consolidation",
    "read_state",
    "write_state",
]

logger = logging.getLogger("agentscope_context_ext")

STATE_FILE = ".consolidation.json"
STATE_KEY = f"{NOTES_DIRNAME}/{STATE_FILE}"


def read_state(memory: LongTermMemory) -> dict[str, Any]:
    """The consolidation bookkeeping (``last_run``, ``last_note_day``)."""
    try:
        data = memory.storage.read(STATE_KEY)
        state = json.loads(data) if data else {}
    except (OSError, ValueError):
        return {}
    return state if isinstance(state, dict) else {}


def write_state(memory: LongTermMemory, **updates: Any) -> None:
    """Update the consolidation bookkeeping."""
    state = {**read_state(memory), **updates}
    memory.storage.write(STATE_KEY, json.dumps(state).encode())


def last_consolidation(memory: LongTermMemory) -> datetime | None:
    """When the last consolidation ran (aware datetime), or ``None``."""
    value = read_state(memory).get("last_run")
    if not isinstance(value, str) or not value:
        return None  # never, or a record edited by hand into something else
    try:
        when = datetime.fromisoformat(value)
    except ValueError:
        return None
    return when if when.tzinfo is not None else when.astimezone()  # naive: local time


class ConsolidationScheduler:
    """Runs a consolidation every day at ``at`` (HH:MM, local time), in the event loop.

    Daylight-saving safe: the daily slot is a local wall-clock time, resolved through the local
    time zone each day. ``tick(now)`` and ``catch_up(now)`` are the whole logic; ``start()``
    only sleeps between ticks. Tests drive ``tick``/``catch_up`` with a fake clock.

    Args:
        at (`str`): ``HH:MM``.
        run (`Callable[[], Awaitable]`): The consolidation.
        last_run (`Callable[[], datetime | None]`): When it last ran.
        clock (`Callable[[], datetime]`): Local aware "now".
    """

    def __init__(
        self,
        at: str,
        run: Callable[[], Awaitable[Any]],
        last_run: Callable[[], datetime | None],
        clock: Callable[[], datetime] = lambda: datetime.now().astimezone(),
    ) -> None:
        hours, minutes = (int(part) for part in at.split(":"))
        self.at = time(hours, minutes)
        self.run = run
        self.last_run = last_run
        self.clock = clock
        self._task: asyncio.Task | None = None
        self.runs = 0

    def slot(self, day: date, like: datetime) -> datetime:
        """The aware local datetime of ``day`` at ``at``."""
        if isinstance(like.tzinfo, ZoneInfo):
            return datetime.combine(day, self.at, tzinfo=like.tzinfo)
        return (
            datetime.combine(day, self.at).astimezone(like.tzinfo)
            if like.tzinfo
            else datetime.combine(day, self.at)
        )

    def latest_slot(self, now: datetime) -> datetime:
        """The most recent slot at or before ``now``."""
        today = self.slot(now.date(), now)
        return today if today <= now else self.slot(now.date() - timedelta(days=1), now)

    def next_slot(self, now: datetime) -> datetime:
        """The first slot after ``now``."""
        today = self.slot(now.date(), now)
        return today if today > now else self.slot(now.date() + timedelta(days=1), now)

    def due(self, now: datetime) -> bool:
        """Whether the latest slot has passed without a run."""
        last = self.last_run()
        return last is None or last < self.latest_slot(now)

    async def tick(self, now: datetime | None = None) -> bool:
        """Run if due; returns whether it ran."""
        now = now or self.clock()
        if not self.due(now):
            return False
        await self._run_once()
        return True

    async def catch_up(self, now: datetime | None = None) -> bool:
        """At start: run once if the last run is more than a day old (or never happened)."""
        now = now or self.clock()
        last = self.last_run()
        if last is not None and now - last <= timedelta(days=1):
            return False
        await self._run_once()
        return True

    async def _run_once(self) -> None:
        self.runs += 1
        # A failed consolidation waits for the next slot; the loop must survive it.
        try:
            await self.run()
        except Exception:
            logger.exception("daily consolidation failed")

    def start(self) -> asyncio.Task:
        """Start the background loop in the running event loop."""
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._in_portal())
        return self._task

    async def _in_portal(self) -> None:
        # in a portal: its workspace calls wait on the loop (design §2.3); the loop's coroutine
        # is made only once the task runs (one stopped before that leaves none unawaited)
        await in_portal(self._loop())

    def stop(self) -> None:
        """Cancel the background loop."""
        if self._task is not None:
            self._task.cancel()
            self._task = None

    async def _loop(self) -> None:
        await self.catch_up()
        while True:
            now = self.clock()
            wait = (self.next_slot(now) - now).total_seconds()
            # Wake at least hourly, so a suspended machine or a clock change is noticed.
            await asyncio.sleep(min(max(wait, 1.0), 3600.0))
            await self.tick()
