"""``agentscope-context serve`` on 1.x: the service it runs (``create_app``) is AgentScope 2.x's;
1.x has none, so the command is refused with a one-line reason."""

from __future__ import annotations

from collections.abc import Callable
from importlib import metadata

from ..core.agent_file import ServeSettings
from ..core.errors import ConfigError

__all__ = ["serve_agent_file"]


async def serve_agent_file(settings: ServeSettings, say: Callable[[str], None] = print) -> None:
    """Refuse: AgentScope 1.x has no service to run the agent in.

    Raises:
        `ConfigError`: Always.
    """
    raise ConfigError(
        f"serve runs AgentScope 2.x's own service (agentscope.app.create_app); the installed "
        f"AgentScope is {metadata.version('agentscope')}: pip install -U agentscope"
    )
