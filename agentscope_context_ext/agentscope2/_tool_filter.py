"""A served agent with exactly its own tools: :class:`ToolFilter` (design §11.3).

``create_app`` gives every agent it runs AgentScope's built-ins: its workspace's Bash, Edit,
Glob, Grep, Read and Write, the Task* tools, ToolStop, the Team* tools, a group of Schedule*
tools, the workspace's skills and MCPs, and the workspace's instructions in the system prompt
(19 tools and about 7,700 tokens of schemas for an agent that asked for two; with a
``LocalWorkspaceManager``, Bash runs on the serving host). ``ToolFilter(keep)`` takes them
away as each reply starts: the toolkit keeps the tools named in ``keep`` (the caller's own,
``create_app``'s ``extra_agent_tools``), context management adds its own after, and the
workspace's instructions leave the system prompt (they describe tools the agent no longer
has). It keeps no state: one instance can serve every agent.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable, Collection
from typing import Any

from agentscope.middleware import MiddlewareBase
from agentscope.tool import Toolkit
from agentscope.workspace import WorkspaceBase

__all__ = ["ToolFilter"]


class ToolFilter(MiddlewareBase):
    """Keep only the tools named in ``keep`` (and the workspace's instructions out of the
    system prompt); put it in front of :class:`ContextMiddleware`.

    Args:
        keep (`Collection[str]`): The names of the tools the agent keeps.
    """

    def __init__(self, keep: Collection[str]) -> None:
        self.keep = frozenset(keep)

    async def on_reply(
        self, agent: Any, input_kwargs: dict, next_handler: Callable[..., AsyncGenerator]
    ) -> AsyncGenerator:
        # A new toolkit of the kept tools: no tool group is left, so neither is 2.x's
        # reset_tools meta tool, nor the skill viewer, nor an MCP server's tools.
        kept = [
            tool
            for group in agent.toolkit.tool_groups
            for tool in group.tools
            if tool.name in self.keep
        ]
        agent.toolkit = Toolkit(tools=kept)
        async for item in next_handler(**input_kwargs):
            yield item

    async def on_system_prompt(self, agent: Any, current_prompt: str) -> str:
        workspace = getattr(agent, "offloader", None)
        if not isinstance(workspace, WorkspaceBase):
            return current_prompt
        instructions = await workspace.get_instructions()
        if not instructions:
            return current_prompt
        # 2.x joins the system prompt, the skills' and the workspace's instructions with "\n"
        return current_prompt.replace(f"\n{instructions}", "", 1)
