"""The storage under every workspace store: a local folder (the default) or a Redis server.

The stores (the dialog log, saved tool results, ``Memory.md`` with its notes and backups, the
Summarizer's journal, the consolidation state) speak to one small interface, :class:`Storage`,
in workspace-relative keys that are the local paths (``dialog/2026-12-03.jsonl``,
``tool_result/<hash>.txt``, ``Memory.md``, ``memory/jobs/<id>.json``):

- whole values: :meth:`~Storage.read`, :meth:`~Storage.write` (atomic, optionally expiring),
  :meth:`~Storage.delete`, :meth:`~Storage.touch`, :meth:`~Storage.mtime`, :meth:`~Storage.names`;
- line logs: :meth:`~Storage.append_lines` (durable, numbered from 1 in append order),
  :meth:`~Storage.line_count`, :meth:`~Storage.lines`, :meth:`~Storage.lines_backwards`;
- locks: :meth:`~Storage.lock`, exclusive across processes and machines sharing the workspace,
  with a lease on Redis so that a killed worker never blocks the others.

:func:`open_storage` picks the backend from the ``workspace`` value: a path, or a URL
``redis://[user:password@]host:port/db[?prefix=NAME]``. This module imports no Redis client;
``_redis_storage`` does, only when a Redis workspace is opened.

One module on purpose: the storage contract and its local implementation side by side, so the
Redis one (``_redis_storage.py``) has one text to follow.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Protocol, runtime_checkable

from ..errors import WorkspaceError
from ._files import atomic_write_bytes, ensure_directory, file_lock
from ._keys import check_key
from ._urls import is_storage_url, redact_url, refuse_other_schemes, workspace_url_error

_CHUNK = 1 << 16

__all__ = [
    "LocalStorage",
    "Storage",
    "check_storage_writable",
    "is_storage_url",
    "open_storage",
    "redact_url",
    "refuse_other_schemes",
    "workspace_url_error",
]


@runtime_checkable
class Storage(Protocol):
    """What the workspace stores need from where they keep their data."""

    location: str
    """Where it is, for messages (a folder, or a Redis URL without its password)."""

    atomic_appends: bool
    """Whether :meth:`append_lines` is atomic by itself (no lock needed around it)."""

    def read(self, key: str, limit: int | None = None) -> bytes | None:
        """The value of ``key`` (a log reads as its lines joined; at most ``limit`` bytes of
        it), ``None`` if absent."""
        ...

    def write(self, key: str, data: bytes, ttl_seconds: float | None = None) -> None:
        """Replace ``key`` atomically (readers see the old value or the new one); with
        ``ttl_seconds`` the value expires that long after its last write or :meth:`touch`."""
        ...

    def delete(self, key: str) -> bool:
        """Remove ``key``; whether it existed."""
        ...

    def touch(self, key: str, ttl_seconds: float | None = None) -> bool:
        """Make ``key`` young again (its TTL restarts); whether it exists."""
        ...

    def mtime(self, key: str) -> float | None:
        """When ``key`` was last written or touched (Unix time; ``None`` if absent)."""
        ...

    def size(self, key: str) -> int:
        """Bytes of ``key`` (0 if absent)."""
        ...

    def version(self, key: str) -> tuple | None:
        """A cheap value that changes whenever ``key`` is written, without reading it (``None``
        if absent): to notice a change every step."""
        ...

    def names(self, prefix: str) -> list[str]:
        """Names of the keys directly under ``prefix`` (a folder), sorted."""
        ...

    def append_lines(self, key: str, lines: list[bytes]) -> int:
        """Append ``lines`` (each without its newline) to the log ``key`` in order, durably;
        returns how many lines the log had before, so the new ones are numbered from that
        plus one."""
        ...

    def line_count(self, key: str) -> int:
        """Lines in the log ``key`` (0 if absent)."""
        ...

    def lines(self, key: str, start: int = 1) -> Iterator[tuple[int, bytes]]:
        """``(number, line)`` from line ``start`` to the end."""
        ...

    def lines_backwards(self, key: str) -> Iterator[tuple[int, bytes]]:
        """``(number, line)`` from the last line to the first."""
        ...

    def log_versions(self, keys: list[str]) -> list[tuple | None]:
        """A version of each log of ``keys`` in one read (one round trip on a server), in
        order, ``None`` for an absent one: where appends are atomic, ``(line count, last
        line)``; else :meth:`version`'s. What a reader checks before it reads on (the history
        index, design §6.2), so that the check costs the same however many logs there are."""
        ...

    def lock(self, name: str, timeout: float = 30.0) -> contextlib.AbstractContextManager:
        """Hold the exclusive lock ``name`` while the ``with`` block runs; waits at most
        ``timeout`` seconds (then ``TimeoutError``)."""
        ...


def open_storage(
    workspace: str | os.PathLike[str] | Storage, timeout: float | None = None
) -> Storage:
    """The storage a ``workspace`` value names: a :class:`Storage` as is, a Redis URL, or a
    folder (created if needed).

    Args:
        workspace (`str | os.PathLike | Storage`): The folder, URL or storage.
        timeout (`float | None`): The deadline of one call to a server, in seconds
            (``workspace_timeout``; ``None``: its default, 3 s). A folder has none.

    Raises:
        `WorkspaceError`: A bad URL (or a URL of another scheme), an unreachable server, a
            missing ``redis`` client, or a folder that cannot be created; the message says which.
    """
    if isinstance(workspace, Storage):
        return workspace
    text = os.fspath(workspace)
    if isinstance(text, str):
        refuse_other_schemes(text)
    if isinstance(text, str) and is_storage_url(text):
        from ._redis_storage import RedisStorage

        if timeout is None:
            return RedisStorage.from_url(text)
        return RedisStorage.from_url(text, timeout=timeout)
    return LocalStorage(text)


class LinkedKeyError(ValueError):
    """A key of a :class:`LocalStorage` passes a link inside its folder (never followed)."""


class LocalStorage:
    """Keys are files under a folder; logs are files of lines; locks are ``flock`` files.

    Args:
        root (`str | os.PathLike`): The workspace folder (created if needed).
    """

    atomic_appends = False
    """Counting the lines and appending are two steps: writers take a lock."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = ensure_directory(Path(root))
        self.location = str(self.root)

    def path(self, key: str) -> Path:
        """The file of ``key``.

        Raises:
            `ValueError`: ``key`` is not a workspace key, or it passes a link inside the folder:
                a store never reads or writes through one (a link planted in one session's
                folder would reach another session's files).
        """
        path = self.root / check_key(key)
        step = self.root
        for part in key.split("/"):
            step = step / part
            if step.is_symlink():
                raise LinkedKeyError(f"not a workspace key: {key!r} passes a link ({step.name})")
        return path

    # ------------------------------------------------------------------ values

    def read(self, key: str, limit: int | None = None) -> bytes | None:
        try:
            with open(self.path(key), "rb") as handle:
                return handle.read() if limit is None else handle.read(limit)
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            return None

    def write(self, key: str, data: bytes, ttl_seconds: float | None = None) -> None:
        atomic_write_bytes(self.path(key), data)

    def delete(self, key: str) -> bool:
        try:
            self.path(key).unlink()
        except FileNotFoundError:
            return False
        return True

    def touch(self, key: str, ttl_seconds: float | None = None) -> bool:
        try:
            path = self.path(key)
        except LinkedKeyError:
            return False  # never refresh (or follow) what this store did not write
        if not path.is_file():
            return False
        os.utime(path)
        return True

    def mtime(self, key: str) -> float | None:
        try:
            return self.path(key).stat().st_mtime
        except FileNotFoundError:
            return None

    def size(self, key: str) -> int:
        try:
            return self.path(key).stat().st_size
        except FileNotFoundError:
            return 0

    def version(self, key: str) -> tuple | None:
        try:
            info = self.path(key).stat()
        except FileNotFoundError:
            return None
        return info.st_mtime_ns, info.st_size

    def log_versions(self, keys: list[str]) -> list[tuple | None]:
        # No round trip to batch: one listing a folder (checked for links once, not every part
        # of every key: 334 day files at 1M messages) and one stat a file.
        entries: dict[str, dict[str, os.DirEntry]] = {}
        versions: list[tuple | None] = []
        for key in keys:
            folder, _, name = check_key(key).rpartition("/")
            if folder not in entries:
                try:
                    with os.scandir(self.path(folder) if folder else self.root) as listing:
                        entries[folder] = {entry.name: entry for entry in listing}
                except (FileNotFoundError, NotADirectoryError):
                    entries[folder] = {}
            entry = entries[folder].get(name)
            if entry is not None and entry.is_symlink():
                raise LinkedKeyError(f"not a workspace key: {key!r} passes a link ({name})")
            info = None if entry is None or not entry.is_file() else entry.stat()
            versions.append(None if info is None else (info.st_mtime_ns, info.st_size))
        return versions

    def names(self, prefix: str) -> list[str]:
        try:
            return sorted(
                entry.name
                for entry in os.scandir(self.path(prefix.rstrip("/")))
                if entry.is_file(follow_symlinks=False)
            )
        except (FileNotFoundError, NotADirectoryError, LinkedKeyError):
            return []  # a linked folder holds nothing of this store's

    # ------------------------------------------------------------------ logs

    def append_lines(self, key: str, lines: list[bytes]) -> int:
        path = self.path(key)
        ensure_directory(path.parent)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        with os.fdopen(fd, "r+b") as handle:
            existing = _count_lines(handle)
            size = handle.seek(0, os.SEEK_END)
            prefix = b""
            if size:
                handle.seek(size - 1)
                if handle.read(1) != b"\n":
                    # A torn last line from a crash: end it, so our first line stays whole.
                    prefix = b"\n"
            handle.write(prefix + b"".join(line + b"\n" for line in lines))
            handle.flush()
            os.fsync(handle.fileno())
        return existing

    def line_count(self, key: str) -> int:
        try:
            with open(self.path(key), "rb") as handle:
                return _count_lines(handle)
        except FileNotFoundError:
            return 0

    def lines(self, key: str, start: int = 1) -> Iterator[tuple[int, bytes]]:
        try:
            handle = open(self.path(key), "rb")  # noqa: SIM115 - closed by the with below
        except FileNotFoundError:
            return
        with handle:
            for number, raw in enumerate(handle, start=1):
                if number >= start:
                    yield number, raw.rstrip(b"\n")

    def lines_backwards(self, key: str) -> Iterator[tuple[int, bytes]]:
        try:
            handle = open(self.path(key), "rb")  # noqa: SIM115 - closed by the with below
        except FileNotFoundError:
            return
        with handle:
            yield from _backwards(handle)

    # ------------------------------------------------------------------ locks

    def lock(self, name: str, timeout: float = 30.0) -> contextlib.AbstractContextManager:
        # flock is released by the kernel when the holder dies: no lease needed.
        return file_lock(self.path(name))


