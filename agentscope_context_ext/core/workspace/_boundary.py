"""What a served session's file tools may see (design §11.4): their roots minus the service's
own folders (every agent's workspace, the records, our caches), except the session's own folder.

A service keeps every user's conversations under one tree; a file tool whose root holds that
tree (the current directory, an explorer root of ``.``) would otherwise read another user's
saved messages by path. Every check is on the real path (symlinks and ``..`` resolved), so a
relative, absolute, linked or dotted path to the same file gets the same answer; and each folder
on the way is also compared by identity (device and inode), so a path that differs only in case
on a case-insensitive file system (macOS, Windows) is the same folder too.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field

__all__ = ["BOUNDARY_REFUSAL", "ReadBoundary"]

BOUNDARY_REFUSAL = (
    "is among the service's other users' and sessions' files; only your own session's "
    "files are readable there"
)
"""What a refused path is told (after the path the agent gave)."""

Identity = tuple[int, int]


def _real(path: str | os.PathLike[str]) -> str:
    return os.path.normcase(os.path.realpath(path))


def _identity(path: str) -> Identity | None:
    try:
        info = os.stat(path)
    except (OSError, ValueError):
        return None
    return info.st_dev, info.st_ino


def _within(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


@dataclass(frozen=True)
class ReadBoundary:
    """Folders (or files) no file tool of this session may see, and the session's own folders
    inside them, which it may. Both are real paths (:meth:`of` resolves them).

    Attributes:
        hidden (`tuple[str, ...]`): The service's folders and files: every agent's workspace,
            a store folder of ours, the records, the private cache folder.
        own (`tuple[str, ...]`): This session's folders (its saved outputs, messages, dialog).
    """

    hidden: tuple[str, ...]
    own: tuple[str, ...]
    _hidden_ids: frozenset[Identity] = field(default=frozenset(), repr=False, compare=False)
    _own_ids: frozenset[Identity] = field(default=frozenset(), repr=False, compare=False)

    @classmethod
    def of(
        cls, hidden: Iterable[str | os.PathLike[str]], own: Iterable[str | os.PathLike[str]]
    ) -> ReadBoundary:
        """A boundary from paths as given (made absolute, symlinks resolved, repeats dropped);
        those that exist are also known by identity."""
        hidden_paths = tuple(dict.fromkeys(_real(path) for path in hidden))
        own_paths = tuple(dict.fromkeys(_real(path) for path in own))

        def identities(paths: tuple[str, ...]) -> frozenset[Identity]:
            return frozenset(i for i in map(_identity, paths) if i is not None)

        return cls(hidden_paths, own_paths, identities(hidden_paths), identities(own_paths))

    def allows(self, path: str | os.PathLike[str]) -> bool:
        """Whether ``path`` may be read (or a folder's files listed): the nearest of its
        folders that is hidden or own decides (an own folder lies inside a hidden one)."""
        return self._allowed(_real(path))

    def shows(self, path: str | os.PathLike[str]) -> bool:
        """Whether ``list_dir`` and ``grep`` may show or enter ``path``: it is allowed, or it is
        a hidden folder on the way to an own one (whose other entries stay hidden)."""
        real = _real(path)
        return self._allowed(real) or any(_within(own, real) for own in self.own)

    def _allowed(self, real: str) -> bool:
        step = real
        while True:
            identity = _identity(step)
            if step in self.own or (identity is not None and identity in self._own_ids):
                return True
            if step in self.hidden or (identity is not None and identity in self._hidden_ids):
                return False
            parent = os.path.dirname(step)
            if parent == step:
                return True
            step = parent
