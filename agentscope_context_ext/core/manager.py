"""``ContextManager``: the extension attached to one agent, whatever the framework.

The one assembly both adapters call: from the adapter's port (its agent's messages), token
counter and workspace it builds the pipeline, long-term memory (which listens for compactions on
the event bus) and the tool list, and it owns the policy run before every model call
(:meth:`ContextManager.before_model_call`). What an adapter adds is only what its AgentScope
needs: how to reach the agent's messages and prompt (the port, :meth:`prompt_parts`), how to
wrap a tool, where ``Memory.md`` is shown, and its hooks or middleware.

One module on purpose: it is the assembly; each part it wires lives in its own package.
"""

from __future__ import annotations

import logging
import time
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .config import ContextConfig
from .errors import ConfigError, ContextOverflowError, WorkspaceWriteError
from .events import ContextEvent, ContextStats, ContextWarning, EventBus
from .longterm import (
    AgentRunner,
    ConsolidationResult,
    LongTermMemory,
    LongTermService,
    SummarizerService,
)
from .pipeline import (
    DIALOG_TOOL_NAMES,
    CallModel,
    ContextPort,
    PromptCount,
    SummaryShelf,
    build_pipeline,
    tool_name,
)
from .provider_errors import LengthRejection
from .search import HistoryScope
from .tokens import TokenCounter, known_max_input_tokens
from .tools import make_dialog_tools, make_read_file
from .tracing import in_conversation, record_span
from .workspace import DialogStore, ReadBoundary, Storage, ToolResultStore, portal

__all__ = ["DIALOG_TOOL_NAMES", "ContextManager", "LongTermHooks", "resolve_window"]

logger = logging.getLogger("agentscope_context_ext")

CoreTool = Callable[..., Awaitable[str]]
Notify = Callable[[str], Awaitable[None]]


@dataclass
class LongTermHooks:
    """What long-term memory needs of an adapter."""

    runner: Callable[[str, int], AgentRunner]
    """``runner(name, max_iters)``: an agent of the framework (the Summarizer, the
    consolidator) on the long-term memory's model."""
    show: Callable[[str | None], None]
    """Puts the ``Memory.md`` block where the model sees it (``None``: take it away)."""


def resolve_window(config: ContextConfig, model_window: int | None, model_name: str | None) -> int:
    """The window the pipeline manages: ``max_input_tokens`` from the config, else the model's
    own (2.x's ``context_size``), else the known window of its name.

    Raises:
        `ConfigError`: The summary budget does not fit the window that came from the model.
    """
    window = config.max_input_tokens or model_window or known_max_input_tokens(model_name)
    problem = config.compaction.summary_budget_error(window)
    if problem:
        raise ConfigError(f"{problem} (the window of {model_name or 'the model'})")
    return window


