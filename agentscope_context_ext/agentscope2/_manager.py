"""Context management on an AgentScope 2.x ``Agent``: one middleware, one offloader.

The 2.x way is the agent's own configuration:

.. code-block:: python

    from agentscope.agent import Agent
    from agentscope_context_ext import ContextMiddleware

    context = ContextMiddleware("configs/small-window.yaml")
    agent = Agent(name="assistant", system_prompt="...", model=model, toolkit=toolkit,
                  middlewares=[context], offloader=context.offloader)
    await agent.reply(UserMsg("user", "Summarise the logs in ./logs"))
    print(context.manager.stats.as_dict())

and ``enable_context_management(agent, config)`` does the same on an agent that exists (it adds
the middleware to the agent's hook lists, sets the offloader when the agent has none, and
``detach()`` takes both away again).

What each hook does:

- ``on_reply``: binds the middleware to its agent on first use and adds the tools
  (``read_file``, ``read_dialog``, ``search_dialog``, the memory tools);
- ``on_acting``: stage one on every tool response as it leaves the tool, before 2.x writes it
  into the context (and before 2.x's ``tool_result_limit`` split sees it);
- ``on_compress_context``: 2.x calls it before every reasoning step; the whole pipeline runs
  here (pending stage one, stage two, the token check, the pair-safe compaction with the
  dialog saved first) and 2.x's own compression is *not* called;
- ``on_model_call``: the dialog tools are left out of the schemas until there is a dialog to
  read (``ManagerBase.offered_tools``), the provider's reported input tokens of a like call are
  compared with ours (``stats.token_count_error``, ``calibrate_with_usage``), and a call the
  provider rejects for its length is retried once after a compaction;
- ``on_system_prompt``: ``Memory.md`` after the agent's system prompt.
"""

from __future__ import annotations

import inspect
import logging
import time
from collections.abc import AsyncGenerator, Callable, Iterator
from pathlib import Path
from typing import Any

from agentscope.message import DataBlock, HintBlock, ToolResultBlock, UserMsg
from agentscope.middleware import MiddlewareBase
from agentscope.model import ChatModelBase
from agentscope.tool import ToolResponse

from ..core.config import ContextConfig
from ..core.errors import ConfigError, ContextExtError, ContextOverflowError, WorkspaceWriteError
from ..core.events import ContextEvent, ContextStats, EventBus
from ..core.longterm import NOTES_DIRNAME
from ..core.manager import ManagerBase
from ..core.pipeline import ResultSlot, build_pipeline
from ..core.provider_errors import length_rejection, with_first_chunk
from ..core.tokens import get_token_counter, known_max_input_tokens
from ..core.workspace import ToolResultStore, open_workspace
from ._context import StatePort, changed_output
from ._convert import DialogStore, has_text, media_of, output_text, tool_arguments
from ._longterm import LongTermMemoryService
from ._model import model_call, model_name, named_model
from ._offloader import ContextOffloader
from ._schemas import ToolSchemas
from ._stream import shown_as_cut
from ._tools import make_dialog_tools, make_read_file_tool

__all__ = ["ContextManager", "ContextMiddleware", "enable_context_management"]

logger = logging.getLogger("agentscope_context_ext")

_HOOK_LISTS = (
    "_reply_middlewares",
    "_acting_middlewares",
    "_model_call_middlewares",
    "_compress_context_middlewares",
    "_system_prompt_middlewares",
)
"""Where a 2.0.x ``Agent`` keeps the middlewares of the hooks ours implements (on_reply,
on_acting, on_model_call, on_compress_context, on_system_prompt), filtered once in its
constructor."""


