"""The extractive summary: a handover written from the messages alone, no model involved.

It is the offline default (``compaction.model: extractive``) and the fallback when the model
fails. What it keeps, in the order it gives up space:

1. the user's requests, verbatim (the goal), and their constraints;
2. what remains: the last plan or todo list, the agent's last stated intention, an unresolved
   error;
3. each file the agent created or edited, with what changed (``old`` -> ``new`` lines, added
   definitions), each distinct command with its outcome and first error line, other calls;
4. the files it read and what they define, the agent's decisions;
5. the most salient identifiers that are not named yet (:class:`~._terms.Salience`).

Every candidate line has a priority; lines are taken, most important first, while they fit in
the token budget, then rendered in conversation order. Merging with the previous summary is the
same selection with the previous items as candidates (the original goal ranking highest), so
the summary never grows past its budget however many compactions it accumulates.

Deterministic, and language-neutral: everything is found by structure (tool arguments,
backticks, paths) rather than by English words; the few labels it writes follow the summary
language (English or Chinese).
"""

from __future__ import annotations

import math
import os
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from ..messages import Message
from ._model import SECTION_TITLES, CompactSummary
from ._terms import Salience, TextIndex
from ._worklog import CommandWork, FileWork, OtherCall, WorkLog, build_worklog

__all__ = ["DEFAULT_BUDGET_TOKENS", "estimate_tokens", "extractive_summary", "sentences"]

DEFAULT_BUDGET_TOKENS = 2048
_CONSTRAINT_RE = re.compile(
    r"\b(must|never|always|don't|do not|please|should not|shouldn't|only|avoid|make sure)\b"
    r"|必须|不要|务必|请|禁止|一定|不能|只能|避免",
    re.IGNORECASE,
)
_DECISION_RE = re.compile(
    r"\b(decid\w*|chose|choose|going to|will use|instead|switch\w* to|prefer\w*|rather than|"
    r"the (?:issue|problem|cause|fix) (?:is|was))\b|决定|改用|采用|原因是|问题是",
    re.IGNORECASE,
)
_NEXT_RE = re.compile(
    r"\b(next|then|todo|remaining|still need|now (?:I|let)|let me|I'll|I will|plan)\b"
    r"|下一步|接下来|然后|待办|还需要",
    re.IGNORECASE,
)
_SENTENCE_SPLIT_RE = re.compile(r"(?<=[.!?。！？])\s+|\n+")
_BACKTICKED_RE = re.compile(r"`([^`\n]+)`")
_LABELS = {
    "en": {
        "created": "created",
        "edited": "edited",
        "read": "read",
        "listed": "listed",
        "searched": "searched",
        "lines": "lines",
        "failed": "failed",
        "ok": "ok",
        "then": "then",
        "root": "Paths are relative to",
        "unresolved": "Unresolved",
        "saved": "full output",
        "defines": "defines",
        "plan": "Plan",
        "also_read": "Also read",
    },
    "zh": {
        "created": "新建",
        "edited": "修改",
        "read": "读取",
        "listed": "列出",
        "searched": "搜索",
        "lines": "行",
        "failed": "失败",
        "ok": "成功",
        "then": "之后",
        "root": "路径相对于",
        "unresolved": "未解决",
        "saved": "完整输出",
        "defines": "定义",
        "plan": "计划",
        "also_read": "另读取",
    },
}
# Priorities: what a handover can least afford to lose is highest. Heads are the one-line
# entries; details (changed lines, definitions, gists) hang off a chosen head.
_P_ESSENTIAL = 80.0
"""Lines at least this important may use the budget kept for salient terms."""
_P_FIRST_REQUEST = 100.0
_P_PREVIOUS_GOAL = 99.0
_P_REQUEST = 96.0
_P_UNRESOLVED = 92.0
_P_TODO = 91.0
_P_NEXT = 90.0
_P_SAVED_OUTPUT = 88.0
_P_ROOT = 87.0
_P_CONSTRAINT = 85.0
_P_MODIFIED_FILE = 80.0
_P_FAILED_COMMAND = 79.0
_P_FILE_ERROR = 75.0
_P_COMMAND = 68.0
_P_DECISION = 66.0
_P_WRITTEN_DEFINITION = 62.0
_P_CHANGE = 54.0
"""Plus twice the line's weight (3 definition, 2 import/attribute, 1 names code, 0 other)."""
_P_PREVIOUS_ITEM = 57.0
_P_OTHER_CALL = 55.0
_P_FINDING = 47.0
_P_READ_FILE = 50.0
_P_READ_DEFINITION = 46.0
_P_GIST = 45.0
_TERMS_PER_LINE = 10
_CHANGES_PER_FILE = 16
_GIST_CHARS = 120
_TERM_SHARE = 0.2
"""Share of the budget kept for salient terms (heads may use it; details may not)."""
_MIN_TERM_SCORE = 2.0
"""A term scoring less passed by once in one tool output: not worth a place."""
_REQUEST_SHARE = 0.3
"""At most this share of the budget per user request (longer ones are cut in the middle)."""