def _count_lines(handle) -> int:
    handle.seek(0)
    count = 0
    last = b""
    while chunk := handle.read(_CHUNK):
        count += chunk.count(b"\n")
        last = chunk[-1:]
    return count + (1 if last and last != b"\n" else 0)


def _backwards(handle) -> Iterator[tuple[int, bytes]]:
    """Lines from the last to the first, with their 1-based numbers, reading in chunks."""
    line_no = _count_lines(handle)
    position = handle.seek(0, os.SEEK_END)
    pending = b""
    first_chunk = True
    while position > 0:
        size = min(_CHUNK, position)
        position -= size
        handle.seek(position)
        pending = handle.read(size) + pending
        if first_chunk:
            first_chunk = False
            if pending.endswith(b"\n"):
                pending = pending[:-1]
        pieces = pending.split(b"\n")
        pending = pieces[0]
        for raw in reversed(pieces[1:]):
            yield line_no, raw
            line_no -= 1
    if line_no >= 1:
        yield line_no, pending


def check_storage_writable(storage: Storage) -> None:
    """Prove ``storage`` takes a write (a read-only replica or a full server does not).

    Raises:
        `WorkspaceError`: Naming the workspace and the server's reason.
    """
    key = f".write-check-{os.getpid()}"
    try:
        storage.write(key, b"ok")
        storage.delete(key)
    except Exception as exc:  # noqa: BLE001 - whatever the backend raises, one clear error
        raise storage_error(storage.location, exc) from None


def storage_error(location: str, exc: BaseException) -> WorkspaceError:
    """A one-line :class:`WorkspaceError` for a storage that cannot be used."""
    reason = " ".join(str(exc).split())[:200] or type(exc).__name__
    return WorkspaceError(f"the workspace {location} cannot be used: {reason}")
