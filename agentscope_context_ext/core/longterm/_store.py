"""``LongTermMemory``: the file layer of long-term memory (design §7).

``Memory.md`` holds durable facts in sections (``## Personal``, ``## Try-Error Notes``,
``## Facts``, others allowed), one ``- item`` per line; ``memory/YYYY-MM-DD.md`` holds the day's
notes; ``memory/backup/Memory-<timestamp>.md`` keeps the last versions before each full
rewrite. Every write is a read-modify-write under one lock shared by every process using the
workspace, landing atomically (a local folder: temp file + ``os.replace``; Redis: one command),
so two agents sharing a workspace lose no update. No argument ever becomes a path: names come only
from validated dates.

One module on purpose: every read-modify-write of the memory files goes through the one lock
this class holds.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from datetime import date, datetime

from ..truncation import sendable_text
from ..workspace import Storage, open_storage

MEMORY_FILE = "Memory.md"
NOTES_DIRNAME = "memory"
BACKUP_DIRNAME = "backup"
_BACKUP_DIR = f"{NOTES_DIRNAME}/{BACKUP_DIRNAME}"
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
    text = " ".join(sendable_text(text).replace("\x00", "").split())
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
        workspace (`str | os.PathLike | Storage`): The workspace: a folder, a ``redis://`` URL
            or an open :class:`Storage`.
        backups_kept (`int`): Backups of ``Memory.md`` kept in ``memory/backup/``.
        clock (`Callable[[], datetime]`): Local "now"; tests inject one.
    """

    def __init__(
        self,
        workspace: str | os.PathLike[str] | Storage,
        backups_kept: int = 7,
        clock: Callable[[], datetime] = datetime.now,
    ) -> None:
        if backups_kept < 1:
            raise ValueError(f"backups_kept must be at least 1, got {backups_kept}")
        self.storage = open_storage(workspace)
        self.backups_kept = backups_kept
        self._clock = clock
        self._lock = f"{NOTES_DIRNAME}/.lock"

    def where(self, key: str) -> str:
        """Where ``key`` lives, for people: a file path, or the Redis URL and key."""
        return f"{self.storage.location}/{key}"

    def _read(self, key: str) -> str | None:
        data = self.storage.read(key)
        return None if data is None else data.decode("utf-8", errors="replace")

    def _write(self, key: str, text: str) -> None:
        self.storage.write(key, sendable_text(text).encode("utf-8"))

    # ------------------------------------------------------------- Memory.md

    def read(self) -> str:
        """The whole of ``Memory.md`` ("" when it does not exist yet)."""
        return self._read(MEMORY_FILE) or ""

    def version(self) -> tuple | None:
        """A value that changes whenever ``Memory.md`` is written, read without the file (a stat
        locally), to notice changes cheaply every step; ``None`` if missing."""
        return self.storage.version(MEMORY_FILE)

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
        with self.storage.lock(self._lock):
            content = self.read()
            key = normalise(entry)
            if any(normalise(line) == key for line in content.splitlines() if line.strip()):
                return False
            self._write(MEMORY_FILE, _insert(content, title, f"- {entry}"))
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
        with self.storage.lock(self._lock):
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
            self._write(
                MEMORY_FILE,
                "\n".join(line for line in updated.split("\n") if line.strip() not in ("-",)),
            )
        return True, "edited"

    def write(self, content: str, based_on: str | None = None) -> str | None:
        """Replace the whole of ``Memory.md``, after backing up the current version.

        A rewrite is made from a version read earlier (a consolidation reads, waits for a model,
        then writes). With ``based_on`` (the text the rewrite was made from), what changed in
        the file since is not lost: under the lock, lines added since go into their sections of
        the new content (unless it already has an equivalent line), and lines removed since
        (an edit) stay out of it.

        Returns:
            `str | None`: Where the backup went (``None`` when there was nothing to back up).
        """
        if not isinstance(content, str):
            raise MemoryInputError(f"content must be a string, got {type(content).__name__}")
        content = sendable_text(content).replace("\x00", "")
        with self.storage.lock(self._lock):
            if based_on is not None:
                content = merge_changes(content, based_on, self.read())
            backup = self._backup()
            self._write(MEMORY_FILE, content if content.endswith("\n") else content + "\n")
        return None if backup is None else self.where(backup)

    def backups(self) -> list[str]:
        """Backups of ``Memory.md`` (workspace keys, ``memory/backup/Memory-<time>.md``), oldest
        first; :meth:`read_backup` reads one."""
        names = self.storage.names(_BACKUP_DIR)
        return [f"{_BACKUP_DIR}/{n}" for n in names if _BACKUP_RE.match(n)]

    def read_backup(self, key: str) -> str:
        """The text of one of :meth:`backups` ("" if it is gone)."""
        if key not in self.backups():
            raise MemoryInputError(f"not a backup of Memory.md: {key!r}")
        return self._read(key) or ""

    def _backup(self) -> str | None:
        current = self.read()
        if not current:
            return None
        stamp = self._clock().strftime("%Y%m%d-%H%M%S-%f")
        key = f"{_BACKUP_DIR}/Memory-{stamp}.md"
        while self.storage.mtime(key) is not None:  # two rewrites in the same microsecond
            stamp = stamp[:-6] + f"{(int(stamp[-6:]) + 1) % 1_000_000:06d}"
            key = f"{_BACKUP_DIR}/Memory-{stamp}.md"
        self._write(key, current)
        for old in self.backups()[: -self.backups_kept]:
            self.storage.delete(old)
        return key

    # ----------------------------------------------------------- daily notes

    def add_daily_note(self, text: str, day: date | str | None = None) -> str:
        """Append ``- HH:MM text`` to ``memory/YYYY-MM-DD.md`` (today by default).

        Returns:
            `str`: Where the note is.
        """
        entry = clean_entry(text)
        now = self._clock()
        note_day = _parse_day(day) if day is not None else now.date()
        key = f"{NOTES_DIRNAME}/{note_day.isoformat()}.md"
        with self.storage.lock(self._lock):
            content = self._read(key) or f"# {note_day.isoformat()}\n"
            if not content.endswith("\n"):
                content += "\n"
            self._write(key, f"{content}- {now.strftime('%H:%M')} {entry}\n")
        return self.where(key)

    def daily_notes(self, since: date | str | None = None) -> dict[str, str]:
        """Daily notes by date (``YYYY-MM-DD``), oldest first; only days after ``since``."""
        after = _parse_day(since) if since is not None else None
        names = sorted(n for n in self.storage.names(NOTES_DIRNAME) if _NOTE_FILE_RE.match(n))
        notes = {}
        for name in names:
            day = name[:10]
            try:
                parsed = date.fromisoformat(day)
            except ValueError:
                continue
            if after is not None and parsed <= after:
                continue
            text = self._read(f"{NOTES_DIRNAME}/{name}")
            if text is not None:
                notes[day] = text
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
