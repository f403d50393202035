"""An agent file's agent served by AgentScope 2.x's own service, with context management on
(``agentscope-context serve``, design §11.3).

:func:`build_app` is ``create_app`` with :func:`context_middleware_factory` for the agent file's
context settings, the agent file's tools for every agent and no other (AgentScope's built-ins
only when the file says ``tools.agentscope_builtins``), the agent file's model settings on every
call (``_served_model.py``), SQLite (one process) or Redis storage (several workers, with
``RedisMessageBus``) and a ``LocalWorkspaceManager``. :func:`serve` measures what every prompt
holds before any message (``_serve_prompt.py``), runs the app under uvicorn (stopping within
seconds, streams open or not: ``_serve_stop.py``) and registers the agent file's model as a
credential and its agent, for one user, through the service's own HTTP API (so what it makes
is what a client would have made).

One module on purpose: the command is one sequence (check the places, open the records, build
the app, start it, register, print) whose steps are short and read in order.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import socket
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

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
from ..core.workspace import is_within, redact_url
from ._serve_log import AGENTSCOPE_LOGGER, OneLineFailures
from ._serve_prompt import measure_served_prompt
from ._served import context_middleware_factory, session_boundary, session_folder
from ._served_model import SERVED_CREDENTIALS, model_credential
from ._tools import as_tool

__all__ = ["StorageUrl", "build_app", "parse_storage_url", "serve_agent_file"]

STARTUP_SECONDS = 60.0


@dataclass(frozen=True)
class StorageUrl:
    """Where the service keeps its records: ``sqlite:///app.db`` or ``redis://host:port/db``."""

    kind: str
    """``sqlite`` or ``redis``."""
    path: Path | None = None
    """The SQLite file."""
    host: str = "127.0.0.1"
    port: int = 6379
    db: int = 0
    password: str | None = None

    def files(self) -> list[Path]:
        """The files holding the records (a SQLite database and its journals; none for
        Redis): every user's conversations, hidden from the agents' file tools."""
        if self.path is None:
            return []
        path = self.path.absolute()
        return [path, *(path.with_name(path.name + end) for end in ("-wal", "-shm", "-journal"))]


def parse_storage_url(url: str) -> StorageUrl:
    """``sqlite:///path/app.db`` (relative: ``sqlite:///app.db``) or
    ``redis://[:password@]host:port/db``.

    Raises:
        `ConfigError`: Any other form, naming the two that work.
    """
    forms = "sqlite:///path/app.db or redis://host:port/db"
    shown = redact_url(url)  # the password never reaches a message
    if url.startswith("sqlite:///"):
        path = url[len("sqlite:///") :]
        if not path:
            raise ConfigError(f"--storage {shown}: no database file ({forms})")
        return StorageUrl("sqlite", path=Path(path).expanduser())
    if url.startswith("redis://"):
        # urlsplit itself raises on a bracket left open ("redis://[::1"), .port on a port out
        # of range: each is the user's typo, not an internal error
        try:
            parts = urlsplit(url)
            port = parts.port or 6379
        except ValueError as exc:
            raise ConfigError(f"--storage {shown}: not a Redis URL ({exc}; {forms})") from None
        if not parts.hostname:
            raise ConfigError(f"--storage {shown}: no host ({forms})")
        db = parts.path.lstrip("/") or "0"
        if not (db.isascii() and db.isdigit()):
            raise ConfigError(f"--storage {shown}: the database is not a number ({forms})")
        return StorageUrl(
            "redis", host=parts.hostname, port=port, db=int(db), password=parts.password
        )
    raise ConfigError(f"--storage {shown}: not a storage URL ({forms})")


def check_places(storage: StorageUrl, workspaces: Path) -> None:
    """Prove, before the service starts, that its records and its workspaces can be used: a
    SQLite file that is a database (or not there yet) in a folder that can be made, a Redis
    server that answers, a workspaces folder.

    Raises:
        `ConfigError`: Naming the option and the reason, in one line.
    """
    if workspaces.exists() and not workspaces.is_dir():
        raise ConfigError(f"--workspaces {workspaces}: exists and is not a folder")
    try:
        workspaces.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"--workspaces {workspaces}: {exc.strerror}") from None
    if storage.kind == "sqlite":
        assert storage.path is not None
        path = storage.path
        if path.is_dir():
            raise ConfigError(f"--storage sqlite:///{path}: a folder, not a database file")
        if path.is_file() and path.stat().st_size:
            with path.open("rb") as handle:
                if handle.read(16) != b"SQLite format 3\x00":
                    raise ConfigError(f"--storage sqlite:///{path}: not a SQLite database")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ConfigError(f"--storage sqlite:///{path}: {exc.strerror}") from None
        return
    try:
        import redis
    except ImportError:
        raise ConfigError(
            f"--storage redis://...: the redis client is not installed ({install_command('redis')})"
        ) from None
    client = redis.Redis(
        host=storage.host,
        port=storage.port,
        db=storage.db,
        password=storage.password,
        socket_connect_timeout=5,
        socket_timeout=5,
    )
    try:
        client.ping()
    except redis.RedisError as exc:
        reason = " ".join(str(exc).split())[:200]
        raise ConfigError(
            f"--storage redis://{storage.host}:{storage.port}/{storage.db}: the server does not "
            f"answer ({reason})"
        ) from None
    finally:
        client.close()


