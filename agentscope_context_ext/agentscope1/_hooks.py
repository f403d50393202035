"""The instance hooks of a managed 1.x agent: thin calls into the manager.

``post_acting`` runs stage one on the results that just arrived (the design's post-tool hook);
``pre_reasoning`` (or ``pre_reply``) runs what the manager runs before every model call. A hook
never breaks the agent, except on purpose: a prompt that would go over the window is refused to
the caller of ``agent(...)`` (``WorkspaceWriteError``, ``ContextOverflowError``).
"""

from __future__ import annotations

import time
from typing import Any

from ..core.events import ContextWarning
from ..core.manager import ContextManager
from ..core.workspace import portal
from ._memory import ContextMemory

__all__ = ["PipelineHooks"]


class PipelineHooks:
    """The hooks of one managed agent.

    Args:
        manager (`ContextManager`): The agent's manager.
        memory (`ContextMemory`): The agent's memory.
    """

    def __init__(self, manager: ContextManager, memory: ContextMemory) -> None:
        self.manager = manager
        self.memory = memory

    @portal
    async def post_acting(self, agent: Any, kwargs: dict[str, Any], output: Any) -> None:
        """Stage one for the results that just arrived."""
        started = time.perf_counter()
        try:
            await self.manager.pipeline.run_stage_one()
        except Exception as exc:  # noqa: BLE001 - the agent must keep running
            await self.manager.bus.emit(ContextWarning(where="post_acting", error=repr(exc)[:300]))
        finally:
            self.manager.stats.hook_seconds += time.perf_counter() - started

    @portal
    async def pre_reasoning(self, agent: Any, kwargs: dict[str, Any]) -> None:
        """What runs before a model call."""
        await self.manager.before_model_call()

    @portal
    async def pre_reply(self, agent: Any, kwargs: dict[str, Any]) -> None:
        """What runs before a model call, once per reply."""
        # ReActAgent adds the incoming message to memory inside reply(); adding it here first
        # lets the check see it (the agent's own add is then a no-op: same id).
        incoming = kwargs.get("msg")
        if incoming is not None:
            await self.memory.add(incoming)
        await self.manager.before_model_call()
