"""A framework of the tests' own, for the core tests: no AgentScope anywhere.

The core reaches a framework only through ``ContextPort`` (a memory of messages), a
``RecordCodec`` (how the dialog store saves them), ``ContextManager.prompt_parts`` (the system
prompt and tool schemas) and plain async tool functions. This module is a small, honest
implementation of that framework side over the core's neutral ``Message``: what an adapter does
for AgentScope, done for a list of neutral messages. It is a test double of the framework, never
of the package's own code; the core runs unchanged against it.

- :class:`MessageCodec`: neutral messages as dialog records and back.
- :class:`NeutralPort`: the memory (messages, truncation records kept beside them, the summary,
  the change log), with a session state that survives a save and reload.
- :class:`NeutralManager`: the core ``ContextManager`` over the port, with tool schemas.
- :class:`NeutralAgent`: a ReAct loop (model call, tool calls, results, repeat) with a scripted
  model: the pipeline runs before every model call, as an adapter's hook runs it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import itertools
import json
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentscope_context_ext.core.config import ContextConfig
from agentscope_context_ext.core.events import EventBus
from agentscope_context_ext.core.longterm import NOTES_DIRNAME, AgentRunner
from agentscope_context_ext.core.manager import ContextManager, LongTermHooks, resolve_window
from agentscope_context_ext.core.messages import (
    Media,
    Message,
    Part,
    Reminder,
    Text,
    Thinking,
    ToolCall,
    ToolResult,
)
from agentscope_context_ext.core.pipeline import (
    CallModel,
    ResultChange,
    ResultSlot,
    SavedText,
    TextSlot,
    TruncationRecord,
    message_bound,
)
from agentscope_context_ext.core.summary import CompactSummary
from agentscope_context_ext.core.tokens import TokenCounter, get_token_counter, view_to_formatted
from agentscope_context_ext.core.truncation import sendable_text, split_notice
from agentscope_context_ext.core.workspace import DialogStore, open_workspace

__all__ = [
    "MessageCodec",
    "ModelTurn",
    "NeutralAgent",
    "NeutralManager",
    "NeutralPort",
    "ScriptedCallModel",
    "SummaryCall",
    "assistant",
    "everything",
    "fetch_session",
    "replies",
    "results",
    "schema",
    "user",
]

_ids = itertools.count(1)


def _new_id(prefix: str) -> str:
    return f"{prefix}-{next(_ids):06d}"


def user(text: str, msg_id: str | None = None, timestamp: str = "") -> Message:
    """A user's message."""
    return Message(msg_id or _new_id("user"), "user", "user", timestamp, (Text(text),))


def assistant(
    text: str | None = None, *calls: ToolCall, msg_id: str | None = None, timestamp: str = ""
) -> Message:
    """An assistant's message: optional text, then tool calls (parallel when several)."""
    parts: tuple[Part, ...] = ((Text(text),) if text else ()) + calls
    return Message(msg_id or _new_id("assistant"), "assistant", "assistant", timestamp, parts)


def results(*answers: ToolResult, msg_id: str | None = None, timestamp: str = "") -> Message:
    """A message carrying tool results (the role 1.x's ReActAgent gives them)."""
    return Message(msg_id or _new_id("results"), "system", "system", timestamp, answers)


# ------------------------------------------------------------------------------- the codec


def _encode_part(part: Part) -> dict[str, Any]:
    if isinstance(part, Reminder):
        return {"type": "reminder", "text": part.text}
    if isinstance(part, Text):
        return {"type": "text", "text": part.text}
    if isinstance(part, Thinking):
        return {"type": "thinking", "text": part.text}
    if isinstance(part, ToolCall):
        return {"type": "tool_call", "id": part.id, "name": part.name, "input": part.arguments}
    if isinstance(part, ToolResult):
        return {
            "type": "tool_result",
            "id": part.id,
            "name": part.name,
            "text": part.text,
            "media": [_encode_part(m) for m in part.media],
        }
    return {"type": "media", **dataclasses.asdict(part)}


