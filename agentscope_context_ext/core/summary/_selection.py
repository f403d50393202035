"""Choosing what goes into a summary under a token budget.

Every candidate line (an :class:`Entry`: a head, and details that hang off it) has a priority.
Lines are taken, most important first, while they fit; a detail only with its head; the last
share of the budget is kept for the salient terms, which fill what is left. Then the sections
are rendered in conversation order.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from ..messages import Message
from ._carry import carry_progress, carry_reserve
from ._model import SECTION_TITLES, CompactSummary
from ._terms import Salience, TextIndex
from ._text import BACKTICKED_RE, DECISION_RE, clip, estimate_tokens, relative, sentences
from ._worklog import WorkLog, build_worklog

# Priorities: what a handover can least afford to lose is highest. Heads are the one-line
# entries; details (changed lines, definitions, gists) hang off a chosen head.
P_ESSENTIAL = 80.0
"""Lines at least this important may use the budget kept for salient terms."""
P_FIRST_REQUEST = 100.0
P_PREVIOUS_GOAL = 99.0
P_REQUEST = 96.0
P_UNRESOLVED = 92.0
P_TODO = 91.0
P_NEXT = 90.0
P_SAVED_OUTPUT = 88.0
P_ROOT = 87.0
P_CONSTRAINT = 85.0
P_MODIFIED_FILE = 80.0
P_QUOTED_CONSTRAINT = 40.0
"""A constraint the goal line already quotes whole."""
P_FAILED_COMMAND = 79.0
P_FILE_ERROR = 75.0
P_COMMAND = 68.0
P_DECISION = 66.0
P_WRITTEN_DEFINITION = 62.0
P_CHANGE = 54.0
"""Plus twice the line's weight (3 definition, 2 import/attribute, 1 names code, 0 other)."""
P_PREVIOUS_ITEM = 57.0
P_OTHER_CALL = 55.0
P_FINDING = 47.0
P_READ_FILE = 50.0
P_READ_DEFINITION = 46.0
P_GIST = 45.0
TERMS_PER_LINE = 10
CHANGES_PER_FILE = 16
GIST_CHARS = 120
TERM_SHARE = 0.25
"""Share of the budget kept for salient terms (heads may use it; details may not). Chosen by
leave-one-out on B7's two Claude Code sessions, replayed on both majors: tuned on one, 0.25 is
best (0.2 before); the other is the same at every value from 0.2 to 0.4 (issue 34)."""
REQUEST_SHARE = 0.3
"""At most this share of the budget per user request (longer ones are cut in the middle)."""


@dataclass
class Entry:
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


def select(
    entries: list[Entry], budget: int, reserve: int, count: Callable[[str], int]
) -> list[Entry]:
    """Heads and details, most important first, while they fit in ``budget``.

    A detail is taken only with its head, and a detail more important than its head brings the
    head along; a head that ``needs_detail`` is never taken alone. The last ``reserve`` tokens
    are kept for the salient terms: only essential lines (priority >= ``P_ESSENTIAL``) may use
    them.
    """
    candidates: list[tuple[float, int, Entry, tuple[int, str, str] | None]] = [
        (entry.priority, 0, entry, None) for entry in entries if not entry.needs_detail
    ]
    for entry in entries:
        candidates.extend(
            (p, 1, entry, (position, text, group)) for p, position, text, group in entry.details
        )
    candidates.sort(key=lambda c: (-c[0], c[1]))
    chosen: list[Entry] = []
    taken: set[int] = set()
    used = 0
    for priority, _, entry, detail in candidates:
        limit = budget if priority >= P_ESSENTIAL else budget - reserve
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


def add_saved_outputs(
    chosen: list[Entry], saved: Sequence[str], budget: int, count: Callable[[str], int]
) -> None:
    """One line naming every offloaded output the chosen lines do not name yet (design §12.7)."""
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
        chosen.append(Entry("critical_context", 1e6, line, P_SAVED_OUTPUT))


def add_findings(
    chosen: list[Entry], log: WorkLog, budget: int, count: Callable[[str], int]
) -> None:
    """The agent's own sentences that name something in backticks, newest first, each only
    if it names something no chosen line names yet; they may use half of what is left."""
    written = TextIndex("\n".join(entry.render() for entry in chosen))
    used = sum(count(entry.render()) + 2 for entry in chosen)
    limit = used + (budget - used) // 2
    for index, text in reversed(log.statements):
        for sentence in sentences(text):
            spans = BACKTICKED_RE.findall(sentence)
            if not spans or DECISION_RE.search(sentence):
                continue
            if all(written.mentions(span) for span in spans):
                continue
            line = clip(sentence, 300)
            cost = count(line) + 2
            if used + cost > limit:
                continue
            chosen.append(Entry("critical_context", index, line, P_FINDING))
            written.add(line)
            used += cost