def estimate_tokens(text: str) -> int:
    """A conservative token estimate when no counter is given: UTF-8 bytes / 3."""
    return math.ceil(len(text.encode("utf-8", errors="replace")) / 3)


@dataclass
class _Entry:
    section: str
    order: float
    head: str
    priority: float
    details: list[tuple[float, int, str, str]] = field(default_factory=list)
    """(priority, position, text, group); position keeps the details' own order when rendered,
    and consecutive details of one group share its label (``defines `a`, `b```)."""
    lead: str = ": "
    joiner: str = "; "
    needs_detail: bool = False
    """Worth nothing alone (a file that was only read): taken only with a detail."""
    chosen_details: list[tuple[int, str, str]] = field(default_factory=list)

    def render(self) -> str:
        if not self.chosen_details:
            return self.head
        parts: list[str] = []
        current: str | None = None
        for _, text, group in sorted(self.chosen_details):
            if group and group == current:
                parts[-1] += f", {text}"
            else:
                parts.append(f"{group} {text}" if group else text)
            current = group
        return f"{self.head}{self.lead}{self.joiner.join(parts)}"


def extractive_summary(
    msgs: Sequence[Message],
    previous: CompactSummary | None = None,
    *,
    budget_tokens: int = DEFAULT_BUDGET_TOKENS,
    count_tokens: Callable[[str], int] = estimate_tokens,
    language: str = "English",
) -> CompactSummary:
    """Summarise ``msgs`` (and fold ``previous`` in) within ``budget_tokens``.

    Args:
        msgs (`Sequence[Message]`): The messages to compact, oldest first.
        previous (`CompactSummary | None`): The summary they extend.
        budget_tokens (`int`): Tokens the six sections may take together.
        count_tokens (`Callable[[str], int]`): The token counter (default: bytes / 3).
        language (`str`): The summary language; labels are Chinese for ``Chinese...``.

    Returns:
        `CompactSummary`: ``source="extractive"``; ``compactions`` and ``dialog_refs`` carried
        over from ``previous``.
    """
    labels = _LABELS["zh" if language.lower().startswith("chinese") else "en"]
    log = build_worklog(msgs)
    salience = Salience().extend(msgs)
    root = _common_root(list(log.files))
    entries = _entries(log, previous, labels, root, budget_tokens)
    chosen = _select(entries, budget_tokens, int(budget_tokens * _TERM_SHARE), count_tokens)
    _add_saved_outputs(chosen, log.saved_outputs, budget_tokens, count_tokens)
    _add_findings(chosen, log, budget_tokens, count_tokens)
    _add_terms(chosen, salience, previous, root, budget_tokens, count_tokens)
    sections: dict[str, list[str]] = {name: [] for name in SECTION_TITLES}
    for entry in sorted(chosen, key=lambda e: e.order):
        sections[entry.section].append(entry.render())
    return CompactSummary(
        **sections,
        source="extractive",
        dialog_refs=list(previous.dialog_refs) if previous else [],
        compactions=previous.compactions + 1 if previous else 1,
    )


# --------------------------------------------------------------------- entries