def _decode_part(data: Mapping[str, Any]) -> Part:
    kind = data["type"]
    if kind == "reminder":
        return Reminder(str(data["text"]))
    if kind == "text":
        return Text(str(data["text"]))
    if kind == "thinking":
        return Thinking(str(data["text"]))
    if kind == "tool_call":
        return ToolCall(str(data["id"]), str(data["name"]), dict(data["input"]))
    if kind == "tool_result":
        media = tuple(_decode_part(m) for m in data["media"])
        return ToolResult(str(data["id"]), str(data["name"]), str(data["text"]), media)  # type: ignore[arg-type]
    if kind == "media":
        return Media(data["kind"], data["media_type"], data["url"], data["data"])
    raise ValueError(f"unknown part type {kind!r}")


class MessageCodec:
    """Neutral messages as the JSON records of a dialog file (a framework's ``to_dict``)."""

    def encode(self, msg: Message) -> dict[str, Any]:
        return {
            "id": msg.id,
            "role": msg.role,
            "name": msg.name,
            "timestamp": msg.timestamp,
            "parts": [_encode_part(part) for part in msg.parts],
        }

    def decode(self, record: dict[str, Any]) -> Message:
        return Message(
            id=str(record["id"]),
            role=str(record["role"]),
            name=str(record.get("name", "")),
            timestamp=str(record.get("timestamp", "")),
            parts=tuple(_decode_part(part) for part in record["parts"]),
        )

    def view(self, msg: Message) -> Message:
        return msg


# ------------------------------------------------------------------------------- the port


