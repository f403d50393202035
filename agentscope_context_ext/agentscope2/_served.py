"""Context management for agents served by AgentScope 2.x's own service, ``create_app``.

``create_app(..., extra_agent_middlewares=context_middleware_factory(config))``: the service
calls the factory every turn, ``(user_id, agent_id, session_id, workspace)``, and builds the
agent, its model and every middleware anew. Nothing that matters lives in the middleware it
returns: the context, the summary and each tool result's truncation record are in the agent's
``AgentState`` (which the service stores after each reply), the files are in the agent's own 2.x
workspace (design §11.3):

.. code-block:: text

    <workdir>/                         the agent's 2.x workspace (LocalWorkspaceManager:
                                       <basedir>/<agent_id>)
      sessions/<session_id>/           2.x's own offloads (context.jsonl, tool_result-*.txt)
        context_ext/                   this session's dialog/ and tool_result/
      context_ext/agents/<agent_id>/   the agent's Memory.md and memory/ (memory_scope="agent")
        users/<user_id>/               ... or one user's with the agent (memory_scope="user")

With ``workspace: redis://...`` in the config the same layout is kept in that Redis store,
under ``agents/<agent_id>/``, for workers on several machines. A workspace whose files are not
on this machine (a Docker or E2B sandbox, reached through its backend's async calls) gets the
same layout too: the stores work on a local copy (:class:`WorkspaceMirror`), pulled from the
workspace before a turn and pushed to it after each step that writes. A turn served by another
worker, or after a restart, continues where the last one stopped.

Each session's file tools (``read_file``; serve's ``list_dir`` and ``grep``) see their roots
minus the service's folders (every agent's workspace, a store folder of ours, our cache), except
the session's own folder (:func:`session_boundary`, design §11.4).

What does live in the worker is the summary written ahead (design §4.6): one still written when
a turn ends is kept on the factory's :class:`SummaryShelf` and taken up by the session's next
turn in this process (:class:`ServedMiddleware`); a turn served elsewhere starts its own.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Collection, Iterable, Sequence
from pathlib import Path
from typing import Any, Literal

from agentscope.middleware import MiddlewareBase
from agentscope.model import ChatModelBase
from agentscope.tool import LocalBackend

from ..core.config import ContextConfig
from ..core.errors import ConfigError, ContextExtError
from ..core.longterm import NOTES_DIRNAME
from ..core.pipeline import SummaryShelf
from ..core.search import HistoryScope, history_key, safe_id
from ..core.tracing import tracing_enabled
from ..core.workspace import (
    DIALOG_DIRNAME,
    TOOL_RESULT_DIRNAME,
    LocalStorage,
    Placement,
    ReadBoundary,
    Storage,
    SubStorage,
    cache_folder_path,
    check_storage_writable,
    check_writable,
    open_storage,
    portal,
    private_cache_folder,
)
from ._manager import AgentManager
from ._middleware import ContextMiddleware
from ._mirror import WorkspaceMirror
from ._refusal import RefusedTurn
from ._tool_filter import ToolFilter
from ._tracing import traced

__all__ = [
    "CONTEXT_DIRNAME",
    "MiddlewareFactory",
    "context_middleware_factory",
    "served_placement",
    "session_boundary",
    "session_folder",
]

logger = logging.getLogger("agentscope_context_ext")

CONTEXT_DIRNAME = "context_ext"
"""This package's folder in a session's folder and in the agent's workspace."""

SESSIONS_DIRNAME = "sessions"
"""2.x's folder of per-session files in a workspace (``WorkspaceBase._sessions_dir``)."""

MemoryScope = Literal["agent", "user"]

MiddlewareFactory = Callable[[str, str, str, Any], Awaitable[list[MiddlewareBase]]]
"""What ``create_app(extra_agent_middlewares=...)`` takes: ``(user_id, agent_id, session_id,
workspace) -> [middleware]``."""


class ServedMiddleware(ContextMiddleware):
    """The middleware of one served turn (``per_turn``): its agent takes up the summary
    written ahead that the session's last turn kept on ``shelf``, and keeps its own there when
    the turn ends (``ContextManager.carry_summary``).

    Args:
        shelf (`SummaryShelf`): The worker's (the factory's) summaries kept between turns.
        session (`tuple[str, str, str]`): ``(user_id, agent_id, session_id)``.
        *args, **kwargs: As :class:`ContextMiddleware` (``per_turn`` is on).
    """

    def __init__(
        self, *args: Any, shelf: SummaryShelf, session: tuple[str, str, str], **kwargs: Any
    ) -> None:
        super().__init__(*args, per_turn=True, **kwargs)
        self.shelf = shelf
        self.session = session

    def bind(self, agent: Any) -> AgentManager:
        fresh = self.manager is None
        manager = super().bind(agent)
        if fresh:
            manager.carry_summary(self.shelf, self.session)
        return manager


