"""The pair-safe cut point (design §4.1, 12.4, 12.5, 12.14): a pure function, no AgentScope inside.

Compaction keeps a tail of the newest messages. The tail must start at a message boundary
that separates no ``tool_use`` from its ``tool_result``: a provider rejects a prompt holding a
result without its call (HTTP 400), and a call without its result unless it is the pending last
call. Results are paired with the nearest earlier call of the same id, so reused ids work;
parallel calls in one message and several results in one message are just several pairs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field


@dataclass(frozen=True)
class CutItem:
    """What the cut needs to know about one message."""

    tokens: int
    """Its token count."""
    tool_use_ids: tuple[str, ...] = field(default_factory=tuple)
    """Ids of the tool calls it makes."""
    tool_result_ids: tuple[str, ...] = field(default_factory=tuple)
    """Ids of the tool results it carries."""


def tool_pairs(items: Sequence[CutItem]) -> list[tuple[int, int]]:
    """(call index, result index) of every paired call/result, pairing by id and order.

    A result pairs with the nearest earlier unanswered call of the same id; within one message,
    a result never pairs with a call made in the same message.
    """
    open_calls: dict[str, list[int]] = {}
    pairs = []
    for index, item in enumerate(items):
        for call_id in item.tool_result_ids:
            stack = open_calls.get(call_id)
            if stack:
                pairs.append((stack.pop(), index))
        for call_id in item.tool_use_ids:
            open_calls.setdefault(call_id, []).append(index)
    return pairs


def valid_boundaries(items: Sequence[CutItem]) -> list[bool]:
    """``valid[i]`` is True when keeping ``items[i:]`` splits no call from its result.

    Boundary ``i`` is invalid when some pair has its call before ``i`` and its result at or after
    it. Computed with a difference array: O(messages + pairs).
    """
    n = len(items)
    crossing = [0] * (n + 2)
    for call, result in tool_pairs(items):
        if call < result:
            crossing[call + 1] += 1
            crossing[result + 1] -= 1
    valid = []
    running = 0
    for i in range(n + 1):
        running += crossing[i]
        valid.append(running == 0)
    return valid


def choose_cut(items: Sequence[CutItem], keep_tokens: int) -> int:
    """Index where the kept tail starts: ``items[:cut]`` are compacted, ``items[cut:]`` kept.

    Keeps as much of the newest conversation as fits in ``keep_tokens`` at a pair-safe
    boundary. The newest message is always kept, even when it alone is over the budget (the
    live turn is never compacted away); the tail then starts at the latest safe boundary before
    it. Returns 0 when nothing can be compacted.
    """
    n = len(items)
    if n <= 1:
        return 0
    valid = valid_boundaries(items)
    # Smallest start whose suffix fits the budget.
    suffix = 0
    fit_start = n
    for i in range(n - 1, -1, -1):
        suffix += items[i].tokens
        if suffix > keep_tokens:
            break
        fit_start = i
    for i in range(fit_start, n):
        if valid[i]:
            return i
    # Nothing fits: keep the newest message (and whatever it needs to stay paired).
    for i in range(n - 1, -1, -1):
        if valid[i]:
            return i
    return 0
