"""A served session's files in a sandboxed 2.x workspace (Docker, E2B, ...), whose backend is
reached only through async calls, kept in step with a local copy that this package's synchronous
stores read and write (design §11.3).

:meth:`WorkspaceMirror.pull` brings the workspace's files into the local copy before a turn's
first step (a new worker, a restart, a wiped cache: whatever is missing or has another size);
:meth:`WorkspaceMirror.push` writes what changed locally into the workspace after each hook that
can write (a cut, the pipeline, the end of the reply), and deletes there what the TTL cleanup
deleted here. The service runs one turn of a session at a time (its session lock), so the copy
of a session is never written by two workers at once.

What was last in step is kept next to the copy (``.mirror.json``: each file's size and time), so
that a change made here and not yet written there (a push that failed: the sandbox was away) is
never overwritten by the workspace's older file at the next pull, only pushed.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..core.workspace import atomic_write_bytes, is_within

__all__ = ["WorkspaceMirror"]

_MUTABLE = (".jsonl", ".md", ".json")
"""Files that change in place (dialog logs, Memory.md, notes, journals): pulled again when their
size differs. A saved tool result is named by its content's hash and never changes."""


class WorkspaceMirror:
    """One folder of a 2.x workspace and its local copy.

    Args:
        backend (`Callable[[], BackendBase]`): The workspace's backend, asked for each time (a
            sandbox may replace it when it reconnects: ``WorkspaceBase.get_backend``).
        remote (`str`): The folder in the workspace (a backend path).
        local (`Path`): The local copy.
    """

    def __init__(self, backend: Callable[[], Any], remote: str, local: Path) -> None:
        self.backend = backend
        self.remote = remote.rstrip("/")
        self.local = local
        self._manifest = local / ".mirror.json"
        self._synced: dict[str, tuple[int, int]] = self._load()

    def _load(self) -> dict[str, tuple[int, int]]:
        try:
            data = json.loads(self._manifest.read_text(encoding="utf-8"))
            return {str(key): (int(value[0]), int(value[1])) for key, value in data.items()}
        except (OSError, ValueError, TypeError, IndexError, AttributeError):
            return {}  # no manifest (a new copy) or a damaged one: nothing is known in step

    def _save(self, synced: dict[str, tuple[int, int]]) -> None:
        self._synced = synced
        atomic_write_bytes(self._manifest, json.dumps(synced).encode("utf-8"))

    def _local_files(self) -> dict[str, tuple[int, int]]:
        found: dict[str, tuple[int, int]] = {}
        if not self.local.is_dir():
            return found
        for folder, _, names in os.walk(self.local):
            for name in names:
                if name.startswith("."):  # locks, write probes, atomic writes' temporaries
                    continue
                path = Path(folder) / name
                try:
                    info = path.stat()
                except FileNotFoundError:
                    continue
                found[path.relative_to(self.local).as_posix()] = (info.st_size, info.st_mtime_ns)
        return found

    async def pull(self) -> int:
        """Copy into the local copy what the workspace has and it lacks (or has at another
        size, for the files that change in place, unless changed here and not pushed yet);
        returns how many files came."""
        backend = self.backend()
        remote_files = await backend.list_dir(self.remote, recursive=True)
        local = self._local_files()
        pulled: set[str] = set()
        for path in remote_files:
            relative = path[len(self.remote) :].lstrip("/")
            target = self.local / relative
            if not relative or not is_within(target, self.local):
                continue
            have = local.get(relative)
            if have is not None:
                if not relative.endswith(_MUTABLE) or self._synced.get(relative) != have:
                    continue  # never changes, or changed here and not pushed yet: kept
                entry = await backend.stat(path)
                if entry is None or entry.size_bytes == have[0]:
                    continue
            atomic_write_bytes(target, await backend.read_file(path))
            pulled.add(relative)
        now = self._local_files()
        in_step = {
            rel: seen
            for rel, seen in now.items()
            if rel in pulled or (rel in local and self._synced.get(rel) == local[rel])
        }
        self._save(in_step)  # a local change not pushed yet stays out of step: pushed next
        return len(pulled)

    async def push(self) -> int:
        """Write into the workspace what changed locally since the last pull or push, and
        delete there what was deleted here; returns how many files were written or deleted."""
        backend = self.backend()
        now = self._local_files()
        changed = [rel for rel, seen in now.items() if self._synced.get(rel) != seen]
        gone = [rel for rel in self._synced if rel not in now]
        synced = dict(self._synced)
        try:
            for relative in changed:
                data = (self.local / relative).read_bytes()
                await backend.write_file(backend.join_path(self.remote, relative), data)
                synced[relative] = now[relative]
            for relative in gone:
                await backend.delete_path(backend.join_path(self.remote, relative))
                synced.pop(relative, None)
        finally:
            self._save(synced)  # what was written is in step, even if a later write failed
        return len(changed) + len(gone)
