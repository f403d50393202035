"""One call enables everything on an existing 1.x agent (design §1, 9).

.. code-block:: python

    from agentscope_context_ext import enable_context_management

    manager = enable_context_management(agent, "configs/small-window.yaml")
    await agent(Msg("user", "Summarise the logs in ./logs", "user"))
    print(manager.stats.as_dict())
    manager.detach()  # the agent as it was, holding what it knows now

Every change goes through the agent's public API and is recorded by an :class:`Attachment`:
``agent.memory`` becomes a :class:`ContextMemory` holding the same messages, two instance hooks
(``post_acting``: stage one; ``pre_reasoning`` or ``pre_reply``: the pipeline), the tools
``read_file``, ``read_dialog``, ``search_dialog`` (and the memory tools), a usage tap on the
model, and the agent's own ``compression_config`` off. :meth:`ContextManager.detach` undoes
them all. Nothing is monkey-patched.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

from agentscope.formatter import FormatterBase
from agentscope.message import Msg
from agentscope.model import ChatModelBase

from ..core.config import ContextConfig
from ..core.errors import ConfigError, ContextExtError
from ..core.events import EventBus
from ..core.longterm import (
    NOTES_DIRNAME,
)
from ..core.manager import ManagerBase
from ..core.pipeline import build_pipeline
from ..core.provider_errors import LengthRejection
from ..core.tokens import known_max_input_tokens
from ..core.workspace import ToolResultStore, open_workspace
from ._attachment import Attachment, adopt_memory
from ._context import MemoryPort
from ._convert import DialogStore
from ._hooks import PipelineHooks
from ._longterm import LongTermMemoryService
from ._model import model_call, named_model
from ._tokens import get_token_counter
from ._tool_middleware import StageOneMiddleware
from ._tools import make_dialog_tools, make_read_file_tool
from ._usage import UsageTap

__all__ = ["HOOK_NAME", "ContextManager", "enable_context_management"]

logger = logging.getLogger("agentscope_context_ext")

HOOK_NAME = "agentscope_context_ext"
NOTICE_NAME = "context"


class ContextManager(ManagerBase):
    """The extension attached to one agent. Built by :func:`enable_context_management`.

    Attributes:
        agent: The managed agent.
        config (`ContextConfig`): The configuration in force.
        memory (`ContextMemory`): The agent's memory (also ``agent.memory``).
        workspace (`Path | str`): The workspace folder (or the Redis URL, password hidden).
        storage (`Storage`): Where the workspace's data lives.
        max_input_tokens (`int`): The window the pipeline manages.
        attachment (`Attachment`): Every change made to the agent (``detach()`` undoes them).
    """

    def __init__(
        self,
        agent: Any,
        config: ContextConfig,
        compaction_model: ChatModelBase | None = None,
        compaction_formatter: FormatterBase | None = None,
    ) -> None:
        self.agent = agent
        self.config = config
        model_name = getattr(agent.model, "model_name", None)
        self.max_input_tokens = config.max_input_tokens or known_max_input_tokens(model_name)
        budget_error = config.compaction.summary_budget_error(self.max_input_tokens)
        if budget_error:  # the window came from the model's name
            raise ConfigError(f"{budget_error} (the window of {model_name or 'the model'})")
        extra = (NOTES_DIRNAME,) if config.long_term_memory.enabled else ()
        self.workspace, self.storage = open_workspace(config.workspace, extra)
        self.counter = get_token_counter(
            config.tokenizer, model_name=model_name, media_token_cost=config.media_token_cost
        )
        self.bus = EventBus()
        self.attachment = Attachment(agent)
        self.memory = adopt_memory(agent.memory)
        self.tool_result_store = ToolResultStore(self.storage, ttl_days=config.truncation.ttl_days)
        self.dialog_store = DialogStore(self.storage)
        # Resolved before the model is wrapped: summaries go to the real model, so their usage
        # is never mistaken for the agent's.
        summary_model = (
            None
            if config.compaction.model == "extractive"
            else compaction_model or named_model(agent.model, config.compaction.model)
        )
        self.port = MemoryPort(self.memory, agent.formatter, self.counter)
        self.pipeline = build_pipeline(
            config,
            self.port,
            self.counter,
            dialog_store=self.dialog_store,
            tool_result_store=self.tool_result_store,
            bus=self.bus,
            max_input_tokens=self.max_input_tokens,
            call_model=(
                model_call(summary_model, compaction_formatter or agent.formatter)
                if summary_model is not None
                else None
            ),
            compaction_window=(
                self.max_input_tokens
                if summary_model is None or summary_model is agent.model
                else known_max_input_tokens(getattr(summary_model, "model_name", None))
            ),
            notify=self._print_notice,
        )
        self.long_term_service: LongTermMemoryService | None = None
        if config.long_term_memory.enabled:
            self.long_term_service = LongTermMemoryService(
                config,
                self.storage,
                self.memory,
                named_model(agent.model, config.long_term_memory.model),
                agent.formatter,
                self.counter.count_text,
                self.bus.emit,
            )
            if self.long_term_service.summarizer is not None:
                self.pipeline.parts.compaction.on_compacted = self.long_term_service.on_compacted
        self.hooks = PipelineHooks(
            agent,
            self.pipeline,
            self.bus.stats,
            self.memory,
            self.long_term_service,
        )
        self._attach()

    def _attach(self) -> None:
        """Make the changes, each recorded so that :meth:`detach` can undo it."""
        attachment, agent, config = self.attachment, self.agent, self.config
        attachment.set_attribute("context_manager", self)
        attachment.replace_memory(self.memory)
        compression = getattr(agent, "compression_config", None)
        if compression is not None and getattr(compression, "enable", False):
            logger.warning(
                "turning off the agent's own compression_config while context management is on: "
                "two compactions would fight over the same messages"
            )
            attachment.set_attribute("compression_config", None)
        attachment.set_attribute(
            "model",
            UsageTap(
                agent.model, self._usage_seen, self.offered_tools, self._prompt_after_rejection
            ),
        )
        if config.tools.read_file:
            attachment.register_tool(
                make_read_file_tool(
                    self.workspace if isinstance(self.workspace, Path) else self.storage,
                    config.truncation,
                    config.tools.allowed_roots,
                    max_bytes_cap=config.truncation.read_file_max_bytes(self.max_input_tokens),
                )
            )
        if config.tools.dialog:
            for tool in make_dialog_tools(self.dialog_store):
                attachment.register_tool(tool)
        if self.long_term_service is not None:
            for tool in self.long_term_service.agent_tools():
                attachment.register_tool(tool)
        # The post-tool hook: inside the tool call, so the console and Studio see the cut too;
        # post_acting catches what did not pass through the toolkit's middleware.
        attachment.register_toolkit_middleware(
            StageOneMiddleware(self.pipeline, self.port, self.memory)
        )
        attachment.register_hook("post_acting", HOOK_NAME, self.hooks.post_acting)
        if config.compaction.hook_point == "pre_reply":
            attachment.register_hook("pre_reply", HOOK_NAME, self.hooks.pre_reply)
        else:
            attachment.register_hook("pre_reasoning", HOOK_NAME, self.hooks.pre_reasoning)

    # ---------------------------------------------------------------- public

    async def prompt_parts(self) -> tuple[str, list[dict]]:
        """The agent's system prompt and tool schemas now."""
        return self.hooks.sys_prompt(), self.hooks.tool_schemas()

    def detach(self) -> None:
        """Undo every change this manager made to the agent: the original memory object comes
        back holding the current messages (the summary first), the hooks and tools are removed,
        the model and ``compression_config`` are the agent's own again."""
        if self.attachment.detached:
            return
        if self.long_term_service is not None:
            self.long_term_service.close()
        self.attachment.detach()

    close = detach
    """Same as :meth:`detach`."""

    # --------------------------------------------------------------- helpers

    async def _usage_seen(self, tokens: int, tools: list[dict] | None, tool_choice: Any) -> None:
        await self.record_usage(tokens, (self.hooks.sys_prompt(), tools or []), tool_choice)

    async def _prompt_after_rejection(self, rejection: LengthRejection) -> list[dict]:
        """The provider rejected a reasoning call for its length: compact, and the prompt
        formatted again as ``ReActAgent._reasoning`` formats it, for one retry."""
        started = time.perf_counter()
        try:
            await self.recover_overflow(rejection)
        finally:
            self.stats.hook_seconds += time.perf_counter() - started
        msgs = [Msg("system", self.hooks.sys_prompt(), "system"), *await self.memory.get_memory()]
        return await self.agent.formatter.format(msgs)

    async def _print_notice(self, text: str) -> None:
        # A status message for the console and AgentScope Studio; never stored in memory.
        await self.agent.print(Msg(NOTICE_NAME, text, "assistant"), True)


def enable_context_management(
    agent: Any,
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
        `ContextManager`: ``compact_now()``, ``stats``, ``subscribe()``, ``detach()``.

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
    if isinstance(getattr(agent, "context_manager", None), ContextManager):
        raise ContextExtError(
            "context management is already enabled on this agent; call detach() first"
        )
    return ContextManager(agent, resolved, compaction_model, compaction_formatter)
