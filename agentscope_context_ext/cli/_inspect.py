"""``agentscope-context inspect WORKSPACE``: what the workspace holds (a folder or a Redis
server), at a glance."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import TextIO

from ..core.longterm import LongTermMemory, last_consolidation
from ..core.pipeline import SUMMARY_FILE
from ..core.workspace import DialogStore, Storage, open_storage


def inspect_workspace(workspace: str | Path | Storage, ttl_days: float, stream: TextIO) -> dict:
    """Print a description of ``workspace`` (a folder or a ``redis://`` URL); return the
    figures."""

    def say(line: str = "") -> None:
        print(line, file=stream)

    storage = open_storage(workspace)
    figures: dict = {"workspace": storage.location}
    say(f"workspace: {storage.location}")
    persistence = getattr(storage, "persistence", None)
    if persistence is not None:
        settings = persistence()
        figures["persistence"] = settings
        if settings.get("appendonly") != "yes" and not settings.get("save"):
            say(
                "WARNING: this Redis server does not persist (appendonly no, no save points): a "
                "restart loses the dialog, the saved results and Memory.md"
            )
        else:
            say(
                f"persistence: appendonly {settings.get('appendonly')}, appendfsync "
                f"{settings.get('appendfsync')}, save '{settings.get('save')}'"
            )
    summary = storage.read(SUMMARY_FILE)
    if summary is not None:
        head = summary.decode("utf-8", errors="replace").split("\n")
        stamp = next((line for line in head if line.startswith("Earlier conversation")), "")
        say(f"summary: {SUMMARY_FILE} - {stamp.strip()}")
        figures["summary"] = True
    else:
        say("summary: none yet (nothing was compacted)")
        figures["summary"] = False

    dialog = DialogStore(storage)
    files = dialog.files()
    figures["dialog_files"] = {f: dialog.line_count(f) for f in files}
    say(f"dialog/: {len(files)} file(s)")
    for file in files:
        size = storage.size(file)
        say(f"  {file:<28} {figures['dialog_files'][file]:>7,} lines  {_size(size):>9}")

    keys = [f"tool_result/{name}" for name in storage.names("tool_result")]
    stamps = sorted((storage.mtime(key) or 0.0, key) for key in keys)
    now = time.time()
    ages = [max(0.0, now - mtime) for mtime, _ in stamps]  # a clock set back: not negative
    figures["tool_results"] = len(keys)
    if keys:
        expiring = sum(age > (ttl_days - 1) * 86400 for age in ages)
        size = _size(sum(storage.size(k) for k in keys))
        say(
            f"tool_result/: {len(keys)} file(s), {size}, oldest {age_text(ages[0])}, newest "
            f"{age_text(ages[-1])}; {expiring} expire within a day (ttl {ttl_days:g} days)"
        )
    else:
        say("tool_result/: empty")

    memory = LongTermMemory(storage)
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
    pending = sum(name.endswith(".json") for name in storage.names("memory/jobs"))
    failed = sum(name.endswith(".json") for name in storage.names("memory/jobs/failed"))
    say(f"summarizer jobs: {pending} pending, {failed} failed")
    figures.update(
        memory_bytes=len(content.encode()),
        daily_notes=len(notes),
        pending_jobs=pending,
        failed_jobs=failed,
    )
    return figures


def age_text(seconds: float) -> str:
    """An age in the unit that reads best, the same for every age shown: ``40 s``, ``4 min``,
    ``5.2 h``, ``3.0 days``."""
    if seconds < 60:
        return f"{seconds:.0f} s"
    if seconds < 3600:
        return f"{seconds / 60:.0f} min"
    if seconds < 86400:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} days"


def _size(size: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{size:,.0f} {unit}" if unit == "B" else f"{size:,.1f} {unit}"
        size /= 1024
    return f"{size} B"
