"""A served session's files in a sandboxed 2.x workspace (Docker, E2B, ...), whose backend is
reached only through async calls, kept in step with a local copy that this package's synchronous
stores read and write (design §11.3).

:meth:`WorkspaceMirror.pull` brings the workspace's files into the local copy before a turn's
first step: what the copy lacks (a new worker, a restart, a wiped cache) and what changed there
since it was last in step (another worker's turn), listed one folder a call (``scandir``), never
one call a file. :meth:`WorkspaceMirror.push` writes what changed locally into the workspace
after each hook that can write (a cut, the pipeline, the end of the reply), and deletes there
what the TTL cleanup deleted here; with nothing changed it touches nothing. The service runs
one turn of a session at a time (its session lock), so the copy of a session is never written
by two workers at once.

What was last in step is kept next to the copy (``.mirror.json``: each file's size and time,
here and there), so that a change made here and not yet written there (a push that failed: the
sandbox was away) is never overwritten by the workspace's older file at the next pull, only
pushed. A file deleted there by another worker is not deleted here (a failed listing looks the
same as an empty folder; deleting on it would lose the copy and then, at the push, the
workspace's files): a Summarizer job another worker ran may run again here, and its writes are
idempotent.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..core.search import INDEX_DIRNAME
from ..core.workspace import atomic_write_bytes, is_within

__all__ = ["WorkspaceMirror"]

_MUTABLE = (".jsonl", ".md", ".json", "-cleanup")
"""Files that change in place (dialog logs, Memory.md, notes, journals, bookkeeping): pulled
again when their size or time there changed since they were last in step. A saved tool result
is named by its content's hash and never changes."""

_MANIFEST = ".mirror.json"


def _local_only(name: str) -> bool:
    """Files that are this copy's own: locks, write probes, atomic writes' temporaries and the
    manifest (bookkeeping such as ``.consolidation.json`` is mirrored). The history index's
    folder is this copy's own too: a cache, rebuilt from the files."""
    return name in (".lock", _MANIFEST) or name.startswith(".write-check-") or name.endswith(".tmp")


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
        self._manifest = local / _MANIFEST
        self._synced, self._there = self._load()
        self._pulled = False

    def _load(self) -> tuple[dict[str, tuple], dict[str, tuple]]:
        """What was last in step: each file's (size, time) here and there."""
        try:
            data = json.loads(self._manifest.read_text(encoding="utf-8"))
            return (
                {str(k): tuple(v) for k, v in data["here"].items()},
                {str(k): tuple(v) for k, v in data["there"].items()},
            )
        except (OSError, ValueError, TypeError, KeyError, AttributeError):
            return {}, {}  # no manifest (a new copy) or a damaged one: nothing is in step

    def _save(self, here: dict[str, tuple], there: dict[str, tuple]) -> None:
        if (here, there) == (self._synced, self._there):
            return  # nothing changed: no write (a push runs after every step)
        self._synced, self._there = here, there
        blob = json.dumps({"here": here, "there": there}).encode("utf-8")
        atomic_write_bytes(self._manifest, blob)

    def _local_files(self) -> dict[str, tuple]:
        found: dict[str, tuple] = {}
        if not self.local.is_dir():
            return found
        for folder, folders, names in os.walk(self.local):
            if INDEX_DIRNAME in folders:
                folders.remove(INDEX_DIRNAME)
            for name in names:
                if _local_only(name):
                    continue
                path = Path(folder) / name
                try:
                    info = path.stat()
                except FileNotFoundError:
                    continue
                found[path.relative_to(self.local).as_posix()] = (info.st_size, info.st_mtime_ns)
        return found

    async def _remote_files(self, backend: Any, only: set[str] | None = None) -> dict[str, tuple]:
        """Each file under the folder there with its (size, time): one listing a folder
        (``scandir``), not one call a file. ``only``: the folders (relative) to list."""
        found: dict[str, tuple] = {}
        folders = [""] if only is None else sorted(only)
        seen: set[str] = set()
        while folders:
            relative = folders.pop()
            if relative in seen:
                continue
            seen.add(relative)
            path = backend.join_path(self.remote, relative) if relative else self.remote
            for entry in await backend.scandir(path):
                child = f"{relative}/{entry.name}" if relative else entry.name
                if entry.is_dir:
                    if only is None:
                        folders.append(child)
                elif not _local_only(entry.name):
                    found[child] = (entry.size_bytes, entry.mtime)
        return found

    async def pull(self) -> int:
        """Copy into the local copy what the workspace has that it lacks, or that changed
        there since the last pull or push (unless it changed here too and was not pushed yet:
        then the next push writes this copy's); returns how many files came."""
        backend = self.backend()
        there = await self._remote_files(backend)
        local = self._local_files()
        pulled: set[str] = set()
        for relative, seen_there in there.items():
            target = self.local / relative
            if not is_within(target, self.local):
                continue
            have = local.get(relative)
            if have is not None:
                if self._synced.get(relative) != have:
                    continue  # changed here and not pushed yet: kept
                if self._there.get(relative) == seen_there or not relative.endswith(_MUTABLE):
                    continue  # the same there as when last in step (or never changes)
            data = await backend.read_file(backend.join_path(self.remote, relative))
            atomic_write_bytes(target, data)
            pulled.add(relative)
        now = self._local_files()
        here = {
            rel: seen
            for rel, seen in now.items()
            if rel in pulled or (rel in local and self._synced.get(rel) == local[rel])
        }
        self._save(here, {rel: there[rel] for rel in here if rel in there})
        self._pulled = True
        return len(pulled)

    async def push(self) -> int:
        """Write into the workspace what changed locally since the last pull or push, and
        delete there what was deleted here; returns how many files were written or deleted."""
        if not self._pulled:
            # a copy that is not known to be in step (its pull failed) would write what it
            # started afresh over the workspace's files
            raise RuntimeError(f"{self.remote}: not pulled, nothing is pushed over it")
        now = self._local_files()
        changed = [rel for rel, seen in now.items() if self._synced.get(rel) != seen]
        gone = [rel for rel in self._synced if rel not in now]
        if not changed and not gone:
            return 0
        backend = self.backend()
        here, there = dict(self._synced), dict(self._there)
        try:
            for relative in changed:
                data = (self.local / relative).read_bytes()
                await backend.write_file(backend.join_path(self.remote, relative), data)
                here[relative] = now[relative]
            for relative in gone:
                await backend.delete_path(backend.join_path(self.remote, relative))
                here.pop(relative, None)
                there.pop(relative, None)
            # what the written files look like there, for the next pull (a listing a folder)
            folders = {rel.rpartition("/")[0] for rel in changed}
            listed = await self._remote_files(backend, folders)
            there.update({rel: listed[rel] for rel in changed if rel in listed})
        finally:
            self._save(here, there)  # what was written is in step, even if a later write failed
        return len(changed) + len(gone)
