"""``LongTermMemory``: the file layer of long-term memory (SPEC 7).

``Memory.md`` holds durable facts in sections (``## Personal``, ``## Try-Error Notes``,
``## Facts``, others allowed), one ``- item`` per line; ``memory/YYYY-MM-DD.md`` holds the day's
notes; ``memory/backup/Memory-<timestamp>.md`` keeps the last versions before each full
rewrite. Every write is a read-modify-write under one inter-process lock, landing atomically
(temp file + ``os.replace``), so two agents sharing a workspace lose no update. No argument ever
becomes a path: file names come only from validated dates.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from datetime import date, datetime
from pathlib import Path

from ..workspace import atomic_write_text, ensure_directory, file_lock

MEMORY_FILE = "Memory.md"
NOTES_DIRNAME = "memory"
BACKUP_DIRNAME = "backup"
DEFAULT_SECTIONS = ("Personal", "Try-Error Notes", "Facts")
MAX_ENTRY_CHARS = 2000
"""Longest item ``append`` or a note accepts (a memory item is a line, not a document)."""
MAX_SECTION_CHARS = 60

_NOTE_FILE_RE = re.compile(r"^(\d{4}-\d{2}-\d{2})\.md$")
_BACKUP_RE = re.compile(r"^Memory-\d{8}-\d{6}-\d{6}\.md$")
_HEADER = "# Memory\n"


class MemoryInputError(ValueError):
    """Text or a section name that cannot go into long-term memory; the message says why."""


def normalise(text: str) -> str:
    """The comparison key of a line: no bullet, collapsed whitespace, case-folded."""
    text = re.sub(r"^\s*(?:[-*+]|\d+[.)])\s+", "", text)
    return " ".join(text.split()).casefold()


def clean_entry(text: object, limit: int = MAX_ENTRY_CHARS) -> str:
    """One line of memory text: validated, single-line, valid UTF-8.

    Raises:
        `MemoryInputError`: Not a string, empty, or longer than ``limit`` characters.
    """
    if not isinstance(text, str):
        raise MemoryInputError(f"text must be a string, got {type(text).__name__}")
    if len(text) > limit * 4:
        raise MemoryInputError(
            f"text is {len(text):,} characters; a memory item holds at most {limit:,}"
        )
    text = text.encode("utf-8", errors="replace").decode("utf-8").replace("\x00", "")
    text = " ".join(text.split())
    if not text:
        raise MemoryInputError("text is empty")
    if len(text) > limit:
        raise MemoryInputError(
            f"text is {len(text):,} characters; a memory item holds at most {limit:,}"
        )
    return text


def clean_section(section: object) -> str:
    """A section title: one line, no ``#``, at most 60 characters."""
    if not isinstance(section, str):
        raise MemoryInputError(f"section must be a string, got {type(section).__name__}")
    title = " ".join(section.replace("#", " ").split())
    if not title:
        raise MemoryInputError("section is empty")
    if len(title) > MAX_SECTION_CHARS:
        raise MemoryInputError(f"section title is longer than {MAX_SECTION_CHARS} characters")
    return title