class ContextManager(ABC):
    """The extension attached to one agent: ``stats``, ``subscribe()``, ``compact_now()``,
    ``count()``, long-term memory. ``enable_context_management`` returns one (the adapter's
    subclass).

    Args:
        config (`ContextConfig`): The configuration in force.
        port (`ContextPort`): The agent's messages, as the pipeline sees them.
        counter (`TokenCounter`): The vocabulary to count with.
        max_input_tokens (`int`): The window (:func:`resolve_window`).
        workspace (`Path | str`): The workspace folder (or the Redis URL, password hidden).
        storage (`Storage`): Where the workspace's data lives.
        dialog_store (`DialogStore`): ``dialog/``, with the adapter's codec.
        tool_result_store (`ToolResultStore | None`): ``tool_result/`` (default: a new one on
            ``storage``; an adapter whose offloader saves there passes the same one).
        bus (`EventBus`): Where events go.
        summary_call (`CallModel | None`): The compaction model; ``None`` summarises by
            extraction.
        summary_window (`int | None`): The compaction model's window (default: the agent's).
        notify (`Callable | None`): Prints a compaction notice.
        long_term (`LongTermHooks | None`): The adapter's part of long-term memory (``None``:
            off, whatever the config says).
        long_term_at (`Path | Storage | None`): Where ``Memory.md`` and the daily notes are
            (default: the workspace; a served agent's are its agent's, not its session's).
        history (`HistoryScope | None`): A served session's place among the others: the scopes
            ``search_dialog`` can cover beyond this conversation (design §6.2).
        boundary (`ReadBoundary | None`): A served session's: what ``read_file`` may not read
            inside its roots (the service's other users' and sessions' folders, §11.4).

    Attributes:
        pipeline (`ContextPipeline`): The steps run before every model call.
        long_term_service (`LongTermService | None`): Long-term memory, when on.
        per_turn (`bool`): The agent is built anew every turn (a served agent): long-term
            memory runs no background scheduler, :meth:`end_turn` does its work instead.
    """

    per_turn: bool = False
    _admitted: bool | None = None
    """What :meth:`admits` found (``None``: not looked yet)."""
    _shelf: tuple[SummaryShelf, Hashable] | None = None

    def __init__(
        self,
        config: ContextConfig,
        *,
        port: ContextPort,
        counter: TokenCounter,
        max_input_tokens: int,
        workspace: Path | str,
        storage: Storage,
        dialog_store: DialogStore,
        bus: EventBus,
        tool_result_store: ToolResultStore | None = None,
        summary_call: CallModel | None = None,
        summary_window: int | None = None,
        notify: Notify | None = None,
        long_term: LongTermHooks | None = None,
        long_term_at: Path | Storage | None = None,
        history: HistoryScope | None = None,
        boundary: ReadBoundary | None = None,
    ) -> None:
        self.config = config
        self.port = port
        self.counter = counter
        self.workspace = workspace
        self.storage = storage
        self.dialog_store = dialog_store
        self.history = history
        self.boundary = boundary
        self.bus = bus
        self.tool_result_store = tool_result_store or ToolResultStore(
            storage, ttl_days=config.truncation.ttl_days
        )
        self.pipeline = build_pipeline(
            config,
            port,
            counter,
            dialog_store=dialog_store,
            tool_result_store=self.tool_result_store,
            bus=bus,
            max_input_tokens=max_input_tokens,
            call_model=summary_call,
            compaction_window=summary_window,
            notify=notify,
            # only our reader's outputs name their source file instead of a saved copy
            read_file_name="read_file" if config.tools.read_file else None,
        )
        if history is not None:  # the user's other sessions are worth a search from the start
            self.pipeline.offered_tools.elsewhere = history.has_others
        # Spans of what the pipeline does, when a tracer provider is installed (design §9.1).
        bus.subscribe(record_span)
        self.long_term_service: LongTermService | None = None
        if config.long_term_memory.enabled and long_term is not None:
            self.long_term_service = LongTermService(
                config,
                long_term_at or (workspace if isinstance(workspace, Path) else storage),
                long_term.runner,
                counter.count_text,
                bus.emit,
                long_term.show,
            )
            # The Summarizer reads what each compaction removed, from the event.
            bus.subscribe(self.long_term_service.on_event)

    # ------------------------------------------------------------ for the adapter

    @abstractmethod
    async def prompt_parts(self) -> tuple[str, list[dict]]:
        """The system prompt and every tool schema of the agent now (the pipeline counts those
        the model is shown, :meth:`offered_tools`)."""

    @abstractmethod
    def detach(self) -> None:
        """Undo what context management changed on the agent (its tools, hooks, memory)."""

    async def prepare_step(self) -> None:  # noqa: B027 - a hook, empty unless overridden
        """What the adapter's framework needs done before the pipeline's step (nothing here;
        2.x: its own image limit, which its compression would run and ours replaces)."""

    def tools(self) -> list[tuple[str, CoreTool]]:
        """This package's tools for the agent, as core functions (async, returning text) with
        the ``tools.*`` key that turns each off: ``read_file``, the dialog tools, the memory
        tools, as the config allows. The adapter wraps them as its framework's tools."""
        config = self.config
        tools: list[tuple[str, CoreTool]] = []
        if config.tools.read_file:
            reader = make_read_file(
                self.workspace if isinstance(self.workspace, Path) else self.storage,
                config.truncation,
                config.tools.allowed_roots,
                max_bytes_cap=config.truncation.read_file_max_bytes(self.max_input_tokens),
                held=self.tool_result_store.held,
                sessions=self.history.storage_of if self.history is not None else None,
                boundary=self.boundary,
            )
            tools.append(("read_file", reader))
        if config.tools.dialog:
            tools += [
                ("dialog", tool) for tool in make_dialog_tools(self.dialog_store, self.history)
            ]
        if self.long_term_service is not None:
            tools += [("memory", tool) for tool in self.long_term_service.memory_tools()]
        offer = self.pipeline.offered_tools
        offer.ours = frozenset(function.__name__ for _, function in tools)
        if self.long_term_service is not None:
            offer.unused = self.long_term_service.unused_tools
        return tools

    async def admits(self, sys_prompt: str, tools: list[dict] | None) -> bool:
        """Whether the agent's own fixed part (its system prompt and its own tools) leaves
        room under the compaction trigger; looked at once, at first use. When it does not,
        nothing this package does can help: context management detaches, saying so once (a
        ``warning``), and the agent runs as AgentScope runs it, never refused in the middle of
        a reply AgentScope would run (design §4.3)."""
        if self._admitted is not None:
            return self._admitted
        ours = self.pipeline.offered_tools.ours
        own = [tool for tool in tools or [] if tool_name(tool) not in ours]
        fixed = await self.port.count_system(sys_prompt) + self.counter.count_tools(own)
        trigger = self.pipeline.trigger_tokens
        self._admitted = fixed < trigger
        if not self._admitted:
            name = getattr(getattr(self, "agent", None), "name", "?")
            await self.bus.emit(
                ContextWarning(
                    where="window",
                    error=(
                        f"context management is off for agent {name!r}: its system prompt and "
                        f"tools take {fixed:,} tokens, over the compaction trigger "
                        f"({trigger:,}) of its {self.pipeline.window:,}-token window; "
                        "AgentScope's own context handling runs instead (a larger window or "
                        "a shorter system prompt turns it back on)"
                    ),
                )
            )
            self.detach()
        return self._admitted

    @portal
    async def before_model_call(self, forced: bool = False, instruction: str | None = None) -> bool:
        """What runs before every model call (or a compaction asked for now, ``forced``):
        long-term memory started and ``Memory.md`` shown as it is now, then the pipeline. A
        step that fails is a ``warning`` and the call goes on; a prompt that would go over the
        window is refused (``WorkspaceWriteError``, ``ContextOverflowError``) to the caller.
        The time is added to ``stats.hook_seconds``. ``False``: the adapter declined the agent
        (:meth:`admits`) and nothing ran."""
        started = time.perf_counter()
        try:
            service = self.long_term_service
            if service is not None:
                try:
                    service.start(background=not self.per_turn)
                    service.refresh()
                except Exception as exc:  # noqa: BLE001 - e.g. the workspace server is away
                    await self.bus.emit(
                        ContextWarning(where="long_term_memory", error=repr(exc)[:300])
                    )
            sys_prompt, tools = await self.prompt_parts()
            if not await self.admits(sys_prompt, tools):
                return False
            await self.prepare_step()
            try:
                with self.port.one_step():
                    if forced:
                        await self.pipeline.compact(sys_prompt, tools, instruction, force=True)
                    else:
                        await self.pipeline.before_reasoning(sys_prompt, tools)
            except (WorkspaceWriteError, ContextOverflowError):
                raise  # the prompt would exceed the window: the caller must know
            except Exception as exc:
                logger.exception("context pipeline failed")
                await self.bus.emit(ContextWarning(where="pipeline", error=repr(exc)[:300]))
                if isinstance(exc, OSError):  # the store failed: never send one over the window
                    with self.port.one_step():
                        await self.pipeline.refuse_unchecked(sys_prompt, tools, exc)
            return True
        finally:
            self.stats.hook_seconds += time.perf_counter() - started

    def offered_tools(self, schemas: list[dict]) -> list[dict]:
        """``schemas`` as the model should see them: this package's tools when they can be of
        use and the window has room for them (see ``core.pipeline.ToolOffer``)."""
        return self.pipeline.offered_tools(schemas)

    @portal
    async def record_usage(
        self,
        provider_input_tokens: int,
        sent: tuple[str, list[dict]] | None = None,
        tool_choice: object = None,
    ) -> None:
        """Compare the provider's input-token count of the prompt just sent with ours
        (``stats.token_count_error``; with ``calibrate_with_usage`` the next counts shift by
        the gap). Only a like call counts: one sent with the tool list the pipeline counted
        before it and a tool choice other than ``none`` (a final call without tools, or one
        whose tools cannot be used, is not the prompt the trigger is about). ``sent``: the
        system prompt and tool schemas of that call, as the adapter saw them."""
        if sent is None:
            return
        sys_prompt, tools = sent
        names = tuple(tool_name(tool) for tool in self.offered_tools(tools))
        choice = getattr(tool_choice, "mode", tool_choice)
        if names != self.pipeline.counted_tools or choice == "none":
            return
        # The prompt just sent was built from the context as it is now: count it exactly.
        count = await self.pipeline.count(sys_prompt, tools)
        await self.pipeline.record_usage(provider_input_tokens, count.floor)

    @portal
    async def recover_overflow(self, rejection: LengthRejection) -> PromptCount | None:
        """The provider rejected a call for its length: learn what it said and compact for
        one retry (``ContextPipeline.recover_overflow``); ``None`` when nothing about the prompt
        can help (raise the provider's error). Raises ``ContextOverflowError`` when the prompt
        still cannot fit. The time counts as hook time."""
        started = time.perf_counter()
        try:
            sys_prompt, tools = await self.prompt_parts()
            return await self.pipeline.recover_overflow(sys_prompt, tools, rejection)
        finally:
            self.stats.hook_seconds += time.perf_counter() - started

    @portal
    async def learn_rejection(self, rejection: LengthRejection) -> None:
        """A length rejection that came after the answer began (a retry is no longer
        possible): learn from it, so that the next calls fit."""
        sys_prompt, tools = await self.prompt_parts()
        count = await self.pipeline.count(sys_prompt, tools)
        await self.pipeline.learn_rejection(count.floor, rejection)

    @property
    def max_input_tokens(self) -> int:
        """The window prompts are fitted in (the configured one, or the provider's when it
        showed it is smaller)."""
        return self.pipeline.window

    # ---------------------------------------------------------------- public

    @property
    def stats(self) -> ContextStats:
        """Totals of everything the extension did (see :class:`ContextStats`)."""
        return self.bus.stats

    def subscribe(self, callback: Callable[[ContextEvent], Any]) -> Callable[[], None]:
        """Call ``callback(event)`` (sync or async) for every event; returns an unsubscriber."""
        return self.bus.subscribe(callback)

    @portal
    async def compact_now(self, extra_instruction: str | None = None) -> PromptCount:
        """Compact right away (as far as a pair-safe cut allows), e.g. before a long task.
        While a compaction runs (a reply's, another ``compact_now``) it waits for that one,
        then compacts what is left: one compaction at a time per agent.

        Args:
            extra_instruction (`str | None`): Added to the compaction model's instruction, e.g.
                "keep every SQL query verbatim".

        Returns:
            `PromptCount`: The prompt's token count afterwards, as the model will get it.
        """
        sys_prompt, tools = await self.prompt_parts()
        # Between replies there is no agent span: the spans still name the agent's conversation.
        with in_conversation(self.conversation_id()):
            return await self.pipeline.compact(sys_prompt, tools, extra_instruction, force=True)

    def conversation_id(self) -> str | None:
        """The agent's conversation as its framework's traces name it (``None``: unknown)."""
        return None

    @portal
    async def count(self) -> PromptCount:
        """The token count of the prompt the agent would send now."""
        sys_prompt, tools = await self.prompt_parts()
        return await self.pipeline.count(sys_prompt, tools)

    @property
    def long_term(self) -> LongTermMemory | None:
        """``Memory.md`` and the daily notes (``None`` when long-term memory is off)."""
        return self.long_term_service.memory if self.long_term_service else None

    @property
    def summarizer(self) -> SummarizerService | None:
        """The background Summarizer (``None`` when off)."""
        return self.long_term_service.summarizer if self.long_term_service else None

    @portal
    async def drain(self) -> None:
        """Wait until every pending Summarizer job is done (or recorded as failed)."""
        if self.long_term_service is not None:
            await self.long_term_service.drain()

    @portal
    async def consolidate_now(self) -> ConsolidationResult | None:
        """Merge the daily notes into ``Memory.md`` now (what the daily scheduler runs)."""
        if self.long_term_service is None:
            return None
        return await self.long_term_service.consolidate()

    def carry_summary(self, shelf: SummaryShelf, key: Hashable) -> None:
        """A served session's turn (``per_turn``): take up the summary written ahead that its
        last turn kept on ``shelf`` under ``key`` (used only if this context is the one it was
        kept from), and keep this turn's there at its end instead of cancelling it."""
        kept = shelf.take(key)
        if kept is not None:
            self.pipeline.parts.compaction.adopt_ahead(kept)
        self._shelf = (shelf, key)

    def _keep_summary(self) -> bool:
        """The summary written ahead kept for the session's next turn (:meth:`carry_summary`);
        ``False`` when there is no shelf to keep it on."""
        if self._shelf is None:
            return False
        shelf, key = self._shelf
        kept = self.pipeline.parts.compaction.keep_ahead()
        if kept is not None:
            shelf.put(key, kept)
        return True

    @portal
    async def end_turn(self) -> None:
        """A served turn is over (``per_turn``): the summary written ahead kept for the
        session's next turn (:meth:`carry_summary`) or else cancelled, the Summarizer's jobs
        awaited, a due daily consolidation run, long-term memory stopped."""
        if not self._keep_summary():
            await self.pipeline.stop_background()
        if self.long_term_service is not None:
            await self.long_term_service.end_turn()

    def abandon_turn(self) -> None:
        """A served turn was interrupted: nothing is awaited (the Summarizer's jobs finish in the
        background; a dead worker's stay journaled for the next turn); the scheduler stops,
        the summary written ahead is kept for the next turn (or else cancelled)."""
        if not self._keep_summary():
            self.pipeline.parts.compaction.stop_ahead()
        if self.long_term_service is not None:
            self.long_term_service.abandon_turn()

    def close_long_term(self) -> None:
        """Stop long-term memory (the scheduler; ``Memory.md`` taken away from the model) and
        the summary written ahead."""
        self.pipeline.parts.compaction.stop_ahead()
        if self.long_term_service is not None:
            self.long_term_service.close()
