"""``agentscope-context chat``: an interactive agent with context management, for trying it."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import TextIO
from urllib.parse import parse_qs, urlparse

from agentscope.agent import ReActAgent, UserAgent
from agentscope.message import Msg
from agentscope.tool import Toolkit

from ..agentfile import build_agent
from ..agentscope1 import AtomicJSONSession, enable_context_management
from ..core.config import ContextConfig
from ..core.workspace import is_storage_url
from ._models import model_from_environment

EXIT_WORDS = {"exit", "quit", "/exit", "/quit"}


SESSIONS_DIRNAME = "sessions"


def _session(workspace: str):
    """Where ``chat`` keeps the conversation: next to the workspace's other data."""
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
    (atomically), or with a Redis workspace to AgentScope's ``RedisSession`` on that server,
    and loaded at start.

    Raises:
        `ModelUnreachable`: The model's server does not answer.
    """
    stdin = stdin or sys.stdin
    stdout = stdout or sys.stdout
    if agent_file is not None:
        agent = build_agent(agent_file, model=model_name, base_url=base_url)
        manager = agent.context_manager
        config = manager.config
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
        agent = ReActAgent(
            name="assistant",
            sys_prompt="You are a helpful assistant. Use your tools when they help.",
            model=model,
            formatter=formatter,
            toolkit=Toolkit(),
        )
        manager = enable_context_management(agent, config)
    last: dict = {}
    manager.subscribe(lambda e: last.update(e.data) if e.type == "compaction_finished" else None)
    session = _session(config.workspace)
    interactive = _is_terminal(stdin)
    model_label = getattr(agent.model, "model_name", "the model")

    def say(line: str) -> None:
        print(line, file=stdout, flush=True)

    say(
        f"chatting with {model_label} (window {manager.max_input_tokens:,} tokens, workspace "
        f"{config.workspace}, session {session_id}); /compact, /context, /memory; exit to leave"
    )

    async def command(text: str) -> bool:
        if text == "/compact":
            count = await manager.compact_now()
            say(f"[context] compacted on request: the prompt is now {count.total:,} tokens")
        elif text == "/context":
            count = await manager.count()
            compaction = (
                f"last compaction {last['tokens_before']:,} -> {last['tokens_after']:,} tokens"
                if last
                else "no compaction yet"
            )
            say(
                f"[context] {count.total:,} tokens now (system {count.system:,}, summary and "
                f"memory {count.head:,}, messages {count.messages:,}, tools {count.tools:,}) of a "
                f"{manager.max_input_tokens:,}-token window; compaction at "
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
        user = UserAgent(name="user")
        while True:
            try:
                msg = await user()
            except (EOFError, KeyboardInterrupt):
                return
            yield (msg.get_text_content() or "").strip()

    async def loop() -> None:
        await session.load_session_state(session_id=session_id, agent=agent)
        async for text in turns():
            if text.lower() in EXIT_WORDS:
                break
            if await command(text):
                continue
            try:
                await agent(Msg("user", text, "user"))
            except Exception as exc:
                if _is_connection_error(exc):
                    raise ModelUnreachable(_describe(exc, agent)) from None
                raise
            await session.save_session_state(session_id=session_id, agent=agent)
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


def _describe(exc: BaseException, agent: ReActAgent) -> str:
    model = getattr(agent.model, "model_name", "the model")
    reason = " ".join(str(exc).split())[:200] or type(exc).__name__
    return f"cannot reach {model}: {reason}"