class NeutralPort:
    """A framework's memory of neutral messages, as the pipeline's ``ContextPort``.

    Truncation records are kept beside each message (as 1.x keeps them in ``Msg.metadata`` and
    2.x in the block's), so :meth:`state` and :meth:`load` carry them across a session reload.
    Every message is counted as the neutral layout sends it (``view_to_formatted``), so the
    exact count of a prompt is :meth:`prompt_tokens`.

    Args:
        counter (`TokenCounter`): The vocabulary.
    """

    def __init__(self, counter: TokenCounter) -> None:
        self.counter = counter
        self.summary: CompactSummary | None = None
        self._messages: dict[str, Message] = {}
        self._records: dict[str, dict[str, dict]] = {}
        self._epoch = 0
        self._changed: set[str] = set()
        self._removed: set[str] = set()
        self._pending: list[str] = []

    # ------------------------------------------------------------ the framework's side

    def add(self, *msgs: Message) -> None:
        """Messages the agent appends (a tool result is queued for stage one)."""
        for msg in msgs:
            self._messages[msg.id] = msg
            self._changed.add(msg.id)
            if msg.tool_results:
                self._pending.append(msg.id)

    @property
    def messages(self) -> list[Message]:
        """The live messages, oldest first."""
        return list(self._messages.values())

    def records(self, msg_id: str) -> dict[str, dict]:
        """The truncation records kept with one message, by call id (``#n`` for a text part)."""
        return self._records.get(msg_id, {})

    def state(self) -> str:
        """The session state, as JSON: messages, their records, the summary."""
        codec = MessageCodec()
        return json.dumps(
            {
                "messages": [codec.encode(msg) for msg in self._messages.values()],
                "records": self._records,
                "summary": self.summary.model_dump(mode="json") if self.summary else None,
            }
        )

    def load(self, state: str) -> None:
        """Replace everything with a saved session state (a new epoch: recount it all)."""
        data = json.loads(state)
        codec = MessageCodec()
        self._messages = {}
        self._records = data["records"]
        self.summary = CompactSummary.model_validate(data["summary"]) if data["summary"] else None
        self._epoch += 1
        self._changed, self._removed, self._pending = set(), set(), []
        for record in data["messages"]:
            self.add(codec.decode(record))
        self._changed = set()

    def head(self) -> list[Message]:
        """The messages in front of the live ones: the summary, as a user message."""
        if self.summary is None:
            return []
        return [Message("context-summary", "user", "user", "", (Text(self.summary.render()),))]

    def prompt_tokens(self, sys_prompt: str, tools: list[dict] | None) -> int:
        """Exact tokens of the prompt as it would be sent now, formatted whole."""
        system = Message("system", "system", "system", "", (Text(sys_prompt),))
        formatted = [
            message
            for msg in [system, *self.head(), *self._messages.values()]
            for message in view_to_formatted(msg)
        ]
        return self.counter.count_formatted(formatted, tools)

    # --------------------------------------------------------------------- the port

    def message_ids(self) -> list[str]:
        return list(self._messages)

    def view(self, msg_id: str, saved_text: SavedText | None = None) -> Message:
        msg = self._get(msg_id)
        if saved_text is None:
            return msg
        parts: list[Part] = []
        for part in msg.parts:
            if isinstance(part, ToolResult) and (split := split_notice(part.text)) is not None:
                part = dataclasses.replace(part, full_text=saved_text(split[1].file_path))
            parts.append(part)
        return dataclasses.replace(msg, parts=tuple(parts))

    def pending_results(self) -> list[str]:
        pending, self._pending = self._pending, []
        return [msg_id for msg_id in pending if msg_id in self._messages]

    def requeue(self, msg_id: str) -> None:
        if msg_id in self._messages and msg_id not in self._pending:
            self._pending.append(msg_id)

    def result_message_ids(self) -> list[str]:
        return [msg.id for msg in self._messages.values() if msg.tool_results]

    def result_slots(self, msg_id: str) -> list[ResultSlot]:
        records = self.records(msg_id)
        return [
            ResultSlot(
                call_id=result.id,
                tool=result.name,
                text=result.text if result.text or not result.media else None,
                media=result.media,
                tool_input=self._arguments(result.id),
                record=TruncationRecord.from_dict(records.get(result.id)),
            )
            for result in self._get(msg_id).tool_results
        ]

    def apply(
        self, msg_id: str, slots: Sequence[ResultSlot], changes: Mapping[str, ResultChange]
    ) -> None:
        records = self._records.setdefault(msg_id, {})
        for slot in slots:
            records[slot.call_id] = slot.record.to_dict()
        if not changes:
            return
        msg = self._get(msg_id)
        parts: list[Part] = []
        for part in msg.parts:
            change = changes.get(part.id) if isinstance(part, ToolResult) else None
            if change is not None:
                # as a framework writes it: the text, then each medium kept or its placeholder
                texts = [change.text] if change.text else []
                texts += [item for item in change.media if isinstance(item, str)]
                kept = tuple(item for item in change.media if isinstance(item, Media))
                part = dataclasses.replace(
                    part, text=sendable_text("\n".join(texts)), media=kept, full_text=None
                )
            parts.append(part)
        self._messages[msg_id] = dataclasses.replace(msg, parts=tuple(parts))
        self._changed.add(msg_id)

    def user_text_slots(self, msg_id: str) -> list[TextSlot]:
        msg = self._get(msg_id)
        if msg.role != "user":
            return []
        records = self.records(msg_id)
        return [
            TextSlot(f"{msg_id}#{i}", part.text, TruncationRecord.from_dict(records.get(f"#{i}")))
            for i, part in enumerate(msg.parts)
            if type(part) is Text
        ]

    def apply_texts(
        self, msg_id: str, slots: Sequence[TextSlot], changes: Mapping[str, str]
    ) -> None:
        records = self._records.setdefault(msg_id, {})
        for slot in slots:
            records["#" + slot.key.rsplit("#", 1)[1]] = slot.record.to_dict()
        if not changes:
            return
        msg = self._get(msg_id)
        parts = list(msg.parts)
        for key, text in changes.items():
            parts[int(key.rsplit("#", 1)[1])] = Text(sendable_text(text))
        self._messages[msg_id] = dataclasses.replace(msg, parts=tuple(parts))
        self._changed.add(msg_id)

    def user_media(self, msg_id: str) -> list[tuple[str, Media]]:
        msg = self._get(msg_id)
        if msg.role != "user":
            return []
        return [(f"{msg_id}#{i}", part) for i, part in enumerate(msg.parts) if type(part) is Media]

    def replace_user_media(self, msg_id: str, placeholders: Mapping[str, str]) -> None:
        if not placeholders:
            return
        msg = self._get(msg_id)
        parts = list(msg.parts)
        for key, text in placeholders.items():
            parts[int(key.rsplit("#", 1)[1])] = Text(text)
        self._messages[msg_id] = dataclasses.replace(msg, parts=tuple(parts))
        self._changed.add(msg_id)

    def one_step(self) -> contextlib.nullcontext[None]:
        return contextlib.nullcontext()

    def drain_changes(self) -> tuple[int, set[str], set[str]]:
        changed, removed = self._changed & set(self._messages), self._removed
        self._changed, self._removed = set(), set()
        return self._epoch, changed, removed

    @property
    def epoch(self) -> int:
        return self._epoch

    async def count(self, msg_id: str) -> int:
        return self.counter.count_view(self._get(msg_id))

    def bound(self, msg_id: str) -> int:
        if msg_id not in self._messages:
            raise KeyError(msg_id)
        return message_bound(self._messages[msg_id], self.counter.media_token_cost)

    def head_key(self) -> tuple:
        return (self.summary.render() if self.summary else "",)

    async def count_head(self) -> int:
        return sum(self.counter.count_view(msg) for msg in self.head())

    async def count_system(self, text: str) -> int:
        return self.counter.count_view(Message("system", "system", "system", "", (Text(text),)))

    def native(self, msg_ids: Sequence[str]) -> list[Message]:
        return [self._get(msg_id) for msg_id in msg_ids]

    async def remove(self, msg_ids: Sequence[str]) -> None:
        for msg_id in msg_ids:
            self._get(msg_id)
            del self._messages[msg_id]
            self._records.pop(msg_id, None)
            self._removed.add(msg_id)

    def set_summary(self, summary: CompactSummary | None) -> None:
        self.summary = summary

    def _get(self, msg_id: str) -> Message:
        try:
            return self._messages[msg_id]
        except KeyError:
            raise KeyError(f"no message {msg_id} in memory") from None

    def _arguments(self, call_id: str) -> dict[str, Any]:
        for msg in self._messages.values():
            for call in msg.tool_calls:
                if call.id == call_id:
                    return dict(call.arguments)
        return {}


