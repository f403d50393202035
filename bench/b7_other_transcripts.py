"""B7 (other transcripts) - the names the work needs again, without a reference summary.

Claude Code's summaries exist for two sessions only. On any transcript, a summary can be judged
by what the rest of the conversation needs: the transcript is cut at a point (for a Claude Code
session, its own compaction boundary; otherwise after 60% of its messages), the part before the
cut is replayed through the installed AgentScope and compacted once, as late as possible
(``latest_single_compaction``, default configuration, extractive summaries), and the reference
is every identifier of the compacted messages (``summary_identifiers``: code spans and file
paths; for tau-bench also reservation ids, user ids and flight numbers) that a message after
the cut uses again. Score: the share of them our summary names (``mentions``: whole names).

No target of its own: it checks that what raises B7 on Claude Code's sessions generalises
(issue 34). Transcripts: the Claude Code sessions, the SWE-agent trajectories long enough to
compact, and the 10 longest tau-bench airline trajectories that compact (3 with ``quick``).
"""

from __future__ import annotations

import asyncio
import logging
import math
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

from agentscope_context_ext import ContextConfig
from agentscope_context_ext.adapter import installed
from agentscope_context_ext.core.summary import mentions, summary_identifiers
from agentscope_context_ext.core.tokens import get_token_counter
from agentscope_context_ext.core.workspace import ToolResultStore
from agentscope_context_ext.replay import (
    Record,
    Transcript,
    claude_code_compactions,
    claude_code_records,
    latest_single_compaction,
    load_transcripts,
)

from ._data import transcripts_dir
from ._replayed import strings_of

TITLE = "summary identifiers the rest of the conversation uses again (other transcripts)"

CUT_SHARE = 0.6
"""Where a transcript without a compaction of its own is cut: after this share of messages."""
TAU_LONGEST = 10
_TAU_ID_RE = re.compile(r"\b(?:[A-Z0-9]{6}|[a-z]+_[a-z]+_\d{3,5}|HAT\d{3})\b")
"""tau-bench airline ids (B8's pattern): reservation ids, user ids, flight numbers."""
_LETTER_RE = re.compile(r"[^\W\d_]")
"""A name has a letter: ``1→`` (a line number of a file read) or ``== 2`` is not one."""
_ROOT_RE = re.compile(r"`(/[^`\s]+)`")


@dataclass
class Case:
    """One transcript cut in two: what is replayed and compacted, and what comes after."""

    name: str
    kind: str
    before: list[Record]
    after: list[Record]


def run(quick: bool = False) -> dict:
    """Measure and return the record."""
    logging.getLogger("as").setLevel(logging.ERROR)
    # the bisection probes windows far too small on purpose: their refusals are expected
    logging.getLogger("agentscope_context_ext").setLevel(logging.CRITICAL)
    rows = []
    wanted = 3 if quick else TAU_LONGEST
    for case in cases(quick):
        measured_tau = sum(1 for r in rows if r["kind"] == "tau-bench" and "skipped" not in r)
        if case.kind == "tau-bench" and measured_tau >= wanted:
            continue  # the longest that compact: the next in line stands in for one too short
        try:
            rows.append(asyncio.run(measure(case, precision=0.05 if quick else 0.03)))
        except ValueError as exc:  # too short to compact even at the smallest window
            rows.append({"transcript": case.name, "kind": case.kind, "skipped": str(exc)})
    measured = [r for r in rows if "skipped" not in r]
    by_kind: dict[str, list[dict]] = {}
    for row in measured:
        by_kind.setdefault(row["kind"], []).append(row)
    pooled = {kind: _pooled(kind_rows) for kind, kind_rows in sorted(by_kind.items())}
    return {
        "id": "B7o",
        "what": TITLE,
        "rows": rows,
        "pooled_share": pooled,
        "worst_share": min((r["summary_share"] for r in measured), default=0.0),
        "target": "none (a check that B7's figures generalise)",
        "target_met": True,
    }