class LongTermMemory:
    """Reads and writes ``Memory.md`` and the daily notes of one workspace.

    Args:
        workspace (`str | os.PathLike`): The workspace folder.
        backups_kept (`int`): Backups of ``Memory.md`` kept in ``memory/backup/``.
        clock (`Callable[[], datetime]`): Local "now"; tests inject one.
    """

    def __init__(
        self,
        workspace: str | os.PathLike[str],
        backups_kept: int = 7,
        clock: Callable[[], datetime] = datetime.now,
    ) -> None:
        if backups_kept < 1:
            raise ValueError(f"backups_kept must be at least 1, got {backups_kept}")
        self.workspace = Path(workspace)
        self.path = self.workspace / MEMORY_FILE
        self.notes_dir = self.workspace / NOTES_DIRNAME
        self.backup_dir = self.notes_dir / BACKUP_DIRNAME
        self.backups_kept = backups_kept
        self._clock = clock
        self._lock_path = self.notes_dir / ".lock"

    # ------------------------------------------------------------- Memory.md

    def read(self) -> str:
        """The whole of ``Memory.md`` ("" when it does not exist yet)."""
        try:
            return self.path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return ""

    def version(self) -> tuple[int, int] | None:
        """(mtime_ns, size) of ``Memory.md``, to notice changes cheaply; ``None`` if missing."""
        try:
            info = self.path.stat()
        except FileNotFoundError:
            return None
        return info.st_mtime_ns, info.st_size

    def append(self, text: str, section: str | None = None) -> bool:
        """Add ``- text`` to ``section`` (default ``Facts``), unless an equivalent line exists.

        Equivalent means equal after removing the bullet, collapsing whitespace and folding case,
        anywhere in the file.

        Returns:
            `bool`: ``False`` when an equivalent line was already there (nothing written).

        Raises:
            `MemoryInputError`: Invalid text or section.
        """
        entry = clean_entry(text)
        title = clean_section(section) if section is not None else "Facts"
        with file_lock(self._lock_path):
            content = self.read()
            key = normalise(entry)
            if any(normalise(line) == key for line in content.splitlines() if line.strip()):
                return False
            atomic_write_text(self.path, _insert(content, title, f"- {entry}"))
        return True

    def edit(self, old_text: str, new_text: str) -> bool:
        """Replace the one occurrence of ``old_text`` with ``new_text``; see :meth:`edit_with_reason`."""
        return self.edit_with_reason(old_text, new_text)[0]

    def edit_with_reason(self, old_text: str, new_text: str) -> tuple[bool, str]:
        """Replace exactly one occurrence of ``old_text`` in ``Memory.md``.

        Returns:
            `tuple[bool, str]`: ``(True, "edited")``, or ``(False, reason)`` when ``old_text`` is
            missing or appears more than once (then nothing is written).
        """
        if not isinstance(old_text, str) or not old_text.strip():
            raise MemoryInputError("old_text must be a non-empty string")
        replacement = "" if new_text == "" else clean_entry(new_text)
        with file_lock(self._lock_path):
            content = self.read()
            found = content.count(old_text)
            if found == 0:
                return False, "old_text was not found in Memory.md"
            if found > 1:
                return (
                    False,
                    f"old_text appears {found} times in Memory.md; give more context to pick one",
                )
            start = content.index(old_text)
            span_start = content.rfind("\n", 0, start) + 1
            span_end = content.find("\n", start + len(old_text))
            span = content[span_start : span_end if span_end >= 0 else len(content)]
            if any(line.lstrip().startswith("#") for line in span.split("\n")):
                return False, "old_text touches a section heading; only items can be edited"
            updated = content.replace(old_text, replacement, 1)
            atomic_write_text(
                self.path,
                "\n".join(line for line in updated.split("\n") if line.strip() not in ("-",)),
            )
        return True, "edited"

    def write(self, content: str, based_on: str | None = None) -> Path | None:
        """Replace the whole of ``Memory.md``, after backing up the current version.

        A rewrite is made from a version read earlier (a consolidation reads, waits for a model,
        then writes). With ``based_on`` (the text the rewrite was made from), what changed in
        the file since is not lost: under the lock, lines added since go into their sections of
        the new content (unless it already has an equivalent line), and lines removed since
        (an edit) stay out of it.

        Returns:
            `Path | None`: The backup file (``None`` when there was nothing to back up).
        """
        if not isinstance(content, str):
            raise MemoryInputError(f"content must be a string, got {type(content).__name__}")
        content = content.encode("utf-8", errors="replace").decode("utf-8").replace("\x00", "")
        with file_lock(self._lock_path):
            if based_on is not None:
                content = merge_changes(content, based_on, self.read())
            backup = self._backup()
            atomic_write_text(self.path, content if content.endswith("\n") else content + "\n")
        return backup

    def backups(self) -> list[Path]:
        """Backups of ``Memory.md``, oldest first."""
        try:
            names = sorted(n for n in os.listdir(self.backup_dir) if _BACKUP_RE.match(n))
        except FileNotFoundError:
            return []
        return [self.backup_dir / n for n in names]

    def _backup(self) -> Path | None:
        current = self.read()
        if not current:
            return None
        ensure_directory(self.backup_dir)
        stamp = self._clock().strftime("%Y%m%d-%H%M%S-%f")
        path = self.backup_dir / f"Memory-{stamp}.md"
        while path.exists():  # two rewrites in the same microsecond (fast clocks in tests)
            stamp = stamp[:-6] + f"{(int(stamp[-6:]) + 1) % 1_000_000:06d}"
            path = self.backup_dir / f"Memory-{stamp}.md"
        atomic_write_text(path, current)
        for old in self.backups()[: -self.backups_kept]:
            old.unlink(missing_ok=True)
        return path

    # ----------------------------------------------------------- daily notes

    def add_daily_note(self, text: str, day: date | str | None = None) -> Path:
        """Append ``- HH:MM text`` to ``memory/YYYY-MM-DD.md`` (today by default).

        Returns:
            `Path`: The note file.
        """
        entry = clean_entry(text)
        now = self._clock()
        note_day = _parse_day(day) if day is not None else now.date()
        path = self.notes_dir / f"{note_day.isoformat()}.md"
        with file_lock(self._lock_path):
            try:
                content = path.read_text(encoding="utf-8", errors="replace")
            except FileNotFoundError:
                content = f"# {note_day.isoformat()}\n"
            if not content.endswith("\n"):
                content += "\n"
            atomic_write_text(path, f"{content}- {now.strftime('%H:%M')} {entry}\n")
        return path

    def daily_notes(self, since: date | str | None = None) -> dict[str, str]:
        """Daily notes by date (``YYYY-MM-DD``), oldest first; only days after ``since``."""
        after = _parse_day(since) if since is not None else None
        try:
            names = sorted(n for n in os.listdir(self.notes_dir) if _NOTE_FILE_RE.match(n))
        except FileNotFoundError:
            return {}
        notes = {}
        for name in names:
            day = name[:10]
            try:
                parsed = date.fromisoformat(day)
            except ValueError:
                continue
            if after is not None and parsed <= after:
                continue
            notes[day] = (self.notes_dir / name).read_text(encoding="utf-8", errors="replace")
        return notes