class ContextMiddleware(MiddlewareBase):
    """Context management for one 2.x ``Agent``, as the agent's middleware.

    Args:
        config (`ContextConfig | dict | str | Path | None`): A config, a dict of keys, or a
            YAML/JSON file path; ``None`` uses the defaults.
        compaction_model (`ChatModelBase | None`): Model for summaries; default: the agent's
            own (or ``compaction.model`` by name).

    Attributes:
        offloader (`ContextOffloader`): Pass it as the agent's ``offloader``: what 2.x offloads
            by itself lands in the same workspace.
        manager (`ContextManager | None`): Stats, ``compact_now()``, ``count()``; set when the
            agent first uses the middleware (or at once by ``enable_context_management``).
        bus (`EventBus`): The events of the agent's manager, there from the start:
            :meth:`subscribe` and :attr:`stats` work before the agent first runs.

    Raises:
        `ConfigError`: The configuration is invalid (the message names the key).
        `WorkspaceError`: The workspace cannot be written.
    """

    def __init__(
        self,
        config: ContextConfig | dict[str, Any] | str | Path | None = None,
        *,
        compaction_model: ChatModelBase | None = None,
    ) -> None:
        self.config = ContextConfig.load(config)
        self.compaction_model = compaction_model
        extra = (NOTES_DIRNAME,) if self.config.long_term_memory.enabled else ()
        self.workspace, self.storage = open_workspace(self.config.workspace, extra)
        self.tool_result_store = ToolResultStore(
            self.storage, ttl_days=self.config.truncation.ttl_days
        )
        self.dialog_store = DialogStore(self.storage)
        self.offloader = ContextOffloader(
            self.dialog_store,
            self.tool_result_store,
            self.workspace if isinstance(self.workspace, Path) else None,
        )
        self.bus = EventBus()
        self.manager: ContextManager | None = None
        self._running: set[str] = set()

    def subscribe(self, callback: Callable[[ContextEvent], Any]) -> Callable[[], None]:
        """Call ``callback(event)`` (sync or async) for every event of the agent this middleware
        manages, from its first step on (no need to wait for :attr:`manager`); returns an
        unsubscriber."""
        return self.bus.subscribe(callback)

    @property
    def stats(self) -> ContextStats:
        """Totals of everything the extension did for the agent (zero before its first step)."""
        return self.bus.stats

    def bind(self, agent: Any) -> ContextManager:
        """The manager of ``agent`` (created on the first call)."""
        if self.manager is None:
            other = getattr(agent, "context_manager", None)
            if isinstance(other, ContextManager):
                raise ContextExtError(
                    "this agent already has context management (another ContextMiddleware or "
                    "enable_context_management); use one per agent"
                )
            self.manager = ContextManager(agent, self)
        elif self.manager.agent is not agent:
            raise ContextExtError(
                f"this ContextMiddleware already manages agent {self.manager.agent.name!r}; "
                f"give agent {getattr(agent, 'name', '?')!r} a ContextMiddleware of its own"
            )
        return self.manager

    def _active(self, agent: Any) -> ContextManager | None:
        manager = self.bind(agent)
        return None if manager.detached else manager

    async def on_reply(
        self, agent: Any, input_kwargs: dict, next_handler: Callable[..., AsyncGenerator]
    ) -> AsyncGenerator:
        manager = self._active(agent)
        if manager is not None:
            await manager.attach_tools()
        async for item in next_handler(**input_kwargs):
            yield item

    async def on_acting(
        self, agent: Any, input_kwargs: dict, next_handler: Callable[..., AsyncGenerator]
    ) -> AsyncGenerator:
        manager = self._active(agent)
        tool_call = input_kwargs.get("tool_call")
        key = f"acting:{getattr(tool_call, 'id', '')}"
        if manager is None or tool_call is None or key in self._running:
            # added twice: the outer one cuts
            async for item in next_handler(**input_kwargs):
                yield item
            return
        self._running.add(key)
        try:
            async for item in manager.acting(tool_call, next_handler(**input_kwargs)):
                yield item
        finally:
            self._running.discard(key)

    async def on_model_call(
        self, agent: Any, input_kwargs: dict, next_handler: Callable[..., Any]
    ) -> Any:
        manager = self._active(agent)
        if manager is None or "model" in self._running:  # added twice: the outer one acts
            return await next_handler(**input_kwargs)
        self._running.add("model")
        try:
            tools = input_kwargs.get("tools")
            if tools:
                input_kwargs = {**input_kwargs, "tools": manager.offered_tools(tools)}
            try:
                response = await with_first_chunk(await next_handler(**input_kwargs))
            except Exception as exc:
                rejection = length_rejection(exc)
                if rejection is None:
                    raise
                # The provider counted more than we did: compact, and retry once with the
                # context as it is now (a second rejection is raised as it is).
                await manager.recover_overflow(rejection)
                input_kwargs = manager.retry_input(input_kwargs)
                response = await next_handler(**input_kwargs)
        finally:
            self._running.discard("model")
        sent = _sent_parts(input_kwargs)
        choice = input_kwargs.get("tool_choice")
        if inspect.isasyncgen(response):
            return manager.relay_usage(response, sent, choice)
        await manager.usage_seen(response, sent, choice)
        return response

    async def on_compress_context(
        self, agent: Any, input_kwargs: dict, next_handler: Callable[..., Any]
    ) -> None:
        manager = self._active(agent)
        if manager is None:
            await next_handler(**input_kwargs)
            return
        if "compress" in self._running:  # added twice: the pipeline runs once
            return
        self._running.add("compress")
        try:
            # 2.x's compression tool (or a caller) passes its own context_config: a request to
            # compact now; the step before reasoning passes none.
            forced = input_kwargs.get("context_config") is not None
            await manager.run_pipeline(forced=forced, instructions=input_kwargs.get("instructions"))
        finally:
            self._running.discard("compress")

    async def on_system_prompt(self, agent: Any, current_prompt: str) -> str:
        manager = self._active(agent)
        if manager is None:
            return current_prompt
        return manager.system_prompt(current_prompt)


