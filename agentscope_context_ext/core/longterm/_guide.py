"""What the agent is shown of its long-term memory: a guide to the memory tools and the current
``Memory.md``, bounded in tokens. It is served as one message at the head of the context (never
through the system prompt, so it never ends up in saved session state)."""

from __future__ import annotations

from collections.abc import Callable

from ._store import LongTermMemory

__all__ = [
    "MEMORY_BLOCK_END",
    "MEMORY_BLOCK_START",
    "MEMORY_GUIDE",
    "bounded_by_tokens",
    "memory_block",
]

MEMORY_BLOCK_START = "<long-term-memory>"
MEMORY_BLOCK_END = "</long-term-memory>"
MEMORY_GUIDE = """You have a long-term memory that lasts beyond this conversation, in the workspace:
- memory_append(text, section): a durable fact worth remembering next time, e.g. a user \
preference (section "Personal") or a lesson from a failed attempt (section "Try-Error Notes");
- memory_edit(old_text, new_text): correct a fact that changed;
- daily_note(text): what you did or learned today (merged into Memory.md daily);
- memory_read(): the whole file.
Do not store task progress or file contents there."""


def memory_block(
    memory: LongTermMemory,
    count_text: Callable[[str], int],
    max_tokens: int,
    with_guide: bool = True,
) -> str | None:
    """The text of the long-term memory message: the guide (when the agent has the tools) and
    ``Memory.md`` cut to ``max_tokens``; ``None`` when there is nothing to show."""
    block = MEMORY_GUIDE if with_guide else ""
    content = memory.read().strip()
    if content and max_tokens > 0:
        block += f"\n\nCurrent Memory.md:\n{bounded_by_tokens(content, max_tokens, count_text)}"
    block = block.strip()
    if not block:
        return None
    return f"{MEMORY_BLOCK_START}\n{block}\n{MEMORY_BLOCK_END}"


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
