"""``agentscope-context chat``: an interactive agent with context management, for trying it."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any, TextIO
from urllib.parse import parse_qs, urlparse

from ..agentfile import ModelUnavailable, build_agent, explain_model_failure
from ..compat import agentscope_major
from ..core.agent_file import ModelSettings, load_agent_file
from ..core.config import ContextConfig
from ..core.workspace import is_storage_url
from ._models import model_from_environment

EXIT_WORDS = {"exit", "quit", "/exit", "/quit"}


SESSIONS_DIRNAME = "sessions"


SYSTEM_PROMPT = "You are a helpful assistant. Use your tools when they help."


def _session(workspace: str):
    """Where ``chat`` keeps a 1.x conversation: next to the workspace's other data."""
    from ..agentscope1 import AtomicJSONSession

    if not is_storage_url(workspace):
        return AtomicJSONSession(save_dir=str(Path(workspace) / SESSIONS_DIRNAME))
    from agentscope.session import RedisSession

    parsed = urlparse(workspace)
    prefix = (parse_qs(parsed.query).get("prefix") or ["ace"])[0]
    return RedisSession(
        host=parsed.hostname or "localhost",
        port=parsed.port or 6379,
        db=int(parsed.path.strip("/") or 0),
        password=parsed.password,
        key_prefix=f"{prefix}:{SESSIONS_DIRNAME}:",
    )


class ModelUnreachable(RuntimeError):
    """The model's server refused or dropped the connection."""


class _Agent1:
    """``chat`` on AgentScope 1.x: a ``ReActAgent`` (it prints its own replies), its session
    in ``JSONSession``/``RedisSession``."""

    def __init__(self, agent: Any, config: ContextConfig) -> None:
        self.agent = agent
        self.session = _session(config.workspace)

    @staticmethod
    def make(model: Any, formatter: Any, config: ContextConfig) -> Any:
        from agentscope.agent import ReActAgent
        from agentscope.tool import Toolkit

        from ..agentscope1 import enable_context_management

        agent = ReActAgent(
            name="assistant",
            sys_prompt=SYSTEM_PROMPT,
            model=model,
            formatter=formatter,
            toolkit=Toolkit(),
        )
        enable_context_management(agent, config)
        return agent

    async def load(self, session_id: str) -> None:
        await self.session.load_session_state(session_id=session_id, agent=self.agent)

    async def save(self, session_id: str) -> None:
        await self.session.save_session_state(session_id=session_id, agent=self.agent)

    async def send(self, text: str, say: Any) -> None:
        from agentscope.message import Msg

        await self.agent(Msg("user", text, "user"))

    async def ask(self) -> str:
        from agentscope.agent import UserAgent

        msg = await UserAgent(name="user")()
        return msg.get_text_content() or ""


class _Agent2:
    """``chat`` on AgentScope 2.x: an ``Agent`` with the middleware; its state, as 2.x saves it
    (``model_dump_json``), in the workspace's ``sessions/<id>.json`` (atomic; a Redis workspace
    keeps it on the server)."""

    def __init__(self, agent: Any, config: ContextConfig) -> None:
        self.agent = agent
        self.storage = agent.context_manager.storage

    @staticmethod
    def make(model: Any, formatter: Any, config: ContextConfig) -> Any:
        from agentscope.agent import Agent
        from agentscope.tool import Toolkit

        from ..agentscope2 import ContextMiddleware

        middleware = ContextMiddleware(config)
        agent = Agent(
            name="assistant",
            system_prompt=SYSTEM_PROMPT,
            model=model,
            toolkit=Toolkit(),
            middlewares=[middleware],
            offloader=middleware.offloader,
        )
        middleware.bind(agent)
        return agent

    @staticmethod
    def _key(session_id: str) -> str:
        return f"{SESSIONS_DIRNAME}/{session_id}.json"

    async def load(self, session_id: str) -> None:
        from agentscope.state import AgentState

        data = self.storage.read(self._key(session_id))
        if data:
            self.agent.state = AgentState.model_validate_json(data)

    async def save(self, session_id: str) -> None:
        self.storage.write(self._key(session_id), self.agent.state.model_dump_json().encode())

    async def send(self, text: str, say: Any) -> None:
        from agentscope.message import UserMsg

        answer = await self.agent.reply(UserMsg("user", text))
        say(f"{self.agent.name}: {answer.get_text_content() or ''}")

    async def ask(self) -> str:
        return await asyncio.to_thread(input, "user: ")


