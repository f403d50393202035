"""Daily consolidation (SPEC 7): the day's notes merged into ``Memory.md`` by an agent.

``consolidate()`` gives a ReActAgent the current ``Memory.md`` and the daily notes since the last
consolidation, with two tools: ``memory_read`` and ``memory_write`` (a full rewrite, refused
above ``max_bytes``, backed up before it lands). ``ConsolidationScheduler`` runs it every day at
``consolidation_time`` local time inside the process, and catches up once at start when the
last consolidation is more than a day old; ``agentscope-context consolidate`` runs it from cron.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from agentscope.agent import ReActAgent
from agentscope.formatter import FormatterBase
from agentscope.memory import InMemoryMemory
from agentscope.message import Msg, TextBlock
from agentscope.model import ChatModelBase
from agentscope.tool import Toolkit, ToolResponse

from ..core.workspace import atomic_write_text, ensure_directory
from ._store import LongTermMemory, MemoryInputError

logger = logging.getLogger("agentscope_context_ext")

STATE_FILE = ".consolidation.json"
CONSOLIDATOR_PROMPT = """You consolidate Memory.md, the long-term memory of an AI agent, with the \
daily notes written since the last consolidation. Rewrite Memory.md in full with memory_write:

- keep its sections (## Personal, ## Try-Error Notes, ## Facts, and any others), one "- item" per line;
- fold in everything durable from the notes; drop what only mattered for that day;
- remove duplicates and merge lines that say the same thing;
- when a note contradicts Memory.md or an older note, the newer note wins (notes are dated);
- stay under {max_bytes} bytes; shorten wording rather than drop lessons.

Call memory_write exactly once with the complete new file, then answer "done"."""


@dataclass
class ConsolidationResult:
    """What a consolidation did."""

    status: str
    """``consolidated``, ``nothing_to_do`` (no new notes) or ``unchanged`` (the agent wrote nothing)."""
    notes: list[str]
    """The note days it merged."""
    backup: str | None = None
    """Backup of the previous ``Memory.md``."""
    bytes_after: int = 0
    """Size of ``Memory.md`` afterwards."""


def read_state(memory: LongTermMemory) -> dict[str, Any]:
    """The consolidation bookkeeping (``last_run``, ``last_note_day``)."""
    try:
        return json.loads((memory.notes_dir / STATE_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def last_consolidation(memory: LongTermMemory) -> datetime | None:
    """When the last consolidation ran (aware datetime), or ``None``."""
    value = read_state(memory).get("last_run")
    try:
        return datetime.fromisoformat(value) if value else None
    except ValueError:
        return None


def _write_state(memory: LongTermMemory, **updates: Any) -> None:
    ensure_directory(memory.notes_dir)
    state = {**read_state(memory), **updates}
    atomic_write_text(memory.notes_dir / STATE_FILE, json.dumps(state))


async def consolidate(
    workspace_or_memory: str | Path | LongTermMemory,
    model: ChatModelBase,
    formatter: FormatterBase,
    *,
    max_bytes: int = 16384,
    now: datetime | None = None,
    on_write: Callable[[str, dict[str, Any]], Any] | None = None,
) -> ConsolidationResult:
    """Merge the daily notes since the last consolidation into ``Memory.md``.

    Args:
        workspace_or_memory: A workspace folder or a :class:`LongTermMemory`.
        model (`ChatModelBase`): The consolidation agent's model.
        formatter (`FormatterBase`): Its formatter.
        max_bytes (`int`): ``Memory.md`` must stay under this size.
        now (`datetime | None`): "Now" (local, aware); tests pass a fixed one.
        on_write: Called after the rewrite with details (for a ``memory_written`` event).

    Returns:
        `ConsolidationResult`. No notes since last time means no model call at all.
    """
    memory = (
        workspace_or_memory
        if isinstance(workspace_or_memory, LongTermMemory)
        else LongTermMemory(workspace_or_memory)
    )
    now = now or datetime.now().astimezone()
    state = read_state(memory)
    notes = memory.daily_notes(since=state.get("last_note_day"))
    if not notes:
        _write_state(memory, last_run=now.isoformat())
        return ConsolidationResult("nothing_to_do", [])
    written: dict[str, Any] = {}

    async def memory_read() -> ToolResponse:
        """Read the current Memory.md."""
        return ToolResponse(
            content=[TextBlock(type="text", text=memory.read() or "Memory.md is empty.")]
        )

    async def memory_write(content: str) -> ToolResponse:
        """Replace Memory.md with the complete new version (the old one is backed up first).

        Args:
            content (str): The whole new Memory.md.
        """
        if not isinstance(content, str) or not content.strip():
            return ToolResponse(content=[TextBlock(type="text", text="Error: content is empty")])
        size = len(content.encode("utf-8", errors="replace"))
        if size > max_bytes:
            return ToolResponse(
                content=[
                    TextBlock(
                        type="text",
                        text=f"Error: {size} bytes is over the {max_bytes}-byte limit; shorten it and call memory_write again",
                    )
                ]
            )
        try:
            backup = memory.write(content)
        except (MemoryInputError, OSError) as exc:
            return ToolResponse(content=[TextBlock(type="text", text=f"Error: {exc}")])
        written.update(backup=str(backup) if backup else None, bytes=size)
        return ToolResponse(content=[TextBlock(type="text", text="Memory.md rewritten.")])

    toolkit = Toolkit()
    toolkit.register_tool_function(memory_read)
    toolkit.register_tool_function(memory_write)
    agent = ReActAgent(
        name="consolidator",
        sys_prompt=CONSOLIDATOR_PROMPT.format(max_bytes=max_bytes),
        model=model,
        formatter=formatter,
        toolkit=toolkit,
        memory=InMemoryMemory(),
        max_iters=6,
    )
    agent.set_console_output_enabled(False)
    rendered_notes = "\n\n".join(
        f"### Notes of {day}\n{text.strip()}" for day, text in notes.items()
    )
    await agent(
        Msg(
            "user",
            f"Current Memory.md:\n{memory.read().strip() or '(empty)'}\n\nDaily notes since the last consolidation:\n{rendered_notes}",
            "user",
        )
    )
    yesterday = (now.date() - timedelta(days=1)).isoformat()
    # Today's note is still growing: merge it, but look at it again next time.
    last_day = min(max(notes), yesterday)
    _write_state(
        memory,
        last_run=now.isoformat(),
        last_note_day=max(last_day, state.get("last_note_day") or ""),
    )
    if not written:
        return ConsolidationResult("unchanged", list(notes))
    if on_write is not None:
        result = on_write(
            "consolidate", {"writer": "consolidator", "notes": list(notes), **written}
        )
        if asyncio.iscoroutine(result):
            await result
    return ConsolidationResult(
        "consolidated", list(notes), written.get("backup"), written.get("bytes", 0)
    )


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
            self._task = asyncio.get_running_loop().create_task(self._loop())
        return self._task

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
