"""What a served session's file tools may see (design §11.4): their roots minus the service's
own folders (every agent's workspace, the records, our caches), except the session's own folder.

A service keeps every user's conversations under one tree; a file tool whose root holds that
tree (the current directory, an explorer root of ``.``) would otherwise read another user's
saved messages by path. Every check is on the real path (symlinks and ``..`` resolved), so a
relative, absolute, linked or dotted path to the same file gets the same answer.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["BOUNDARY_REFUSAL", "ReadBoundary"]

BOUNDARY_REFUSAL = (
    "is among the service's other users' and sessions' files; only your own session's "
    "files are readable there"
)
"""What a refused path is told (after the path the agent gave)."""


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

    @classmethod
    def of(
        cls, hidden: Iterable[str | os.PathLike[str]], own: Iterable[str | os.PathLike[str]]
    ) -> ReadBoundary:
        """A boundary from paths as given (made absolute, symlinks resolved, repeats dropped)."""
        return cls(
            tuple(dict.fromkeys(os.path.realpath(path) for path in hidden)),
            tuple(dict.fromkeys(os.path.realpath(path) for path in own)),
        )

    def allows(self, path: str | os.PathLike[str]) -> bool:
        """Whether ``path`` may be read (or a folder's files listed): in an own folder, or in
        no hidden one."""
        return self._allowed(os.path.realpath(path))

    def shows(self, path: str | os.PathLike[str]) -> bool:
        """Whether ``list_dir`` and ``grep`` may show or enter ``path``: it is allowed, or it is
        a hidden folder on the way to an own one (whose other entries stay hidden)."""
        real = os.path.realpath(path)
        return self._allowed(real) or any(_within(own, real) for own in self.own)

    def _allowed(self, real: str) -> bool:
        if any(_within(real, own) for own in self.own):
            return True
        return not any(_within(real, hidden) for hidden in self.hidden)
