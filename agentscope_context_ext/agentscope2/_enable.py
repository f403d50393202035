"""Context management turned on for a 2.x ``Agent`` that already exists
(``enable_context_management``): the middleware added to the agent's hook lists, undone by
``detach()``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agentscope.model import ChatModelBase

from ..core.config import ContextConfig
from ..core.errors import ContextExtError
from ..core.manager import ContextManager
from ._manager import AgentManager
from ._middleware import ContextMiddleware

__all__ = ["enable_context_management"]

_HOOK_LISTS = (
    "_reply_middlewares",
    "_acting_middlewares",
    "_model_call_middlewares",
    "_compress_context_middlewares",
    "_system_prompt_middlewares",
)
"""Where a 2.0.x ``Agent`` keeps the middlewares of the hooks ours implements (on_reply,
on_acting, on_model_call, on_compress_context, on_system_prompt), filtered once in its
constructor."""


def enable_context_management(
    agent: Any,
    config: ContextConfig | dict[str, Any] | str | Path | None = None,
    *,
    compaction_model: ChatModelBase | None = None,
) -> AgentManager:
    """Turn on context management for an AgentScope 2.x ``Agent`` that already exists.

    Adds a :class:`ContextMiddleware` to the agent's hook lists (2.x filters its middlewares
    once, in the constructor, so the lists are where a new one goes) and returns the manager
    (which sets its offloader when the agent has none). ``manager.detach()`` undoes it all.

    Args:
        agent (`Agent`): The 2.x agent.
        config (`ContextConfig | dict | str | Path | None`): A config, a dict of keys, or a
            YAML/JSON file path; ``None`` uses the defaults.
        compaction_model (`ChatModelBase | None`): Model for summaries; default: the agent's.

    Raises:
        `ConfigError`: The configuration is invalid (the message names the key).
        `ContextExtError`: The agent lacks what is needed, or is already managed.
    """
    if isinstance(getattr(agent, "context_manager", None), ContextManager):
        raise ContextExtError(
            "context management is already enabled on this agent; call detach() first"
        )
    missing = [name for name in _HOOK_LISTS if not isinstance(getattr(agent, name, None), list)]
    if missing or not hasattr(agent, "state"):
        raise ContextExtError(
            f"enable_context_management needs an AgentScope 2.x Agent; {type(agent).__name__} "
            "has no middleware lists: pass ContextMiddleware(...) in Agent(middlewares=[...])"
        )
    middleware = ContextMiddleware(config, compaction_model=compaction_model)
    manager = middleware.bind(agent)
    for attribute in _HOOK_LISTS:
        hooks: list = getattr(agent, attribute)
        hooks.append(middleware)
        manager.record_undo(lambda hooks=hooks: hooks.remove(middleware))
    return manager