def _entries(
    log: WorkLog,
    previous: CompactSummary | None,
    labels: dict[str, str],
    root: str | None,
    budget: int,
) -> list[_Entry]:
    entries: list[_Entry] = []
    request_chars = max(300, int(budget * _REQUEST_SHARE * 3))
    if previous is not None:
        entries.extend(_previous_entries(previous))
    for rank, (index, text) in enumerate(log.requests):
        priority = _P_FIRST_REQUEST if rank == 0 and previous is None else _P_REQUEST
        entries.append(
            _Entry("goal", index, clip_middle(_squash(text), request_chars), priority - rank * 0.01)
        )
        for sentence in sentences(text):
            if _CONSTRAINT_RE.search(sentence):
                entries.append(_Entry("constraints", index, _clip(sentence, 400), _P_CONSTRAINT))
    entries.extend(_next_step_entries(log, labels))
    plain_reads = []
    for work in log.files.values():
        if work.modified or work.read_defines or work.errors or work.saved_output:
            entries.append(_file_entry(work, labels, root))
        else:
            plain_reads.append(work)
    if plain_reads:
        entries.append(_read_only_entry(plain_reads, labels, root))
    for work in log.commands.values():
        entries.append(_command_entry(work, labels))
    for call in log.calls.values():
        entries.append(_call_entry(call, labels))
    for index, text in log.statements:
        for sentence in sentences(text):
            if _DECISION_RE.search(sentence):
                entries.append(
                    _Entry("key_decisions", index, _clip(sentence, 300), _P_DECISION + index * 1e-4)
                )
    if root is not None:
        entries.append(_Entry("critical_context", -1e6, f"{labels['root']} `{root}`", _P_ROOT))
    return _dedupe(entries)


def _previous_entries(previous: CompactSummary) -> list[_Entry]:
    entries = []
    for name in SECTION_TITLES:
        if name == "next_steps":
            continue  # the new next steps replace the old ones (kept below if there are none)
        for rank, item in enumerate(getattr(previous, name)):
            if name == "goal":
                priority = _P_PREVIOUS_GOAL - rank * 0.01
            elif name == "constraints":
                priority = _P_CONSTRAINT - 0.5
            else:
                # Older lines give way first, the oldest before the newer ones.
                priority = _P_PREVIOUS_ITEM + rank * 1e-3
            entries.append(_Entry(name, -1e5 + rank, item, priority))
    for rank, item in enumerate(previous.next_steps):
        entries.append(_Entry("next_steps", -1e5 + rank, item, _P_GIST - 1))
    return entries


def _next_step_entries(log: WorkLog, labels: dict[str, str]) -> list[_Entry]:
    entries = []
    open_items = [(status, item) for status, item in log.todos if status.lower() not in _DONE]
    for rank, (status, item) in enumerate(open_items):
        entries.append(
            _Entry("next_steps", 1e5 + rank, f"[{status}] {item}", _P_TODO - rank * 0.01)
        )
    if log.last_error is not None:
        index, error = log.last_error
        entries.append(
            _Entry("next_steps", index, f"{labels['unresolved']}: `{error}`", _P_UNRESOLVED)
        )
    if log.statements:
        index, text = log.statements[-1]
        steps = [s for s in sentences(text) if _NEXT_RE.search(s)] or [_squash(text)]
        for rank, step in enumerate(steps[:6]):
            entries.append(
                _Entry("next_steps", index + rank * 1e-3, _clip(step, 400), _P_NEXT - rank * 0.1)
            )
    return entries


_DONE = {"completed", "complete", "done", "finished", "cancelled", "canceled", "success"}


