"""The instance hooks of a managed 1.x agent: thin calls into the core pipeline.

``post_acting`` runs stage one on the results that just arrived (the design's post-tool hook);
``pre_reasoning`` (or ``pre_reply``) shows the current ``Memory.md`` and runs the pipeline
before the model call. The usage tap's callback compares the provider's count with ours. A hook
never breaks the agent: a failure is a ``warning`` event. The exceptions are on purpose: when
the prompt would go over the window, ``pre_reasoning`` raises :class:`WorkspaceWriteError` (the
workspace refuses writes) or :class:`ContextOverflowError` (what cannot be offloaded does not
fit) to the caller instead of letting the agent send it.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from ..core.errors import ContextOverflowError, WorkspaceWriteError
from ..core.events import ContextStats
from ..core.pipeline import ContextPipeline
from ._longterm import LongTermMemoryService
from ._memory import ContextMemory

__all__ = ["PipelineHooks"]

logger = logging.getLogger("agentscope_context_ext")


class PipelineHooks:
    """The hooks of one managed agent.

    Args:
        agent: The agent (its system prompt and tools are read at each call).
        pipeline (`ContextPipeline`): The pipeline.
        stats (`ContextStats`): Where the time spent in the hooks is added up.
        memory (`ContextMemory`): The agent's memory.
        long_term (`LongTermMemoryService | None`): Long-term memory, if on.
    """

    def __init__(
        self,
        agent: Any,
        pipeline: ContextPipeline,
        stats: ContextStats,
        memory: ContextMemory,
        long_term: LongTermMemoryService | None,
    ) -> None:
        self.agent = agent
        self.pipeline = pipeline
        self.stats = stats
        self.memory = memory
        self.long_term = long_term
        self.bus = pipeline.bus

    async def post_acting(self, agent: Any, kwargs: dict[str, Any], output: Any) -> None:
        """Stage one for the results that just arrived."""
        started = time.perf_counter()
        try:
            await self.pipeline.run_stage_one()
        except Exception as exc:  # noqa: BLE001 - the agent must keep running
            await self.bus.emit("warning", where="post_acting", error=repr(exc)[:300])
        finally:
            self.stats.hook_seconds += time.perf_counter() - started

    async def pre_reasoning(self, agent: Any, kwargs: dict[str, Any]) -> None:
        """The pipeline, before a model call."""
        started = time.perf_counter()
        if self.long_term is not None:
            try:
                self.long_term.start()
                self.long_term.refresh()
            except Exception as exc:  # noqa: BLE001 - e.g. the workspace server is away
                await self.bus.emit("warning", where="long_term_memory", error=repr(exc)[:300])
        try:
            await self.pipeline.before_reasoning(self.sys_prompt(), self.tool_schemas())
        except (WorkspaceWriteError, ContextOverflowError):
            raise  # the prompt would exceed the window: the caller must know
        except Exception as exc:
            logger.exception("context pipeline failed")
            await self.bus.emit("warning", where="pre_reasoning", error=repr(exc)[:300])
        finally:
            self.stats.hook_seconds += time.perf_counter() - started

    async def pre_reply(self, agent: Any, kwargs: dict[str, Any]) -> None:
        """The pipeline, once per reply."""
        # ReActAgent adds the incoming message to memory inside reply(); adding it here first
        # lets the check see it (the agent's own add is then a no-op: same id).
        incoming = kwargs.get("msg")
        if incoming is not None:
            await self.memory.add(incoming)
        await self.pre_reasoning(agent, kwargs)

    def sys_prompt(self) -> str:
        """The agent's system prompt now."""
        try:
            return str(self.agent.sys_prompt or "")
        except Exception:  # noqa: BLE001 - a property that fails must not stop the check
            return ""

    def tool_schemas(self) -> list[dict]:
        """Every tool schema of the agent's toolkit (the pipeline counts those the model is
        shown)."""
        return self.agent.toolkit.get_json_schemas()
