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
the summary never grows past its budget however many compactions it accumulates; the previous
Progress items it then drops are carried as one condensed line (``_carry``), never silently.

Deterministic, and language-neutral: everything is found by structure (tool arguments,
backticks, paths) rather than by English words; the few labels it writes follow the summary
language (English or Chinese). A line it takes from a tool's output (an error line, a first
line) is quoted as that tool's words (``tool `bash` said: `...` ``, :func:`~._text.tool_said`):
the summary is sent as a user message, and a tool's text must not read as the user's.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ..messages import Message
from ._carry import carry_progress, carry_reserve
from ._model import SECTION_TITLES, CompactSummary
from ._selection import (
    CHANGES_PER_FILE,
    GIST_CHARS,
    P_CHANGE,
    P_COMMAND,
    P_CONSTRAINT,
    P_DECISION,
    P_FAILED_COMMAND,
    P_FILE_ERROR,
    P_FIRST_REQUEST,
    P_GIST,
    P_MODIFIED_FILE,
    P_NEXT,
    P_OTHER_CALL,
    P_PREVIOUS_GOAL,
    P_PREVIOUS_ITEM,
    P_QUOTED_CONSTRAINT,
    P_READ_DEFINITION,
    P_READ_FILE,
    P_REQUEST,
    P_ROOT,
    P_SAVED_OUTPUT,
    P_TODO,
    P_UNRESOLVED,
    P_WRITTEN_DEFINITION,
    REQUEST_SHARE,
    TERM_SHARE,
    Entry,
    add_findings,
    add_saved_outputs,
    add_terms,
    dedupe,
    select,
)
from ._terms import Salience
from ._text import (
    CONSTRAINT_RE,
    DECISION_RE,
    LABELS,
    NEXT_RE,
    clip,
    clip_middle,
    common_root,
    estimate_tokens,
    relative,
    sentences,
    squash,
    tool_said,
)
from ._worklog import CommandWork, FileWork, OtherCall, ToolSaid, WorkLog, build_worklog

__all__ = ["DEFAULT_BUDGET_TOKENS", "extractive_summary"]

DEFAULT_BUDGET_TOKENS = 2048


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
    labels = LABELS["zh" if language.lower().startswith("chinese") else "en"]
    log = build_worklog(msgs)
    salience = Salience().extend(msgs)
    root = common_root(list(log.files))

    def written(budget: int) -> CompactSummary:
        entries = _entries(log, previous, labels, root, budget)
        chosen = select(entries, budget, int(budget * TERM_SHARE), count_tokens)
        add_saved_outputs(chosen, log.saved_outputs, budget, count_tokens)
        add_findings(chosen, log, budget, count_tokens)
        add_terms(chosen, salience, previous, root, budget, count_tokens)
        sections: dict[str, list[str]] = {name: [] for name in SECTION_TITLES}
        for entry in sorted(chosen, key=lambda e: e.order):
            sections[entry.section].append(entry.render())
        return CompactSummary(
            **sections,
            source="extractive",
            dialog_refs=list(previous.dialog_refs) if previous else [],
            compactions=previous.compactions + 1 if previous else 1,
        )

    summary = written(budget_tokens)
    # Earlier progress this summary lost is carried as one condensed line, in room kept for it.
    reserve = carry_reserve(summary, previous, budget_tokens, count_tokens)
    if reserve:
        summary = carry_progress(
            written(budget_tokens - reserve), previous, budget_tokens, count_tokens, language
        )
    return summary


# --------------------------------------------------------------------- entries


def _entries(
    log: WorkLog,
    previous: CompactSummary | None,
    labels: dict[str, str],
    root: str | None,
    budget: int,
) -> list[Entry]:
    entries: list[Entry] = []
    request_chars = max(300, int(budget * REQUEST_SHARE * 3))
    if previous is not None:
        entries.extend(_previous_entries(previous))
    for rank, (index, text) in enumerate(log.requests):
        priority = P_FIRST_REQUEST if rank == 0 and previous is None else P_REQUEST
        goal = clip_middle(squash(text), request_chars)
        entries.append(Entry("goal", index, goal, priority - rank * 0.01))
        for sentence in sentences(text):
            if CONSTRAINT_RE.search(sentence):
                # One the goal line quotes whole is said already: repeated only if there is room.
                weight = P_QUOTED_CONSTRAINT if squash(sentence) in goal else P_CONSTRAINT
                entries.append(Entry("constraints", index, clip(sentence, 400), weight))
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
            if DECISION_RE.search(sentence):
                entries.append(
                    Entry("key_decisions", index, clip(sentence, 300), P_DECISION + index * 1e-4)
                )
    if root is not None:
        entries.append(Entry("critical_context", -1e6, f"{labels['root']} `{root}`", P_ROOT))
    return dedupe(entries)


def _previous_entries(previous: CompactSummary) -> list[Entry]:
    entries = []
    for name in SECTION_TITLES:
        if name == "next_steps":
            continue  # the new next steps replace the old ones (kept below if there are none)
        for rank, item in enumerate(getattr(previous, name)):
            if name == "goal":
                priority = P_PREVIOUS_GOAL - rank * 0.01
            elif name == "constraints":
                priority = P_CONSTRAINT - 0.5
            else:
                # Older lines give way first, the oldest before the newer ones.
                priority = P_PREVIOUS_ITEM + rank * 1e-3
            entries.append(Entry(name, -1e5 + rank, item, priority))
    for rank, item in enumerate(previous.next_steps):
        entries.append(Entry("next_steps", -1e5 + rank, item, P_GIST - 1))
    return entries


