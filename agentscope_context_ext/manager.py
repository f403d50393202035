"""One call enables everything on an existing agent (SPEC 1, 9).

.. code-block:: python

    from agentscope_context_ext import enable_context_management

    manager = enable_context_management(agent, "configs/small-window.yaml")
    await agent(Msg("user", "Summarise the logs in ./logs", "user"))
    print(manager.stats.as_dict())

``enable_context_management`` swaps ``agent.memory`` for a :class:`ContextMemory` holding the
same messages, registers two instance hooks (``post_acting``: stage one; ``pre_reasoning`` or
``pre_reply``: the pipeline) and the tools ``read_file``, ``read_dialog`` and
``search_dialog``. Nothing is monkey-patched; :meth:`ContextManager.close` undoes the hooks and
tools.
"""

from __future__ import annotations

import copy
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentscope.agent import ReActAgent
from agentscope.formatter import FormatterBase
from agentscope.memory import InMemoryMemory
from agentscope.message import Msg
from agentscope.model import ChatModelBase

from .core.config import ContextConfig
from .core.errors import ContextExtError
from .core.events import ContextEvent, ContextStats, EventBus
from .longterm import ConsolidationResult, LongTermMemory, SummarizerService
from .longterm._service import LongTermMemoryService
from .memory import ContextMemory
from .pipeline import (
    Compactor,
    ContextChecker,
    ContextCount,
    ContextPipeline,
    PipelineParts,
    ToolResultTruncator,
)
from .core.tokens import get_token_counter, known_max_input_tokens
from .tools import make_dialog_tools, make_read_file_tool
from .usage import UsageTap
from .core.workspace import DialogStore, ToolResultStore, ensure_directory

logger = logging.getLogger("agentscope_context_ext")

HOOK_NAME = "agentscope_context_ext"
NOTICE_NAME = "context"