def _file_entry(work: FileWork, labels: dict[str, str], root: str | None) -> _Entry:
    actions = []
    if work.writes:
        actions.append(labels["created"] + (f" ×{work.writes}" if work.writes > 1 else ""))
    if work.edits:
        actions.append(labels["edited"] + (f" ×{work.edits}" if work.edits > 1 else ""))
    if work.reads:
        actions.append(labels["read"] + (f" ×{work.reads}" if work.reads > 1 else ""))
    if work.listings:
        actions.append(labels["listed"])
    if work.searches:
        actions.append(labels["searched"] + (f" ×{work.searches}" if work.searches > 1 else ""))
    head = f"`{_relative(work.path, root)}`"
    if work.lines is not None and not work.modified:
        head += f" ({work.lines} {labels['lines']})"
    head += " — " + ", ".join(actions)
    if work.modified:
        entry = _Entry(
            "progress", work.first, head, _P_MODIFIED_FILE + min(work.edits + work.writes, 5)
        )
        for position, definition in enumerate(work.defines):
            entry.details.append(
                (_P_WRITTEN_DEFINITION - position * 0.01, position, f"`{definition}`", "")
            )
        ranked = sorted(enumerate(work.changes), key=lambda c: (-c[1][0], c[0]))
        for position, (weight, change) in ranked[:_CHANGES_PER_FILE]:
            priority = _P_CHANGE + 2 * weight - position * 1e-3
            entry.details.append((priority, len(work.defines) + position, change, ""))
    else:
        # A file that was only read is worth a line only with what it holds.
        entry = _Entry("progress", work.first, head, _P_READ_FILE, lead="; ", needs_detail=True)
        for position, definition in enumerate(work.read_defines):
            priority = _P_READ_FILE if position == 0 else _P_READ_DEFINITION - position * 0.01
            entry.details.append((priority, position, f"`{definition}`", labels["defines"]))
    for position, error in enumerate(work.errors[-2:], start=1000):
        entry.details.append((_P_FILE_ERROR, position, f"`{error}`", labels["failed"] + ":"))
    if work.saved_output:
        entry.details.append(
            (_P_SAVED_OUTPUT, 2000, f"`{work.saved_output}`", labels["saved"] + ":")
        )
    return entry


def _read_only_entry(files: list[FileWork], labels: dict[str, str], root: str | None) -> _Entry:
    """One line for the files that were read and show nothing worth repeating."""
    entry = _Entry("progress", files[0].first, labels["also_read"], _P_READ_FILE, needs_detail=True)
    for position, work in enumerate(files):
        shown = f"`{_relative(work.path, root)}`"
        entry.details.append((_P_READ_DEFINITION - 1 - position * 1e-3, position, shown, ""))
    return entry


def _command_entry(work: CommandWork, labels: dict[str, str]) -> _Entry:
    # A command is its own description; what it printed is a detail.
    head = f"`{_clip(work.command, 240)}`" + _outcome(work, labels, with_gist=False)
    failed = work.outcomes and not work.outcomes[-1]
    priority = (_P_FAILED_COMMAND if failed else _P_COMMAND) + work.last * 1e-4
    entry = _Entry("progress", work.first, head, priority, lead=" — ")
    if work.gist and work.outcomes and work.outcomes[-1]:
        entry.details.append((_P_GIST, 0, _clip(work.gist, _GIST_CHARS), ""))
    if work.saved_output:
        entry.details.append((_P_SAVED_OUTPUT, 1, f"`{work.saved_output}`", labels["saved"] + ":"))
    return entry


def _call_entry(call: OtherCall, labels: dict[str, str]) -> _Entry:
    head = f"{call.tool}({_clip(call.arguments, 160)})" + _outcome(call, labels)
    entry = _Entry("progress", call.first, head, _P_OTHER_CALL + call.last * 1e-4, lead="; ")
    if call.saved_output:
        entry.details.append((_P_SAVED_OUTPUT, 1, f"`{call.saved_output}`", labels["saved"] + ":"))
    return entry


def _outcome(work: CommandWork | OtherCall, labels: dict[str, str], with_gist: bool = True) -> str:
    """`` → ok — first line of the output``, `` ×3 → failed 2×: `error`, then ok``, ..."""
    outcomes = work.outcomes
    if not outcomes:
        return ""
    times = f" ×{len(outcomes)}" if len(outcomes) > 1 else ""
    failures = outcomes.count(False)
    shown = with_gist and work.gist and outcomes[-1]
    gist = f" — {_clip(work.gist, _GIST_CHARS)}" if shown else ""
    if failures == 0:
        return f"{times} → {labels['ok']}{gist}"
    detail = f": `{work.error}`" if work.error else ""
    if outcomes[-1]:
        return f"{times} → {labels['failed']} {failures}×{detail}, {labels['then']} {labels['ok']}{gist}"
    return f"{times} → {labels['failed']}{detail}"


# ------------------------------------------------------------------- selection