def _next_step_entries(log: WorkLog, labels: dict[str, str]) -> list[Entry]:
    entries = []
    open_items = [(status, item) for status, item in log.todos if status.lower() not in _DONE]
    for rank, (status, item) in enumerate(open_items):
        entries.append(Entry("next_steps", 1e5 + rank, f"[{status}] {item}", P_TODO - rank * 0.01))
    if log.last_error is not None:
        index, error = log.last_error
        entries.append(
            Entry(
                "next_steps", index, f"{labels['unresolved']}: {_said(error, labels)}", P_UNRESOLVED
            )
        )
    if log.statements:
        index, text = log.statements[-1]
        steps = [s for s in sentences(text) if NEXT_RE.search(s)] or [squash(text)]
        for rank, step in enumerate(steps[:6]):
            entries.append(
                Entry("next_steps", index + rank * 1e-3, clip(step, 400), P_NEXT - rank * 0.1)
            )
    return entries


_DONE = {"completed", "complete", "done", "finished", "cancelled", "canceled", "success"}


def _file_entry(work: FileWork, labels: dict[str, str], root: str | None) -> Entry:
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
    head = f"`{relative(work.path, root)}`"
    if work.lines is not None and not work.modified:
        head += f" ({work.lines} {labels['lines']})"
    head += " — " + ", ".join(actions)
    if work.modified:
        entry = Entry(
            "progress", work.first, head, P_MODIFIED_FILE + min(work.edits + work.writes, 5)
        )
        for position, definition in enumerate(work.defines):
            entry.details.append(
                (P_WRITTEN_DEFINITION - position * 0.01, position, f"`{definition}`", "")
            )
        ranked = sorted(enumerate(work.changes), key=lambda c: (-c[1][0], c[0]))
        for position, (weight, change) in ranked[:CHANGES_PER_FILE]:
            priority = P_CHANGE + 2 * weight - position * 1e-3
            entry.details.append((priority, len(work.defines) + position, change, ""))
    else:
        # A file that was only read is worth a line only with what it holds.
        entry = Entry("progress", work.first, head, P_READ_FILE, lead="; ", needs_detail=True)
        for position, definition in enumerate(work.read_defines):
            priority = P_READ_FILE if position == 0 else P_READ_DEFINITION - position * 0.01
            entry.details.append((priority, position, f"`{definition}`", labels["defines"]))
    for position, error in enumerate(work.errors[-2:], start=1000):
        entry.details.append((P_FILE_ERROR, position, _said(error, labels), labels["failed"] + ":"))
    if work.saved_output:
        entry.details.append(
            (P_SAVED_OUTPUT, 2000, f"`{work.saved_output}`", labels["saved"] + ":")
        )
    return entry


def _read_only_entry(files: list[FileWork], labels: dict[str, str], root: str | None) -> Entry:
    """One line for the files that were read and show nothing worth repeating."""
    entry = Entry("progress", files[0].first, labels["also_read"], P_READ_FILE, needs_detail=True)
    for position, work in enumerate(files):
        shown = f"`{relative(work.path, root)}`"
        entry.details.append((P_READ_DEFINITION - 1 - position * 1e-3, position, shown, ""))
    return entry


def _command_entry(work: CommandWork, labels: dict[str, str]) -> Entry:
    # A command is its own description; what it printed is a detail.
    head = f"`{clip(work.command, 240)}`" + _outcome(work, labels, with_gist=False)
    failed = work.outcomes and not work.outcomes[-1]
    priority = (P_FAILED_COMMAND if failed else P_COMMAND) + work.last * 1e-4
    entry = Entry("progress", work.first, head, priority, lead=" — ")
    if work.gist and work.outcomes and work.outcomes[-1]:
        entry.details.append((P_GIST, 0, _said(work.gist, labels, GIST_CHARS), ""))
    if work.saved_output:
        entry.details.append((P_SAVED_OUTPUT, 1, f"`{work.saved_output}`", labels["saved"] + ":"))
    return entry


def _call_entry(call: OtherCall, labels: dict[str, str]) -> Entry:
    # the line starts with the call: what it printed is quoted as "it said"
    head = f"{call.tool}({clip(call.arguments, 160)})" + _outcome(call, labels, named=False)
    entry = Entry("progress", call.first, head, P_OTHER_CALL + call.last * 1e-4, lead="; ")
    if call.saved_output:
        entry.details.append((P_SAVED_OUTPUT, 1, f"`{call.saved_output}`", labels["saved"] + ":"))
    return entry


def _outcome(
    work: CommandWork | OtherCall,
    labels: dict[str, str],
    with_gist: bool = True,
    named: bool = True,
) -> str:
    """`` → ok — tool `t` said: `first line` ``, `` ×3 → failed 2×: tool `t` said: `error`,
    then ok``, ...; ``named`` off: ``it said`` (the line names the call)."""
    outcomes = work.outcomes
    if not outcomes:
        return ""
    times = f" ×{len(outcomes)}" if len(outcomes) > 1 else ""
    failures = outcomes.count(False)
    shown = with_gist and work.gist and outcomes[-1]
    gist = f" — {_said(work.gist, labels, GIST_CHARS, named)}" if shown else ""
    if failures == 0:
        return f"{times} → {labels['ok']}{gist}"
    detail = f": {_said(work.error, labels, named=named)}" if work.error else ""
    if outcomes[-1]:
        return f"{times} → {labels['failed']} {failures}×{detail}, {labels['then']} {labels['ok']}{gist}"
    return f"{times} → {labels['failed']}{detail}"


def _said(
    line: ToolSaid, labels: dict[str, str], limit: int | None = None, named: bool = True
) -> str:
    """A line of a tool's output as the summary quotes it (clipped to ``limit`` characters;
    ``named`` off, or a tool without a name: ``it said``)."""
    text = line.text if limit is None else clip(line.text, limit)
    return tool_said(line.tool if named and line.tool else None, text, labels)
