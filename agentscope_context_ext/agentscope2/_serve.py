"""An agent file's agent served by AgentScope 2.x's own service, with context management on
(``agentscope-context serve``, design §11.3).

:func:`build_app` is ``create_app`` with :func:`context_middleware_factory` for the agent file's
context settings, the agent file's tools for every agent and no other (AgentScope's built-ins
only when the file says ``tools.agentscope_builtins``), the agent file's model settings on every
call (``_served_model.py``), SQLite (one process) or Redis storage (several workers, with
``RedisMessageBus``; the URL read and its places proved: ``_serve_records.py``) and a
``LocalWorkspaceManager``. :func:`serve` measures what every prompt
holds before any message (``_serve_prompt.py``), runs the app under uvicorn (stopping within
seconds, streams open or not: ``_serve_stop.py``) and registers the agent file's model as a
credential and its agent, for one user, through the service's own HTTP API
(``_serve_register.py``).

The command is one sequence read here in order: check the places, open the records, build the
app, start it, register, print.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..core.agent_file import (
    AgentFile,
    ServeSettings,
    explorer_context,
    import_tool,
    load_agent_file,
)
from ..core.errors import ConfigError
from ..core.installation import install_command
from ..core.tools import make_explorer_functions
from ..core.workspace import is_within
from ._serve_log import AGENTSCOPE_LOGGER, OneLineFailures
from ._serve_prompt import measure_served_prompt
from ._serve_records import (
    StorageUrl,
    check_places,
    open_records,
    parse_storage_url,
    probe_records,
)
from ._serve_register import register_agent, register_credential, usage_lines
from ._served import context_middleware_factory, session_boundary, session_folder
from ._served_model import SERVED_CREDENTIALS, model_credential
from ._tools import as_tool

__all__ = ["StorageUrl", "build_app", "parse_storage_url", "serve_agent_file"]

STARTUP_SECONDS = 60.0


def build_app(spec: AgentFile, storage: StorageUrl, workspaces: Path) -> Any:
    """``create_app`` for the agent file: context management for every agent it runs (the
    file's ``context`` settings), the file's tools and no other unless the file says
    ``tools.agentscope_builtins``, its model settings on every call of a session with the
    credential :func:`model_credential` makes, the storage and a local workspace per agent
    under ``workspaces``. Background workers that need the outside world (channels,
    schedules, the knowledge index) are off; the message bus ends its streams when the
    server stops (:class:`StoppingServer`).

    Raises:
        `ConfigError`: The agent file's tools cannot be built.
    """
    from agentscope.app import create_app
    from agentscope.app.message_bus import InMemoryMessageBus, RedisMessageBus
    from agentscope.app.workspace_manager import LocalWorkspaceManager

    from ._serve_stop import stopping_bus

    context = spec.context
    roots: list[Path] = []
    if spec.tools.explorer is not None:
        roots, context = explorer_context(spec)
    writers = [import_tool(dotted) for dotted in spec.tools.functions]
    # every user's conversations: no session's file tools see them, but its own (design §11.4)
    hidden = [workspaces.absolute(), *storage.files()]

    async def tools(user_id: str, agent_id: str, session_id: str) -> list[Any]:
        own = session_folder(workspaces, agent_id, session_id)
        boundary = session_boundary(hidden, [own])
        functions = make_explorer_functions(roots[0], boundary) if roots else ()
        return [as_tool(f) for f in functions] + [as_tool(f, read_only=False) for f in writers]

    records = open_records(storage)
    if storage.kind == "sqlite":
        bus: Any = stopping_bus(InMemoryMessageBus)
    else:
        bus = stopping_bus(
            RedisMessageBus,
            host=storage.host,
            port=storage.port,
            db=storage.db,
            password=storage.password,
        )
    workspaces.mkdir(parents=True, exist_ok=True)
    keep = None if spec.tools.agentscope_builtins else file_tool_names(spec)
    return create_app(
        storage=records,
        message_bus=bus,
        workspace_manager=LocalWorkspaceManager(str(workspaces.resolve())),
        extra_credentials=list(SERVED_CREDENTIALS),
        extra_agent_middlewares=context_middleware_factory(context, hidden=hidden, tools=keep),
        extra_agent_tools=tools,
        enable_channel_worker=False,
        enable_scheduler=False,
        enable_index_worker=False,
    )


def file_tool_names(spec: AgentFile) -> list[str]:
    """The names of the tools the agent file gives its agent (the explorer's, its
    functions'): all a served agent has, with this package's, unless the file says
    ``tools.agentscope_builtins``."""
    names = []
    if spec.tools.explorer is not None:
        names += [function.__name__ for function in make_explorer_functions(Path.cwd())]
    return names + [import_tool(dotted).__name__ for dotted in spec.tools.functions]


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on ``host:port`` (0: a free port).

    Raises:
        `ConfigError`: The port is taken or the host is not this machine's.
    """
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise ConfigError(f"--host {host}: {exc.strerror}") from None
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(128)
    except OSError as exc:
        sock.close()
        raise ConfigError(
            f"--port {port}: cannot listen on {host}:{port} ({exc.strerror})"
        ) from None
    return sock


async def serve_agent_file(settings: ServeSettings, say: Callable[[str], None] = print) -> None:
    """Serve the agent file's agent until interrupted (Ctrl-C, SIGTERM): ``create_app`` under
    uvicorn on ``settings.host:settings.port``, the file's model registered as a credential
    and its agent for ``settings.user`` (reused when they exist), the prompt's fixed part, the
    URL and curl lines printed.

    Raises:
        `ConfigError`: A bad agent file, storage URL or busy port, or a system prompt and tool
            schemas past the window's compaction point (one line each).
    """
    try:
        import agentscope.app  # noqa: F401 - what create_app needs, checked before anything else
        import aiosqlite  # noqa: F401
        import httpx
        import uvicorn
    except ImportError as exc:
        raise ConfigError(
            f"serve needs AgentScope's service ({exc.name} is missing): " + install_command("serve")
        ) from None
    from ._serve_stop import GRACE_SECONDS, StoppingServer

    spec = load_agent_file(settings.agent)
    storage = parse_storage_url(settings.storage)
    credential, model_class = model_credential(spec.model)
    check_places(storage, settings.workspaces)
    await probe_records(storage, settings.storage)
    app = build_app(spec, storage, settings.workspaces)
    prompt = await measure_served_prompt(
        spec,
        await app.state.extra_agent_tools("serve-check", "serve-check", "serve-check"),
        app.state.extra_agent_middlewares,
        spec.tools.agentscope_builtins,
    )
    prompt.check(f"agent file {settings.agent}")
    sock = bind(settings.host, settings.port)
    host, port = sock.getsockname()[:2]
    shown_host = f"[{host}]" if ":" in host else host
    url = f"http://{shown_host}:{port}"
    config = uvicorn.Config(
        app, log_level="warning", lifespan="on", timeout_graceful_shutdown=GRACE_SECONDS
    )
    server = StoppingServer(config, app.state.message_bus)
    # an expected failure of a turn (the model server down) is one line, not a traceback;
    # with -v (INFO on) every traceback stays
    quiet = None if logging.getLogger().isEnabledFor(logging.INFO) else OneLineFailures()
    if quiet is not None:
        logging.getLogger(AGENTSCOPE_LOGGER).addFilter(quiet)
    task = asyncio.ensure_future(_serve(server, sock))
    try:
        await _started(server, task)
        async with httpx.AsyncClient(
            base_url=url, headers={"X-User-ID": settings.user}, timeout=30.0
        ) as client:
            credential_id = await register_credential(client, spec.name, credential)
            agent_id = await register_agent(client, spec)
        lines = usage_lines(
            url, settings.user, agent_id, (credential["type"], credential_id, model_class), spec
        )
        lines[1:1] = [
            *_places(settings, storage, spec),
            prompt.line(),
            *_builtins_warning(spec, settings.workspaces),
        ]
        for line in lines:
            say(line)
        await task
    finally:
        server.should_exit = True
        with contextlib.suppress(BaseException):
            await asyncio.wait_for(asyncio.shield(task), 10)
        sock.close()
        if quiet is not None:
            logging.getLogger(AGENTSCOPE_LOGGER).removeFilter(quiet)


def _builtins_warning(spec: AgentFile, workspaces: Path) -> list[str]:
    """What ``serve`` says when the agent file turns AgentScope's built-ins on."""
    if not spec.tools.agentscope_builtins:
        return []
    return [
        "AgentScope's built-in tools are on (tools.agentscope_builtins): Bash runs commands "
        f"on this host, as this user (a local workspace: each agent's folder under "
        f"{workspaces.resolve()})",
    ]


async def _serve(server: Any, sock: socket.socket) -> None:
    """uvicorn's ``serve``, whose failed start (``sys.exit(3)``, after logging why) becomes
    a one-line error instead of ending the command with a code of its own."""
    try:
        await server.serve(sockets=[sock])
    except SystemExit as exc:
        raise ConfigError(
            f"the service did not start (exit {exc.code}; its log says why)"
        ) from None


async def _started(server: Any, task: asyncio.Future) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + STARTUP_SECONDS
    while not server.started:
        if task.done():
            error = task.exception()
            raise ConfigError(f"the service did not start: {error or 'it stopped'}")
        if loop.time() > deadline:
            raise ConfigError("the service did not start within a minute")
        await asyncio.sleep(0.05)  # uvicorn offers no start callback; bounded by the deadline


def _places(settings: ServeSettings, storage: StorageUrl, spec: AgentFile) -> list[str]:
    """Where the records and the workspaces are, and whether the agents' file tools' roots
    hold them (they then see only each session's own folder there)."""
    roots = [Path(root).expanduser().absolute() for root in spec.context.tools.allowed_roots]
    if spec.tools.explorer is not None:
        roots += [Path(root).expanduser().absolute() for root in spec.tools.explorer.roots]
    roots = roots or [Path.cwd()]  # read_file's default root

    def where(path: Path, but: str = "") -> str:
        holder = next((root for root in roots if is_within(path, root)), None)
        if holder is None:
            return "outside the agents' file tools' roots"
        name = "the current directory" if holder == Path.cwd() else str(holder)
        return f"inside {name}: hidden from the agents' file tools{but}"

    workspaces = settings.workspaces.absolute()
    records = f"redis://{storage.host}:{storage.port}/{storage.db}"
    if storage.path is not None:
        records = f"{storage.path.absolute()} ({where(storage.path.absolute())})"
    own = " but for each session's own folder"
    return [f"records:     {records}", f"workspaces:  {workspaces} ({where(workspaces, own)})"]