def open_records(storage: StorageUrl) -> Any:
    """AgentScope's storage for ``storage`` (not entered yet)."""
    from agentscope.app.storage import AsyncSQLAlchemyStorage, RedisStorage

    if storage.kind == "sqlite":
        assert storage.path is not None
        return AsyncSQLAlchemyStorage(f"sqlite+aiosqlite:///{storage.path.resolve()}")
    return RedisStorage(
        host=storage.host, port=storage.port, db=storage.db, password=storage.password
    )


async def probe_records(storage: StorageUrl, url: str) -> None:
    """Open and close the service's storage once, as its start will (a damaged database, a
    schema it cannot create): one clear error now instead of a failed start.

    Raises:
        `ConfigError`: Naming ``--storage`` and the reason.
    """
    try:
        async with open_records(storage):
            pass
    except Exception as exc:  # noqa: BLE001 - whatever the database driver raises
        reason = " ".join(str(getattr(exc, "orig", None) or exc).split())[:200]
        raise ConfigError(f"--storage {url}: cannot be opened ({reason})") from None


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
            credential_id = await _credential(client, spec.name, credential)
            agent_id = await _agent(client, spec)
        lines = _usage(
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


async def _credential(client: Any, name: str, data: dict[str, Any]) -> str:
    """The id of the credential named ``<agent>-model`` with ``data`` (updated, or created)."""
    title = f"{name}-model"
    listed = await _json(client, "GET", "/credential/")
    for record in listed.get("credentials", []):
        if (record.get("data") or {}).get("name") == title:
            await _json(
                client,
                "PATCH",
                f"/credential/{record['id']}",
                json={"data": {**data, "name": title}},
            )
            return record["id"]
    created = await _json(client, "POST", "/credential/", json={"data": {**data, "name": title}})
    return created["credential_id"]


async def _agent(client: Any, spec: AgentFile) -> str:
    """The id of the agent named like the agent file's (its system prompt brought up to date)."""
    body = {
        "name": spec.name,
        "system_prompt": spec.system_prompt,
        "chat_config": {"react_config": {"max_iters": spec.max_iters}},
    }
    listed = await _json(client, "GET", "/agent/")
    for record in listed.get("agents", []):
        if (record.get("data") or {}).get("name") == spec.name:
            await _json(client, "PATCH", f"/agent/{record['id']}", json=body)
            return record["id"]
    return (await _json(client, "POST", "/agent/", json=body))["agent_id"]


async def _json(client: Any, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
    response = await client.request(method, path, **kwargs)
    if response.status_code >= 400:
        raise ConfigError(
            f"the service refused {method} {path}: {response.status_code} {response.text[:300]}"
        )
    return response.json() if response.content else {}


def _usage(
    url: str,
    user: str,
    agent_id: str,
    model: tuple[str, str, str],
    spec: AgentFile,
) -> list[str]:
    credential_type, credential_id, model_class = model
    session = {
        "agent_id": agent_id,
        "name": "first session",
        "chat_model_config": {
            "type": credential_type,
            "credential_id": credential_id,
            "model": spec.model.model,
            "model_class": model_class,
            "parameters": {},
        },
    }
    header = f"-H 'X-User-ID: {user}' -H 'Content-Type: application/json'"
    chat = {
        "agent_id": agent_id,
        "session_id": "SESSION_ID",
        "input": {"role": "user", "name": "user", "content": [{"type": "text", "text": "Hello"}]},
    }
    return [
        f"serving {spec.name!r} with context management at {url} (user {user}, agent {agent_id})",
        "a session:   curl -s -X POST " + f"{url}/sessions/ {header} -d '{json.dumps(session)}'",
        "its events:  curl -sN "
        + f"'{url}/sessions/SESSION_ID/stream?agent_id={agent_id}' -H 'X-User-ID: {user}'",
        "a message:   curl -s -X POST " + f"{url}/chat/ {header} -d '{json.dumps(chat)}'",
        "stop with Ctrl-C",
    ]


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