def _select(
    entries: list[_Entry], budget: int, reserve: int, count: Callable[[str], int]
) -> list[_Entry]:
    """Heads and details, most important first, while they fit in ``budget``.

    A detail is taken only with its head, and a detail more important than its head brings the
    head along; a head that ``needs_detail`` is never taken alone. The last ``reserve`` tokens
    are kept for the salient terms: only essential lines (priority >= ``_P_ESSENTIAL``) may use
    them.
    """
    candidates: list[tuple[float, int, _Entry, tuple[int, str, str] | None]] = [
        (entry.priority, 0, entry, None) for entry in entries if not entry.needs_detail
    ]
    for entry in entries:
        candidates.extend(
            (p, 1, entry, (position, text, group)) for p, position, text, group in entry.details
        )
    candidates.sort(key=lambda c: (-c[0], c[1]))
    chosen: list[_Entry] = []
    taken: set[int] = set()
    used = 0
    for priority, _, entry, detail in candidates:
        limit = budget if priority >= _P_ESSENTIAL else budget - reserve
        if detail is None:
            if id(entry) in taken:
                continue
            cost = count(entry.head) + 2
            if used + cost <= limit:
                chosen.append(entry)
                taken.add(id(entry))
                used += cost
            continue
        cost = count(f"{detail[2]} {detail[1]}") + 1
        if id(entry) not in taken:
            cost += count(entry.head) + 2
            if used + cost > limit:
                continue
            chosen.append(entry)
            taken.add(id(entry))
        elif used + cost > limit:
            continue
        entry.chosen_details.append(detail)
        used += cost
    return chosen


def _add_saved_outputs(
    chosen: list[_Entry], saved: Sequence[str], budget: int, count: Callable[[str], int]
) -> None:
    """One line naming every offloaded output the chosen lines do not name yet (SPEC 12.7)."""
    written = "\n".join(entry.render() for entry in chosen)
    used = sum(count(entry.render()) + 2 for entry in chosen)
    missing = []
    for path in saved:
        cost = count(f"`{path}`, ")
        if path not in written and used + cost <= budget:
            missing.append(path)
            used += cost
    if missing:
        line = ", ".join(f"`{path}`" for path in missing)
        chosen.append(_Entry("critical_context", 1e6, line, _P_SAVED_OUTPUT))


def _add_findings(
    chosen: list[_Entry], log: WorkLog, budget: int, count: Callable[[str], int]
) -> None:
    """The agent's own sentences that name something in backticks, newest first, each only
    if it names something no chosen line names yet; they may use half of what is left."""
    written = TextIndex("\n".join(entry.render() for entry in chosen))
    used = sum(count(entry.render()) + 2 for entry in chosen)
    limit = used + (budget - used) // 2
    for index, text in reversed(log.statements):
        for sentence in sentences(text):
            spans = _BACKTICKED_RE.findall(sentence)
            if not spans or _DECISION_RE.search(sentence):
                continue
            if all(written.mentions(span) for span in spans):
                continue
            line = _clip(sentence, 300)
            cost = count(line) + 2
            if used + cost > limit:
                continue
            chosen.append(_Entry("critical_context", index, line, _P_FINDING))
            written.add(line)
            used += cost


def _add_terms(
    chosen: list[_Entry],
    salience: Salience,
    previous: CompactSummary | None,
    root: str | None,
    budget: int,
    count: Callable[[str], int],
) -> None:
    """Fill what is left of the budget with the most salient terms not named yet.

    Terms an earlier summary kept come first (they were chosen once already); then the ranked
    terms of these messages, down to those that passed by once in one output.
    """
    used = sum(count(entry.render()) + 2 for entry in chosen)
    written = TextIndex("\n".join(entry.render() for entry in chosen))
    kept = [
        t
        for item in (previous.critical_context if previous else [])
        for t in _BACKTICKED_RE.findall(item)
    ]
    ranked = [t for t in salience.ranked() if salience.score(t) >= _MIN_TERM_SCORE]
    terms: list[str] = []
    for term in [*kept, *ranked]:
        shown = _relative(term, root)
        if written.mentions(shown):
            continue
        # Priced by the bytes / 3 bound (a BPE token is rarely under 3 bytes of code), not by
        # tokenizing each of hundreds of candidates: it can only leave budget unused.
        cost = estimate_tokens(f"`{shown}`, ") + (2 if len(terms) % _TERMS_PER_LINE == 0 else 0)
        if used + cost > budget:
            continue
        terms.append(shown)
        written.add(shown)
        used += cost
    for start in range(0, len(terms), _TERMS_PER_LINE):
        line = ", ".join(f"`{t}`" for t in terms[start : start + _TERMS_PER_LINE])
        chosen.append(_Entry("critical_context", 2e6 + start, line, 0.0))