def context_middleware_factory(
    config: ContextConfig | dict[str, Any] | str | Path | None = None,
    *,
    memory_scope: MemoryScope = "agent",
    compaction_model: ChatModelBase | None = None,
    mirror: bool | None = None,
    cache: str | Path | None = None,
    hidden: Sequence[str | Path] | None = None,
    tools: Collection[str] | None = None,
) -> MiddlewareFactory:
    """The ``extra_agent_middlewares`` factory of ``create_app``: context management for every
    agent the service runs.

    .. code-block:: python

        from agentscope.app import create_app
        from agentscope_context_ext import context_middleware_factory

        app = create_app(storage, message_bus, workspace_manager,
                         extra_agent_middlewares=context_middleware_factory("context.yaml"))

    Args:
        config (`ContextConfig | dict | str | Path | None`): A config, a dict of keys, or a
            YAML/JSON file path; ``None`` uses the defaults. ``workspace`` left at its default
            keeps the files in each agent's own 2.x workspace; a ``redis://`` URL (or a folder)
            keeps them in that store instead, in the same layout.
        memory_scope (`"agent" | "user"`): Whose ``Memory.md`` a session reads and writes:
            the agent's (every user of the agent shares it) or each user's with this agent.
        compaction_model (`ChatModelBase | None`): Model for summaries; default: the agent's.
        mirror (`bool | None`): Work on a local copy of the files, pulled from the workspace
            before a turn and pushed after each step: ``None`` (default) for a workspace whose
            files are not on this machine (a sandbox), ``True`` for every workspace.
        cache (`str | Path | None`): Where the local copies are (default: this user's
            private folder in the temporary directory, :func:`~agentscope_context_ext.core.workspace.private_cache_folder`).
        hidden (`Sequence[str | Path] | None`): Folders (and files) of the service that no
            session's file tools may see, but for the session's own folder: where every
            agent's workspace is, the records. Default: the folder holding the agent's local
            workspace (``LocalWorkspaceManager``'s ``basedir``). The agent's own
            ``sessions/`` and ``context_ext/``, a store folder of ours and the cache are always
            hidden.
        tools (`Collection[str] | None`): The tools each agent keeps of those ``create_app``
            gives it, by name (e.g. those of ``extra_agent_tools``); the extension adds its
            own. AgentScope's built-ins (its workspace's Bash, Read, Write, ..., the Task*,
            Team* and Schedule* tools, skills, MCPs) and the workspace's instructions go
            (:class:`ToolFilter`). ``None`` (default): the toolkit as the service made it.

    A turn whose files cannot be placed (a workspace that cannot be written) is refused on
    its stream, with the reason (:class:`RefusedTurn`), as every refusal of ours in a turn is.

    Raises:
        `ConfigError`: The configuration is invalid, now rather than at the first turn.
        `WorkspaceError`: The store ``workspace`` names cannot be written.
    """
    settings = ContextConfig.load(config)
    if memory_scope not in ("agent", "user"):
        raise ConfigError(f"memory_scope must be 'agent' or 'user', not {memory_scope!r}")
    store: Storage | None = None
    if "workspace" in settings.model_fields_set:
        store = open_storage(settings.workspace, settings.workspace_timeout)
        check_storage_writable(store)
    checked: set = set()
    copies = Path(cache) if cache is not None else None
    # absolute now: a service that changes its directory later hides the same folders
    hidden_paths = None if hidden is None else [Path(path).absolute() for path in hidden]
    if isinstance(tools, str):
        raise ConfigError(f"tools: a list of tool names, not one string ({tools!r})")
    keep = ToolFilter(tools) if tools is not None else None
    shelf = SummaryShelf()  # this worker's summaries written ahead, between turns

    @portal  # the session's registration waits on the loop, like the turn's calls
    async def factory(
        user_id: str, agent_id: str, session_id: str, workspace: Any = None
    ) -> list[MiddlewareBase]:
        try:
            placement = served_placement(
                settings,
                user_id,
                agent_id,
                session_id,
                workspace,
                store=store,
                memory_scope=memory_scope,
                checked=checked,
                mirror=mirror,
                cache=copies,
                hidden=hidden_paths,
            )
        except ContextExtError as exc:  # said on the turn's stream, not "setup failed"
            return [RefusedTurn(exc)]
        middleware = ServedMiddleware(
            settings,
            compaction_model=compaction_model,
            placement=placement,
            print_notices=False,
            shelf=shelf,
            session=(str(user_id), str(agent_id), str(session_id)),
        )
        # create_app adds no tracing of its own: with a tracer provider installed (trace_to,
        # ``serve --studio-url``), each turn is traced, its spans around ours (design §9.1).
        middlewares = traced(middleware) if tracing_enabled() else [middleware]
        return middlewares if keep is None else [keep, *middlewares]

    return factory