class ContextManager:
    """The extension attached to one agent. Built by :func:`enable_context_management`.

    Attributes:
        agent: The managed agent.
        config (`ContextConfig`): The configuration in force.
        memory (`ContextMemory`): The agent's memory (also ``agent.memory``).
        workspace (`Path`): The workspace folder.
        max_input_tokens (`int`): The window the pipeline manages.
    """

    def __init__(
        self,
        agent: ReActAgent,
        config: ContextConfig,
        compaction_model: ChatModelBase | None = None,
        compaction_formatter: FormatterBase | None = None,
    ) -> None:
        self.agent = agent
        self.config = config
        self.workspace = ensure_directory(Path(config.workspace))
        model_name = getattr(agent.model, "model_name", None)
        self.max_input_tokens = config.max_input_tokens or known_max_input_tokens(model_name)
        self.counter = get_token_counter(
            config.tokenizer, model_name=model_name, media_token_cost=config.media_token_cost
        )
        self.bus = EventBus()
        self.memory = _adopt_memory(agent)
        self.tool_result_store = ToolResultStore(
            self.workspace, ttl_days=config.truncation.ttl_days
        )
        self.dialog_store = DialogStore(self.workspace)
        share_tokens = int(config.truncation.max_window_share * self.max_input_tokens)
        self._tool_names: list[str] = []
        self._read_file_name = "read_file"
        if config.compaction.model == "extractive":
            compaction_model = None  # summaries by extraction only, no model call
        else:
            # Resolved before agent.model is wrapped by UsageTap below: summaries go to the real
            # model, so their usage is never mistaken for the agent's.
            compaction_model = compaction_model or _compaction_model(
                agent.model, config.compaction.model
            )
        compaction_formatter = compaction_formatter or agent.formatter
        parts = PipelineParts(
            config=config,
            memory=self.memory,
            counter=self.counter,
            checker=ContextChecker(self.counter, agent.formatter),
            truncator=ToolResultTruncator(
                config.truncation,
                self.tool_result_store,
                self.counter,
                max_result_tokens=share_tokens,
                read_file_name=self._read_file_name,
            ),
            compactor=Compactor(
                compaction_model,
                compaction_formatter,
                self.counter,
                max_input_tokens=known_max_input_tokens(
                    getattr(compaction_model, "model_name", None)
                )
                if compaction_model is not agent.model
                else self.max_input_tokens,
                budget_tokens=config.compaction.summary_tokens(self.max_input_tokens),
                language=config.compaction.summary_language,
            ),
            dialog_store=self.dialog_store,
            tool_result_store=self.tool_result_store,
            bus=self.bus,
            max_input_tokens=self.max_input_tokens,
        )
        self.pipeline = ContextPipeline(parts, notify=self._print_notice)
        self._original_model = agent.model
        agent.model = UsageTap(agent.model, self._record_usage)
        self._register_tools(share_tokens)
        self.long_term_service: LongTermMemoryService | None = None
        if config.long_term_memory.enabled:
            service = LongTermMemoryService(
                agent,
                config,
                self.workspace,
                _compaction_model(self._original_model, config.long_term_memory.model),
                self.counter.count_text,
                self.bus.emit,
            )
            self.long_term_service = service
            self._register(service.agent_tools())
            if service.summarizer is not None:
                self.pipeline.on_compacted = service.on_compacted
        self._register_hooks()
        self._closed = False

    # ---------------------------------------------------------------- public

    @property
    def stats(self) -> ContextStats:
        """Totals of everything the extension did (see :class:`ContextStats`)."""
        return self.bus.stats

    def subscribe(self, callback: Callable[[ContextEvent], Any]) -> Callable[[], None]:
        """Call ``callback(event)`` (sync or async) for every event; returns an unsubscriber."""
        return self.bus.subscribe(callback)

    async def compact_now(self, extra_instruction: str | None = None) -> ContextCount:
        """Compact right away (as far as a pair-safe cut allows), e.g. before a long task.

        Args:
            extra_instruction (`str | None`): Added to the compaction model's instruction, e.g.
                "keep every SQL query verbatim".

        Returns:
            `ContextCount`: The prompt's token count afterwards.
        """
        await self.pipeline.run_stage_one()
        return await self.pipeline.compact(
            self._sys_prompt(),
            self._tool_schemas(),
            extra_instruction=extra_instruction,
            force=True,
        )

    @property
    def long_term(self) -> LongTermMemory | None:
        """``Memory.md`` and the daily notes (``None`` when long-term memory is off)."""
        return self.long_term_service.memory if self.long_term_service else None

    @property
    def summarizer(self) -> SummarizerService | None:
        """The background Summarizer (``None`` when off)."""
        return self.long_term_service.summarizer if self.long_term_service else None

    async def drain(self) -> None:
        """Wait until every pending Summarizer job is done (or recorded as failed)."""
        if self.long_term_service is not None:
            await self.long_term_service.drain()

    async def consolidate_now(self) -> ConsolidationResult | None:
        """Merge the daily notes into ``Memory.md`` now (what the daily scheduler runs)."""
        if self.long_term_service is None:
            return None
        return await self.long_term_service.consolidate()

    async def count(self) -> ContextCount:
        """The token count of the prompt the agent would send now."""
        return await self.pipeline.count(self._sys_prompt(), self._tool_schemas())

    def close(self) -> None:
        """Remove the hooks and tools this manager added (the memory stays a ContextMemory)."""
        if self._closed:
            return
        self._closed = True
        for hook_type in ("post_acting", "pre_reasoning", "pre_reply"):
            hooks = getattr(self.agent, f"_instance_{hook_type}_hooks", {})
            hooks.pop(HOOK_NAME, None)
        for name in self._tool_names:
            if name in self.agent.toolkit.tools:
                self.agent.toolkit.remove_tool_function(name)
        if self.long_term_service is not None:
            self.long_term_service.close()
        if (
            isinstance(self.agent.model, UsageTap)
            and self.agent.model.inner is self._original_model
        ):
            self.agent.model = self._original_model
        if getattr(self.agent, "context_manager", None) is self:
            self.agent.context_manager = None

    # ----------------------------------------------------------------- hooks

    async def _post_acting(self, agent: Any, kwargs: dict[str, Any], output: Any) -> None:
        started = time.perf_counter()
        try:
            await self.pipeline.run_stage_one()
        except Exception as exc:  # noqa: BLE001 - the agent must keep running
            await self.bus.emit("warning", where="post_acting", error=repr(exc)[:300])
        finally:
            self.stats.hook_seconds += time.perf_counter() - started

    async def _pre_reasoning(self, agent: Any, kwargs: dict[str, Any]) -> None:
        started = time.perf_counter()
        try:
            if self.long_term_service is not None:
                self.long_term_service.start()
                self.long_term_service.refresh_prompt()
            await self.pipeline.before_reasoning(self._sys_prompt(), self._tool_schemas())
        except Exception as exc:
            logger.exception("context pipeline failed")
            await self.bus.emit("warning", where="pre_reasoning", error=repr(exc)[:300])
        finally:
            self.stats.hook_seconds += time.perf_counter() - started

    async def _pre_reply(self, agent: Any, kwargs: dict[str, Any]) -> None:
        # ReActAgent adds the incoming message to memory inside reply(); adding it here first
        # lets the check see it (the agent's own add is then a no-op: same id).
        incoming = kwargs.get("msg")
        if incoming is not None:
            await self.memory.add(incoming)
        await self._pre_reasoning(agent, kwargs)

    async def _record_usage(self, provider_input_tokens: int) -> None:
        # The prompt just sent was built from the memory as it is now: count it exactly.
        count = await self.pipeline.count(self._sys_prompt(), self._tool_schemas())
        self.pipeline.record_usage(provider_input_tokens, count.total - count.calibration)

    # --------------------------------------------------------------- helpers

    def _sys_prompt(self) -> str:
        try:
            return str(self.agent.sys_prompt or "")
        except Exception:  # noqa: BLE001 - a property that fails must not stop the check
            return ""

    def _tool_schemas(self) -> list[dict]:
        return self.agent.toolkit.get_json_schemas()

    async def _print_notice(self, text: str) -> None:
        # A status message for the console and AgentScope Studio; never stored in memory.
        await self.agent.print(Msg(NOTICE_NAME, text, "assistant"), True)

    def _register_hooks(self) -> None:
        self.agent.register_instance_hook("post_acting", HOOK_NAME, self._post_acting)
        if self.config.compaction.hook_point == "pre_reply":
            self.agent.register_instance_hook("pre_reply", HOOK_NAME, self._pre_reply)
        else:
            self.agent.register_instance_hook("pre_reasoning", HOOK_NAME, self._pre_reasoning)

    def _register_tools(self, share_tokens: int) -> None:
        tools: list[Callable] = []
        if self.config.tools.read_file:
            tools.append(
                make_read_file_tool(
                    self.workspace,
                    self.config.truncation,
                    self.config.tools.allowed_roots,
                    max_bytes_cap=max(share_tokens * 2, 1024),
                )
            )
        if self.config.tools.dialog:
            tools.extend(make_dialog_tools(self.dialog_store))
        self._register(tools)

    def _register(self, tools: Any) -> None:
        toolkit = self.agent.toolkit
        for tool in tools:
            name = tool.__name__
            if name in toolkit.tools:
                logger.warning(
                    "the agent already has a tool named %r; keeping it (truncation notices "
                    "expect this package's %s with start_line/start_byte)",
                    name,
                    name,
                )
                continue
            toolkit.register_tool_function(tool)
            self._tool_names.append(name)


