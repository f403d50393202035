"""The agent B1, B2 and B9 measure, built for the installed AgentScope major (1.x or 2.x).

The benchmarks measure the same thing on both majors; only how the agent is built, where its
context lives, how a step's new tool result enters it and what runs as "ours" differ:

- **1.x**: a ``ReActAgent`` with ``enable_context_management``; the context is its memory (one
  ``Msg`` per transcript message, tool results as ``system`` messages); ours is the
  ``pre_reasoning`` pipeline (``manager.pipeline.before_reasoning``); a step adds one new
  message, the tool result.
- **2.x**: ``Agent(..., middlewares=[ContextMiddleware(config)], offloader=middleware.offloader)``;
  the context is ``agent.state.context``, as 2.x builds it: one assistant message per reply
  holding the reply's text, thinking, tool calls and tool results; ours is
  ``agent.compress_context()``, the call 2.x makes before every reasoning step, which runs the
  middleware's ``on_compress_context`` (the whole pipeline, 2.x's own compression not called);
  a step appends its tool call and the result to the reply's message, as 2.x does.

Both are built from the same transcript :class:`~agentscope_context_ext.replay.Record`\\ s, so the
contexts hold the same messages on both majors. Only public names of the package are used.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

from agentscope_context_ext import enable_context_management, get_token_counter
from agentscope_context_ext.replay import Record, records_to_msgs
from agentscope_context_ext.testing import ScriptedChatModel

from ._major import agentscope_major

MAJOR = 2 if agentscope_major() >= 2 else 1
"""The AgentScope major the benchmarks run on."""
SYS_PROMPT = "You are a coding agent working in a large repository. Be careful and precise."


def record_tokens(record: Record, counter: Any) -> int:
    """A record's tokens (its texts, call arguments and outputs), near its formatted count:
    used to cut a transcript at a context size the same way on both majors."""
    parts: list[str] = []
    for block in record.blocks():
        kind = block.get("type")
        if kind in ("text", "thinking"):
            parts.append(str(block.get(kind) or ""))
        elif kind == "tool_use":
            parts.append(json.dumps(block.get("input") or {}, ensure_ascii=False))
        elif kind == "tool_result":
            parts.append(_output_text(block.get("output")))
    return counter.count_text("\n".join(parts)) + 4


def prefix(records: list[Record], target: int, counter: Any) -> list[Record]:
    """The longest prefix of ``records`` of at most ``target`` tokens (at least one record),
    not ending with calls that have no results (a context is cut between reasoning steps)."""
    total = 0
    out: list[Record] = []
    for record in records:
        tokens = record_tokens(record, counter)
        if total + tokens > target and out:
            break
        out.append(record)
        total += tokens
    while (
        out
        and out[-1].role == "assistant"
        and any(b.get("type") == "tool_use" for b in out[-1].blocks())
    ):
        out.pop()
    return out


def _output_text(output: Any) -> str:
    if isinstance(output, str):
        return output
    if isinstance(output, list):
        return "\n".join(
            str(b.get("text", ""))
            for b in output
            if isinstance(b, dict) and b.get("type") == "text"
        )
    return "" if output is None else str(output)


def native_messages(records: list[Record]) -> list[Any]:
    """The records as the installed major keeps them in an agent's context (see the module:
    ``replay.records_to_msgs``); new objects each call (two agents never share a block)."""
    return records_to_msgs(copy.deepcopy(records))


def _call2(call_id: str, name: str, arguments: Any) -> Any:
    from agentscope.message import ToolCallBlock, ToolCallState

    if not isinstance(arguments, str):
        arguments = json.dumps(arguments or {}, ensure_ascii=False)
    return ToolCallBlock(id=call_id, name=name, input=arguments, state=ToolCallState.FINISHED)


def _result2(call_id: str, name: str, output: Any) -> Any:
    from agentscope.message import ToolResultBlock, ToolResultState

    return ToolResultBlock(id=call_id, name=name, output=output, state=ToolResultState.SUCCESS)


def user_message(text: str) -> Any:
    """A user message of the installed major (what ``DialogStore.append`` takes)."""
    if MAJOR == 1:
        from agentscope.message import Msg

        return Msg("user", text, "user")
    from agentscope.message import UserMsg

    return UserMsg("user", text)


def formatter(name: str) -> Any:
    """An AgentScope formatter by class name (both majors have the chat formatters)."""
    import agentscope.formatter

    return getattr(agentscope.formatter, name)()


class Managed:
    """An agent with this package's context management, its context filled, ready to step.

    Attributes:
        agent: The AgentScope agent.
        manager: Its ``ContextManager`` (``count()``, ``pipeline``, ``stats``).
        messages (`int`): Messages in the agent's context (1.x: memory; 2.x: state.context).
    """

    def __init__(self, agent: Any, manager: Any, middleware: Any = None) -> None:
        self.agent = agent
        self.manager = manager
        self.middleware = middleware
        self._added: list[Callable[[], Any]] = []
        self._tools: list[dict] = []

    @property
    def messages(self) -> int:
        if MAJOR == 1:
            return len(self.agent.memory.messages)
        return len(self.agent.state.context)

    @property
    def formatter(self) -> Any:
        """The formatter the agent's prompts go through (2.x: its model's)."""
        return self.agent.formatter if MAJOR == 1 else self.agent.model.formatter

    async def warm(self) -> None:
        """Bind and count the whole context once (what the first step of a session pays)."""
        if MAJOR == 1:
            self._tools = self.agent.toolkit.get_json_schemas()
        else:
            await self.agent.compress_context()  # binds the middleware: manager, tools
            self.manager = self.middleware.manager
            self._tools = await self.agent.toolkit.get_tool_schemas(
                self.agent.state.tool_context.activated_groups
            )
        await self.step()

    async def step(self) -> None:
        """Ours: what runs before a reasoning step (see the module)."""
        if MAJOR == 1:
            await self.manager.pipeline.before_reasoning(SYS_PROMPT, self._tools)
        else:
            await self.agent.compress_context()

    async def add_result(self, call_id: str, output: str) -> None:
        """One step's new tool result (on 2.x with its call, in the reply's message)."""
        if MAJOR == 1:
            from agentscope.message import Msg

            msg = Msg(
                "system",
                [{"type": "tool_result", "id": call_id, "name": "shell", "output": output}],
                "system",
            )
            await self.agent.memory.add(msg)
            self._added.append(lambda: self.agent.memory.delete([msg.id]))
            return
        self._added.append(
            _append2(
                self.agent,
                [_call2(call_id, "shell", {"command": "curl"}), _result2(call_id, "shell", output)],
            )
        )

    async def remove_added(self) -> None:
        """Take the step's additions out again (every step measures the same context).

        On 2.x the context is then counted once (outside any timing): ours learns of a change
        to ``state.context`` by the messages' lengths, and a reply's message that shrank
        behind its back and grew back to the same length by the next step would look unchanged
        (a session only appends to it; ours' own removals are seen at once)."""
        while self._added:
            done = self._added.pop()()
            if done is not None and hasattr(done, "__await__"):
                await done
        if MAJOR >= 2:
            await self.count()

    async def format_and_count(self, counter: Any, formatter: Any) -> int:
        """(a): format the whole prompt with the formatter and count it with ``counter``."""
        if MAJOR == 1:
            from agentscope.message import Msg

            prompt = await formatter.format(
                [Msg("system", SYS_PROMPT, "system"), *await self.agent.memory.get_memory()]
            )
            return await counter.count(prompt, self._tools)
        from agentscope.message import SystemMsg

        prompt = await formatter.format(
            [SystemMsg("system", SYS_PROMPT), *self.agent.state.context]
        )
        return counter.count_formatted(prompt, self._tools)

    async def count(self) -> int:
        """Our count of the prompt the agent would send now."""
        return (await self.manager.count()).total

    def close(self) -> None:
        self.manager.detach()


def _append2(agent: Any, blocks: list[Any]) -> Callable[[], None]:
    """Append ``blocks`` to the reply's assistant message (a new one after a user message), as
    2.x's ``state.append_context`` does; return the undo."""
    from agentscope.message import Msg

    context = agent.state.context
    if context and context[-1].role == "assistant":
        msg = context[-1]
        msg.content.extend(blocks)

        def undo() -> None:
            for block in blocks:
                msg.content.remove(block)

        return undo
    msg = Msg(name=agent.name, role="assistant", content=list(blocks))
    context.append(msg)
    return lambda: context.remove(msg)


async def managed(
    records: list[Record], config: dict[str, Any], formatter_name: str = "DashScopeChatFormatter"
) -> Managed:
    """An agent of the installed major with ``records`` as its context and ours attached with
    ``config``, warmed (see :meth:`Managed.warm`)."""
    messages = native_messages(records)
    if MAJOR == 1:
        from agentscope.agent import ReActAgent
        from agentscope.tool import Toolkit

        agent = ReActAgent(
            name="bench",
            sys_prompt=SYS_PROMPT,
            model=ScriptedChatModel(["ok"]),
            formatter=formatter(formatter_name),
            toolkit=Toolkit(),
        )
        agent.set_console_output_enabled(False)
        await agent.memory.add(messages)
        result = Managed(agent, enable_context_management(agent, config))
    else:
        from agentscope.agent import Agent
        from agentscope.tool import Toolkit

        from agentscope_context_ext import ContextMiddleware

        model = ScriptedChatModel(["ok"])
        model.formatter = formatter(formatter_name)
        middleware = ContextMiddleware(config)
        agent = Agent(
            name="bench",
            system_prompt=SYS_PROMPT,
            model=model,
            toolkit=Toolkit(),
            middlewares=[middleware],
            offloader=middleware.offloader,
        )
        agent.state.context.extend(messages)
        result = Managed(agent, None, middleware)
    await result.warm()
    return result


class Native:
    """The same agent with AgentScope's own compression, below its threshold: its check.

    On 1.x, ``ReActAgent(compression_config=...)`` and its ``_compress_memory_if_needed`` with
    ``counter`` as its ``agent_token_counter``. On 2.x, a plain ``Agent`` (no middleware) and
    ``agent.compress_context()``, which runs ``_compress_context_impl``: the image limit, the
    model input (system prompt, context, tool schemas) and ``model.count_tokens``; with
    ``counter`` the model counts exactly (the formatted prompt, like 1.x's counter), without it
    as every 2.0.x model does (``ChatModelBase.count_tokens``, bytes/4).
    """

    def __init__(self, agent: Any) -> None:
        self.agent = agent
        self._added: list[Callable[[], Any]] = []

    async def add_result(self, call_id: str, output: str) -> None:
        if MAJOR == 1:
            from agentscope.message import Msg

            msg = Msg(
                "system",
                [{"type": "tool_result", "id": call_id, "name": "shell", "output": output}],
                "system",
            )
            await self.agent.memory.add(msg)
            self._added.append(lambda: self.agent.memory.delete([msg.id]))
            return
        self._added.append(
            _append2(
                self.agent,
                [_call2(call_id, "shell", {"command": "curl"}), _result2(call_id, "shell", output)],
            )
        )

    async def remove_added(self) -> None:
        while self._added:
            done = self._added.pop()()
            if done is not None and hasattr(done, "__await__"):
                await done

    async def check(self) -> None:
        if MAJOR == 1:
            await self.agent._compress_memory_if_needed()
        else:
            await self.agent.compress_context()


async def native(
    records: list[Record], counter: Any | None, formatter_name: str = "DashScopeChatFormatter"
) -> Native:
    """AgentScope's own compression on an agent with ``records`` as its context, its threshold
    out of reach (see :class:`Native`). ``counter=None`` is 2.x's own count (2.x only)."""
    messages = native_messages(records)
    if MAJOR == 1:
        from agentscope.agent import ReActAgent
        from agentscope.memory import InMemoryMemory
        from agentscope.tool import Toolkit

        if counter is None:
            raise ValueError("1.x's compression needs an agent_token_counter")
        agent = ReActAgent(
            name="native",
            sys_prompt=SYS_PROMPT,
            model=ScriptedChatModel(["ok"]),
            formatter=formatter(formatter_name),
            toolkit=Toolkit(),
            memory=InMemoryMemory(),
            compression_config=ReActAgent.CompressionConfig(
                enable=True, agent_token_counter=counter, trigger_threshold=10**9
            ),
        )
        await agent.memory.add(messages)
        return Native(agent)
    from agentscope.agent import Agent
    from agentscope.tool import Toolkit

    model_class = ScriptedChatModel if counter is None else _exactly_counted(counter)
    model = model_class(["ok"], context_size=10**9)
    model.formatter = formatter(formatter_name)
    agent = Agent(name="native", system_prompt=SYS_PROMPT, model=model, toolkit=Toolkit())
    agent.state.context.extend(messages)
    await agent.compress_context()  # warm, as ours is
    return Native(agent)


def _exactly_counted(counter: Any) -> type:
    class ExactlyCounted(ScriptedChatModel):
        """The scripted model whose ``count_tokens`` formats the prompt and counts it exactly
        (2.0.x's models estimate bytes/4)."""

        async def count_tokens(self, messages: list, tools: list[dict] | None) -> int:
            return counter.count_formatted(await self.formatter.format(messages), tools)

    return ExactlyCounted


def qwen_counter() -> Any:
    """The exact Qwen counter every benchmark counts with."""
    return get_token_counter("qwen")


def plain_counter() -> Any:
    """The exact Qwen counter without the counts it keeps of large texts: every count
    tokenizes, as a hook that calls a tokenizer does (the comparison sides of B1)."""
    return get_token_counter("qwen", memo_size=0)
