"""One call enables everything on an existing 1.x agent (design §1, §9).

.. code-block:: python

    from agentscope_context_ext import enable_context_management

    manager = enable_context_management(agent, "configs/small-window.yaml")
    await agent(Msg("user", "Summarise the logs in ./logs", "user"))
    print(manager.stats.as_dict())
    manager.detach()  # the agent as it was, holding what it knows now

The core's :class:`~agentscope_context_ext.core.manager.ContextManager` does the work; this
adapter adds what 1.x needs, each change made through the agent's public API and recorded by an
:class:`Attachment`: ``agent.memory`` becomes a :class:`ContextMemory` holding the same
messages, two instance hooks (``post_acting``: stage one; ``pre_reasoning`` or ``pre_reply``:
what runs before a model call), the tools, a usage tap on the model, and the agent's own
``compression_config`` off. :meth:`ReActAgentManager.detach` undoes them all. Nothing is
monkey-patched.
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any

from agentscope.formatter import FormatterBase
from agentscope.message import Msg
from agentscope.model import ChatModelBase

from ..core.config import ContextConfig
from ..core.errors import ContextExtError
from ..core.events import EventBus
from ..core.longterm import NOTES_DIRNAME
from ..core.manager import ContextManager, LongTermHooks, resolve_window
from ..core.provider_errors import LengthRejection
from ..core.tokens import known_max_input_tokens
from ..core.workspace import open_workspace
from ._attachment import Attachment, adopt_memory
from ._context import MemoryPort
from ._convert import as_tool, open_dialog
from ._hooks import PipelineHooks
from ._longterm import agent_runner
from ._model import model_call, named_model
from ._tokens import get_token_counter
from ._tool_middleware import StageOneMiddleware
from ._usage import UsageTap

__all__ = ["HOOK_NAME", "ReActAgentManager", "enable_context_management"]

logger = logging.getLogger("agentscope_context_ext")

HOOK_NAME = "agentscope_context_ext"
NOTICE_NAME = "context"


class ReActAgentManager(ContextManager):
    """The extension attached to one 1.x agent. Built by :func:`enable_context_management`.

    Attributes:
        agent: The managed agent.
        memory (`ContextMemory`): The agent's memory (also ``agent.memory``).
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
        name = getattr(agent.model, "model_name", None)
        window = resolve_window(config, None, name)
        extra = (NOTES_DIRNAME,) if config.long_term_memory.enabled else ()
        workspace, storage = open_workspace(config.workspace, extra, config.workspace_timeout)
        counter = get_token_counter(
            config.tokenizer, model_name=name, media_token_cost=config.media_token_cost
        )
        self.attachment = Attachment(agent)
        self.memory = adopt_memory(agent.memory)
        # Resolved before the model is wrapped: summaries go to the real model, so their usage
        # is never mistaken for the agent's.
        summary_model = (
            None
            if config.compaction.model == "extractive"
            else compaction_model or named_model(agent.model, config.compaction.model)
        )
        long_term_model = named_model(agent.model, config.long_term_memory.model)
        super().__init__(
            config,
            port=MemoryPort(self.memory, agent.formatter, counter),
            counter=counter,
            max_input_tokens=window,
            workspace=workspace,
            storage=storage,
            dialog_store=open_dialog(storage),
            bus=EventBus(),
            summary_call=(
                model_call(
                    summary_model,
                    compaction_formatter or agent.formatter,
                    max_tokens=config.compaction.summary_output_cap(window),
                )
                if summary_model is not None
                else None
            ),
            summary_window=(
                None
                if summary_model is None or summary_model is agent.model
                else known_max_input_tokens(getattr(summary_model, "model_name", None))
            ),
            notify=self._print_notice,
            long_term=LongTermHooks(
                runner=lambda role, max_iters: agent_runner(
                    long_term_model, agent.formatter, role, max_iters
                ),
                show=self.memory.set_long_term,
            ),
        )
        self.hooks = PipelineHooks(self, self.memory)
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
                agent.model,
                self._usage_seen,
                self.offered_tools,
                self._prompt_after_rejection,
                self.learn_rejection,
            ),
        )
        for _, tool in self.tools():
            attachment.register_tool(as_tool(tool))
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

    def conversation_id(self) -> str | None:
        """AgentScope 1.x's run id, as its traces write it (JSON-encoded, quotes included)."""
        from agentscope import _config as run_config

        run_id = getattr(run_config, "run_id", None)
        return json.dumps(run_id, ensure_ascii=False) if run_id else None

    async def prompt_parts(self) -> tuple[str, list[dict]]:
        """The agent's system prompt and every tool schema of its toolkit now."""
        return self.sys_prompt(), self.agent.toolkit.get_json_schemas()

    def sys_prompt(self) -> str:
        """The agent's system prompt now."""
        try:
            return str(self.agent.sys_prompt or "")
        except Exception:  # noqa: BLE001 - a property that fails must not stop the check
            return ""

    def detach(self) -> None:
        """Undo every change this manager made to the agent: the original memory object comes
        back holding the current messages (the summary first), the hooks and tools are removed,
        the model and ``compression_config`` are the agent's own again."""
        if self.attachment.detached:
            return
        self.close_long_term()
        self.attachment.detach()

    close = detach
    """Same as :meth:`detach`."""

    # --------------------------------------------------------------- helpers

    async def _usage_seen(self, tokens: int, tools: list[dict] | None, tool_choice: Any) -> None:
        await self.record_usage(tokens, (self.sys_prompt(), tools or []), tool_choice)

    async def _prompt_after_rejection(self, rejection: LengthRejection) -> list[dict] | None:
        """The provider rejected a reasoning call for its length: compact, and the prompt
        formatted again as ``ReActAgent._reasoning`` formats it, for one retry (``None``:
        nothing about the prompt can help)."""
        if await self.recover_overflow(rejection) is None:
            return None
        started = time.perf_counter()
        try:
            msgs = [Msg("system", self.sys_prompt(), "system"), *await self.memory.get_memory()]
            return await self.agent.formatter.format(msgs)
        finally:
            self.stats.hook_seconds += time.perf_counter() - started

    async def _print_notice(self, text: str) -> None:
        # A status message for the console and AgentScope Studio; never stored in memory.
        await self.agent.print(Msg(NOTICE_NAME, text, "assistant"), True)


def enable_context_management(
    agent: Any,
    config: ContextConfig | dict[str, Any] | str | Path | None = None,
    *,
    compaction_model: ChatModelBase | None = None,
    compaction_formatter: FormatterBase | None = None,
) -> ReActAgentManager:
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
        `ReActAgentManager`: a ``ContextManager`` with ``compact_now()``, ``stats``,
        ``subscribe()``, ``detach()``.

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
    return ReActAgentManager(agent, resolved, compaction_model, compaction_formatter)