def enable_context_management(
    agent: ReActAgent,
    config: ContextConfig | dict[str, Any] | str | Path | None = None,
    *,
    compaction_model: ChatModelBase | None = None,
    compaction_formatter: FormatterBase | None = None,
) -> ContextManager:
    """Turn on context management for a ``ReActAgent``.

    Args:
        agent (`ReActAgent`): The agent (any ``ReActAgentBase`` with memory, model, formatter
            and toolkit).
        config (`ContextConfig | dict | str | Path | None`): A config, a dict of keys, or a
            YAML/JSON file path; ``None`` uses the defaults.
        compaction_model (`ChatModelBase | None`): Model for summaries; default: the agent's
            own (or ``compaction.model`` by name).
        compaction_formatter (`FormatterBase | None`): Its formatter; default: the agent's.

    Returns:
        `ContextManager`: ``compact_now()``, ``stats``, ``subscribe()``, ``close()``.

    Raises:
        `ConfigError`: The configuration is invalid (the message names the key).
        `ContextExtError`: The agent lacks what is needed, or is already managed.
    """
    resolved = ContextConfig.load(config)
    for attribute in ("memory", "model", "formatter", "toolkit", "register_instance_hook"):
        if not hasattr(agent, attribute):
            raise ContextExtError(
                f"enable_context_management needs a ReActAgent-like agent with .{attribute}; "
                f"got {type(agent).__name__}"
            )
    existing = getattr(agent, "context_manager", None)
    if isinstance(existing, ContextManager):
        raise ContextExtError(
            "context management is already enabled on this agent; call close() first"
        )
    if getattr(agent, "compression_config", None) is not None and getattr(
        agent.compression_config, "enable", False
    ):
        logger.warning(
            "disabling the agent's own compression_config: agentscope-context-ext compacts the "
            "context itself, and two compactions would fight"
        )
        agent.compression_config = None
    manager = ContextManager(agent, resolved, compaction_model, compaction_formatter)
    agent.context_manager = manager
    return manager


def _adopt_memory(agent: Any) -> ContextMemory:
    """Replace ``agent.memory`` with a ContextMemory holding the same messages and marks."""
    old = agent.memory
    if isinstance(old, ContextMemory):
        return old
    memory = ContextMemory()
    if isinstance(old, InMemoryMemory):
        for msg, marks in old.content:
            memory._append(msg, list(marks))
        memory._compressed_summary = getattr(old, "_compressed_summary", "") or ""
    elif old is not None:
        state = old.state_dict() if hasattr(old, "state_dict") else {}
        if isinstance(state, dict) and "content" in state:
            memory.load_state_dict(state, strict=False)
        else:
            logger.warning(
                "agent memory of type %s cannot be read synchronously; starting the managed "
                "memory empty",
                type(old).__name__,
            )
    agent.memory = memory
    return memory


def _compaction_model(model: ChatModelBase, name: str | None) -> ChatModelBase:
    """The agent's model, or a copy of it pointed at another model name."""
    if not name or getattr(model, "model_name", None) == name:
        return model
    clone = copy.copy(model)
    clone.model_name = name
    return clone
