"""A managed 1.x agent behind the small interface that the commands (``chat``, ``demo``) and the
tests share; the 2.x adapter offers the same class, so nothing above the adapters asks which
AgentScope is installed.

The agent is a ``ReActAgent`` with context management on; it prints its own replies when its
console is on. Its conversation is saved with AgentScope's sessions next to the workspace's
other data: ``AtomicJSONSession`` in ``<workspace>/sessions/`` or, for a Redis workspace,
AgentScope's ``RedisSession`` on that server.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Coroutine, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

from agentscope.agent import ReActAgent
from agentscope.formatter import DashScopeChatFormatter, FormatterBase
from agentscope.message import Msg
from agentscope.model import ChatModelBase
from agentscope.tool import Toolkit

from ..core.config import ContextConfig
from ..core.messages import Message
from ..core.workspace import is_storage_url, open_storage
from ._convert import as_tool, to_view
from ._manager import ContextManager, enable_context_management
from ._session import AtomicJSONSession

__all__ = ["SESSIONS_DIRNAME", "ManagedAgent", "saved_session_texts"]

SESSIONS_DIRNAME = "sessions"
"""Where a conversation is saved, inside the workspace."""

CoreTool = Callable[..., Coroutine[Any, Any, str]]


class ManagedAgent:
    """A 1.x agent with context management on.

    Args:
        agent (`ReActAgent`): An agent whose context is managed (``agent.context_manager``).
    """

    def __init__(self, agent: ReActAgent) -> None:
        self.agent = agent
        self.manager: ContextManager = agent.context_manager
        self._session: Any = None

    @classmethod
    def create(
        cls,
        model: ChatModelBase,
        config: ContextConfig,
        *,
        name: str = "assistant",
        system_prompt: str = "You are a helpful assistant.",
        tools: Sequence[CoreTool] = (),
        formatter: FormatterBase | None = None,
        max_iters: int = 10,
        console: bool = False,
    ) -> ManagedAgent:
        """A new ``ReActAgent`` on ``model`` with the core tool functions ``tools`` and context
        management on (parallel tool calls; the console off unless asked)."""
        toolkit = Toolkit()
        for tool in tools:
            toolkit.register_tool_function(as_tool(tool))
        agent = ReActAgent(
            name=name,
            sys_prompt=system_prompt,
            model=model,
            formatter=formatter or DashScopeChatFormatter(),
            toolkit=toolkit,
            max_iters=max_iters,
            parallel_tool_calls=True,
        )
        agent.set_console_output_enabled(console)
        enable_context_management(agent, config)
        return cls(agent)

    async def ask(self, text: str) -> str:
        """Give the agent one user message; its answer's text."""
        answer = await self.agent(Msg("user", text, "user"))
        return answer.get_text_content() or ""

    @property
    def prints_replies(self) -> bool:
        """Whether the agent shows its own replies (a 1.x agent prints to its console)."""
        return not getattr(self.agent, "_disable_console_output", False)

    def messages(self) -> list[Msg]:
        """The messages in the agent's context now, oldest first (the summary not included)."""
        return list(self.agent.memory.messages)

    def views(self) -> list[Message]:
        """:meth:`messages` as the core's neutral views."""
        return [to_view(msg) for msg in self.messages()]

    def dialog_views(self) -> list[Message]:
        """The messages compaction saved to ``dialog/``, as neutral views."""
        store = self.manager.pipeline.parts.dialog_store
        return [to_view(record.msg) for record in store.iter_records()]

    async def load_session(self, session_id: str) -> None:
        """Load the conversation saved under ``session_id`` (nothing when there is none)."""
        await self._sessions().load_session_state(session_id=session_id, agent=self.agent)

    async def save_session(self, session_id: str) -> None:
        """Save the conversation under ``session_id``."""
        await self._sessions().save_session_state(session_id=session_id, agent=self.agent)

    def _sessions(self) -> Any:
        if self._session is None:
            self._session = _session_store(self.manager.config.workspace)
        return self._session


def saved_session_texts(workspace: str) -> list[str]:
    """The conversations saved for ``workspace`` (``AtomicJSONSession`` files in ``sessions/``,
    or ``RedisSession`` keys under ``<prefix>:sessions:``), as text: the live context of every
    session a ``chat`` can continue, whose saved results the ``cleanup`` command must keep."""
    if not is_storage_url(workspace):
        storage = open_storage(workspace)
        names = storage.names(SESSIONS_DIRNAME)
        found = [storage.read(f"{SESSIONS_DIRNAME}/{name}") for name in names]
        return [data.decode("utf-8", errors="replace") for data in found if data]
    import redis

    place = _redis_place(workspace)
    prefix = place.pop("key_prefix")
    client = redis.Redis(**place, socket_timeout=10)
    texts = []
    pattern = re.sub(r"([*?\[\]\\])", r"\\\1", prefix) + "*"  # the prefix taken literally
    for key in client.scan_iter(match=pattern, count=500):
        data = client.get(key)
        if data:
            texts.append(data.decode("utf-8", errors="replace"))
    return texts


def _session_store(workspace: str) -> Any:
    """AgentScope's session store next to the workspace's other data."""
    if not is_storage_url(workspace):
        return AtomicJSONSession(save_dir=str(Path(workspace) / SESSIONS_DIRNAME))
    from agentscope.session import RedisSession

    return RedisSession(**_redis_place(workspace))


def _redis_place(workspace: str) -> dict[str, Any]:
    """Where ``RedisSession`` keeps a Redis workspace's sessions: its server and key prefix."""
    parsed = urlparse(workspace)
    prefix = (parse_qs(parsed.query).get("prefix") or ["ace"])[0]
    return {
        "host": parsed.hostname or "localhost",
        "port": parsed.port or 6379,
        "db": int(parsed.path.strip("/") or 0),
        "password": parsed.password,
        "key_prefix": f"{prefix}:{SESSIONS_DIRNAME}:",
    }
