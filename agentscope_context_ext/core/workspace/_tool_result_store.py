"""``tool_result/<32 hex>.txt``: the full text of every truncated tool result (design §2.2, 3.2).

The store writes each file atomically before the truncated excerpt replaces the original in
memory, so a notice never points at a file that does not exist. Files live ``ttl_days``; the
cleanup deletes only what this store could have written (regular files named like ours inside
``tool_result/``), never follows a symlink, and runs at start and at most once an hour after.
Files that a live message or the summary still names are kept whatever their age (the caller
passes them as ``keep``); what only a saved dialog line names expires, and ``read_file`` says so.

A user's own words offloaded because they alone would not fit the window go to
``message/<32 hex>.txt`` instead, and are kept like ``dialog/``: they never expire.

One text may leave the context before it is on disk: the part of a result that AgentScope 2.x
splits off by itself (it drops what its offloader takes). When that cannot be saved,
:meth:`ToolResultStore.save_or_hold` keeps it here, in memory, under the path it will have; it
is read like a saved one (:meth:`held`, :meth:`read_text`, ``read_file``) and written by
:meth:`flush_held`, which the pipeline calls before every model call.
"""

from __future__ import annotations

import hashlib
import logging
import math
import os
import re
import time
from collections.abc import Callable, Iterable, Sequence

from ..truncation import encode_text
from ._storage import Storage, open_storage

logger = logging.getLogger("agentscope_context_ext")

TOOL_RESULT_DIRNAME = "tool_result"
MESSAGE_DIRNAME = "message"
"""Where an offloaded user text goes (kept for good, like ``dialog/``)."""
MEDIA_SUFFIXES = ("png", "jpg", "gif", "webp", "wav", "mp3", "mp4", "bin")
"""Extensions of saved media copies (old images/audio/video replaced by a placeholder)."""
_NAME_RE = re.compile(r"^[0-9a-f]{32}\.(txt|" + "|".join(MEDIA_SUFFIXES) + r")$")
_MEDIA_TYPE_SUFFIX = {
    "image/png": "png",
    "image/jpeg": "jpg",
    "image/jpg": "jpg",
    "image/gif": "gif",
    "image/webp": "webp",
    "audio/wav": "wav",
    "audio/x-wav": "wav",
    "audio/mpeg": "mp3",
    "audio/mp3": "mp3",
    "video/mp4": "mp4",
}
SUMMARY_READ_BYTES = 512 * 1024
"""How much of a saved output the summary reads back (the head of a 100 MB log is enough to
name what it is about; the rest stays reachable through ``read_file``)."""
CLEANUP_INTERVAL_SECONDS = 3600.0

CLEANUP_MARK = ".tool_result-cleanup"
"""When the TTL cleanup last ran (the store's clock, as text): a store made anew each turn (a
served agent's) does not clean up at every turn."""
"""The running cleanup happens at most this often."""
_SAVED_PATH_RE = re.compile(
    TOOL_RESULT_DIRNAME + r"/[0-9a-f]{32}\.(?:txt|" + "|".join(MEDIA_SUFFIXES) + r")\b"
)


MAX_TTL_DAYS = 36500
"""The longest TTL (100 years): a Redis server refuses expiries past about 10**14 days, and a
result saved with one would never be saved at all."""


def _check_ttl(ttl_days: float) -> None:
    # nan compares false with every age: a cleanup would delete every file not kept
    if not (math.isfinite(ttl_days) and 0 < ttl_days <= MAX_TTL_DAYS):
        raise ValueError(
            f"ttl_days must be a number of days from 0 to {MAX_TTL_DAYS}, got {ttl_days}"
        )


def saved_paths(text: str) -> set[str]:
    """The saved-result paths (``tool_result/<hash>.<ext>``) that ``text`` names."""
    return set(_SAVED_PATH_RE.findall(text)) if TOOL_RESULT_DIRNAME in text else set()


