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
  (``read_file``, ``read_dialog``, ``search_dialog``, the memory tools); every event of the
  extension and every notice goes out on the reply's event stream as a 2.x ``CustomEvent``
  (``context_ext.compaction_finished``, ``context_ext.notice``, ...), at the reply's end just
  before its ``ReplyEndEvent`` (2.x's own events keep their order), where a ``create_app``
  client reads it (design §11.3); a served turn we refuse ends there too, with the reason
  (``_refusal.py``); at its end the reply's answer loses its lone surrogates (U+FFFD), so
  that the state can be saved;
- ``on_acting``: stage one on every tool response as it leaves the tool, before 2.x writes it
  into the context (and before 2.x's ``tool_result_limit`` split sees it); a response left
  whole loses its lone surrogates there;
- ``on_compress_context``: 2.x calls it before every reasoning step; the context's lone
  surrogates are replaced (a user's message, a model's answer), then the whole pipeline runs
  here (pending stage one, stage two, the token check, the pair-safe compaction with the
  dialog saved first) and 2.x's own compression is *not* called;
- ``on_model_call``: the dialog tools are left out of the schemas until there is a dialog to
  read (``ContextManager.offered_tools``), the provider's reported input tokens of a like call are
  compared with ours (``stats.token_count_error``, ``calibrate_with_usage``), and a call the
  provider rejects for its length is retried once after a compaction;
- ``on_system_prompt``: ``Memory.md`` after the agent's system prompt.

With AgentScope's ``TracingMiddleware`` (design §9.1) put it in front of this one
(``middlewares=[TracingMiddleware(), context]``): its tool spans then carry the cut output, and
this middleware corrects its ``chat`` spans' tool list to the tools actually sent. One put
behind is moved in front for tool calls when the middleware binds.

The hooks and their order are read together here; each hook is a short call into the manager
(or, for a served middleware, into the event outbox and the local copies of a sandboxed
workspace, which the hooks drive in order). What the hooks read out of 2.x's arguments is in
``_hook_arguments.py``; ``enable_context_management`` in ``_enable.py``.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import AsyncGenerator, Callable
from pathlib import Path
from typing import Any

from agentscope.event import CustomEvent, ReplyEndEvent, ReplyStartEvent
from agentscope.middleware import MiddlewareBase
from agentscope.model import ChatModelBase

from ..core.config import ContextConfig
from ..core.errors import ContextExtError, WorkspaceError
from ..core.events import ContextEvent, ContextStats, ContextWarning, EventBus
from ..core.longterm import NOTES_DIRNAME
from ..core.manager import ContextManager
from ..core.provider_errors import length_rejection, with_first_chunk
from ..core.tracing import correct_chat_span
from ..core.workspace import Placement, ToolResultStore, open_workspace, portal, portal_stream
from ._convert import open_dialog
from ._hook_arguments import hint_text, plain, sent_parts
from ._manager import AgentManager
from ._offloader import ContextOffloader
from ._refusal import refusal
from ._tracing import tracing_after_cuts

__all__ = ["ContextMiddleware"]

logger = logging.getLogger("agentscope_context_ext")


class ContextMiddleware(MiddlewareBase):
    """Context management for one 2.x ``Agent``, as the agent's middleware.

    Args:
        config (`ContextConfig | dict | str | Path | None`): A config, a dict of keys, or a
            YAML/JSON file path; ``None`` uses the defaults.
        compaction_model (`ChatModelBase | None`): Model for summaries; default: the agent's
            own (or ``compaction.model`` by name).
        placement (`Placement | None`): Where the files go instead of ``config.workspace``
            (what :func:`context_middleware_factory` passes for a served session).
        print_notices (`bool`): Print each notice (``[context] compacted ...``) on stdout as
            well as sending it on the event stream; a served agent's go on the stream only.
        per_turn (`bool`): The middleware lives for one reply (``create_app`` builds a new one
            each turn): at the reply's end the Summarizer's jobs are awaited and long-term
            memory is stopped, so nothing is left running for a middleware that is gone; and a
            refusal of ours (``ContextExtError``) ends the reply on its stream, a
            ``context_ext.error`` event and a ``ReplyEndEvent`` saying why, instead of raising
            into the service (which would report "an unknown error").

    Attributes:
        offloader (`ContextOffloader`): Pass it as the agent's ``offloader``: what 2.x offloads
            by itself lands in the same workspace.
        manager (`AgentManager | None`): Stats, ``compact_now()``, ``count()``; set when the
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
        placement: Placement | None = None,
        print_notices: bool = True,
        per_turn: bool = False,
    ) -> None:
        self.config = ContextConfig.load(config)
        self.compaction_model = compaction_model
        if placement is None:
            extra = (NOTES_DIRNAME,) if self.config.long_term_memory.enabled else ()
            placement = Placement(
                *open_workspace(self.config.workspace, extra, self.config.workspace_timeout)
            )
        self.placement = placement
        self.workspace, self.storage = placement.workspace, placement.storage
        self.print_notices = print_notices
        self.per_turn = per_turn
        self.dialog_store = open_dialog(self.storage)
        self.tool_result_store = ToolResultStore(
            self.storage, ttl_days=self.config.truncation.ttl_days
        )
        self.offloader = ContextOffloader(
            self.dialog_store,
            self.tool_result_store,
            self.workspace if isinstance(self.workspace, Path) else None,
        )
        self.bus = EventBus()
        self.manager: AgentManager | None = None
        self._running: set[str] = set()
        self._outbox: list[CustomEvent] = []
        self._pulled = False
        self.bus.subscribe(self._to_stream)

    def subscribe(self, callback: Callable[[ContextEvent], Any]) -> Callable[[], None]:
        """Call ``callback(event)`` (sync or async) for every event of the agent this middleware
        manages, from its first step on (no need to wait for :attr:`manager`); returns an
        unsubscriber."""
        return self.bus.subscribe(callback)

    @property
    def stats(self) -> ContextStats:
        """Totals of everything the extension did for the agent (zero before its first step)."""
        return self.bus.stats

    def bind(self, agent: Any) -> AgentManager:
        """The manager of ``agent`` (created on the first call)."""
        if self.manager is None:
            other = getattr(agent, "context_manager", None)
            if isinstance(other, ContextManager):
                raise ContextExtError(
                    "this agent already has context management (another ContextMiddleware or "
                    "enable_context_management); use one per agent"
                )
            self.manager = AgentManager(
                agent,
                self.config,
                workspace=self.workspace,
                storage=self.storage,
                dialog_store=self.dialog_store,
                tool_result_store=self.tool_result_store,
                bus=self.bus,
                offloader=self.offloader,
                compaction_model=self.compaction_model,
                notify=self.notice,
                long_term_at=self.placement.long_term,
                history=self.placement.history,
                boundary=self.placement.boundary,
            )
            self.manager.middleware = self
            self.manager.per_turn = self.per_turn
            # A TracingMiddleware inside ours would trace tool outputs before the cut.
            tracing_after_cuts(agent, self)
        elif self.manager.agent is not agent:
            raise ContextExtError(
                f"this ContextMiddleware already manages agent {self.manager.agent.name!r}; "
                f"give agent {getattr(agent, 'name', '?')!r} a ContextMiddleware of its own"
            )
        return self.manager

    def _active(self, agent: Any) -> AgentManager | None:
        manager = self.bind(agent)
        return None if manager.detached else manager

    async def notice(self, text: str) -> None:
        """One status line (``[context] compacted 14,281 -> 6,952 tokens ...``): on the event
        stream, and printed unless ``print_notices`` is off."""
        self._outbox.append(CustomEvent(name="context_ext.notice", value={"text": text}))
        logger.info("%s", text)
        if self.print_notices:
            print(text, flush=True)

    def _to_stream(self, event: ContextEvent) -> None:
        self._outbox.append(CustomEvent(name=f"context_ext.{event.type}", value=plain(event.data)))

    def _sent(self) -> list[CustomEvent]:
        sent, self._outbox = self._outbox, []
        return sent

    @portal_stream
    async def on_reply(
        self, agent: Any, input_kwargs: dict, next_handler: Callable[..., AsyncGenerator]
    ) -> AsyncGenerator:
        try:
            if self.placement.mirrors and not self._pulled:
                self._pulled = True
                await self._pull()
            manager = self._active(agent)
            if manager is not None:
                await manager.attach_tools()
        except ContextExtError as exc:
            if not self.per_turn:
                raise
            for event in refusal(agent, exc, None, self._sent()):
                yield event
            return
        interrupted = False
        refused: ContextExtError | None = None
        reply_id: str | None = None
        try:
            async for item in next_handler(**input_kwargs):
                if isinstance(item, ReplyStartEvent):
                    reply_id = item.reply_id
                if isinstance(item, ReplyEndEvent):
                    interrupted = str(getattr(item, "finished_reason", "")) == "interrupted"
                    # Ours go out at the reply's end, just before it: the events 2.x emits
                    # keep their order and positions, which clients and HITL read by position.
                    for event in self._sent():
                        yield event
                yield item
        except (asyncio.CancelledError, GeneratorExit):
            interrupted = True
            raise
        except ContextExtError as exc:
            if not self.per_turn:
                raise
            # served: the service would report it as an unknown error; the reply ends
            # saying it instead (after the turn's end below)
            refused = exc
        finally:
            if manager is not None and not manager.detached:
                manager.port.make_sendable()  # the reply's answer: the state can be saved
            if manager is not None and self.per_turn:
                if interrupted:
                    # the user stopped the turn: the Summarizer is not waited for (its jobs
                    # finish in the background, or stay journaled for the next turn)
                    if not manager.turn_ended:
                        manager.turn_ended = True
                        manager.abandon_turn()
                else:
                    await self._end_turn(manager)
            # what this turn wrote reaches a sandboxed workspace even when stopped: the next
            # turn may be another worker's
            await self._push()
        if refused is not None:
            for event in refusal(agent, refused, reply_id, self._sent()):
                yield event
        for event in self._sent():
            yield event

    async def _pull(self) -> None:
        """The local copies brought up to date before the turn. A pull that fails ends the
        turn with a clear error: a turn on a copy not known to be in step would start the
        stores afresh and, later, write them over the workspace's files."""
        for mirror in self.placement.mirrors:
            try:
                await mirror.pull()
            except Exception as exc:
                reason = " ".join(str(exc).split())[:200] or type(exc).__name__
                raise WorkspaceError(
                    f"the agent's workspace cannot be read ({mirror.remote}): {reason}"
                ) from exc

    async def _push(self) -> None:
        """Write what changed into a sandboxed workspace; a failure is a warning (the files are
        on this machine's disk meanwhile) and the next push writes them."""
        for mirror in self.placement.mirrors:
            try:
                await mirror.push()
            except Exception as exc:  # noqa: BLE001 - whatever the sandbox's transport raises
                await self.bus.emit(ContextWarning(where="workspace push", error=repr(exc)[:300]))

    async def _end_turn(self, manager: AgentManager) -> None:
        """A per-turn middleware's last act, after the reply's end went out (the client is not
        kept waiting): the Summarizer awaited, a due consolidation run, long-term memory
        stopped. Its events follow the reply's end on the stream."""
        if manager.turn_ended:
            return
        manager.turn_ended = True
        try:
            await manager.end_turn()
        except Exception as exc:
            logger.exception("long-term memory failed at the end of a served turn")
            await self.bus.emit(ContextWarning(where="long_term_memory", error=repr(exc)[:300]))

    @portal_stream
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
            await self._push()

    @portal
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
                # A tracing middleware outside ours listed the agent's tools: list those sent.
                correct_chat_span(input_kwargs["tools"])
            try:
                response = await with_first_chunk(await next_handler(**input_kwargs))
            except Exception as exc:
                rejection = length_rejection(exc)
                # 2.x calls the model again on a failure (max_retries): one recovery a step.
                step = (agent.state.reply_id, agent.state.cur_iter)
                if rejection is None or manager.recovered_step == step:
                    raise
                manager.recovered_step = step
                # The provider counted more than we did: compact, and retry once with the
                # context as it is now (a second rejection is raised as it is).
                if await manager.recover_overflow(rejection) is None:
                    raise
                # the agent's own tool list again: the compaction may have opened the dialog
                input_kwargs = manager.retry_input({**input_kwargs, "tools": tools})
                correct_chat_span(input_kwargs.get("tools") or [])
                response = await next_handler(**input_kwargs)
        finally:
            self._running.discard("model")
        sent = sent_parts(input_kwargs)
        choice = input_kwargs.get("tool_choice")
        if inspect.isasyncgen(response):
            return manager.relay_usage(response, sent, choice)
        await manager.usage_seen(response, sent, choice)
        return response

    @portal
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
            instruction = hint_text(input_kwargs.get("instructions"))
            # a user's message, a model's answer: what is sent and saved (dialog/) is sendable,
            # as a 1.x memory keeps it
            manager.port.make_sendable()
            if not await manager.before_model_call(forced=forced, instruction=instruction):
                await next_handler(**input_kwargs)  # detached at first use: 2.x's own runs
        finally:
            self._running.discard("compress")
            await self._push()

    @portal
    async def on_system_prompt(self, agent: Any, current_prompt: str) -> str:
        manager = self._active(agent)
        if manager is None:
            return current_prompt
        return manager.system_prompt(current_prompt)