class ContextManager(ManagerBase):
    """The extension attached to one 2.x agent (``middleware.manager``).

    Attributes:
        agent: The managed agent.
        config (`ContextConfig`): The configuration in force.
        middleware (`ContextMiddleware`): The agent's middleware.
        workspace (`Path | str`): The workspace folder (or the Redis URL, password hidden).
        storage (`Storage`): Where the workspace's data lives.
        max_input_tokens (`int`): The window the pipeline manages (``config.max_input_tokens``,
            else the model's ``context_size``).
        port (`StatePort`): The agent's state as the pipeline sees it.
    """

    def __init__(self, agent: Any, middleware: ContextMiddleware) -> None:
        for attribute in ("state", "model", "toolkit"):
            if getattr(agent, attribute, None) is None:
                raise ContextExtError(
                    f"context management needs an AgentScope 2.x Agent with .{attribute}; "
                    f"got {type(agent).__name__}"
                )
        config = middleware.config
        self.agent = agent
        self.config = config
        self.middleware = middleware
        self.workspace = middleware.workspace
        self.storage = middleware.storage
        name = model_name(agent.model)
        self.max_input_tokens = (
            config.max_input_tokens
            or getattr(agent.model, "context_size", None)
            or known_max_input_tokens(name)
        )
        budget_error = config.compaction.summary_budget_error(self.max_input_tokens)
        if budget_error:
            raise ConfigError(f"{budget_error} (the window of {name or 'the model'})")
        self.counter = get_token_counter(
            config.tokenizer, model_name=name, media_token_cost=config.media_token_cost
        )
        self.bus = middleware.bus
        self.port = StatePort(agent, self.counter)
        summary_model = (
            None
            if config.compaction.model == "extractive"
            else middleware.compaction_model or named_model(agent.model, config.compaction.model)
        )
        self.pipeline = build_pipeline(
            config,
            self.port,
            self.counter,
            dialog_store=middleware.dialog_store,
            tool_result_store=middleware.tool_result_store,
            bus=self.bus,
            max_input_tokens=self.max_input_tokens,
            call_model=model_call(summary_model) if summary_model is not None else None,
            compaction_window=(
                self.max_input_tokens
                if summary_model is None or summary_model is agent.model
                else getattr(summary_model, "context_size", None)
            ),
            notify=self._print_notice,
        )
        self.long_term_service: LongTermMemoryService | None = None
        if config.long_term_memory.enabled:
            self.long_term_service = LongTermMemoryService(
                config,
                self.workspace if isinstance(self.workspace, Path) else self.storage,
                named_model(agent.model, config.long_term_memory.model),
                self.counter.count_text,
                self.bus.emit,
            )
            if self.long_term_service.summarizer is not None:
                self.pipeline.parts.compaction.on_compacted = self.long_term_service.on_compacted
        self.detached = False
        self._tools: list[Any] = []
        self._undo: list[Callable[[], None]] = []
        self._schemas = ToolSchemas()
        agent.context_manager = self
        self._undo.append(lambda: _delete(agent, "context_manager"))
        if getattr(agent, "offloader", None) is None:
            # 2.x drops what it takes out by itself (an input file the model cannot take, an
            # image over max_image_num) unless an offloader saves it first.
            agent.offloader = middleware.offloader
            self._undo.append(lambda: setattr(agent, "offloader", None))

    # ------------------------------------------------------------ the hooks' work

    async def attach_tools(self) -> None:
        """Add this package's tools to the agent's toolkit (once; a tool of the same name that
        is not ours is an error: 2.x would silently replace it)."""
        if self._tools or self.detached:
            return
        config, toolkit = self.config, self.agent.toolkit
        by_key: list[tuple[str, Any]] = []  # (the config key that turns it off, the tool)
        if config.tools.read_file:
            by_key.append(
                (
                    "read_file",
                    make_read_file_tool(
                        self.workspace if isinstance(self.workspace, Path) else self.storage,
                        config.truncation,
                        config.tools.allowed_roots,
                        max_bytes_cap=config.truncation.read_file_max_bytes(self.max_input_tokens),
                    ),
                )
            )
        if config.tools.dialog:
            by_key += [("dialog", tool) for tool in make_dialog_tools(self.middleware.dialog_store)]
        if self.long_term_service is not None:
            by_key += [("memory", tool) for tool in self.long_term_service.agent_tools()]
        for key, tool in by_key:
            if await toolkit.get_tool(tool.name) is not None:
                raise ContextExtError(
                    f"the agent's toolkit already has a tool named {tool.name!r}; rename it or "
                    f"turn ours off (tools.{key}: false)"
                )
        tools = [tool for _, tool in by_key]
        await toolkit.add_tool(tools)
        self._tools = tools

    def acting(self, tool_call: Any, items: AsyncGenerator) -> AsyncGenerator:
        """A tool's chunks and final response as the agent's events and context get them:
        stage one on the response, and chunks held past the stream allowance so that the
        events add up to what the model gets (see ``_stream.shown_as_cut``)."""
        allowance = self.pipeline.stream_allowance(str(tool_call.name), tool_arguments(tool_call))
        return shown_as_cut(items, allowance, lambda response: self.cut(tool_call, response))

    async def cut(self, tool_call: Any, response: ToolResponse) -> ToolResponse:
        """Stage one on a tool's final response, before 2.x writes it into the context."""
        slot = ResultSlot(
            call_id=str(tool_call.id),
            tool=str(tool_call.name),
            text=output_text(response.content) if has_text(response.content) else None,
            media=media_of(response.content),
            tool_input=tool_arguments(tool_call),
            state={},
        )
        started = time.perf_counter()
        try:
            change = await self.pipeline.stage_one_now(slot)
        finally:
            self.stats.hook_seconds += time.perf_counter() - started
        if change is None:
            return response
        return response.model_copy(update={"content": changed_output(response.content, change)})

    async def run_pipeline(self, forced: bool = False, instructions: Any = None) -> None:
        """The pipeline before a reasoning step (or a compaction asked for now). A caller that
        gives up (a cancellation) stops it at its next wait, the summary model's answer
        included: every step leaves the context whole at each wait (the dialog is written before
        the summary is asked for, and the summary replaces the messages in one go), so an
        interrupted compaction keeps its messages and their copy in ``dialog/`` is a duplicate,
        never a loss."""
        await self._run(forced, instructions)

    async def _run(self, forced: bool, instructions: Any) -> None:
        started = time.perf_counter()
        try:
            await self._steps(forced, instructions)
        finally:
            self.stats.hook_seconds += time.perf_counter() - started

    async def _steps(self, forced: bool, instructions: Any) -> None:
        service = self.long_term_service
        if service is not None:
            try:
                service.start()
                service.refresh()
            except Exception as exc:  # noqa: BLE001 - e.g. the workspace server is away
                await self.bus.emit("warning", where="long_term_memory", error=repr(exc)[:300])
        await self._limit_images()
        sys_prompt, tools = await self.prompt_parts()
        try:
            with self.port.one_step():
                if forced:
                    extra = _hint_text(instructions)
                    await self.pipeline.compact(sys_prompt, tools, extra, force=True)
                else:
                    await self.pipeline.before_reasoning(sys_prompt, tools)
        except (WorkspaceWriteError, ContextOverflowError):
            raise  # the prompt would exceed the window: the caller must know
        except Exception as exc:
            logger.exception("context pipeline failed")
            await self.bus.emit("warning", where="compress_context", error=repr(exc)[:300])

    async def _limit_images(self) -> None:
        """2.x's own ``max_image_num`` step, which its compression runs first and ours
        replaces: the oldest images over the limit leave the context, each saved by the agent's
        offloader (ours, unless the agent has another) and replaced by 2.x's reminder naming
        the copy. A copy that cannot be saved leaves every image where it is (2.x applies the
        replacements only once all are saved)."""
        limit = getattr(self.agent, "_limit_context_images", None)
        context_config = getattr(self.agent, "context_config", None)
        if limit is None or context_config is None or self.agent.offloader is None:
            return  # another 2.x release, or an offloader taken away: keep every image
        # Only a message holding an image can change; with no more images than the limit,
        # nothing can (every step pays this scan, not the block ids of the whole context).
        holding = [(msg, n) for msg in self.agent.state.context if (n := _images(msg))]
        most = getattr(context_config, "max_image_num", None)
        if isinstance(most, int) and sum(n for _, n in holding) <= most:
            return
        before = [_block_ids(msg) for msg, _ in holding]
        try:
            await limit(context_config)
        except OSError as exc:  # our offloader's WorkspaceError, or another offloader's
            logger.warning("cannot save an image over max_image_num (%s); keeping it", exc)
            await self.bus.emit("warning", where="max_image_num", error=repr(exc)[:300])
            return
        changed = [
            msg for (msg, _), ids in zip(holding, before, strict=True) if _block_ids(msg) != ids
        ]
        if changed:
            self.port.touch_messages(changed)

    def system_prompt(self, prompt: str) -> str:
        """The system prompt with ``Memory.md`` (when long-term memory is on)."""
        if self.long_term_service is None:
            return prompt
        return self.long_term_service.system_prompt(prompt)

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
        (``sent``: the call's system prompt and tools, see :func:`_sent_parts`)."""
        usage = getattr(response, "usage", None)
        tokens = getattr(usage, "input_tokens", None)
        if isinstance(tokens, int) and tokens > 0:
            try:
                await self.record_usage(tokens, sent, tool_choice)
            except Exception as exc:  # noqa: BLE001 - a count that fails must not fail the call
                await self.bus.emit("warning", where="usage", error=repr(exc)[:300])

    async def relay_usage(
        self,
        chunks: AsyncGenerator,
        sent: tuple[str, list[dict]] | None = None,
        tool_choice: Any = None,
    ) -> AsyncGenerator:
        """Pass a streamed response through; the last chunk's usage is recorded."""
        last = None
        async for chunk in chunks:
            last = chunk
            yield chunk
        if last is not None:
            await self.usage_seen(last, sent, tool_choice)

    # ---------------------------------------------------------------- public

    def detach(self) -> None:
        """Undo what context management changed: its tools leave the toolkit, the middleware
        stops acting (and leaves the agent's hook lists when ``enable_context_management`` put
        it there), the offloader it set is taken back. The context keeps what it holds now (the
        summary stays ``state.summary``)."""
        if self.detached:
            return
        self.detached = True
        if self.long_term_service is not None:
            self.long_term_service.close()
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

    async def _print_notice(self, text: str) -> None:
        # A status line for the console; 2.x has no print hook, the log carries it.
        logger.info("%s", text)
        print(text, flush=True)


def _sent_parts(model_kwargs: dict) -> tuple[str, list[dict]] | None:
    """The system prompt and tool schemas of a model call, as 2.x passed them (its first
    message is the system prompt it built); None when the call does not look like that."""
    messages = model_kwargs.get("messages")
    if not messages or getattr(messages[0], "role", None) != "system":
        return None
    content = messages[0].content
    if isinstance(content, list) and len(content) == 1:  # 2.x makes its one TextBlock
        content = getattr(content[0], "text", None)
    if not isinstance(content, str):
        return None
    return content, list(model_kwargs.get("tools") or [])


def _hint_text(instructions: Any) -> str | None:
    if instructions is None:
        return None
    hint = getattr(instructions, "hint", instructions)
    return hint if isinstance(hint, str) else output_text(hint)


def _image_places(msg: Any) -> Iterator[list]:
    """The block lists of ``msg`` where 2.x's image limit looks for images and replaces them
    in place: its content, and the list outputs of its tool results and hints."""
    yield msg.content
    for block in msg.content:
        if isinstance(block, ToolResultBlock) and isinstance(block.output, list):
            yield block.output
        elif isinstance(block, HintBlock) and isinstance(block.hint, list):
            yield block.hint


def _images(msg: Any) -> int:
    """How many images ``msg`` holds where 2.x's image limit counts them."""
    return sum(_is_image(item) for place in _image_places(msg) for item in place)


def _is_image(block: Any) -> bool:
    return isinstance(block, DataBlock) and block.source.media_type.startswith("image/")


def _block_ids(msg: Any) -> tuple[int, ...]:
    """The identity of every item where 2.x's image limit may replace one (a replacement in
    place leaves the message's own fingerprint as it was)."""
    return tuple(id(item) for place in _image_places(msg) for item in place)


def _delete(agent: Any, name: str) -> None:
    if hasattr(agent, name):
        delattr(agent, name)


def enable_context_management(
    agent: Any,
    config: ContextConfig | dict[str, Any] | str | Path | None = None,
    *,
    compaction_model: ChatModelBase | None = None,
) -> ContextManager:
    """Turn on context management for an AgentScope 2.x ``Agent`` that already exists.

    Adds a :class:`ContextMiddleware` to the agent's hook lists (2.x filters its middlewares
    once, in the constructor, so the lists are where a new one goes) and returns the manager
    (which sets its offloader when the agent has none). ``manager.detach()`` undoes it all.

    Args:
        agent (`Agent`): The 2.x agent.
        config (`ContextConfig | dict | str | Path | None`): A config, a dict of keys, or a
            YAML/JSON file path; ``None`` uses the defaults.
        compaction_model (`ChatModelBase | None`): Model for summaries; default: the agent's.

    Raises:
        `ConfigError`: The configuration is invalid (the message names the key).
        `ContextExtError`: The agent lacks what is needed, or is already managed.
    """
    if isinstance(getattr(agent, "context_manager", None), ContextManager):
        raise ContextExtError(
            "context management is already enabled on this agent; call detach() first"
        )
    missing = [name for name in _HOOK_LISTS if not isinstance(getattr(agent, name, None), list)]
    if missing or not hasattr(agent, "state"):
        raise ContextExtError(
            f"enable_context_management needs an AgentScope 2.x Agent; {type(agent).__name__} "
            "has no middleware lists: pass ContextMiddleware(...) in Agent(middlewares=[...])"
        )
    middleware = ContextMiddleware(config, compaction_model=compaction_model)
    manager = middleware.bind(agent)
    for attribute in _HOOK_LISTS:
        hooks: list = getattr(agent, attribute)
        hooks.append(middleware)
        manager.record_undo(lambda hooks=hooks: hooks.remove(middleware))
    return manager
