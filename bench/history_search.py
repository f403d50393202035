"""history - where the agent looks: what ``agentscope-context search`` shows first for the names
of the early part of a real session.

Each shared Claude Code session long enough to compact is replayed at a 32k window through the installed AgentScope, as ``agentscope-context replay`` does: its early
messages leave the context for ``dialog/`` and ``tool_result/``. The names of its first half
(B7's identifiers: code spans and file paths, with a letter, at least 3 characters) that the
saved history holds are the queries, as the agent types them when its summary or a later message
names one; 20 of them, taken two ways so that no one list decides:

- *spread*: every k-th name in order of first appearance;
- *needed again*: the names the second half of the session uses most often again (what the
  agent is most likely to look up), ties by first appearance.

A name is shown when it stands, as written (blanks folded, as a snippet folds them), in the
first lines of the command's output: its header line and the first three hits (path and
snippet each: 7 lines). Also counted: in the first hit, and in any of the 10 hits.

Target (issue 46): >= 18 of 20 in the first lines, on every Claude Code session and both lists.
"""

from __future__ import annotations

import asyncio
import io
import json
import re
import tempfile
from collections import Counter
from pathlib import Path

from agentscope_context_ext import ContextConfig
from agentscope_context_ext.adapter import installed
from agentscope_context_ext.cli._search import search_workspace
from agentscope_context_ext.core.summary import mentions, summary_identifiers
from agentscope_context_ext.replay import Transcript, claude_code_records

from ._data import transcripts_dir
from ._replayed import strings_of

TITLE = "where the agent looks: names of a session's first half in the search's first lines"
TARGET = ">= 18 of 20 names in the first lines (header + 3 hits), every Claude Code session"
WINDOW = 32_768
NAMES = 20
BAR = 18
FIRST_LINES = 7
"""The header line and the first three hits (a path line and a snippet line each)."""
_LETTER_RE = re.compile(r"[^\W\d_]")


def _names(records: list, workspace: Path) -> dict[str, list[str]]:
    """The two lists of names (see the module's text)."""
    half = len(records) // 2
    early = "\n".join(strings_of(r.content) for r in records[:half])
    later = "\n".join(strings_of(r.content) for r in records[half:])
    saved = "\n".join(
        p.read_text(encoding="utf-8", errors="replace")
        for p in sorted(workspace.rglob("*"))
        if p.is_file() and p.suffix in (".jsonl", ".txt") and ".search" not in p.parts
    )
    names = [
        n
        for n in summary_identifiers(early)
        if _LETTER_RE.search(n)
        and len(n) >= 3
        and (n in saved or json.dumps(n, ensure_ascii=False)[1:-1] in saved)
    ]
    step = max(1.0, len(names) / NAMES)
    spread = [names[int(i * step)] for i in range(min(NAMES, len(names)))]
    uses = Counter({n: later.count(n) for n in names if mentions(later, n)})
    needed = sorted(uses, key=lambda n: (-uses[n], names.index(n)))[:NAMES]
    return {"spread": spread, "needed again": needed}


def _shown(name: str, lines: list[str]) -> bool:
    folded = " ".join(name.split())
    return any(folded in " ".join(line.split()) for line in lines)


def _look(workspace: Path, name: str) -> dict:
    out = io.StringIO()
    search_workspace(str(workspace), name, stream=out, progress=io.StringIO())
    lines = out.getvalue().splitlines()
    return {
        "name": name,
        "first_hit": _shown(name, lines[:3]),
        "first_lines": _shown(name, lines[:FIRST_LINES]),
        "any_hit": _shown(name, lines),
    }


def _case(name: str, kind: str, records: list, folder: Path) -> dict | None:
    workspace = folder / name
    asyncio.run(
        installed.replay_transcript(
            Transcript(name, records), ContextConfig(), workspace, WINDOW, check_recovery=False
        )
    )
    if not any((workspace / "dialog").glob("*.jsonl")):
        return None  # never compacted at this window: nothing left the context
    lists = {}
    for selection, names in _names(records, workspace).items():
        looks = [_look(workspace, n) for n in names]
        lists[selection] = {
            "names": len(looks),
            "first_lines": sum(x["first_lines"] for x in looks),
            "first_hit": sum(x["first_hit"] for x in looks),
            "any_hit": sum(x["any_hit"] for x in looks),
            "missed": [x["name"] for x in looks if not x["first_lines"]],
        }
    return {"transcript": name, "kind": kind, "messages": len(records), "lists": lists}
    # (no SWE-agent trajectory of the shared data reaches 32k tokens: none compacts)


def run(quick: bool = False) -> dict:
    """Replay, search and count (see the module's text)."""
    root = transcripts_dir()
    cases = []
    with tempfile.TemporaryDirectory(prefix="history-") as scratch:
        folder = Path(scratch)
        for path in sorted((root / "claude-code").glob("*.jsonl")):
            records = claude_code_records(path)
            if len(records) >= 100:  # a session long enough to compact at 32k
                case = _case(path.name[:8], "claude-code", records, folder)
                if case:
                    cases.append(case)
    claude = [c for c in cases if c["kind"] == "claude-code"]
    worst = min(
        (x["first_lines"] for c in claude for x in c["lists"].values()),
        default=0,
    )
    return {
        "id": "history",
        "what": TITLE,
        "target": TARGET,
        "window": WINDOW,
        "first_lines": FIRST_LINES,
        "cases": cases,
        "worst_claude_code": worst,
        "target_met": bool(claude) and worst >= BAR,
    }


def table(record: dict) -> str:
    """A Markdown table of a history record."""
    lines = [
        f"window {record['window']:,} tokens; shown: in the first {record['first_lines']} lines "
        "(header + 3 hits) of `agentscope-context search WORKSPACE NAME`",
        "",
        "| transcript | kind | messages | names | in the first lines | first hit | any of 10 | "
        "missed |",
        "|---|---|---:|---|---:|---:|---:|---|",
    ]
    for case in record["cases"]:
        for selection, x in case["lists"].items():
            missed = ", ".join(f"`{m}`" for m in x["missed"][:4]) or "-"
            lines.append(
                f"| {case['transcript']} | {case['kind']} | {case['messages']} | {selection} | "
                f"{x['first_lines']}/{x['names']} | {x['first_hit']}/{x['names']} | "
                f"{x['any_hit']}/{x['names']} | {missed} |"
            )
    return "\n".join(lines)
