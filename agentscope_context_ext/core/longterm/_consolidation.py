"""Daily consolidation (design §7): the day's notes merged into ``Memory.md`` by an agent.

``consolidate()`` gives an agent the current ``Memory.md`` and the daily notes since the last
consolidation, with two tools: ``memory_read`` and ``memory_write`` (a full rewrite, refused
above ``max_bytes``, backed up before it lands). The agent takes its time; whatever the
Summarizer, ``memory_append`` or another process writes to ``Memory.md`` meanwhile is merged
into the rewrite under the lock (``LongTermMemory.write(based_on=...)``), never overwritten. The agent itself is the adapter's: a runner
that takes a system prompt, a user message and plain tool functions returning text.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, NoReturn

from ._schedule import read_state, write_state
from ._store import LongTermMemory, MemoryInputError

__all__ = [
    "CONSOLIDATOR_PROMPT",
    "AgentInterrupted",
    "AgentRunner",
    "ConsolidationResult",
    "consolidate",
    "interrupted_reply",
]

AgentRunner = Callable[[str, str, Sequence[Callable[..., Awaitable[str]]]], Awaitable[str]]
"""``(system prompt, user message, tools) -> the agent's final answer``: an adapter runs an agent
of its framework with these tools (plain async functions returning text, documented for the
agent) and nothing else. A reply the framework ended as interrupted is not an answer: the
runner calls :func:`interrupted_reply` instead of returning its text."""


class AgentInterrupted(RuntimeError):
    """A background agent's reply was interrupted, not answered (and no cancellation of the
    running task explains it)."""


def interrupted_reply(name: str) -> NoReturn:
    """What a runner does with a reply its framework ended as interrupted.

    Both AgentScope majors catch the ``CancelledError`` of a cancelled task inside the agent and
    return an ordinary message ("I noticed that you have interrupted me", 2.x's interruption
    message): taken for an answer, a Summarizer job cancelled at the event loop's end counted
    as done and its journal entry went (issue 42). The cancellation is passed on when the task
    was cancelled; otherwise :class:`AgentInterrupted` is raised (a failed attempt).

    Raises:
        `asyncio.CancelledError`: The running task was asked to stop.
        `AgentInterrupted`: The reply was interrupted for another reason.
    """
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError(f"the {name} agent was cancelled")
    raise AgentInterrupted(f"the {name} agent's reply was interrupted")


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


async def consolidate(
    workspace_or_memory: str | Path | LongTermMemory,
    run_agent: AgentRunner,
    *,
    max_bytes: int = 16384,
    now: datetime | None = None,
    on_write: Callable[[str, dict[str, Any]], Any] | None = None,
) -> ConsolidationResult:
    """Merge the daily notes since the last consolidation into ``Memory.md``.

    Args:
        workspace_or_memory: A workspace folder or a :class:`LongTermMemory`.
        run_agent (`AgentRunner`): Runs the consolidation agent.
        max_bytes (`int`): ``Memory.md`` must stay under this size.
        now (`datetime | None`): "Now" (local, aware); tests pass a fixed one.
        on_write: Called after the rewrite with details (for a ``memory_written`` event).

    Returns:
        `ConsolidationResult`. No notes since last time means no agent run at all.
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
        write_state(memory, last_run=now.isoformat())
        return ConsolidationResult("nothing_to_do", [])
    written: dict[str, Any] = {}
    shown = {"text": memory.read()}
    """The version the agent last saw: its rewrite is merged with what changed since."""

    async def memory_read() -> str:
        """Read the current Memory.md."""
        shown["text"] = memory.read()
        return shown["text"] or "Memory.md is empty."

    async def memory_write(content: str) -> str:
        """Replace Memory.md with the complete new version (the old one is backed up first).

        Args:
            content (str): The whole new Memory.md.
        """
        if not isinstance(content, str) or not content.strip():
            return "Error: content is empty"
        size = len(content.encode("utf-8", errors="replace"))
        if size > max_bytes:
            return (
                f"Error: {size} bytes is over the {max_bytes}-byte limit; shorten it and call "
                "memory_write again"
            )
        try:
            backup = memory.write(content, based_on=shown["text"])
        except (MemoryInputError, OSError) as exc:
            return f"Error: {exc}"
        shown["text"] = memory.read()  # a second rewrite builds on this one
        written.update(backup=str(backup) if backup else None, bytes=size)
        return "Memory.md rewritten."

    rendered = "\n\n".join(f"### Notes of {day}\n{text.strip()}" for day, text in notes.items())
    await run_agent(
        CONSOLIDATOR_PROMPT.format(max_bytes=max_bytes),
        f"Current Memory.md:\n{shown['text'].strip() or '(empty)'}\n\n"
        f"Daily notes since the last consolidation:\n{rendered}",
        [memory_read, memory_write],
    )
    yesterday = (now.date() - timedelta(days=1)).isoformat()
    # Today's note is still growing: merge it, but look at it again next time.
    last_day = min(max(notes), yesterday)
    write_state(
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
        if inspect.isawaitable(result):
            await result
    return ConsolidationResult(
        "consolidated", list(notes), written.get("backup"), written.get("bytes", 0)
    )