# ---------------------------------------------------------------------------- the manager

CoreTool = Callable[..., Awaitable[str]]


def schema(tool: CoreTool) -> dict:
    """The JSON schema of a core tool, as a framework builds it from the signature."""
    properties = {
        name: {"type": "integer" if param.annotation in (int, "int") else "string"}
        for name, param in inspect.signature(tool).parameters.items()
    }
    return {
        "type": "function",
        "function": {
            "name": tool.__name__,
            "description": inspect.getdoc(tool) or "",
            "parameters": {"type": "object", "properties": properties},
        },
    }


class NeutralManager(ContextManager):
    """The core's ``ContextManager`` on a :class:`NeutralPort`.

    Args:
        config (`ContextConfig | dict`): The configuration (``workspace`` included).
        tools (`Sequence[CoreTool]`): The agent's own tools (this package's are added).
        summary_call (`CallModel | None`): The compaction model; ``None``: extractive.
        runner (`Callable[[str, int], AgentRunner] | None`): The Summarizer and consolidation
            agents (``None``: long-term memory off).
        system_prompt (`str`): The agent's system prompt.
    """

    def __init__(
        self,
        config: ContextConfig | dict,
        tools: Sequence[CoreTool] = (),
        summary_call: CallModel | None = None,
        runner: Callable[[str, int], AgentRunner] | None = None,
        system_prompt: str = "You work with tools.",
    ) -> None:
        config = ContextConfig.load(config)
        extra = (NOTES_DIRNAME,) if config.long_term_memory.enabled else ()
        workspace, storage = open_workspace(config.workspace, extra)
        counter = get_token_counter(config.tokenizer, media_token_cost=config.media_token_cost)
        self.system_prompt = system_prompt
        self.memory_text: str | None = None
        super().__init__(
            config,
            port=NeutralPort(counter),
            counter=counter,
            max_input_tokens=resolve_window(config, None, None),
            workspace=workspace,
            storage=storage,
            dialog_store=DialogStore(storage, codec=MessageCodec()),
            bus=EventBus(),
            summary_call=summary_call,
            long_term=None if runner is None else LongTermHooks(runner, self._show),
        )
        self.own_tools = {tool.__name__: tool for tool in tools}
        self.all_tools = {**self.own_tools, **{tool.__name__: tool for _, tool in self.tools()}}

    def _show(self, text: str | None) -> None:
        self.memory_text = text

    def detach(self) -> None:
        self.detached = True
        self.close_long_term()

    async def prompt_parts(self) -> tuple[str, list[dict]]:
        sys_prompt = self.system_prompt
        if self.memory_text:
            sys_prompt += "\n\n" + self.memory_text
        return sys_prompt, [schema(tool) for tool in self.all_tools.values()]