def run_chat(
    config: ContextConfig | None,
    session_id: str = "chat",
    agent_file: Path | None = None,
    model_name: str | None = None,
    base_url: str | None = None,
    stdin: TextIO | None = None,
    stdout: TextIO | None = None,
) -> dict:
    """Chat until ``exit`` (or EOF); prints the context stats on the way out and returns them.

    The agent comes from ``agent_file`` (any provider, see :func:`build_agent`; ``model_name``
    and ``base_url`` override its model), else from the environment's DashScope/OpenAI key.
    On a terminal the user types at a prompt; otherwise each line of ``stdin`` is one message,
    so a chat can be scripted. ``/compact``, ``/context`` and ``/memory`` are commands. The
    agent's state is saved after every turn to ``<workspace>/sessions/<session_id>.json``
    (atomically), or with a Redis workspace on that server (1.x: AgentScope's
    ``RedisSession``; 2.x: the workspace's own keys), and loaded at start. The agent is the
    installed AgentScope's: a 1.x ``ReActAgent`` or a 2.x ``Agent``.

    Raises:
        `ModelUnreachable`: The model's server does not answer.
        `ModelUnavailable`: The server does not speak the provider's API, or answered an HTTP
            error (one line each).
    """
    stdin = stdin or sys.stdin
    stdout = stdout or sys.stdout
    kind = _Agent2 if agentscope_major() >= 2 else _Agent1
    settings: ModelSettings | None = None
    if agent_file is not None:
        spec = load_agent_file(agent_file).with_overrides(model_name, base_url)
        settings = spec.model
        agent = build_agent(spec)
        config = agent.context_manager.config
    else:
        config = config or ContextConfig()
        model, formatter = model_from_environment(
            model_name
            or (
                config.compaction.model
                if config.compaction.model not in (None, "extractive")
                else None
            )
        )
        agent = kind.make(model, formatter, config)
    manager = agent.context_manager
    chat = kind(agent, config)
    last: dict = {}
    manager.subscribe(lambda e: last.update(e.data) if e.type == "compaction_finished" else None)
    interactive = _is_terminal(stdin)
    model_label = _model_label(agent)

    def say(line: str) -> None:
        print(line, file=stdout, flush=True)

    say(
        f"chatting with {model_label} (window {manager.max_input_tokens:,} tokens, workspace "
        f"{config.workspace}, session {session_id}); /compact, /context, /memory; exit to leave"
    )

    async def command(text: str) -> bool:
        if text == "/compact":
            before = manager.stats.compactions
            count = await manager.compact_now()
            done = "compacted on request" if manager.stats.compactions > before else "no compaction"
            say(f"[context] {done}: the next prompt is {count.total:,} tokens")
        elif text == "/context":
            count = await manager.count()
            compaction = (
                f"last compaction {last['tokens_before']:,} -> {last['tokens_after']:,} tokens"
                if last
                else "no compaction yet"
            )
            shift = (
                f", the provider's count over ours {count.calibration:+,}"
                if count.calibration
                else ""
            )
            say(
                f"[context] {count.total:,} tokens now (system {count.system:,}, summary and "
                f"memory {count.head:,}, messages {count.messages:,}, tools {count.tools:,}"
                f"{shift}) of a {manager.max_input_tokens:,}-token window; compaction at "
                f"{manager.pipeline.trigger_tokens:,}; {compaction}"
            )
        elif text == "/memory":
            service = manager.long_term_service
            content = service.memory.read().strip() if service is not None else ""
            say(content or "[context] Memory.md is empty (or long-term memory is off)")
        else:
            return False
        return True

    async def turns():
        if not interactive:
            for line in stdin:
                if line.strip():
                    yield line.strip()
            return
        while True:
            try:
                text = await chat.ask()
            except (EOFError, KeyboardInterrupt):
                return
            yield text.strip()

    async def loop() -> None:
        await chat.load(session_id)
        async for text in turns():
            if text.lower() in EXIT_WORDS:
                break
            if await command(text):
                continue
            try:
                await chat.send(text, say)
            except Exception as exc:
                if _is_connection_error(exc):
                    raise ModelUnreachable(_describe(exc, agent)) from None
                problem = await asyncio.to_thread(explain_model_failure, exc, settings)
                if problem:
                    raise ModelUnavailable(problem) from None
                raise
            await chat.save(session_id)
        await manager.drain()

    asyncio.run(loop())
    stats = manager.stats
    say(
        f"context stats: {stats.truncations} truncation(s), {stats.retruncations} "
        f"re-truncation(s), {stats.compactions} compaction(s), {stats.bytes_offloaded:,} bytes "
        f"offloaded, peak prompt {stats.peak_prompt_tokens:,} tokens"
        + (
            f", token count error {stats.token_count_error:+.2%}"
            if stats.token_count_error is not None
            else ""
        )
    )
    return stats.as_dict()


def _is_terminal(stream: TextIO) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False


def _is_connection_error(exc: BaseException) -> bool:
    """Refused, reset or timed out, whichever client raised it (openai, httpx, ollama)."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        name = type(exc).__name__
        if isinstance(exc, ConnectionError) or name in (
            "APIConnectionError",
            "APITimeoutError",
            "ConnectError",
            "ConnectTimeout",
            "ReadTimeout",
            "RemoteProtocolError",
        ):
            return True
        exc = exc.__cause__ or exc.__context__
    return False


def _describe(exc: BaseException, agent: Any) -> str:
    model = _model_label(agent)
    reason = " ".join(str(exc).split())[:200] or type(exc).__name__
    return f"cannot reach {model}: {reason}"


def _model_label(agent: Any) -> str:
    """The model's name (1.x ``model_name``, 2.x ``model``)."""
    model = agent.model
    name = getattr(model, "model_name", None) or getattr(model, "model", None)
    return name if isinstance(name, str) else "the model"
