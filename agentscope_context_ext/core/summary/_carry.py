"""Progress carried across compactions (design §4.2).

Each compaction merges the previous summary with the new messages under one budget, so what the
first compactions did competes with what the last one did, and lost: a fourth compaction (on an
8k window) dropped every Progress line the first three had. Now no Progress item of the
previous summary is dropped silently. Whatever the new summary no longer says (neither the item
nor every name it holds in backticks) is written back as ONE line at the head of Progress,
``Earlier: a; b; c``, within a share of the budget kept free for it, the oldest condensed first:
each item cut to its head (the name and outcome, without the details), then the oldest to their
names alone, then counted (``+3 more, in the Raw Dialog``), where the dialog guide says how to
read them back. The line is carried like any other item: the next compaction flattens it back
into its items.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from ._model import CompactSummary
from ._terms import TextIndex
from ._text import BACKTICKED_RE, LABELS, clip, squash

__all__ = ["CARRY_SHARE", "carry_progress", "carry_reserve", "lost_progress"]

CARRY_SHARE = 0.15
"""At most this share of the summary's budget is kept for the earlier progress it would drop."""
_HEAD_CHARS = 120
"""A condensed item: its head, at most this long."""
_MORE_RE = re.compile(r"\s*\(\+(\d+) [^()]*\)$")
CountTokens = Callable[[str], int]


def lost_progress(summary: CompactSummary, previous: CompactSummary | None) -> list[str]:
    """The Progress items of ``previous`` (an ``Earlier:`` line counted as its items) that
    ``summary`` no longer says, oldest first: neither the item itself nor every name it holds
    in backticks (an item naming nothing is looked for word for word)."""
    if previous is None or not previous.progress:
        return []
    written = TextIndex("\n".join(_items(summary)))
    kept = {squash(item).casefold() for item in summary.progress}
    lost = []
    for item in _flatten(previous.progress):
        names = BACKTICKED_RE.findall(item)
        if squash(item).casefold() in kept:
            continue
        if names and all(written.mentions(name) for name in names):
            continue
        if not names and squash(item).casefold() in squash(written.text).casefold():
            continue
        lost.append(item)
    return lost


def carry_reserve(
    summary: CompactSummary, previous: CompactSummary | None, budget: int, count: CountTokens
) -> int:
    """Tokens to keep free in a summary of ``budget`` tokens for the earlier progress that
    ``summary`` (written with the whole budget) lost: what its condensed line takes, at most
    :data:`CARRY_SHARE` of the budget; 0 when nothing was lost."""
    lost = lost_progress(summary, previous)
    if not lost:
        return 0
    line = _line([_head(item) for item in lost], 0, LABELS["en"])
    return min(count(line) + 2, int(budget * CARRY_SHARE))


def carry_progress(
    summary: CompactSummary,
    previous: CompactSummary | None,
    budget: int,
    count: CountTokens,
    language: str = "English",
) -> CompactSummary:
    """``summary`` with the earlier progress it lost (:func:`lost_progress`) written back as
    one ``Earlier:`` line at the head of Progress, within what is left of ``budget``.

    Args:
        summary (`CompactSummary`): The new summary, written with room left for the line
            (:func:`carry_reserve`).
        previous (`CompactSummary | None`): The summary it replaces.
        budget (`int`): Tokens the six sections may take together.
        count (`Callable[[str], int]`): The token counter.
        language (`str`): The summary language (the line's label follows it).
    """
    lost = lost_progress(summary, previous)
    if not lost:
        return summary
    labels = LABELS["zh" if language.lower().startswith("chinese") else "en"]
    room = budget - sum(count(item) + 2 for item in _items(summary)) - 2
    more = sum(_more(item) for item in (previous.progress if previous else []))
    items = [_head(item) for item in lost]
    names_only = 0
    # Over the room: the oldest items shrink to their names, then give way to a count.
    while items and count(_line(items, more, labels)) > room:
        if names_only < len(items):
            items[names_only] = _names(items[names_only])
            names_only += 1
        else:
            items.pop(0)
            names_only -= 1
            more += 1
    line = _line(items, more, labels)
    if count(line) > room:
        return summary  # not even the count fits: the budget is spent on what is newer
    return summary.model_copy(update={"progress": [line, *summary.progress]})


def _items(summary: CompactSummary) -> list[str]:
    return [
        *summary.goal,
        *summary.constraints,
        *summary.progress,
        *summary.key_decisions,
        *summary.next_steps,
        *summary.critical_context,
    ]


def _flatten(progress: Sequence[str]) -> list[str]:
    """Progress items, an ``Earlier:`` line of an earlier carry split back into its items."""
    items: list[str] = []
    for item in progress:
        label = next(
            (
                labels["earlier"]
                for labels in LABELS.values()
                if item.startswith(labels["earlier"] + ": ")
            ),
            None,
        )
        if label is None:
            items.append(item)
            continue
        body = _MORE_RE.sub("", item[len(label) + 2 :])
        items.extend(part for part in _split(body) if part)
    return items


def _more(item: str) -> int:
    """How many items an ``Earlier:`` line already counts without naming them."""
    match = _MORE_RE.search(item)
    earlier = any(item.startswith(labels["earlier"] + ": ") for labels in LABELS.values())
    return int(match.group(1)) if match and earlier else 0


def _split(body: str) -> list[str]:
    """``a; b; c`` split at the separators outside backticks (a command may hold ``; ``)."""
    parts, current, quoted = [], [], False
    index = 0
    while index < len(body):
        char = body[index]
        if char == "`":
            quoted = not quoted
        if not quoted and body.startswith("; ", index):
            parts.append("".join(current).strip())
            current = []
            index += 2
            continue
        current.append(char)
        index += 1
    parts.append("".join(current).strip())
    return parts


def _head(item: str) -> str:
    """An item without its details: what it names and how that went, up to the first ``: ``
    or ``; `` outside backticks, or the `` — `` after an outcome arrow (a file
    that was "— edited: <changes>" keeps "— edited"; a command "→ ok — <gist>" keeps "→ ok")."""
    item = squash(item)
    if not BACKTICKED_RE.search(item):  # prose: no name to keep, only its start
        return _clip(item, _HEAD_CHARS)
    cuts = [_outside_backticks(item, separator, 0) for separator in (": ", "; ")]
    arrow = _outside_backticks(item, " → ", 0)
    if arrow >= 0:
        cuts.append(_outside_backticks(item, " — ", arrow))
    cuts = [cut for cut in cuts if cut >= 0]
    head = item[: min(cuts)] if cuts else item
    if not BACKTICKED_RE.search(head):  # "Also read: `a.py`, `b.py`": the names are the item
        head = f"{head}: {_names(item)}"
    return _clip(head, _HEAD_CHARS)


def _clip(text: str, limit: int) -> str:
    """:func:`clip`, a backtick it cut open closed again (the line is split outside them)."""
    text = clip(text, limit)
    return text + "`" if text.count("`") % 2 else text


def _outside_backticks(text: str, separator: str, start: int) -> int:
    position = text.find(separator, start)
    while position >= 0 and text[:position].count("`") % 2:
        position = text.find(separator, position + 1)
    return position


def _names(item: str) -> str:
    """An item reduced to the names it holds in backticks (its head, shorter, if none)."""
    names = BACKTICKED_RE.findall(item)
    return ", ".join(f"`{name}`" for name in names) if names else _clip(item, 40)


def _line(items: Sequence[str], more: int, labels: dict[str, str]) -> str:
    line = f"{labels['earlier']}: " + "; ".join(items)
    if more:
        line += f" (+{more} {labels['more']})"
    return line