# ------------------------------------------------------------------------------ the agent


@dataclass
class ModelTurn:
    """One model call as the scripted model receives it."""

    index: int
    sys_prompt: str
    messages: list[Message]
    """The head (the summary) and the live messages, as sent."""
    tools: list[dict]
    """The tool schemas the model is shown."""
    prompt_tokens: int
    """Exact tokens of the whole prompt (formatted whole, tools included)."""
    counted_tokens: int
    """What the pipeline counted before the call (``await manager.count()``)."""

    @property
    def text(self) -> str:
        """Every string of the prompt."""
        return "\n".join([self.sys_prompt, *(m.raw_text() for m in self.messages)])

    def orphans(self) -> list[str]:
        """Tool results sent without their call, and calls without their result (but the
        last message's: it is the call being made)."""
        problems = []
        open_calls: dict[str, int] = {}
        for msg in self.messages:
            for result in msg.tool_results:
                if open_calls.get(result.id, 0) == 0:
                    problems.append(f"result without call: {result.id}")
                else:
                    open_calls[result.id] -= 1
            for call in msg.tool_calls:
                open_calls[call.id] = open_calls.get(call.id, 0) + 1
        return problems + [f"call without result: {c}" for c, n in open_calls.items() if n > 0]

    def tool_names(self) -> set[str]:
        return {tool["function"]["name"] for tool in self.tools}


Answer = str | Message | None
Respond = Callable[[ModelTurn], Answer | Awaitable[Answer]]


@dataclass
class NeutralAgent:
    """A ReAct loop over a :class:`NeutralManager`: before every model call the pipeline runs
    (``manager.before_model_call()``), the scripted model answers with text or an assistant
    message with tool calls, every call is run and its result appended, one message each.

    Args:
        manager (`NeutralManager`): The context management.
        respond (`Respond`): The scripted model: a turn in, an answer out (sync or async).
        max_iters (`int`): Model calls per reply.
    """

    manager: NeutralManager
    respond: Respond
    max_iters: int = 100
    turns: list[ModelTurn] = field(default_factory=list)

    @property
    def port(self) -> NeutralPort:
        return self.manager.port  # type: ignore[return-value]

    async def ask(self, text: str | Message | None) -> str:
        """One user message (a text, or a message of its own); ``None``: carry on from the
        context as it is, without a new message. The agent's final text."""
        if text is not None:
            self.port.add(text if isinstance(text, Message) else user(text))
        for _ in range(self.max_iters):
            manager = self.manager
            await manager.before_model_call()
            sys_prompt, schemas = await manager.prompt_parts()
            shown = manager.offered_tools(schemas)
            turn = ModelTurn(
                len(self.turns),
                sys_prompt,
                [*self.port.head(), *self.port.messages],
                shown,
                self.port.prompt_tokens(sys_prompt, shown),
                (await manager.count()).total,
            )
            self.turns.append(turn)
            answer = self.respond(turn)
            if inspect.isawaitable(answer):
                answer = await answer
            msg = answer if isinstance(answer, Message) else assistant(answer or "")
            self.port.add(msg)
            if not msg.tool_calls:
                return msg.text
            for call in msg.tool_calls:
                tool = manager.all_tools[call.name]
                output = await tool(**call.arguments)
                # a tool answers text, or (text, media): e.g. a screenshot
                text, media = output if isinstance(output, tuple) else (output, ())
                self.port.add(results(ToolResult(call.id, call.name, text, tuple(media))))
        return ""


