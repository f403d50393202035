"""Stage one inside the tool call: the design's post-tool hook, run where AgentScope 1.x lets
a result be changed before anyone sees it.

``ReActAgent._acting`` prints each tool response (to the console and, through the class
``pre_print`` hook that ``agentscope.init(studio_url=...)`` installs, to AgentScope Studio)
before the ``post_acting`` hook runs. A ``post_acting`` cut therefore reached the model only:
the console and Studio showed the whole output. This toolkit middleware
(``Toolkit.register_middleware``, AgentScope's own onion around ``call_tool_function``) runs
stage one on every response of a call of the managed agent as it leaves the tool, so the
console, Studio and the model all get the same excerpt and notice, and the full text is on
disk first. The memory adopts the record when the message arrives; ``post_acting`` stays as the
fallback for results that did not pass through here (another toolkit, a tool added later).
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncGenerator, Callable
from typing import Any

from agentscope.tool import ToolResponse

from ..core.pipeline import ContextPipeline
from ..core.workspace import portal_stream
from ._context import MemoryPort
from ._memory import ContextMemory

__all__ = ["StageOneMiddleware"]


class StageOneMiddleware:
    """A ``Toolkit`` middleware that runs stage one on the managed agent's tool responses.

    Calls of other agents sharing the toolkit pass through untouched: a call is the managed
    agent's when its id is one of the tool calls in the agent's memory.

    Args:
        pipeline (`ContextPipeline`): The managed agent's pipeline.
        port (`MemoryPort`): Builds the result as the stages see it.
        memory (`ContextMemory`): The managed agent's memory.
    """

    def __init__(self, pipeline: ContextPipeline, port: MemoryPort, memory: ContextMemory) -> None:
        self.pipeline = pipeline
        self.port = port
        self.memory = memory
        self.active = True
        """Set to ``False`` on detach (the toolkit may still hold this middleware)."""

    @portal_stream
    async def __call__(
        self, kwargs: dict[str, Any], next_handler: Callable[..., Any]
    ) -> AsyncGenerator[ToolResponse, None]:
        call = kwargs.get("tool_call") or {}
        call_id = str(call.get("id"))
        mine = self.active and self.memory.knows_call(call_id)
        async for response in await next_handler(**kwargs):
            if mine and isinstance(response, ToolResponse):
                response = await self._cut(call, call_id, response)
            yield response

    async def _cut(self, call: dict, call_id: str, response: ToolResponse) -> ToolResponse:
        slot = self.port.output_slot(
            call_id, str(call.get("name")), response.content, call.get("input")
        )
        change = await self.pipeline.stage_one_now(slot)
        if change is None:
            return response
        # A copy: a streaming tool may keep accumulating into the object it yielded.
        return dataclasses.replace(
            response, content=self.port.changed_output(response.content, change)
        )