class ToolResultStore:
    """Saves full tool results under ``<workspace>/tool_result/`` and expires them.

    Args:
        workspace (`str | os.PathLike | Storage`): The workspace: a folder (created if needed),
            a ``redis://`` URL, or an open :class:`Storage`.
        ttl_days (`float`): Age in days after which a saved result is deleted.
        clock (`Callable[[], float]`): Returns "now" as a Unix timestamp; tests inject one.
    """

    def __init__(
        self,
        workspace: str | os.PathLike[str] | Storage,
        ttl_days: float = 7,
        clock: Callable[[], float] = time.time,
    ) -> None:
        _check_ttl(ttl_days)
        self.storage = open_storage(workspace)
        self.directory = f"{self.storage.location}/{TOOL_RESULT_DIRNAME}"
        """Where the results go, for messages."""
        self.ttl_days = ttl_days
        self._clock = clock
        self._last_cleanup: float | None = None
        self._held: dict[str, bytes] = {}

    def save(self, text: str) -> str:
        """Write ``text`` to ``tool_result/<32 hex>.txt`` and return that relative path.

        The name is a 128-bit hash of the content (the shape of a uuid4 hex): the same output
        always gets the same path, so a resumed session produces the same prompts as an
        uninterrupted one, and identical outputs share one file. Saving existing content again
        refreshes its age for the TTL.

        Returns:
            `str`: e.g. ``"tool_result/0f3c...e1.txt"`` (always with ``/``).

        Raises:
            `OSError`: The file could not be written (disk full, read-only workspace); nothing
                was left behind and the caller must keep the original text.
        """
        data = encode_text(text)
        return self._save(data, f"{hashlib.blake2b(data, digest_size=16).hexdigest()}.txt")

    def save_or_hold(self, text: str) -> tuple[str, BaseException | None]:
        """:meth:`save`, or, when that fails, keep ``text`` in memory under the path it will
        have until :meth:`flush_held` writes it. Returns the path and the failure (``None``
        when saved)."""
        try:
            return self.save(text), None
        except Exception as exc:  # noqa: BLE001 - a disk or a server: held, saved later
            data = encode_text(text)
            key = f"{TOOL_RESULT_DIRNAME}/{hashlib.blake2b(data, digest_size=16).hexdigest()}.txt"
            self._held[key] = data
            logger.warning("cannot save %s (%s); holding it in memory until it can be", key, exc)
            return key, exc

    def held(self, relative_path: str) -> bytes | None:
        """The bytes of a text held in memory (not saved yet) under ``relative_path``."""
        return self._held.get(relative_path.replace("\\", "/")) if self._held else None

    def flush_held(self) -> list[tuple[str, BaseException | None]]:
        """Try to save every held text; returns each path with its failure (``None``: saved,
        and no longer held)."""
        outcomes: list[tuple[str, BaseException | None]] = []
        for key, data in list(self._held.items()):
            try:
                self._save(data, key.rpartition("/")[2])
            except Exception as exc:  # noqa: BLE001 - still failing: held a step longer
                outcomes.append((key, exc))
                continue
            del self._held[key]
            outcomes.append((key, None))
        return outcomes

    def save_message(self, text: str) -> str:
        """Write a user's text to ``message/<32 hex>.txt`` (kept for good: no TTL, no cleanup)
        and return that relative path.

        Raises:
            `OSError`: The file could not be written; the caller keeps the text.
        """
        data = encode_text(text)
        key = f"{MESSAGE_DIRNAME}/{hashlib.blake2b(data, digest_size=16).hexdigest()}.txt"
        if self.storage.size(key) != len(data):
            self.storage.write(key, data)
        return key

    def save_message_parts(self, texts: Sequence[str]) -> tuple[str, list[int]]:
        """Several text parts of one user message in ONE file (``message/<32 hex>.txt``, kept
        for good like :meth:`save_message`): the parts in order, each starting on a line of its
        own (a newline follows each part but the last that does not end with one), so one part
        alone is exactly :meth:`save_message` of it.

        Returns:
            `tuple[str, list[int]]`: The relative path, and the line each part starts on (what
            :meth:`read_message_part` takes, with the part's size in bytes).

        Raises:
            `OSError`: The file could not be written; the caller keeps the texts.
        """
        pieces: list[str] = []
        starts: list[int] = []
        line = 1
        for index, text in enumerate(texts):
            starts.append(line)
            last = index == len(texts) - 1
            piece = text if last or text.endswith("\n") else text + "\n"
            pieces.append(piece)
            line += piece.count("\n")
        return self.save_message("".join(pieces)), starts

    def read_message_part(self, relative_path: str, start_line: int, size: int) -> str | None:
        """The part of a saved user message that starts at ``start_line`` and takes ``size``
        bytes (:meth:`save_message_parts`), byte for byte; ``None`` when the file is missing,
        unreadable or shorter."""
        if not self.is_own_path(relative_path) or start_line < 1 or size < 0:
            return None
        try:
            data = self.storage.read(relative_path.replace("\\", "/"))
        except OSError:
            return None
        if data is None:
            return None
        offset = 0
        for _ in range(start_line - 1):
            offset = data.find(b"\n", offset) + 1
            if offset == 0:
                return None
        part = data[offset : offset + size]
        # surrogateescape: bytes that were not UTF-8 come back as the text held them
        return part.decode("utf-8", errors="surrogateescape") if len(part) == size else None

    def _save(self, data: bytes, name: str) -> str:
        key = f"{TOOL_RESULT_DIRNAME}/{name}"
        ttl = self.ttl_days * 86400.0  # used by backends that expire keys themselves (Redis)
        # The name is the content's hash: the same name is the same bytes, so an existing one
        # is only made young again.
        if not self.storage.touch(key, ttl):
            self.storage.write(key, data, ttl)
        return key

    def save_media(self, data: bytes, media_type: str) -> str:
        """Write a media file (e.g. a decoded base64 image) and return its relative path."""
        suffix = _MEDIA_TYPE_SUFFIX.get(media_type.lower().split(";")[0].strip(), "bin")
        return self._save(data, f"{hashlib.blake2b(data, digest_size=16).hexdigest()}.{suffix}")

    def read_text(self, relative_path: str, max_bytes: int = SUMMARY_READ_BYTES) -> str | None:
        """The saved text a notice names, for the summary (at most ``max_bytes``).

        Returns:
            `str | None`: ``None`` when ``relative_path`` is not a file this store writes, is
            missing, or cannot be read. Bytes that are not UTF-8 become replacement characters.
        """
        if not self.is_own_path(relative_path):
            return None
        key = relative_path.replace(chr(92), "/")
        held = self.held(key)
        if held is not None:
            return held[:max_bytes].decode("utf-8", errors="replace")
        try:
            data = self.storage.read(key, max_bytes)
        except OSError:
            return None
        return None if data is None else data.decode("utf-8", errors="replace")

    def is_own_path(self, relative_path: str) -> bool:
        """Whether ``relative_path`` names a file this store writes (by shape, not existence)."""
        head, _, name = relative_path.replace("\\", "/").rpartition("/")
        if head == MESSAGE_DIRNAME:
            return bool(_NAME_RE.match(name)) and name.endswith(".txt")
        return head == TOOL_RESULT_DIRNAME and bool(_NAME_RE.match(name))

    def cleanup(self, ttl_days: float | None = None, keep: Iterable[str] = ()) -> list[str]:
        """Delete saved results older than ``ttl_days`` (default: the store's), except ``keep``
        (workspace-relative paths still named by live messages or the summary).

        Only regular files whose name is ``<32 hex>.txt`` (or a media suffix) directly inside ``tool_result/`` are
        considered; symlinks, directories and foreign names are left alone, and nothing is
        followed out of the folder.

        Returns:
            `list[str]`: Workspace-relative paths of the deleted files.
        """
        ttl = self.ttl_days if ttl_days is None else ttl_days
        _check_ttl(ttl)
        now = self._clock()
        self._last_cleanup = now
        try:
            self.storage.write(CLEANUP_MARK, repr(now).encode("ascii"))
        except Exception as exc:  # noqa: BLE001 - the mark only saves work; cleaning goes on
            logger.warning("TTL cleanup cannot record its time: %s", exc)
        cutoff = now - ttl * 86400.0
        removed: list[str] = []
        kept = {path.replace("\\", "/") for path in keep}
        try:
            names = self.storage.names(TOOL_RESULT_DIRNAME)
        except OSError as exc:
            logger.warning("TTL cleanup cannot list %s: %s", self.directory, exc)
            return removed
        for name in names:
            key = f"{TOOL_RESULT_DIRNAME}/{name}"
            if not _NAME_RE.match(name):
                continue
            if key in kept:
                # Still named by the context: young again (on Redis, its expiry restarts).
                self.storage.touch(key, ttl * 86400.0)
                continue
            mtime = self.storage.mtime(key)
            if mtime is None or mtime >= cutoff:
                continue
            try:
                if self.storage.delete(key):
                    removed.append(key)
            except OSError as exc:
                logger.warning("TTL cleanup cannot delete %s: %s", key, exc)
        return removed

    def maybe_cleanup(self, keep: Callable[[], Iterable[str]] = tuple) -> list[str] | None:
        """Run :meth:`cleanup` if it never ran or last ran over an hour ago; ``keep()`` is
        asked only then.

        Returns:
            `list[str] | None`: The deleted paths, or ``None`` when it was not due.
        """
        now = self._clock()
        if self._last_cleanup is None:
            self._last_cleanup = self._recorded_cleanup()
        if self._last_cleanup is not None and now - self._last_cleanup < CLEANUP_INTERVAL_SECONDS:
            return None
        return self.cleanup(keep=keep())

    def _recorded_cleanup(self) -> float | None:
        try:
            data = self.storage.read(CLEANUP_MARK)
            return float(data.decode("ascii")) if data else None
        except (OSError, ValueError, UnicodeDecodeError):
            return None
