"""What the agent is shown of its long-term memory: the current ``Memory.md``, bounded in tokens,
after the system prompt (nothing while the file is empty)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ._store import LongTermMemory

__all__ = [
    "MEMORY_BLOCK_END",
    "MEMORY_BLOCK_START",
    "MemoryView",
    "bounded_by_tokens",
    "memory_block",
]

MEMORY_BLOCK_START = "<long-term-memory>"
MEMORY_BLOCK_END = "</long-term-memory>"
MEMORY_HEADING = "Memory.md, your notes from earlier conversations"
"""What the block calls ``Memory.md`` (how to write it is in the memory tools' descriptions)."""


@dataclass(frozen=True)
class MemoryView:
    """What the model is shown of ``Memory.md``: the block (``None``: the file is empty) and
    whether it holds the whole file."""

    block: str | None = None
    whole: bool = True


def memory_block(
    memory: LongTermMemory,
    count_text: Callable[[str], int],
    max_tokens: int,
    with_tools: bool = True,
) -> MemoryView:
    """The long-term memory block for the system prompt: ``Memory.md`` cut to ``max_tokens``
    (nothing at all while the file is empty: the tools' descriptions say what it is for)."""
    content = memory.read().strip()
    if not content or max_tokens <= 0:
        return MemoryView(None, not content)
    shown = bounded_by_tokens(content, max_tokens, count_text)
    hint = " (keep them current with memory_append and memory_edit)" if with_tools else ""
    block = f"{MEMORY_BLOCK_START}\n{MEMORY_HEADING}{hint}:\n{shown}\n{MEMORY_BLOCK_END}"
    return MemoryView(block, shown == content)


def bounded_by_tokens(text: str, limit: int, count: Callable[[str], int]) -> str:
    """``text`` cut at a line boundary to at most ``limit`` tokens, saying so when cut."""
    if count(text) <= limit:
        return text
    kept: list[str] = []
    for line in text.split("\n"):
        if count("\n".join([*kept, line])) > limit:
            break
        kept.append(line)
    return "\n".join(kept) + "\n(... Memory.md continues: call memory_read for the rest)"
