"""What AgentScope 2.x's service does each turn, in process, for the tests of the served agent:
:class:`Worker` builds a new ``Agent`` and asks the middleware factory anew for every turn, keeps
the state between turns as JSON (as the service's storage does) and gives the agent its 2.x
``LocalWorkspace``; :func:`big_output` is the ~160 KB tool those agents have. AgentScope 2.x
only (import it from 2.x test files)."""

from __future__ import annotations

from pathlib import Path

from agentscope.agent import Agent, ReActConfig
from agentscope.event import CustomEvent
from agentscope.message import UserMsg
from agentscope.permission import PermissionBehavior, PermissionDecision
from agentscope.state import AgentState
from agentscope.tool import FunctionTool, Toolkit
from agentscope.workspace import LocalWorkspace

from agentscope_context_ext.testing import ModelCall, ScriptedChatModel

ALLOW = PermissionDecision(behavior=PermissionBehavior.ALLOW, message="test tool")
WINDOW = 16384


def big_output(tag: str) -> str:
    """A ~160 KB output.

    Args:
        tag (str): What each line starts with.
    """
    return "\n".join(f"{tag} {i:05d} " + "y" * 80 for i in range(1800))


def config(**extra) -> dict:
    """A served config: a 16k window, long-term memory off unless given."""
    data = {"max_input_tokens": WINDOW, "long_term_memory": {"enabled": False}}
    data.update(extra)
    return data


def custom(events: list, name: str) -> list[dict]:
    """The values of the 2.x ``CustomEvent``s named ``name``."""
    return [e.value for e in events if isinstance(e, CustomEvent) and e.name == name]


def system_text(call: ModelCall) -> str:
    system = call.messages[0]["content"]
    return system if isinstance(system, str) else system[0]["text"]


async def local_workspace(folder: Path) -> LocalWorkspace:
    workspace = LocalWorkspace(workdir=str(folder))
    await workspace.initialize()
    return workspace


class Worker:
    """One service worker: per turn a new agent and middleware, the state through JSON.

    Args:
        workspace (`LocalWorkspace | Path`): The agent's 2.x workspace, or its folder (made into
            one on the first turn).
        factory: ``context_middleware_factory(...)``'s factory.
        model (`ScriptedChatModel`): The agent's model.
        tools: ``create_app``'s ``extra_agent_tools``: ``async (user, agent, session) ->
            [tool]``, added to :func:`big_output` each turn (``None``: none).
    """

    def __init__(
        self, workspace: LocalWorkspace | Path, factory, model: ScriptedChatModel, tools=None
    ) -> None:
        self._where = workspace
        self.tools = tools
        self.workspace: LocalWorkspace | None = (
            workspace if isinstance(workspace, LocalWorkspace) else None
        )
        self.factory = factory
        self.model = model
        self.states: dict[str, str] = {}

    async def agent(self, user: str, agent_id: str, session: str) -> Agent:
        if self.workspace is None:
            self.workspace = await local_workspace(Path(self._where))
        saved = self.states.get(session)
        state = AgentState.model_validate_json(saved) if saved else AgentState()
        state.session_id = session
        extra = await self.tools(user, agent_id, session) if self.tools is not None else []
        return Agent(
            name="worker",
            system_prompt="You work with tools.",
            model=self.model,
            toolkit=Toolkit(tools=[FunctionTool(big_output, permission=ALLOW), *extra]),
            middlewares=await self.factory(user, agent_id, session, self.workspace),
            react_config=ReActConfig(max_iters=20),
            state=state,
            offloader=self.workspace,
        )

    async def turn(self, user: str, agent_id: str, session: str, text: str) -> list:
        """One turn: the agent's reply to ``text``; every event it streamed."""
        agent = await self.agent(user, agent_id, session)
        events = [event async for event in agent.reply_stream(UserMsg("user", text))]
        self.states[session] = agent.state.model_dump_json()
        return events
