"""The manager of one 2.x ``Agent`` (``middleware.manager``): the core's
:class:`~agentscope_context_ext.core.manager.ContextManager` with what 2.x needs.

What 2.x needs: the agent's ``state`` as the port (:class:`StatePort`), the tools added to its
toolkit as ``FunctionTool``\\ s (and taken away again by :meth:`AgentManager.detach`), stage one
on a tool's response in the tool call (:meth:`AgentManager.acting`), 2.x's own image limit
before each step, the system prompt and tool schemas 2.x builds, ``Memory.md`` after the system
prompt, a retried model call's input after a compaction, and the provider's reported usage.

One module on purpose: it is the list above, each item a short method over 2.x's API; the
middleware only dispatches to it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncGenerator, Awaitable, Callable
from pathlib import Path
from typing import Any

from agentscope.message import AssistantMsg, UserMsg
from agentscope.model import ChatModelBase
from agentscope.tool import ToolResponse

from ..core.config import ContextConfig
from ..core.errors import ContextExtError
from ..core.events import ContextWarning, EventBus
from ..core.manager import ContextManager, LongTermHooks, resolve_window
from ..core.pipeline import ResultChange, ResultSlot
from ..core.provider_errors import relay_stream
from ..core.search import HistoryScope
from ..core.tokens import get_token_counter
from ..core.workspace import DialogStore, ReadBoundary, Storage, ToolResultStore
from ._context import StatePort, changed_output
from ._convert import has_text, media_of, output_text, tool_arguments
from ._images import ImageLimit
from ._longterm import agent_runner
from ._model import model_call, model_name, named_model
from ._offloader import ContextOffloader
from ._schemas import ToolSchemas
from ._stream import shown_as_cut
from ._tools import as_tool

__all__ = ["AgentManager"]

logger = logging.getLogger("agentscope_context_ext")


class AgentManager(ContextManager):
    """The extension attached to one 2.x agent.

    Args:
        agent: The 2.x ``Agent``.
        config (`ContextConfig`): The configuration in force.
        workspace (`Path | str`): The workspace folder (or the Redis URL, password hidden).
        storage (`Storage`): Where the workspace's data lives.
        dialog_store (`DialogStore`): ``dialog/`` with the 2.x codec.
        tool_result_store (`ToolResultStore`): ``tool_result/`` (the offloader's too).
        bus (`EventBus`): Where events go (the middleware's, there before the agent runs).
        offloader (`ContextOffloader`): Set as the agent's when it has none.
        compaction_model (`ChatModelBase | None`): Model for summaries; default: the agent's.
        notify (`Callable[[str], Awaitable] | None`): Where notices go (default: printed).
        history (`HistoryScope | None`): A served session's siblings, for ``search_dialog``'s
            scopes (design §6.2).
        boundary (`ReadBoundary | None`): What a served session's ``read_file`` may not read.
        long_term_at (`Path | Storage | None`): Where ``Memory.md`` is (default: the
            workspace).

    Attributes:
        agent: The managed agent.
        port (`StatePort`): The agent's state as the pipeline sees it.
        middleware (`ContextMiddleware`): The middleware that drives it (set when it binds).
    """

    middleware: Any = None
    recovered_step: tuple | None = None
    """The reasoning step whose call was last recovered from a length rejection (2.x retries
    a failed call: a step recovers once)."""
    turn_ended: bool = False
    """A per-turn middleware's reply is over (its long-term memory stopped)."""

    def __init__(
        self,
        agent: Any,
        config: ContextConfig,
        *,
        workspace: Path | str,
        storage: Storage,
        dialog_store: DialogStore,
        tool_result_store: ToolResultStore,
        bus: EventBus,
        offloader: ContextOffloader,
        compaction_model: ChatModelBase | None = None,
        notify: Callable[[str], Awaitable[Any]] | None = None,
        long_term_at: Path | Storage | None = None,
        history: HistoryScope | None = None,
        boundary: ReadBoundary | None = None,
    ) -> None:
        for attribute in ("state", "model", "toolkit"):
            if getattr(agent, attribute, None) is None:
                raise ContextExtError(
                    f"context management needs an AgentScope 2.x Agent with .{attribute}; "
                    f"got {type(agent).__name__}"
                )
        self.agent = agent
        name = model_name(agent.model)
        window = resolve_window(config, getattr(agent.model, "context_size", None), name)
        counter = get_token_counter(
            config.tokenizer, model_name=name, media_token_cost=config.media_token_cost
        )
        summary_model = (
            None
            if config.compaction.model == "extractive"
            else compaction_model or named_model(agent.model, config.compaction.model)
        )
        long_term_model = named_model(agent.model, config.long_term_memory.model)
        self._memory_block: str | None = None
        super().__init__(
            config,
            port=StatePort(agent, counter),
            counter=counter,
            max_input_tokens=window,
            workspace=workspace,
            storage=storage,
            dialog_store=dialog_store,
            tool_result_store=tool_result_store,
            bus=bus,
            summary_call=(
                model_call(summary_model, max_tokens=config.compaction.summary_output_cap(window))
                if summary_model is not None
                else None
            ),
            summary_window=(
                None
                if summary_model is None or summary_model is agent.model
                else getattr(summary_model, "context_size", None)
            ),
            notify=notify or _print_notice,
            long_term=LongTermHooks(
                runner=lambda role, max_iters: agent_runner(long_term_model, role, max_iters),
                show=self._show_memory,
            ),
            long_term_at=long_term_at,
            history=history,
            boundary=boundary,
        )
        self.detached = False
        self._tools: list[Any] = []
        self._undo: list[Callable[[], None]] = []
        self._schemas = ToolSchemas()
        self._images = ImageLimit(agent, bus, self.port.touch_messages)
        agent.context_manager = self
        self._undo.append(lambda: _delete(agent, "context_manager"))
        if getattr(agent, "offloader", None) is None:
            # 2.x drops what it takes out by itself (an input file the model cannot take, an
            # image over max_image_num) unless an offloader saves it first.
            agent.offloader = offloader
            self._undo.append(lambda: setattr(agent, "offloader", None))

    # ------------------------------------------------------------ the hooks' work

    async def attach_tools(self) -> None:
        """Add this package's tools to the agent's toolkit (once; a tool of the same name that
        is not ours is an error: 2.x would silently replace it)."""
        if self._tools or self.detached:
            return
        toolkit = self.agent.toolkit
        wrapped = []
        for key, function in self.tools():
            # memory_read reads; the other memory tools write Memory.md
            writes = key == "memory" and function.__name__ != "memory_read"
            tool = as_tool(function, read_only=not writes)
            if await toolkit.get_tool(tool.name) is not None:
                raise ContextExtError(
                    f"the agent's toolkit already has a tool named {tool.name!r}; rename it or "
                    f"turn ours off (tools.{key}: false)"
                )
            wrapped.append(tool)
        await toolkit.add_tool(wrapped)
        self._tools = wrapped

    def acting(self, tool_call: Any, items: AsyncGenerator) -> AsyncGenerator:
        """A tool's chunks and final response as the agent's events and context get them:
        stage one on the response, and chunks held past the stream allowance so that the
        events add up to what the model gets (see ``_stream.shown_as_cut``)."""
        allowance = self.pipeline.stream_allowance(str(tool_call.name), tool_arguments(tool_call))
        return shown_as_cut(items, allowance, lambda response: self.cut(tool_call, response))

    async def cut(self, tool_call: Any, response: ToolResponse) -> ToolResponse:
        """Stage one on a tool's final response, before 2.x writes it into the context. When
        2.x's own ``tool_result_limit`` would cut even our excerpt, the response is left to
        2.x: its split, its reminder and its offloader (the user's workspace, or ours) do what
        they do without us, and our stage one finds the rest within its limits."""
        slot = ResultSlot(
            call_id=str(tool_call.id),
            tool=str(tool_call.name),
            text=output_text(response.content) if has_text(response.content) else None,
            media=media_of(response.content),
            tool_input=tool_arguments(tool_call),
        )
        started = time.perf_counter()
        try:
            if await self._split_by_agentscope(slot, response):
                return response
            change = await self.pipeline.stage_one_now(slot)
        finally:
            self.stats.hook_seconds += time.perf_counter() - started
        if change is None:
            return response
        return response.model_copy(update={"content": changed_output(response.content, change)})

    async def _split_by_agentscope(self, slot: ResultSlot, response: ToolResponse) -> bool:
        """Whether 2.x's ``tool_result_limit`` is the stricter for this response: it would
        split the response and still split what our stage one leaves of it (counted as 2.x
        counts, with the model's ``count_tokens``)."""
        limit = getattr(getattr(self.agent, "context_config", None), "tool_result_limit", None)
        if not isinstance(limit, int) or slot.text is None:
            return False
        excerpt = self.pipeline.stage_one_excerpt(slot)
        if excerpt is None:
            return False  # ours leaves it whole: 2.x splits it or not, as without us
        count = self.agent.model.count_tokens
        try:
            if (
                await count([AssistantMsg(self.agent.name, content=response.content)], None)
                <= limit
            ):
                return False
            excerpt_content = changed_output(response.content, ResultChange(excerpt, slot.media))
            return (
                await count([AssistantMsg(self.agent.name, content=excerpt_content)], None) > limit
            )
        except Exception:  # noqa: BLE001 - a model that cannot count: our stage one cuts
            return False

    async def prepare_step(self) -> None:
        """2.x's own image limit (its compression, which ours replaces, runs it first)."""
        await self._images.apply()

    def system_prompt(self, prompt: str) -> str:
        """``prompt`` with the ``Memory.md`` block after it (once), when long-term memory is
        on (the middleware's ``on_system_prompt``)."""
        block = self._memory_block
        if not block or block in prompt:
            return prompt
        return f"{prompt}\n\n{block}"

    def conversation_id(self) -> str | None:
        """The agent's session id: what 2.x's ``TracingMiddleware`` names its conversation."""
        return getattr(getattr(self.agent, "state", None), "session_id", None) or None

    async def prompt_parts(self) -> tuple[str, list[dict]]:
        """The system prompt and every tool schema the agent has now (2.x builds the system
        prompt from its own text, skills, workspace instructions and the middlewares'
        transformers), this package's tools included; the pipeline counts those the model is
        shown."""
        await self.attach_tools()
        agent = self.agent
        build = getattr(agent, "_get_system_prompt", None)
        if build is not None:
            sys_prompt = await build()
        else:
            sys_prompt = self.system_prompt(str(getattr(agent, "_system_prompt", "") or ""))
        tools = await self._schemas(agent.toolkit, agent.state.tool_context.activated_groups)
        return sys_prompt, tools

    def retry_input(self, model_kwargs: dict) -> dict:
        """A model call's arguments again after a compaction: its system prompt, then the
        context as 2.x builds it (the summary, then the messages), and the tools the model is
        shown now."""
        messages = list(model_kwargs.get("messages") or [])
        state = self.agent.state
        rebuilt = (
            messages[:1] if messages and getattr(messages[0], "role", None) == "system" else []
        )
        if state.summary:
            rebuilt.append(UserMsg(name="user", content=state.summary))
        rebuilt.extend(state.context)
        tools = model_kwargs.get("tools")
        return {
            **model_kwargs,
            "messages": rebuilt,
            "tools": self.offered_tools(tools) if tools else tools,
        }

    async def usage_seen(
        self, response: Any, sent: tuple[str, list[dict]] | None = None, tool_choice: Any = None
    ) -> None:
        """Record the provider's input tokens of one (final) model response, if it has them
        (``sent``: the call's system prompt and tools, as 2.x passed them)."""
        usage = getattr(response, "usage", None)
        tokens = getattr(usage, "input_tokens", None)
        if isinstance(tokens, int) and tokens > 0:
            if type(self.agent.model).__name__.startswith("Anthropic"):
                # Anthropic's input_tokens leave out the prompt cache's reads and writes
                # (OpenAI's and the others' include them).
                tokens += (getattr(usage, "cache_input_tokens", 0) or 0) + (
                    getattr(usage, "cache_creation_input_tokens", 0) or 0
                )
            try:
                await self.record_usage(tokens, sent, tool_choice)
            except Exception as exc:  # noqa: BLE001 - a count that fails must not fail the call
                await self.bus.emit(ContextWarning(where="usage", error=repr(exc)[:300]))

    def relay_usage(
        self,
        chunks: AsyncGenerator,
        sent: tuple[str, list[dict]] | None = None,
        tool_choice: Any = None,
    ) -> AsyncGenerator:
        """Pass a streamed response through; the last chunk's usage is recorded. A length
        rejection that comes after the answer began cannot be retried: it is learned from and
        raised."""
        return relay_stream(
            chunks, lambda last: self.usage_seen(last, sent, tool_choice), self.learn_rejection
        )

    # ---------------------------------------------------------------- public

    def detach(self) -> None:
        """Undo what context management changed: its tools leave the toolkit, the middleware
        stops acting (and leaves the agent's hook lists when ``enable_context_management`` put
        it there), the offloader it set is taken back. The context keeps what it holds now (the
        summary stays ``state.summary``)."""
        if self.detached:
            return
        self.detached = True
        self.close_long_term()
        if self._tools:
            ours = {id(tool) for tool in self._tools}
            for group in self.agent.toolkit.tool_groups:
                group.tools = [tool for tool in group.tools if id(tool) not in ours]
            self._tools = []
        for undo in reversed(self._undo):
            undo()
        self._undo.clear()

    close = detach
    """Same as :meth:`detach`."""

    def record_undo(self, undo: Callable[[], None]) -> None:
        """Run ``undo`` on :meth:`detach` (after the later changes are undone)."""
        self._undo.append(undo)

    # --------------------------------------------------------------- helpers

    def _show_memory(self, block: str | None) -> None:
        self._memory_block = block


async def _print_notice(text: str) -> None:
    # A status line for the console; the log carries it too.
    logger.info("%s", text)
    print(text, flush=True)


def _delete(agent: Any, name: str) -> None:
    if hasattr(agent, name):
        delattr(agent, name)