def _parse_day(day: date | str) -> date:
    if isinstance(day, datetime):
        return day.date()
    if isinstance(day, date):
        return day
    try:
        return date.fromisoformat(str(day).strip())
    except ValueError:
        raise MemoryInputError(f"date must look like YYYY-MM-DD, got {day!r}") from None


def merge_changes(rewrite: str, base: str, current: str) -> str:
    """``rewrite`` (made from ``base``) with what changed from ``base`` to ``current`` carried
    over: item lines added since are inserted into their section, item lines removed since
    are dropped. Lines compare by :func:`normalise`."""
    if current == base:
        return rewrite
    base_keys = {normalise(line) for line in _items(base)}
    current_keys = {normalise(line) for line in _items(current)}
    removed = base_keys - current_keys
    if removed:
        rewrite = "\n".join(
            line
            for line in rewrite.split("\n")
            if not (_is_item(line) and normalise(line) in removed)
        )
    present = {normalise(line) for line in _items(rewrite)}
    section = "Facts"
    for line in current.split("\n"):
        if line.startswith("## "):
            section = line[3:].strip() or "Facts"
            continue
        key = normalise(line)
        if _is_item(line) and key not in base_keys and key not in present:
            rewrite = _insert(rewrite, section, line.rstrip())
            present.add(key)
    return rewrite


def _is_item(line: str) -> bool:
    return bool(line.strip()) and not line.lstrip().startswith("#")


def _items(content: str) -> list[str]:
    return [line for line in content.split("\n") if _is_item(line)]


def _insert(content: str, section: str, line: str) -> str:
    """``content`` with ``line`` added at the end of ``## section`` (created if missing)."""
    if not content.strip():
        content = _HEADER + "".join(f"\n## {title}\n" for title in DEFAULT_SECTIONS)
    lines = content.rstrip("\n").split("\n")
    heading = f"## {section}".casefold()
    start = next((i for i, text in enumerate(lines) if text.strip().casefold() == heading), None)
    if start is None:
        lines += ["", f"## {section}", line]
        return "\n".join(lines) + "\n"
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
    insert_at = end
    while insert_at > start + 1 and not lines[insert_at - 1].strip():
        insert_at -= 1
    lines.insert(insert_at, line)
    return "\n".join(lines) + "\n"
