"""Opening a managed agent's workspace, with the checks every adapter makes at enable time."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ._boundary import ReadBoundary
from ._dialog_store import DIALOG_DIRNAME
from ._files import check_writable
from ._storage import (
    Storage,
    check_storage_writable,
    is_storage_url,
    open_storage,
    refuse_other_schemes,
)
from ._tool_result_store import TOOL_RESULT_DIRNAME

__all__ = ["Placement", "open_workspace"]


def open_workspace(
    workspace: str, extra_folders: tuple[str, ...] = (), timeout: float | None = None
) -> tuple[Path | str, Storage]:
    """The workspace (its folder, or the Redis URL with the password hidden) and its storage,
    after a write has been taken: a clear :class:`WorkspaceError` now (a folder that is not
    writable, a bad Redis URL or one of another scheme, a server that does not answer)
    instead of lost saves and oversized prompts later.

    Args:
        workspace (`str`): A folder or a ``redis://`` URL (``ContextConfig.workspace``).
        extra_folders (`tuple[str, ...]`): Folders to probe besides ``dialog/`` and
            ``tool_result/`` (``notes/`` with long-term memory on).
        timeout (`float | None`): The deadline of one call to a server
            (``ContextConfig.workspace_timeout``; ``None``: the default).
    """
    refuse_other_schemes(workspace)  # before a folder named after it is created
    if is_storage_url(workspace):
        storage = open_storage(workspace, timeout)
        check_storage_writable(storage)
        return storage.location, storage
    folder = check_writable(Path(workspace), (DIALOG_DIRNAME, TOOL_RESULT_DIRNAME, *extra_folders))
    return folder, open_storage(folder)


@dataclass(frozen=True)
class Placement:
    """Where one managed agent's files go, when not where ``ContextConfig.workspace`` says: a
    served agent's session folder and its agent's long-term memory (design §11.3).

    Attributes:
        workspace (`Path | str`): The folder of the dialog and the saved tool results (or the
            store's location, for messages, when it is not a local folder).
        storage (`Storage`): That folder's storage.
        long_term (`Path | Storage | None`): Where ``Memory.md`` and the daily notes are;
            ``None``: in the workspace.
        mirrors (`tuple`): Local copies of folders kept elsewhere (a sandboxed workspace), each
            with ``async pull()`` and ``async push()``: the adapter pulls before a turn and
            pushes after each step that writes.
        history (`HistoryScope | None`): The session among the others of its place (the
            scopes of ``search_dialog``); ``None``: an agent that is not served.
        boundary (`ReadBoundary | None`): What the session's file tools may not see (the
            service's other users' and sessions' folders); ``None``: an agent that is not
            served.
    """

    workspace: Path | str
    storage: Storage
    long_term: Path | Storage | None = None
    mirrors: tuple[Any, ...] = ()
    history: Any = None
    boundary: ReadBoundary | None = None