def served_placement(
    config: ContextConfig,
    user_id: str,
    agent_id: str,
    session_id: str,
    workspace: Any,
    *,
    store: Storage | None = None,
    memory_scope: MemoryScope = "agent",
    checked: set | None = None,
    mirror: bool | None = None,
    cache: Path | None = None,
    hidden: Sequence[Path] | None = None,
) -> Placement:
    """Where one served session's files go (the layout at the top of this module).

    Args:
        config (`ContextConfig`): The configuration (long-term memory on or off).
        user_id, agent_id, session_id (`str`): As ``create_app`` names them.
        workspace (`WorkspaceBase | None`): The agent's 2.x workspace for this turn.
        store (`Storage | None`): A store of our own (``workspace:`` in the config); ``None``:
            the agent's 2.x workspace.
        memory_scope (`"agent" | "user"`): Whose ``Memory.md``.
        checked (`set[Path] | None`): Folders already proven writable (skipped).
        mirror (`bool | None`): Work on a local copy (``None``: when the workspace's files are
            not on this machine).
        cache (`Path | None`): Where local copies are.
        hidden (`Sequence[Path] | None`): The service's folders its file tools may not see
            (default: the folder holding the agent's local workspace).

    Raises:
        `ContextExtError`: No workspace to put the files in.
        `WorkspaceError`: A folder cannot be written.
    """
    session_key = f"{SESSIONS_DIRNAME}/{safe_id(session_id)}/{CONTEXT_DIRNAME}"
    # the agent's id is in the path: agents may share one workspace (one sandbox per user)
    memory_key = f"{CONTEXT_DIRNAME}/agents/{safe_id(agent_id)}"
    if memory_scope == "user":  # what the agent keeps of one user, apart from the others
        memory_key = f"{memory_key}/users/{safe_id(user_id)}"
    if store is not None:
        agent_root = f"agents/{safe_id(agent_id)}"
        session = SubStorage(store, f"{agent_root}/{session_key}")
        long_term = SubStorage(store, f"{agent_root}/{memory_key}")
        history = _history(store, agent_id, user_id, session_id, session.folder, checked)
        boundary = _store_boundary(store, session.folder, workspace, session_key, hidden, cache)
        return Placement(session.location, session, long_term, history=history, boundary=boundary)
    workdir, local = _workdir(workspace)
    if mirror is False and not local:
        raise ContextExtError(
            f"context_middleware_factory(mirror=False): the agent's workspace "
            f"{type(workspace).__name__} keeps its files in {workdir} on another machine; "
            "leave mirror unset (a local copy is kept in step with it)"
        )
    mirrors: tuple[WorkspaceMirror, ...] = ()
    if mirror or (mirror is None and not local):
        backend = workspace.get_backend().join_path
        where = (cache or private_cache_folder()) / safe_id(
            str(getattr(workspace, "workspace_id", "") or workdir)
        )
        session_dir, memory_dir = where / session_key, where / memory_key
        mirrors = (
            WorkspaceMirror(workspace.get_backend, backend(workdir, session_key), session_dir),
            WorkspaceMirror(workspace.get_backend, backend(workdir, memory_key), memory_dir),
        )
        if not config.long_term_memory.enabled:
            mirrors = mirrors[:1]
    else:
        session_dir, memory_dir = Path(workdir) / session_key, Path(workdir) / memory_key
    if checked is None or session_dir not in checked:
        check_writable(session_dir, (DIALOG_DIRNAME, TOOL_RESULT_DIRNAME))
        if checked is not None:
            checked.add(session_dir)
    if config.long_term_memory.enabled and (checked is None or memory_dir not in checked):
        check_writable(memory_dir, (NOTES_DIRNAME,))
        if checked is not None:
            checked.add(memory_dir)
    # Sessions of a local folder can be searched together; a sandbox's copy holds one session.
    history = (
        None
        if mirrors
        else _history(
            LocalStorage(workdir), agent_id, user_id, session_id, session_key, checked, signed=True
        )
    )
    if mirrors:  # the workspace's folder is not on this machine: only our copies are
        boundary = session_boundary(hidden or (), [session_dir.parent], cache)
    else:
        boundary = session_boundary(
            [*_hidden_by_default(workdir, hidden), *_ours(workdir)], [session_dir.parent], cache
        )
    return Placement(session_dir, LocalStorage(session_dir), memory_dir, mirrors, history, boundary)