def cases(quick: bool = False) -> list[Case]:
    """The transcripts, each cut where it is compacted."""
    root = transcripts_dir()
    found: list[Case] = []
    for path in sorted((root / "claude-code").glob("*.jsonl")):
        points = claude_code_compactions(path)
        everything = claude_code_records(path)
        for index, point in enumerate(points):
            before = claude_code_records(path, until_line=point.line)
            end = (
                len(claude_code_records(path, until_line=points[index + 1].line))
                if index + 1 < len(points)
                else len(everything)
            )
            head = point.summary.strip()[:200]
            # the summary Claude Code wrote is not a use of a name by the work
            after = [r for r in everything[len(before) : end] if head not in strings_of(r.content)]
            found.append(Case(f"{path.name[:8]}#{index + 1}", "claude-code", before, after))
    for path in sorted((root / "swe-agent").glob("*.traj")):
        for transcript in load_transcripts(path):
            found.append(_cut(transcript, "swe-agent"))
    airline = root / "tau-bench" / "gpt-4o-airline.json"
    # A data folder may hold only some kinds (the tests' synthetic one holds Claude Code).
    tau = load_transcripts(airline) if airline.is_file() else []
    tau.sort(key=lambda t: -sum(len(strings_of(r.content)) for r in t.messages))
    found += [_cut(t, "tau-bench") for t in tau[: 2 * (3 if quick else TAU_LONGEST)]]
    if quick:
        found = [c for c in found if c.kind != "claude-code"] + [
            c for c in found if c.kind == "claude-code"
        ][:1]
    return found


async def measure(case: Case, precision: float = 0.03) -> dict:
    """Compact ``case.before`` once, as late as possible, and score the summary."""
    config = ContextConfig()
    counter = get_token_counter("qwen")
    with tempfile.TemporaryDirectory() as scratch:
        window = await latest_single_compaction(
            case.before, config, precision=precision, workspace=Path(scratch)
        )
        workspace = Path(scratch) / "final"
        replay = await installed.replay_transcript(
            Transcript(case.name, case.before), config, workspace, window, check_recovery=False
        )
        compacted = [
            r.msg for r in installed.open_dialog(workspace).iter_records(newest_first=False)
        ]
        store = ToolResultStore(workspace)
        corpus = "\n".join(v.raw_text() for v in installed.to_views(compacted, store.read_text))
        summary_file = workspace / "summary.md"
        summary = summary_file.read_text(encoding="utf-8") if summary_file.is_file() else ""
    later = "\n".join(strings_of(r.content) for r in case.after)
    reference = [name for name in identifiers(corpus, case.kind) if mentions(later, name)]
    missing = [name for name in reference if not kept(summary, name)]
    return {
        "transcript": case.name,
        "kind": case.kind,
        "window": window,
        "compactions": replay.stats.get("compactions", 0),
        "compacted_messages": len(compacted),
        "messages": len(case.before),
        "identifiers": len(reference),
        "kept": len(reference) - len(missing),
        "summary_share": round(1 - len(missing) / len(reference), 4) if reference else 1.0,
        "summary_chars": len(summary),
        "summary_tokens": counter.count_text(summary),
        "missing": missing,
    }


def identifiers(text: str, kind: str) -> list[str]:
    """B7's identifiers of ``text`` (code spans, paths), with tau-bench's ids for tau-bench."""
    names = [n for n in summary_identifiers(text) if _LETTER_RE.search(n)]
    if kind == "tau-bench":
        names += [n for n in dict.fromkeys(_TAU_ID_RE.findall(text)) if not n.isdigit()]
    return list(dict.fromkeys(names))


def kept(summary: str, name: str) -> bool:
    """Whether ``summary`` names ``name``: whole, or (an absolute path) relative to a folder
    the summary names in backticks (``Paths are relative to `/home/dev/app` ``)."""
    if mentions(summary, name):
        return True
    if not name.startswith("/"):
        return False
    for root in _ROOT_RE.findall(summary):
        if name.startswith(root.rstrip("/") + "/") and mentions(
            summary, name[len(root) :].lstrip("/")
        ):
            return True
    return False


def table(record: dict) -> str:
    lines = [
        "| transcript | window | compacted | names used again | in summary | summary chars |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for r in record["rows"]:
        if "skipped" in r:
            lines.append(f"| {r['transcript']} | skipped: {r['skipped']} | | | | |")
            continue
        lines.append(
            f"| {r['transcript']} | {r['window']:,} | {r['compacted_messages']} of "
            f"{r['messages']} | {r['identifiers']} | {r['summary_share']:.1%} "
            f"| {r['summary_chars']:,} |"
        )
    for kind, share in record["pooled_share"].items():
        lines.append(f"| **{kind}, pooled** | | | | **{share:.1%}** | |")
    return "\n".join(lines)


def _cut(transcript: Transcript, kind: str) -> Case:
    records = list(transcript.messages)
    cut = math.ceil(CUT_SHARE * len(records))
    # never between a call and its output: the outputs that follow stay before the cut
    while cut < len(records) and records[cut].role == "system":
        cut += 1
    name = Path(transcript.name).name[:28]
    return Case(name, kind, records[:cut], records[cut:])


def _pooled(rows: list[dict]) -> float:
    total = sum(r["identifiers"] for r in rows)
    return round(sum(r["kept"] for r in rows) / total, 4) if total else 1.0


if __name__ == "__main__":
    import sys

    result = run(quick="--quick" in sys.argv)
    print(table(result))