def fetch_session(
    plan: Sequence[Sequence[tuple[int, int]]],
    first_step: int = 0,
    final: str = "All documents fetched.",
) -> Respond:
    """The scripted model of a session (``harness_common.session_plan``): at each model call the
    next step's ``fetch`` calls (ids ``call-<step>-<k>``, steps numbered from ``first_step``),
    then ``final``."""

    def respond(turn: ModelTurn) -> Answer:
        if turn.index >= len(plan):
            return final
        step = first_step + turn.index
        calls = [
            ToolCall(f"call-{step}-{k}", "fetch", {"size_kb": size, "seed": seed})
            for k, (size, seed) in enumerate(plan[turn.index])
        ]
        return assistant(f"step {step}", *calls)

    return respond


def replies(*answers: Answer) -> Respond:
    """The scripted model of a few turns: ``answers`` in order, then "Done."."""
    queue = list(answers)
    return lambda turn: queue.pop(0) if queue else "Done."


def everything(agent: NeutralAgent) -> Iterator[Message]:
    """The messages compaction moved to ``dialog/`` (oldest first), then the live ones."""
    store = agent.manager.dialog_store
    for record in store.iter_records(newest_first=False):
        yield record.msg
    yield from agent.port.messages


def workspace_files(root: Path, folder: str) -> list[Path]:
    """The files of one workspace folder (none when it does not exist)."""
    return sorted((root / folder).glob("*")) if (root / folder).is_dir() else []


# ------------------------------------------------------------------- the compaction model


@dataclass
class SummaryCall:
    """One call of a compaction model, as the core makes it (``CallModel``)."""

    index: int
    instruction: str
    """The system instruction."""
    content: str
    """The user content: the rendered messages (and the previous summary)."""

    @property
    def text(self) -> str:
        """The whole prompt's text, as a chat model would receive it."""
        return f"{self.instruction}\n{self.content}"


class ScriptedCallModel:
    """A compaction model on the core's ``CallModel`` interface (``(instruction, content) ->
    answer``), answering from a script: in order from a list, or a function of each call (sync
    or async). An exception instance in the script is raised; ``None`` is no answer at all.
    Every call is recorded in :attr:`calls`.

    Args:
        script (`Sequence | Callable[[SummaryCall], Any]`): The answers.
    """

    def __init__(self, script: Sequence[Any] | Callable[[SummaryCall], Any]) -> None:
        self._respond = script if callable(script) else None
        self._script = [] if callable(script) else list(script)
        self.calls: list[SummaryCall] = []

    async def __call__(self, instruction: str, content: str) -> str:
        call = SummaryCall(len(self.calls), instruction, content)
        self.calls.append(call)
        if self._respond is not None:
            answer = self._respond(call)
            if inspect.isawaitable(answer):
                answer = await answer
        elif self._script:
            answer = self._script.pop(0)
        else:
            raise RuntimeError(f"ScriptedCallModel: script exhausted at call {call.index + 1}")
        if isinstance(answer, BaseException):
            raise answer
        return answer
