"""A managed 2.x agent behind the small interface that the commands (``chat``, ``demo``) and the
tests share; the 1.x adapter offers the same class, so nothing above the adapters asks which
AgentScope is installed.

The agent is an ``Agent`` with the :class:`ContextMiddleware` and its offloader in its
constructor (the 2.x way). Its conversation is its state, saved as 2.x saves it
(``state.model_dump_json()``) in the workspace's storage under ``sessions/<id>.json`` (an atomic
file, or a key on the Redis server).
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Sequence
from typing import Any

from agentscope.agent import Agent, ReActConfig
from agentscope.message import Msg, UserMsg
from agentscope.model import ChatModelBase
from agentscope.state import AgentState
from agentscope.tool import Toolkit

from ..core.config import ContextConfig
from ..core.manager import ContextManager
from ..core.messages import Message
from ..core.workspace import open_storage, portal
from ._convert import to_view
from ._middleware import ContextMiddleware
from ._tools import as_tool
from ._tracing import traced

__all__ = ["SESSIONS_DIRNAME", "ManagedAgent", "saved_session_texts"]

SESSIONS_DIRNAME = "sessions"
"""Where a conversation is saved, inside the workspace."""

CoreTool = Callable[..., Coroutine[Any, Any, str]]


class ManagedAgent:
    """A 2.x agent with context management on.

    Args:
        agent (`Agent`): An agent whose context is managed (``agent.context_manager``).
    """

    prints_replies = False
    """A 2.x agent prints nothing by itself: the caller shows its answers."""

    def __init__(self, agent: Agent) -> None:
        self.agent = agent
        self.manager: ContextManager = agent.context_manager

    @classmethod
    def create(
        cls,
        model: ChatModelBase,
        config: ContextConfig,
        *,
        name: str = "assistant",
        system_prompt: str = "You are a helpful assistant.",
        tools: Sequence[CoreTool] = (),
        formatter: Any = None,
        max_iters: int = 10,
        console: bool = False,
    ) -> ManagedAgent:
        """A new ``Agent`` on ``model`` (which formats for itself: ``formatter`` is 1.x's and
        not used) with the core tool functions ``tools`` and context management on."""
        middleware = ContextMiddleware(config)
        agent = Agent(
            name=name,
            system_prompt=system_prompt,
            model=model,
            toolkit=Toolkit(tools=[as_tool(tool) for tool in tools]),
            middlewares=traced(middleware),
            offloader=middleware.offloader,
            react_config=ReActConfig(max_iters=max_iters),
        )
        middleware.bind(agent)
        return cls(agent)

    async def ask(self, text: str) -> str:
        """Give the agent one user message; its answer's text."""
        answer = await self.agent.reply(UserMsg("user", text))
        return answer.get_text_content() or ""

    def messages(self) -> list[Msg]:
        """The messages in the agent's context now, oldest first (the summary not included)."""
        return list(self.agent.state.context)

    def views(self) -> list[Message]:
        """:meth:`messages` as the core's neutral views."""
        return [to_view(msg) for msg in self.messages()]

    def dialog_views(self) -> list[Message]:
        """The messages compaction saved to ``dialog/``, as neutral views."""
        store = self.manager.pipeline.parts.dialog_store
        return [to_view(record.msg) for record in store.iter_records()]

    @portal
    async def load_session(self, session_id: str) -> None:
        """Load the state saved under ``session_id`` (nothing when there is none)."""
        data = self.manager.storage.read(_key(session_id))
        if data:
            self.agent.state = AgentState.model_validate_json(data)

    @portal
    async def save_session(self, session_id: str) -> None:
        """Save the agent's state under ``session_id``."""
        self.manager.storage.write(_key(session_id), self.agent.state.model_dump_json().encode())


def _key(session_id: str) -> str:
    return f"{SESSIONS_DIRNAME}/{session_id}.json"


def saved_session_texts(workspace: str) -> list[str]:
    """The conversations saved in ``workspace`` (``sessions/<id>.json``, on a folder or a Redis
    server), as text: the live context of every session a ``chat`` can continue, whose saved
    results the ``cleanup`` command must keep."""
    storage = open_storage(workspace)
    texts = []
    for name in storage.names(SESSIONS_DIRNAME):
        data = storage.read(f"{SESSIONS_DIRNAME}/{name}")
        if data:
            texts.append(data.decode("utf-8", errors="replace"))
    return texts
