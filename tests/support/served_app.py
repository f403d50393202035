"""AgentScope 2.x's own service, served for real on loopback, for end-to-end tests.

:class:`ServedApp` builds the app with ``agentscope.app.create_app`` (SQL storage on a sqlite
file, the in-memory message bus, a :class:`LocalWorkspaceManager`; channels, scheduler and index
worker off), serves it with uvicorn on ``127.0.0.1`` on a free port from a background thread, and
talks to it over HTTP (httpx) the way a client does: credential, agent, session, ``POST /chat``,
and the session's SSE stream (``GET /sessions/{sid}/stream``) read until the reply ends.

The model behind the agent is a loopback OpenAI-compatible server (``llm_servers.ModelServer``):
its URL goes into an ``openai_credential``'s ``base_url``.

Synchronisation is event-driven, not timed: the server is up when uvicorn says ``started``; the
stream is known to be subscribed, before the message is posted, because the harness's message bus
(a thin :class:`~agentscope.app.message_bus.InMemoryMessageBus` subclass) reports each
subscription; a turn is over when its ``REPLY_END`` has arrived and the session lock (held until
the reply and the agent state are persisted) has been released. Every wait has a deadline.

Nothing from ``agentscope.app`` is imported at module level, so this file imports anywhere; the
tests that use it skip when ``agentscope.app`` cannot be imported (AgentScope 1.x, or 2.x without
its ``service`` extra).
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx

DEFAULT_MODEL = "scripted-model"
"""The model name sessions ask for. It matches no built-in model card, so the context size is the
model class's default (``OpenAIChatModel``: 128000) unless ``ServedApp(context_size=...)``."""

USER_ID = "served-tester"
"""The ``X-User-ID`` header the harness sends (the service's only notion of identity)."""


class ServedAppError(RuntimeError):
    """The served app did not start, answered an error, or a turn did not end in time."""


def _watched_bus_class() -> type:
    """An :class:`InMemoryMessageBus` that tells waiting threads about subscriptions and
    locks: which stream keys have a live subscriber, which lock keys are held."""
    from agentscope.app.message_bus import InMemoryMessageBus

    class WatchedBus(InMemoryMessageBus):
        def __init__(self) -> None:
            super().__init__()
            self.changed = threading.Condition()
            self.subscribers: Counter[str] = Counter()
            self.held: Counter[str] = Counter()

        def _bump(self, counter: Counter[str], key: str, by: int) -> None:
            with self.changed:
                counter[key] += by
                self.changed.notify_all()

        async def subscribe(self, key: str, *, on_ready: Callable[[], None] | None = None):
            def ready() -> None:
                self._bump(self.subscribers, key, 1)
                if on_ready is not None:
                    on_ready()

            try:
                async for item in super().subscribe(key, on_ready=ready):
                    yield item
            finally:
                self._bump(self.subscribers, key, -1)

        @asynccontextmanager
        async def acquire_lock(self, key: str, *, ttl_secs: int = 600):
            async with super().acquire_lock(key, ttl_secs=ttl_secs):
                self._bump(self.held, key, 1)
                try:
                    yield
                finally:
                    self._bump(self.held, key, -1)

        def wait_until(self, predicate: Callable[[], bool], deadline: float, what: str) -> None:
            """Block the calling (test) thread until ``predicate()`` holds."""
            with self.changed:
                while not predicate():
                    left = deadline - time.monotonic()
                    if left <= 0:
                        raise ServedAppError(f"timed out waiting for {what}")
                    self.changed.wait(left)

    return WatchedBus


def _sized_agent_class(base: type | None, context_size: int) -> type:
    """An agent class whose model (and fallback model) report ``context_size``.

    The service builds the model from the session's ``chat_model_config``; nothing in that
    config, nor in the agent's ``chat_config``, sets the context size (it comes from the
    built-in model card matching the model name, else the model class's default), so the
    app's ``custom_agent_cls`` hook is the way to give an agent a small window."""
    from agentscope.agent import Agent

    parent = base or Agent

    class SizedAgent(parent):  # type: ignore[valid-type, misc]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.model.context_size = context_size
            fallback = getattr(self.model_config, "fallback_model", None)
            if fallback is not None:
                fallback.context_size = context_size

    SizedAgent.__name__ = SizedAgent.__qualname__ = f"SizedAgent{context_size}"
    return SizedAgent


