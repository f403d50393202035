"""``agentscope-context chat``: an interactive agent with context management, for trying it."""

from __future__ import annotations

import asyncio
from pathlib import Path
from urllib.parse import parse_qs, urlparse

from agentscope.agent import ReActAgent, UserAgent
from agentscope.tool import Toolkit

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


def run_chat(config: ContextConfig, session_id: str = "chat") -> None:
    """Chat until the user types exit (or EOF); prints the context stats on the way out.

    The agent's state is saved after every turn to ``<workspace>/sessions/<session_id>.json``
    (atomically: a kill never leaves a half-written file), or with a Redis workspace to
    AgentScope's ``RedisSession`` on the same server, and loaded at start.
    """
    model, formatter = model_from_environment(
        config.compaction.model if config.compaction.model not in (None, "extractive") else None
    )
    agent = ReActAgent(
        name="assistant",
        sys_prompt="You are a helpful assistant. Use your tools when they help.",
        model=model,
        formatter=formatter,
        toolkit=Toolkit(),
    )
    manager = enable_context_management(agent, config)
    user = UserAgent(name="user")
    session = _session(config.workspace)
    print(
        f"chatting with {model.model_name} (window {manager.max_input_tokens:,} tokens, workspace {config.workspace}, session {session_id}); type exit to leave"
    )

    async def loop() -> None:
        await session.load_session_state(session_id=session_id, agent=agent)
        while True:
            try:
                msg = await user()
            except (EOFError, KeyboardInterrupt):
                break
            if (msg.get_text_content() or "").strip().lower() in EXIT_WORDS:
                break
            await agent(msg)
            await session.save_session_state(session_id=session_id, agent=agent)
        await manager.drain()
        print(f"context stats: {manager.stats.as_dict()}")

    asyncio.run(loop())