def _dedupe(entries: list[_Entry]) -> list[_Entry]:
    """One entry per (section, text): the highest priority and earliest position win."""
    best: dict[tuple[str, str], _Entry] = {}
    for entry in entries:
        key = (entry.section, " ".join(entry.head.split()).casefold())
        kept = best.get(key)
        if kept is None or entry.priority > kept.priority:
            if kept is not None:
                entry.order = min(entry.order, kept.order)
            best[key] = entry
    return list(best.values())


# --------------------------------------------------------------------- helpers


def sentences(text: str) -> list[str]:
    """``text`` split into sentences (``.!?`` and ``。！？``) and lines; very short pieces dropped."""
    return [s.strip() for s in _SENTENCE_SPLIT_RE.split(text) if len(s.strip()) > 3]


def clip_middle(text: str, limit: int) -> str:
    """``text`` if it has at most ``limit`` characters, else its head and tail around a marker."""
    if len(text) <= limit:
        return text
    keep = max(limit - 20, 2)
    head, tail = text[: keep * 2 // 3], text[-(keep - keep * 2 // 3) :]
    return f"{head} […{len(text) - len(head) - len(tail)} chars…] {tail}"


def _common_root(paths: Sequence[str]) -> str | None:
    """The deepest directory that at least 60% of the absolute paths share (3+ levels deep)."""
    absolute = [p for p in paths if p.startswith("/")]
    if len(absolute) < 2:
        return None
    counts: Counter[str] = Counter()
    for path in set(absolute):
        parts = path.split("/")[1:-1]
        for depth in range(3, len(parts) + 1):
            counts["/" + "/".join(parts[:depth])] += 1
    needed = math.ceil(0.6 * len(set(absolute)))
    shared = [d for d, n in counts.items() if n >= needed]
    return max(shared, key=lambda d: (d.count("/"), d)) if shared else None


def _relative(path: str, root: str | None) -> str:
    if root and path.startswith(root + "/"):
        return os.path.relpath(path, root)
    return path


def _squash(text: str) -> str:
    """Whitespace runs collapsed (newlines too): one item is one line."""
    return " ".join(text.split())


def _clip(text: str, limit: int) -> str:
    text = _squash(text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


# ------------------------------------------------------------ model summaries

_SECTION_PRIORITY = {
    "goal": _P_REQUEST,
    "next_steps": _P_NEXT,
    "constraints": _P_CONSTRAINT,
    "progress": _P_CHANGE,
    "key_decisions": _P_DECISION,
    "critical_context": _P_FINDING,
}


def fit_summary(
    summary: CompactSummary,
    msgs: Sequence[Message],
    *,
    budget_tokens: int = DEFAULT_BUDGET_TOKENS,
    count_tokens: Callable[[str], int] = estimate_tokens,
) -> CompactSummary:
    """A model-written summary made to fit ``budget_tokens`` and completed from ``msgs``.

    Items are kept by section (goal first, then next steps, constraints, decisions, progress
    with its newest items first); every offloaded-output path of ``msgs`` is present (SPEC 12.7:
    it is what makes an output recoverable); what is left of the budget holds the salient
    identifiers of ``msgs`` the model did not write.
    """
    log = build_worklog(msgs)
    entries = []
    for name, base in _SECTION_PRIORITY.items():
        items = getattr(summary, name)
        for rank, item in enumerate(items):
            # Earlier goal items first (the original request); elsewhere newer items first.
            bonus = -rank * 0.01 if name == "goal" else rank * 0.01
            entries.append(_Entry(name, rank, item, base + bonus))
    chosen = _select(entries, budget_tokens, int(budget_tokens * _TERM_SHARE), count_tokens)
    _add_saved_outputs(chosen, log.saved_outputs, budget_tokens, count_tokens)
    _add_terms(chosen, Salience().extend(msgs), None, None, budget_tokens, count_tokens)
    sections: dict[str, list[str]] = {name: [] for name in SECTION_TITLES}
    for entry in sorted(chosen, key=lambda e: e.order):
        sections[entry.section].append(entry.render())
    return summary.model_copy(update=sections)
