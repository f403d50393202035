"""File-system primitives of the workspace: atomic writes, inter-process locks, safe paths.

Everything that leaves the context is only as safe as these few functions: a write either
lands whole (temp file, fsync, ``os.replace``) or not at all, and two processes sharing a
workspace take an exclusive lock before a read-modify-write.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

from ..errors import WorkspaceError

if os.name == "nt":  # pragma: no cover - exercised on Windows only
    import msvcrt

    def _lock(fd: int) -> None:
        os.lseek(fd, 0, os.SEEK_SET)
        msvcrt.locking(fd, msvcrt.LK_LOCK, 1)

    def _unlock(fd: int) -> None:
        os.lseek(fd, 0, os.SEEK_SET)
        msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)

else:
    import fcntl

    def _lock(fd: int) -> None:
        fcntl.flock(fd, fcntl.LOCK_EX)

    def _unlock(fd: int) -> None:
        fcntl.flock(fd, fcntl.LOCK_UN)


@contextlib.contextmanager
def file_lock(lock_path: str | os.PathLike[str]) -> Iterator[None]:
    """Hold an exclusive inter-process lock on ``lock_path`` (created if needed).

    The lock file is separate from the data file, because the data file is replaced by
    ``os.replace`` and a lock on a replaced inode protects nothing.
    """
    lock_path = Path(lock_path)
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        _lock(fd)
        try:
            yield
        finally:
            _unlock(fd)
    finally:
        os.close(fd)


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> None:
    """Write ``data`` to ``path`` so that readers see the old file or the new one, never half.

    The temp file lives in the same directory (``os.replace`` is atomic only within a file
    system) and is fsync'ed before the rename; the directory is fsync'ed after it.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp_name, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp_name)
        raise
    fsync_directory(path.parent)


def atomic_write_text(path: str | os.PathLike[str], text: str) -> None:
    """:func:`atomic_write_bytes` for text, UTF-8; unencodable characters become ``?``."""
    atomic_write_bytes(path, text.encode("utf-8", errors="replace"))


def fsync_directory(directory: str | os.PathLike[str]) -> None:
    """Persist a directory entry (a new or renamed file) where the platform allows it."""
    if os.name == "nt":  # pragma: no cover - directories cannot be opened on Windows
        return
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def ensure_directory(path: str | os.PathLike[str]) -> Path:
    """Create ``path`` (and parents) if needed; fail with a clear message if it cannot be."""
    path = Path(path)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise WorkspaceError(f"{path} exists and is not a directory") from None
    except OSError as exc:
        raise WorkspaceError(f"cannot create directory {path}: {exc.strerror or exc}") from None
    if not path.is_dir():
        raise WorkspaceError(f"{path} exists and is not a directory")
    return path


def check_writable(path: str | os.PathLike[str], subfolders: tuple[str, ...] = ()) -> Path:
    """Create ``path`` and its ``subfolders`` and prove each can take a file (write, fsync,
    delete a probe), so that an unusable workspace is one clear error at start, not a lost save
    at the first large tool result.

    Raises:
        `WorkspaceError`: Naming the folder that cannot be written and why.
    """
    root = ensure_directory(path)
    for folder in (root, *(root / name for name in subfolders)):
        ensure_directory(folder)
        probe = folder / f".write-check-{os.getpid()}"
        try:
            fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                os.write(fd, b"ok")
                os.fsync(fd)
            finally:
                os.close(fd)
            os.unlink(probe)
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.unlink(probe)
            raise WorkspaceError(
                f"the workspace folder {folder} is not writable: {exc.strerror or exc}"
            ) from None
    return root


def is_within(path: str | os.PathLike[str], root: str | os.PathLike[str]) -> bool:
    """Whether the real path of ``path`` is ``root`` or inside it (symlinks resolved)."""
    real_path = os.path.realpath(path)
    real_root = os.path.realpath(root)
    return real_path == real_root or real_path.startswith(real_root.rstrip(os.sep) + os.sep)


def cache_folder_path() -> Path:
    """Where :func:`private_cache_folder` is (not made, not checked)."""
    uid = os.getuid() if hasattr(os, "getuid") else 0
    return Path(tempfile.gettempdir()) / f"agentscope-context-ext-{uid}"


def private_cache_folder() -> Path:
    """This user's own folder in the temporary directory, private (0700): where a served
    agent's local copies of a sandbox's files and the history index of a Redis workspace go.

    Raises:
        `WorkspaceError`: It exists and is not this user's private folder (a link, another
            owner, open to others): someone else could read or plant the copies.
    """
    uid = os.getuid() if hasattr(os, "getuid") else None  # Windows: no owner to compare
    path = cache_folder_path()
    try:
        path.mkdir(mode=0o700, exist_ok=True)
        info = os.lstat(path)
    except OSError as exc:
        raise WorkspaceError(f"the cache folder {path} cannot be made: {exc.strerror}") from None
    foreign = uid is not None and (info.st_uid != uid or info.st_mode & 0o077)
    if not stat.S_ISDIR(info.st_mode) or foreign:
        raise WorkspaceError(
            f"the cache folder {path} is not this user's private folder (a link, another "
            "owner, or open to others); pass cache= a folder of your own"
        )
    return path
