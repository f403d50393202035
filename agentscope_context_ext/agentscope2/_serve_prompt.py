"""What every prompt of a served agent holds before any message, measured before ``serve``
starts: its system prompt and its tool schemas, against its window.

A window they leave no room in used to be found at the first turn, whose reply was refused
before any model call; :func:`measure_served_prompt` builds the agent a session would get
(the agent file's model as the service makes it, the file's tools, the middlewares of the real
factory on a throw-away local workspace) and counts with the pipeline's own counter, so the
figures are those of a turn. :meth:`ServedPrompt.check` refuses, in one line, a system prompt
and schemas past the compaction point: compaction could never bring a prompt under it.
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from agentscope.agent import Agent
from agentscope.tool import TaskCreate, TaskGet, TaskList, TaskUpdate, Toolkit
from agentscope.workspace import LocalWorkspace

from ..core.agent_file import AgentFile
from ..core.errors import ConfigError
from ._middleware import ContextMiddleware
from ._refusal import RefusedTurn
from ._served import MiddlewareFactory
from ._served_model import served_model

__all__ = ["ServedPrompt", "measure_served_prompt"]

_SESSION_NOTICE = (
    "\n\n<system-notification>You're within a session (id=00000000000000000000000000000000)."
    "</system-notification>"
)
"""What the service adds to the agent's system prompt in each session (its shape)."""


@dataclass(frozen=True)
class ServedPrompt:
    """The parts of a served agent's prompt that no compaction can make smaller."""

    system: int
    """Tokens of the system prompt (with the service's session notice)."""
    tools: int
    """Tokens of the tool schemas a session's first call is shown, this package's included."""
    tools_most: int
    """Tokens of every schema the agent may be shown (ours appear when of use: the dialog
    tools once there is a dialog), what the check holds against the compaction point."""
    names: tuple[str, ...]
    """The tools, in the order the model sees them."""
    window: int
    """The window prompts are fitted in."""
    trigger: int
    """Compaction starts above this many tokens."""
    builtins: bool
    """AgentScope's built-ins are on (only those that can be made without the service are
    counted: the workspace's and the Task* tools)."""

    def line(self) -> str:
        """What ``serve`` prints about it."""
        counted = "at least " if self.builtins else ""
        return (
            f"tools: {', '.join(self.names) or 'none'} ({counted}{self.tools:,} tokens of "
            f"schemas); system prompt {self.system:,} tokens; window {self.window:,} tokens, "
            f"compaction above {self.trigger:,}"
        )

    def check(self, source: str) -> None:
        """Refuse a system prompt and schemas past the compaction point.

        Raises:
            `ConfigError`: In one line, with the figures and what to change.
        """
        fixed = self.system + self.tools_most
        if fixed <= self.trigger:
            return
        raise ConfigError(
            f"{source}: the system prompt ({self.system:,} tokens) and the tools' schemas "
            f"({self.tools_most:,} tokens) take {fixed:,} tokens, over "
            f"the compaction point ({self.trigger:,}) of the {self.window:,}-token window: "
            "no room is left for the conversation. Offer fewer tools (tools: in the agent "
            "file), shorten the system prompt, or use a larger window "
            "(context.max_input_tokens)"
        )


async def measure_served_prompt(
    spec: AgentFile,
    tools: Sequence[Any],
    factory: MiddlewareFactory,
    builtins: bool,
) -> ServedPrompt:
    """The system prompt and tool schemas a session of ``spec``'s served agent gets.

    Args:
        spec (`AgentFile`): The agent file.
        tools (`Sequence[ToolBase]`): The file's tools, as ``extra_agent_tools`` gives them.
        factory (`MiddlewareFactory`): The app's ``context_middleware_factory``.
        builtins (`bool`): AgentScope's built-ins are on.

    Raises:
        `ConfigError`: The model settings are wrong (an option the model does not have).
        `ContextExtError`: The middlewares cannot be made (the reason the turns would give).
    """
    model = served_model(spec.model)
    with tempfile.TemporaryDirectory(prefix="agentscope-context-serve-") as folder:
        workspace = LocalWorkspace(workdir=folder)
        await workspace.initialize()
        try:
            given = list(tools)
            if builtins:
                given = [*await workspace.list_tools(), *_task_tools(), *given]
            middlewares = await factory("serve-check", "serve-check", "serve-check", workspace)
            for middleware in middlewares:
                if isinstance(middleware, RefusedTurn):
                    raise middleware.error
            context = next(m for m in middlewares if isinstance(m, ContextMiddleware))
            agent = Agent(
                name=spec.name,
                system_prompt=spec.system_prompt + _SESSION_NOTICE,
                model=model,
                toolkit=Toolkit(tools=given),
                middlewares=middlewares,
                offloader=workspace,
            )
            manager = context.bind(agent)
            sys_prompt, schemas = await manager.prompt_parts()
            first = manager.offered_tools(schemas)  # what a session's first call is shown
            return ServedPrompt(
                system=await manager.port.count_system(sys_prompt),
                tools=manager.counter.count_tools(first),
                tools_most=manager.counter.count_tools(schemas),
                names=tuple(schema["function"]["name"] for schema in first),
                window=manager.max_input_tokens,
                trigger=manager.pipeline.trigger_tokens,
                builtins=builtins,
            )
        finally:
            await workspace.close()


def _task_tools() -> list[Any]:
    return [TaskCreate(), TaskList(), TaskGet(), TaskUpdate()]
