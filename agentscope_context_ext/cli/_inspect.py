"""``agentscope-context inspect WORKSPACE``: what is on disk, at a glance."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import TextIO

from ..core.longterm import LongTermMemory, last_consolidation
from ..core.pipeline import SUMMARY_FILE
from ..core.workspace import DialogStore


def inspect_workspace(workspace: Path, ttl_days: float, stream: TextIO) -> dict:
    """Print a description of ``workspace``; return the figures."""

    def say(line: str = "") -> None:
        print(line, file=stream)

    figures: dict = {"workspace": str(workspace)}
    say(f"workspace: {workspace.resolve()}")
    summary = workspace / SUMMARY_FILE
    if summary.is_file():
        head = summary.read_text(encoding="utf-8", errors="replace").split("\n")
        stamp = next((line for line in head if line.startswith("Earlier conversation")), "")
        say(f"summary: {SUMMARY_FILE} - {stamp.strip()}")
        figures["summary"] = True
    else:
        say("summary: none yet (nothing was compacted)")
        figures["summary"] = False

    dialog = DialogStore(workspace)
    files = dialog.files()
    figures["dialog_files"] = {f: dialog.line_count(f) for f in files}
    say(f"dialog/: {len(files)} file(s)")
    for file in files:
        size = (workspace / file).stat().st_size
        say(f"  {file:<28} {figures['dialog_files'][file]:>7,} lines  {_size(size):>9}")

    results = (
        sorted(
            (p for p in (workspace / "tool_result").glob("*") if p.is_file()),
            key=lambda p: p.stat().st_mtime,
        )
        if (workspace / "tool_result").is_dir()
        else []
    )
    now = time.time()
    ages = [(now - p.stat().st_mtime) / 86400 for p in results]
    figures["tool_results"] = len(results)
    if results:
        expiring = sum(age > ttl_days - 1 for age in ages)
        say(
            f"tool_result/: {len(results)} file(s), {_size(sum(p.stat().st_size for p in results))}, oldest "
            f"{ages[0]:.1f} days, newest {ages[-1] * 24 * 60:.0f} min; {expiring} expire within a day (ttl {ttl_days:g} days)"
        )
    else:
        say("tool_result/: empty")

    memory = LongTermMemory(workspace)
    content = memory.read()
    if content:
        sections = {}
        current = None
        for line in content.split("\n"):
            if line.startswith("## "):
                current = line[3:].strip()
                sections[current] = 0
            elif current and re.match(r"^\s*- ", line):
                sections[current] += 1
        detail = ", ".join(f"{name} {count}" for name, count in sections.items())
        say(f"Memory.md: {_size(len(content.encode()))}, {sum(sections.values())} items ({detail})")
    else:
        say("Memory.md: not written yet")
    notes = memory.daily_notes()
    last = last_consolidation(memory)
    say(
        f"daily notes: {len(notes)}"
        + (f" (latest {max(notes)})" if notes else "")
        + f"; backups: {len(memory.backups())}; last consolidation: {last.isoformat(timespec='minutes') if last else 'never'}"
    )
    jobs = workspace / "memory" / "jobs"
    pending = len(list(jobs.glob("*.json"))) if jobs.is_dir() else 0
    failed = len(list((jobs / "failed").glob("*.json"))) if (jobs / "failed").is_dir() else 0
    say(f"summarizer jobs: {pending} pending, {failed} failed")
    figures.update(
        memory_bytes=len(content.encode()),
        daily_notes=len(notes),
        pending_jobs=pending,
        failed_jobs=failed,
    )
    return figures


def _size(size: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{size:,.0f} {unit}" if unit == "B" else f"{size:,.1f} {unit}"
        size /= 1024
    return f"{size} B"
