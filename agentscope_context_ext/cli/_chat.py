"""``agentscope-context chat``: an interactive agent with context management, for trying it."""

from __future__ import annotations

import asyncio

from agentscope.agent import ReActAgent, UserAgent
from agentscope.tool import Toolkit

from ..agentscope1 import enable_context_management
from ..core.config import ContextConfig
from ._models import model_from_environment

EXIT_WORDS = {"exit", "quit", "/exit", "/quit"}


def run_chat(config: ContextConfig) -> None:
    """Chat until the user types exit (or EOF); prints the context stats on the way out."""
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
    print(
        f"chatting with {model.model_name} (window {manager.max_input_tokens:,} tokens, workspace {config.workspace}); type exit to leave"
    )

    async def loop() -> None:
        while True:
            try:
                msg = await user()
            except (EOFError, KeyboardInterrupt):
                break
            if (msg.get_text_content() or "").strip().lower() in EXIT_WORDS:
                break
            await agent(msg)
        await manager.drain()
        print(f"context stats: {manager.stats.as_dict()}")

    asyncio.run(loop())