def add_terms(
    chosen: list[Entry],
    salience: Salience,
    previous: CompactSummary | None,
    root: str | None,
    budget: int,
    count: Callable[[str], int],
) -> None:
    """Fill what is left of the budget with the most salient terms not named yet.

    Terms an earlier summary kept come first (they were chosen once already); then the ranked
    terms of these messages, down to those that passed by once in one output. A span of several
    words that only a tool wrote (Markdown in its output) is a quote of the tool, not a name:
    listed bare, it would read as the summary's own words (the summary quotes a tool's words
    only as what the tool said, ``_text.tool_said``).
    """
    used = sum(count(entry.render()) + 2 for entry in chosen)
    written = TextIndex("\n".join(entry.render() for entry in chosen))
    kept = [
        t
        for item in (previous.critical_context if previous else [])
        for t in BACKTICKED_RE.findall(item)
    ]
    # Down to the names that passed by once in one output: the budget, not a score, is the
    # limit (an id seen once may be the one the next step needs).
    ranked = salience.ranked()
    terms: list[str] = []
    for term in [*kept, *ranked]:
        shown = relative(term, root)
        if written.mentions(shown) or (len(term.split()) > 1 and salience.only_output(term)):
            continue
        # Priced by the bytes / 3 bound (a BPE token is rarely under 3 bytes of code), not by
        # tokenizing each of hundreds of candidates: it can only leave budget unused.
        cost = estimate_tokens(f"`{shown}`, ") + (2 if len(terms) % TERMS_PER_LINE == 0 else 0)
        if used + cost > budget:
            continue
        terms.append(shown)
        written.add(shown)
        used += cost
    for start in range(0, len(terms), TERMS_PER_LINE):
        line = ", ".join(f"`{t}`" for t in terms[start : start + TERMS_PER_LINE])
        chosen.append(Entry("critical_context", 2e6 + start, line, 0.0))


def dedupe(entries: list[Entry]) -> list[Entry]:
    """One entry per (section, text): the highest priority and earliest position win."""
    best: dict[tuple[str, str], Entry] = {}
    for entry in entries:
        key = (entry.section, " ".join(entry.head.split()).casefold())
        kept = best.get(key)
        if kept is None or entry.priority > kept.priority:
            if kept is not None:
                entry.order = min(entry.order, kept.order)
            best[key] = entry
    return list(best.values())


# ------------------------------------------------------------ model summaries

_SECTION_PRIORITY = {
    "goal": P_REQUEST,
    "next_steps": P_NEXT,
    "constraints": P_CONSTRAINT,
    "progress": P_CHANGE,
    "key_decisions": P_DECISION,
    "critical_context": P_FINDING,
}


def fit_summary(
    summary: CompactSummary,
    msgs: Sequence[Message],
    *,
    budget_tokens: int = 2048,
    count_tokens: Callable[[str], int] = estimate_tokens,
    previous: CompactSummary | None = None,
    language: str = "English",
) -> CompactSummary:
    """A model-written summary made to fit ``budget_tokens`` and completed from ``msgs``.

    Items are kept by section (goal first, then next steps, constraints, decisions, progress
    with its newest items first); every offloaded-output path of ``msgs`` is present (design §12.7:
    it is what makes an output recoverable); what is left of the budget holds the salient
    identifiers of ``msgs`` the model did not write. The Progress items of ``previous`` that
    neither the model nor the fitting kept are carried as one condensed line (``_carry``), in
    room kept for it.
    """
    fitted = _fit(summary, msgs, budget_tokens, count_tokens)
    reserve = carry_reserve(fitted, previous, budget_tokens, count_tokens)
    if not reserve:
        return fitted
    fitted = _fit(summary, msgs, budget_tokens - reserve, count_tokens)
    return carry_progress(fitted, previous, budget_tokens, count_tokens, language)


def _fit(
    summary: CompactSummary,
    msgs: Sequence[Message],
    budget_tokens: int,
    count_tokens: Callable[[str], int],
) -> CompactSummary:
    log = build_worklog(msgs)
    entries = []
    for name, base in _SECTION_PRIORITY.items():
        items = getattr(summary, name)
        for rank, item in enumerate(items):
            # Earlier goal items first (the original request); elsewhere newer items first.
            bonus = -rank * 0.01 if name == "goal" else rank * 0.01
            entries.append(Entry(name, rank, item, base + bonus))
    chosen = select(entries, budget_tokens, int(budget_tokens * TERM_SHARE), count_tokens)
    add_saved_outputs(chosen, log.saved_outputs, budget_tokens, count_tokens)
    add_terms(chosen, Salience().extend(msgs), None, None, budget_tokens, count_tokens)
    sections: dict[str, list[str]] = {name: [] for name in SECTION_TITLES}
    for entry in sorted(chosen, key=lambda e: e.order):
        sections[entry.section].append(entry.render())
    return summary.model_copy(update=sections)