def session_boundary(
    hidden: Iterable[str | Path], own: Iterable[str | Path], cache: Path | None = None
) -> ReadBoundary:
    """What one served session's file tools may see (design §11.4): nothing in ``hidden`` (the
    service's workspaces and records) nor in our cache folders, but all of its ``own`` folders.

    Args:
        hidden (`Iterable[str | Path]`): The service's folders and files.
        own (`Iterable[str | Path]`): The session's own folders.
        cache (`Path | None`): A cache folder given to the factory (``cache=``); this user's
            private cache folder is always hidden.
    """
    caches = [cache_folder_path(), *([cache] if cache is not None else [])]
    return ReadBoundary.of([*hidden, *caches], own)


def session_folder(workspaces: str | Path, agent_id: str, session_id: str) -> Path:
    """A served session's folder in ``LocalWorkspaceManager(workspaces)``'s layout: 2.x's
    offloads and ours (``context_ext/``) of that session."""
    workdir = Path(workspaces).absolute() / str(agent_id)
    return workdir / SESSIONS_DIRNAME / safe_id(session_id)


def _hidden_by_default(workdir: str, hidden: Sequence[Path] | None) -> list[Path]:
    """``hidden``, or the folder holding the agent's workspace: ``LocalWorkspaceManager`` keeps
    every agent's there (``basedir/<agent_id>``), each user's agents and sessions among them."""
    return list(hidden) if hidden is not None else [Path(workdir).absolute().parent]


def _ours(workdir: str) -> list[Path]:
    """The agent's workspace's folders of every session and its memory: hidden whatever the
    service says (they hold the agent's other sessions, maybe other users')."""
    return [Path(workdir) / SESSIONS_DIRNAME, Path(workdir) / CONTEXT_DIRNAME]


def _store_boundary(
    store: Storage,
    folder: str,
    workspace: Any,
    session_key: str,
    hidden: Sequence[Path] | None,
    cache: Path | None,
) -> ReadBoundary:
    """A session's boundary when its files are in a store of ours (``workspace:``): the store's
    folder (when it is one) is hidden but for the session's, and so is the agent's 2.x
    workspace (when local) but for the session's folder there."""
    hide: list[Path] = list(hidden or ())
    own: list[Path] = []
    if isinstance(store, LocalStorage):
        hide.append(store.root)
        own.append(store.root / folder)
    workdir = getattr(workspace, "workdir", None)
    if workdir is not None and _is_local(workspace):
        hide += [*_hidden_by_default(str(workdir), hidden), *_ours(str(workdir))]
        own.append((Path(workdir) / session_key).parent)
    return session_boundary(hide, own, cache)


def _is_local(workspace: Any) -> bool:
    try:
        return isinstance(workspace.get_backend(), LocalBackend)
    except Exception:  # noqa: BLE001 - no backend (not initialized): nothing local to hide
        return False


def _history(
    root: Storage,
    agent_id: str,
    user_id: str,
    session_id: str,
    folder: str,
    done: set | None,
    signed: bool = False,
) -> HistoryScope | None:
    """The session's place among the others of ``root``, written down the first time this
    process serves it (design §6.2); ``None`` when the list cannot be written. ``signed``: the
    list is in the agent's own workspace, where its tools could write it."""
    mark = ("history", root.location, str(agent_id), str(session_id))
    try:
        key = history_key() if signed else None
        scope = HistoryScope(root, str(agent_id), str(user_id), str(session_id), folder, key)
        if done is None or mark not in done:
            scope.register()
    except Exception as exc:  # noqa: BLE001 - the turn goes on; search covers the session
        logger.warning("cannot list session %s for history search: %r", session_id, exc)
        return None
    if done is not None:
        done.add(mark)
    return scope


def _workdir(workspace: Any) -> tuple[str, bool]:
    """A 2.x workspace's folder, and whether its files are on this machine (its backend is a
    ``LocalBackend``)."""
    workdir = getattr(workspace, "workdir", None)
    get_backend = getattr(workspace, "get_backend", None)
    if workdir is None or get_backend is None:
        raise ContextExtError(
            "context_middleware_factory: create_app gave no workspace to put the context's "
            "files in; set workspace: (a folder or redis://...) in the context config"
        )
    try:
        backend = get_backend()
    except RuntimeError as exc:  # not initialized
        raise ContextExtError(f"context_middleware_factory: {exc}") from None
    return str(workdir), isinstance(backend, LocalBackend)