def _free_socket() -> socket.socket:
    """A socket bound to a free loopback port (handed to uvicorn, so no port race)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    return sock


def user_message(text: str, name: str = "user") -> dict:
    """A user ``Msg`` as the chat endpoint takes it."""
    return {"role": "user", "name": name, "content": [{"type": "text", "text": text}]}


def reply_text(events: list[dict]) -> str:
    """The assistant text streamed in ``events`` (its ``TEXT_BLOCK_DELTA`` deltas, joined)."""
    return "".join(e.get("delta", "") for e in events if e.get("type") == "TEXT_BLOCK_DELTA")


def event_types(events: list[dict]) -> list[str]:
    """The ``type`` of each event, in order."""
    return [str(e.get("type")) for e in events]


def reply_end(events: list[dict]) -> dict:
    """The ``REPLY_END`` event of a turn (the last one)."""
    ends = [e for e in events if e.get("type") == "REPLY_END"]
    if not ends:
        raise ServedAppError(f"no REPLY_END among {event_types(events)}")
    return ends[-1]


class ServedApp:
    """AgentScope's service (``create_app``) running on ``127.0.0.1`` for the duration of a
    ``with`` block.

    Args:
        root (`Path | str | None`): Folder for ``app.db`` and ``workspaces/``; a temporary
            folder (removed at exit) when ``None``.
        extra_agent_middlewares: ``create_app``'s per-turn middleware factory,
            ``async (user_id, agent_id, session_id[, workspace]) -> list[MiddlewareBase]``.
        extra_agent_tools: ``create_app``'s per-turn tool factory,
            ``async (user_id, agent_id, session_id) -> list[ToolBase]``.
        context_size (`int | None`): When set, every agent's model reports this context size
            (through ``create_app``'s ``custom_agent_cls``); otherwise the model's own.
        user_id (`str`): The ``X-User-ID`` the harness sends.
        timeout (`float`): Deadline, in seconds, of each wait (start, a turn, stop).
        **create_app_kwargs: Anything else for ``create_app`` (e.g. ``custom_agent_cls``).

    Attributes:
        base_url (`str`): ``http://127.0.0.1:<port>`` once started.
        root, db_path, workspaces_dir (`Path`): Where the storage and the workspaces live;
            an agent's workdir is :meth:`agent_workdir`.
        app: The FastAPI app; ``bus``: its message bus (in-process; for inspection).
        client (`httpx.Client`): The client the helpers use (``X-User-ID`` set).
    """

    def __init__(
        self,
        root: Path | str | None = None,
        *,
        extra_agent_middlewares: Callable[..., Awaitable[list]] | None = None,
        extra_agent_tools: Callable[..., Awaitable[list]] | None = None,
        context_size: int | None = None,
        user_id: str = USER_ID,
        timeout: float = 60.0,
        **create_app_kwargs: Any,
    ) -> None:
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        if root is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="served-app-")
            root = self._tmp.name
        self.root = Path(root)
        self.db_path = self.root / "app.db"
        self.workspaces_dir = self.root / "workspaces"
        self.user_id = user_id
        self.timeout = timeout
        self._extra_agent_middlewares = extra_agent_middlewares
        self._extra_agent_tools = extra_agent_tools
        self._context_size = context_size
        self._create_app_kwargs = create_app_kwargs
        self.base_url = ""
        self.app: Any = None
        self.bus: Any = None
        self.client: httpx.Client | None = None
        self._server: Any = None
        self._thread: threading.Thread | None = None
        self._thread_error: BaseException | None = None

    # ------------------------------------------------------------------ lifecycle

    def __enter__(self) -> ServedApp:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def build_app(self) -> Any:
        """The app, as ``create_app`` builds it (not yet served)."""
        from agentscope.app import create_app
        from agentscope.app.storage import AsyncSQLAlchemyStorage
        from agentscope.app.workspace_manager import LocalWorkspaceManager

        self.root.mkdir(parents=True, exist_ok=True)
        self.workspaces_dir.mkdir(parents=True, exist_ok=True)
        self.bus = _watched_bus_class()()
        kwargs = dict(self._create_app_kwargs)
        if self._context_size is not None:
            kwargs["custom_agent_cls"] = _sized_agent_class(
                kwargs.get("custom_agent_cls"), self._context_size
            )
        return create_app(
            storage=AsyncSQLAlchemyStorage(f"sqlite+aiosqlite:///{self.db_path}"),
            message_bus=self.bus,
            workspace_manager=LocalWorkspaceManager(str(self.workspaces_dir)),
            extra_agent_middlewares=self._extra_agent_middlewares,
            extra_agent_tools=self._extra_agent_tools,
            enable_channel_worker=False,
            enable_scheduler=False,
            enable_index_worker=False,
            **kwargs,
        )

    def start(self) -> None:
        """Build the app, serve it from a background thread, and wait until it is up (and
        ``/health`` says ``ok``). On failure everything started is stopped again."""
        try:
            self._start()
        except BaseException:
            self.stop()
            raise

    def _start(self) -> None:
        import uvicorn

        self.app = self.build_app()
        sock = _free_socket()
        host, port = sock.getsockname()[:2]
        config = uvicorn.Config(
            self.app,
            log_level="warning",
            lifespan="on",
            timeout_graceful_shutdown=5,
        )
        self._server = uvicorn.Server(config)

        def serve() -> None:
            try:
                self._server.run(sockets=[sock])
            except BaseException as exc:  # noqa: BLE001 - reported by start(); SystemExit too
                self._thread_error = exc
            finally:
                sock.close()

        self._thread = threading.Thread(target=serve, name="served-app", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + self.timeout
        # Poll uvicorn's own flag (no callback exists), bounded by the deadline.
        while not self._server.started:
            if not self._thread.is_alive():
                raise ServedAppError(f"the app did not start: {self._thread_error!r}")
            if time.monotonic() > deadline:
                raise ServedAppError("the app did not start in time")
            self._thread.join(0.01)
        self.base_url = f"http://{host}:{port}"
        self.client = httpx.Client(
            base_url=self.base_url,
            headers={"X-User-ID": self.user_id},
            timeout=httpx.Timeout(self.timeout),
        )
        health = self.client.get("/health")
        if health.status_code != 200 or health.json().get("status") != "ok":
            raise ServedAppError(f"the app is not healthy: {health.status_code} {health.text}")

    def stop(self) -> None:
        """Close the client and shut the server down (uvicorn ``should_exit``)."""
        if self.client is not None:
            self.client.close()
            self.client = None
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(self.timeout)
            if self._thread.is_alive():
                self._server.force_exit = True
                self._thread.join(self.timeout)
            self._thread = None
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    # ------------------------------------------------------------------ HTTP

    def _http(self) -> httpx.Client:
        if self.client is None:
            raise ServedAppError("the app is not running")
        return self.client

    def request(self, method: str, path: str, **kwargs: Any) -> Any:
        """One request; the JSON answer (``None`` for no content), or :class:`ServedAppError`."""
        response = self._http().request(method, path, **kwargs)
        if response.status_code >= 400:
            raise ServedAppError(
                f"{method} {path} -> {response.status_code}: {response.text[:2000]}"
            )
        return response.json() if response.content else None

    def create_credential(self, model_url: str, api_key: str = "sk-loopback") -> str:
        """An ``openai_credential`` whose ``base_url`` is ``model_url`` (e.g. a
        ``ModelServer("openai", ...).url``, which ends in ``/v1``); its id."""
        data = {"type": "openai_credential", "api_key": api_key, "base_url": model_url}
        return self.request("POST", "/credential/", json={"data": data})["credential_id"]

    def create_agent(
        self,
        name: str = "served-agent",
        system_prompt: str = "You're a helpful assistant.",
        *,
        chat_config: dict | None = None,
    ) -> str:
        """An agent; its id. ``chat_config`` is ``AgentChatConfig`` as JSON
        (``context_config``, ``react_config``, ``invite_config``), all optional."""
        body: dict[str, Any] = {"name": name, "system_prompt": system_prompt}
        if chat_config is not None:
            body["chat_config"] = chat_config
        return self.request("POST", "/agent/", json=body)["agent_id"]

    def create_session(
        self,
        agent_id: str,
        credential_id: str,
        *,
        model: str = DEFAULT_MODEL,
        parameters: dict | None = None,
        name: str = "served-session",
    ) -> str:
        """A session of ``agent_id`` on the OpenAI chat-completions model ``model``; its id.

        The session is named, so the service does not call the model once more after the
        first turn to title it (auto-naming runs only for unnamed sessions)."""
        chat_model_config = {
            "type": "openai_credential",
            "credential_id": credential_id,
            "model": model,
            "model_class": "openai_chat",
            "parameters": parameters or {},
        }
        body = {"agent_id": agent_id, "name": name, "chat_model_config": chat_model_config}
        return self.request("POST", "/sessions/", json=body)["session_id"]

    def set_permission_mode(self, agent_id: str, session_id: str, mode: str) -> dict:
        """Set the session's permission mode (``default``, ``accept_edits``, ``explore``,
        ``bypass``, ``dont_ask``); the updated session record."""
        return self.request(
            "PATCH",
            f"/sessions/{session_id}",
            params={"agent_id": agent_id},
            json={"permission_mode": mode},
        )

    def messages(self, agent_id: str, session_id: str, limit: int = 200) -> dict:
        """``GET /sessions/{sid}/messages``: ``messages`` (persisted ``Msg`` JSON, oldest
        first), ``event_cursor``, ``is_running``, ``has_more``."""
        return self.request(
            "GET",
            f"/sessions/{session_id}/messages",
            params={"agent_id": agent_id, "limit": limit},
        )

    def post_chat(self, agent_id: str, session_id: str, payload: str | dict | list) -> dict:
        """``POST /chat`` alone (fire-and-forget): ``payload`` is the user's text, or the raw
        ``input`` (a ``Msg``, a list of them, or a confirm / external-execution event)."""
        body_input = user_message(payload) if isinstance(payload, str) else payload
        body = {"agent_id": agent_id, "session_id": session_id, "input": body_input}
        return self.request("POST", "/chat/", json=body)

    def chat(
        self,
        agent_id: str,
        session_id: str,
        payload: str | dict | list,
        *,
        timeout: float | None = None,
    ) -> list[dict]:
        """One turn over HTTP: subscribe to the session's SSE stream, ``POST /chat``, read the
        stream until the reply's ``REPLY_END``, then wait until the run has released the
        session (reply and state persisted). Returns the turn's events (parsed JSON).

        The stream is opened from the session's persisted replay cursor, so it carries this
        turn's events only. A turn parked on a confirmation (``REQUIRE_USER_CONFIRM``) has
        no ``REPLY_END`` yet: it times out here, so set a permission mode that lets the tools
        run, or answer with :meth:`post_chat` and read on with another :meth:`chat`.
        """
        from agentscope.app.message_bus import MessageBusKeys

        deadline = time.monotonic() + (timeout or self.timeout)
        events_key = MessageBusKeys.session_events(session_id)
        lock_key = MessageBusKeys.session_lock(session_id)
        cursor = self.messages(agent_id, session_id, limit=1).get("event_cursor")
        params = {"agent_id": agent_id}
        if cursor:
            params["after"] = cursor
        before = self.bus.subscribers[events_key]
        events: list[dict] = []
        started: set[str] = set()
        with self._http().stream("GET", f"/sessions/{session_id}/stream", params=params) as r:
            if r.status_code != 200:
                r.read()
                raise ServedAppError(f"stream -> {r.status_code}: {r.text[:2000]}")
            self.bus.wait_until(
                lambda: self.bus.subscribers[events_key] > before,
                deadline,
                f"the stream of session {session_id} to subscribe",
            )
            self.post_chat(agent_id, session_id, payload)
            try:
                for line in r.iter_lines():
                    if time.monotonic() > deadline:
                        raise ServedAppError(
                            f"the turn did not end in time; events: {event_types(events)}"
                        )
                    if not line.startswith("data:"):
                        continue  # blank separators and ``:`` heartbeats
                    event = json.loads(line[len("data:") :].strip())
                    events.append(event)
                    if event.get("type") == "REPLY_START":
                        started.add(event.get("reply_id"))
                    elif event.get("type") == "REPLY_END" and event.get("reply_id") in started:
                        break
                else:
                    raise ServedAppError(
                        f"the stream ended before REPLY_END; events: {event_types(events)}"
                    )
            except httpx.ReadTimeout as exc:
                raise ServedAppError(
                    f"no event for {self.timeout}s; events so far: {event_types(events)}"
                ) from exc
        self.bus.wait_until(
            lambda: self.bus.held[lock_key] == 0,
            deadline,
            f"the run of session {session_id} to release the session",
        )
        return events

    # ------------------------------------------------------------------ workspace

    def agent_workdir(self, agent_id: str) -> Path:
        """The agent's LocalWorkspace workdir (``<workspaces_dir>/<agent_id>``): the Bash
        tool's cwd, with ``sessions/<session_id>/`` (offloaded context and tool results),
        ``data/`` (offloaded media) and ``skills/``. Created here if missing, so a test can
        put files there before the first turn."""
        path = self.workspaces_dir / agent_id
        path.mkdir(parents=True, exist_ok=True)
        return path


def service_missing(*also: str) -> str | None:
    """Why AgentScope's service cannot run here (``None``: it can): AgentScope 1.x, or 2.x
    without the ``[serve]`` extra, or one of ``also`` (module names) missing."""
    import importlib

    from agentscope_context_ext import agentscope_major

    if agentscope_major() < 2:
        return "create_app is AgentScope 2.x's service"
    for name in ("agentscope.app", "aiosqlite", "uvicorn", *also):
        try:
            importlib.import_module(name)
        except ImportError as exc:
            return f"{exc.name} is not installed (AgentScope's service: pip install -e '.[serve]')"
    return None


SERVE_COMMAND = str(Path(sys.executable).with_name("agentscope-context"))


class ServeProcess:
    """``agentscope-context serve ARGS`` in a subprocess, up once it printed where it serves:
    ``url``, ``user``, the body of a new session (``session_body``) and an HTTP ``client``."""

    def __init__(self, args: list[str], cwd: Path) -> None:
        self.process = subprocess.Popen(
            [SERVE_COMMAND, "serve", *args],
            cwd=cwd,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        self.lines: list[str] = []
        assert self.process.stdout is not None
        for line in self.process.stdout:  # blocks until serve prints, or exits
            self.lines.append(line.rstrip("\n"))
            if line.startswith("stop with"):
                break
        if not self.lines or not self.lines[-1].startswith("stop with"):
            self.stop()
            raise ServedAppError(f"serve did not start: {self.process.stderr.read()}")
        serving = next(line for line in self.lines if re.search(r"at http://\S+ ", line))
        self.url = re.search(r"at (http://\S+) ", serving).group(1)
        self.user = re.search(r"\(user (\S+),", serving).group(1)
        session_line = next(line for line in self.lines if line.startswith("a session:"))
        self.session_body = json.loads(session_line.split(" -d '", 1)[1].rsplit("'", 1)[0])
        self.agent_id: str = self.session_body["agent_id"]
        self.client = httpx.Client(base_url=self.url, headers={"X-User-ID": self.user}, timeout=30)

    def new_session(self) -> str:
        response = self.client.post("/sessions/", json=self.session_body)
        assert response.status_code < 300, response.text
        return response.json()["session_id"]

    def chat(self, session: str, text: str) -> None:
        """``POST /chat`` with a user message (the run goes on in the server)."""
        message = {"role": "user", "name": "user", "content": [{"type": "text", "text": text}]}
        body = {"agent_id": self.agent_id, "session_id": session, "input": message}
        response = self.client.post("/chat/", json=body)
        assert response.status_code == 200, response.text

    def replies(self, session: str, done: Callable[[list[dict]], bool], timeout: float) -> list:
        """The session's stored messages once ``done(messages)`` holds and no run is active
        (another process: polled against a deadline, there is nothing to wait on)."""
        deadline = time.monotonic() + timeout
        while True:
            response = self.client.get(
                f"/sessions/{session}/messages", params={"agent_id": self.agent_id, "limit": 200}
            )
            stored = response.json()
            assert response.status_code == 200, stored
            if done(stored["messages"]) and not stored["is_running"]:
                return stored["messages"]
            if time.monotonic() > deadline:
                raise ServedAppError(f"no reply in time: {stored}")
            time.sleep(0.1)

    def stop(self) -> str:
        """Stop it (SIGINT, as Ctrl-C); what it wrote on stderr."""
        if getattr(self, "client", None) is not None:
            self.client.close()
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return self.process.stderr.read() if self.process.stderr else ""


def serve_options(folder: Path, spec: Path) -> list[str]:
    """``serve`` options for the agent file ``spec``: a free port, SQLite storage and the
    workspaces in ``folder``."""
    return [
        "--agent",
        str(spec),
        "--port",
        "0",
        "--storage",
        f"sqlite:///{folder / 'app.db'}",
        "--workspaces",
        str(folder / "ws"),
    ]


def agent_file(folder: Path, model_url: str = "http://127.0.0.1:9/v1", **context: int) -> Path:
    """A ``serve``-able agent file in ``folder``: an openai-compatible model at ``model_url``
    (by default a port nobody listens on), a 16k window, long-term memory off."""
    path = folder / "agent.yaml"
    path.write_text(
        "name: reader\n"
        "system_prompt: You read files.\n"
        "model:\n"
        "  provider: openai-compatible\n"
        "  model: scripted\n"
        f"  base_url: {model_url}\n"
        "  stream: false\n"
        "context:\n"
        f"  max_input_tokens: {context.get('max_input_tokens', 16384)}\n"
        "  long_term_memory: {enabled: false}\n",
        encoding="utf-8",
    )
    return path


def run_cli(*args: str, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess:
    """``agentscope-context ARGS`` run to its end in ``cwd``; its output captured."""
    return subprocess.run(
        [SERVE_COMMAND, *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
