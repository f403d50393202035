"""Memory tools (design §6.3, 7): ``memory_read``, ``memory_append``, ``memory_edit``,
``daily_note``. None of them takes a path: they can only touch ``Memory.md`` and today's note
of their workspace, and every bad input is answered with an ``Error: ...`` string.

They are plain async functions returning text, documented for the agent; each adapter wraps them
into its framework's tool type."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Coroutine
from typing import Any

from ..workspace import portal
from ._store import LongTermMemory, MemoryInputError

__all__ = ["MemoryTool", "make_memory_tools"]

MemoryTool = Callable[..., Coroutine[Any, Any, str]]
WriteListener = Callable[[str, dict[str, Any]], Any]


def make_memory_tools(
    memory: LongTermMemory,
    on_write: WriteListener | None = None,
    writer: str = "agent",
) -> tuple[MemoryTool, MemoryTool, MemoryTool, MemoryTool]:
    """Build ``(memory_read, memory_append, memory_edit, daily_note)`` over ``memory``.

    Args:
        memory (`LongTermMemory`): The workspace's long-term memory.
        on_write (`Callable[[str, dict], Any] | None`): Called after each successful write with
            the tool name and details (the manager turns it into a ``memory_written`` event).
        writer (`str`): Who writes (``agent``, ``summarizer``), reported to ``on_write``.
    """

    async def written(tool: str, **details: Any) -> None:
        if on_write is not None:
            result = on_write(tool, {"writer": writer, **details})
            if inspect.isawaitable(result):
                await result

    async def memory_read() -> str:
        """Read the whole of your long-term memory, Memory.md."""
        content = memory.read()
        return content if content.strip() else "Memory.md is empty."

    async def memory_append(text: str, section: str = "") -> str:
        """Remember a durable fact in Memory.md, kept beyond this conversation: a user
        preference, a lesson from a failed attempt; not task progress or file contents.

        Args:
            text (str):
                The fact, one line.
            section (str):
                "Personal", "Try-Error Notes" or "Facts" (the default).
        """
        section = section or None
        try:
            added = memory.append(text, section)
        except MemoryInputError as exc:
            return f"Error: {exc}"
        except OSError as exc:
            return f"Error: Memory.md could not be written ({exc.strerror or exc})"
        if not added:
            return "Already in Memory.md; nothing added."
        await written("memory_append", section=section or "Facts", chars=len(text))
        return f"Added to Memory.md under ## {section or 'Facts'}."

    async def memory_edit(old_text: str, new_text: str) -> str:
        """Correct Memory.md: replace old_text, which must appear exactly once, with
        new_text (empty: delete it).

        Args:
            old_text (str):
                The text, as Memory.md has it.
            new_text (str):
                The replacement.
        """
        try:
            ok, reason = memory.edit_with_reason(old_text, new_text)
        except MemoryInputError as exc:
            return f"Error: {exc}"
        except OSError as exc:
            return f"Error: Memory.md could not be written ({exc.strerror or exc})"
        if not ok:
            return f"Error: {reason}"
        await written("memory_edit", chars=len(str(new_text)))
        return "Memory.md edited."

    async def daily_note(text: str) -> str:
        """Note what you did or learned today (merged into Memory.md daily).

        Args:
            text (str):
                The note, one line.
        """
        try:
            path = memory.add_daily_note(text)
        except MemoryInputError as exc:
            return f"Error: {exc}"
        except OSError as exc:
            return f"Error: the daily note could not be written ({exc.strerror or exc})"
        name = path.rpartition("/")[2]
        await written("daily_note", file=f"memory/{name}", chars=len(text))
        return f"Noted in memory/{name}."

    # in portals: their workspace calls (and Memory.md's lock) wait on the loop (design §2.3)
    return portal(memory_read), portal(memory_append), portal(memory_edit), portal(daily_note)
