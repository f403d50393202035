"""``ContextChecker``: how many tokens the model would receive (SPEC 4 step 2, 5.1).

System prompt + summary message + messages + tool schemas, counted incrementally: each message
is counted once (through the agent's own formatter when there is one, so the count is that of
what is actually sent) and recounted only when the memory reports it changed. A step with no
new message re-tokenizes nothing.

Tokenizing is deferred while it cannot matter: a byte-level BPE token covers at least one byte,
so a message's UTF-8 size (doubled for non-ASCII text, which Unicode normalisation can expand)
plus its template overhead bounds its token count from above. While the bounded total stays
under the compaction trigger, new messages are not tokenized at all; the moment it could cross,
every pending message is counted exactly. ``count(exact=True)`` always counts exactly.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any

from agentscope.formatter import FormatterBase
from agentscope.message import Msg

from ..memory import ContextMemory
from ..core.tokens import TokenCounter
from ..core.truncation import encoded_size

logger = logging.getLogger("agentscope_context_ext")


@dataclass(frozen=True)
class ContextCount:
    """Tokens of each part of the prompt."""

    system: int
    """The system prompt."""
    head: int
    """The summary message(s) at the head of the memory."""
    messages: int
    """The live messages."""
    tools: int
    """The tool JSON schemas."""
    calibration: int = 0
    """Shift learned from the provider's reported usage (``calibrate_with_usage``)."""
    estimated: bool = False
    """``messages`` is an upper bound (some new messages not tokenized yet, far from the trigger)."""

    @property
    def total(self) -> int:
        """Everything the model receives."""
        return self.system + self.head + self.messages + self.tools + self.calibration


class ContextChecker:
    """Keeps a running token count of a ``ContextMemory``.

    Args:
        counter (`TokenCounter`): The vocabulary to count with.
        formatter (`FormatterBase | None`): The agent's formatter; each message is formatted
            alone and counted as sent. ``None`` counts a neutral rendering of the message.
    """

    def __init__(self, counter: TokenCounter, formatter: FormatterBase | None = None) -> None:
        self.counter = counter
        self.formatter = formatter
        self._counts: dict[str, int] = {}
        self._bounds: dict[str, int] = {}
        self._messages_total = 0
        self._epoch: int | None = None
        self._system: tuple[str, int] | None = None
        self._head: tuple[tuple[str, ...], int] | None = None
        self._tools_key: tuple[tuple, int] | None = None
        self._tools_bound_key: tuple[tuple, int] | None = None

    async def count_msg(self, msg: Msg) -> int:
        """Tokens of one message as the formatter sends it."""
        if self.formatter is not None:
            try:
                return self.counter.count_formatted(await self.formatter.format([msg]))
            except Exception as exc:  # noqa: BLE001 - any formatter quirk: count the message neutrally
                logger.debug("formatter could not format %s alone (%s)", msg.id, exc)
        return self.counter.count_msg(msg)

    async def message_tokens(self, memory: ContextMemory) -> dict[str, int]:
        """Exact per-message token counts, synced with the memory's changes."""
        self._sync(memory)
        await self._resolve(memory)
        return self._counts

    async def count(
        self,
        memory: ContextMemory,
        sys_prompt: str,
        tools: list[dict] | None = None,
        exact_above: int | None = None,
    ) -> ContextCount:
        """Count the prompt the agent would send now.

        Args:
            exact_above (`int | None`): ``None`` counts exactly. Otherwise new messages are only
                bounded from above while the bounded total stays at or below this many tokens
                (the result is then marked ``estimated``).
        """
        self._sync(memory)
        head = await self._head_tokens(memory)
        if exact_above is not None:
            await self._narrow(memory, sys_prompt, head, tools, exact_above)
            system = self._system_bound(sys_prompt)
            tools_bound, tools_exact = self._tools_bound(tools)
            approximate = (
                bool(self._bounds) or self._exact_system(sys_prompt) is None or not tools_exact
            )
            if approximate and system + head + tools_bound + self._messages_total <= exact_above:
                return ContextCount(
                    system=system,
                    head=head,
                    messages=self._messages_total,
                    tools=tools_bound,
                    estimated=True,
                )
        await self._resolve(memory)
        return ContextCount(
            system=await self._system_tokens(sys_prompt),
            head=head,
            messages=self._messages_total,
            tools=self._tools_tokens(tools),
        )

    def _sync(self, memory: ContextMemory) -> None:
        """Fold the memory's change log in: new or edited messages get an upper bound."""
        epoch, changed, removed = memory.drain_changes()
        if epoch != self._epoch:
            self._epoch = epoch
            self._counts = {}
            self._bounds = {
                msg.id: message_bound(msg, self.counter.media_token_cost) for msg in memory.messages
            }
            self._messages_total = sum(self._bounds.values())
            return
        for msg_id in removed:
            self._messages_total -= self._counts.pop(msg_id, 0) + self._bounds.pop(msg_id, 0)
        for msg_id in changed:
            msg = memory.get(msg_id)
            if msg is None:
                continue
            self._messages_total -= self._counts.pop(msg_id, 0) + self._bounds.pop(msg_id, 0)
            bound = message_bound(msg, self.counter.media_token_cost)
            self._bounds[msg_id] = bound
            self._messages_total += bound

    async def _narrow(
        self,
        memory: ContextMemory,
        sys_prompt: str,
        head: int,
        tools: list[dict] | None,
        limit: int,
    ) -> None:
        """Tokenize the largest unknowns (pending messages, the system prompt) first, and only
        until the bounded total is back under ``limit``: a bound under it decides as well as an
        exact count would."""
        pending = sorted(self._bounds, key=self._bounds.__getitem__, reverse=True)
        index = 0
        while True:
            system = self._system_bound(sys_prompt)
            tools_bound, _ = self._tools_bound(tools)
            if system + head + tools_bound + self._messages_total <= limit:
                return
            system_unknown = self._exact_system(sys_prompt) is None
            next_bound = self._bounds.get(pending[index], 0) if index < len(pending) else -1
            if system_unknown and system >= next_bound:
                await self._system_tokens(sys_prompt)
            elif index < len(pending):
                await self._resolve_one(memory, pending[index])
                index += 1
            else:
                return

    async def _resolve(self, memory: ContextMemory) -> None:
        """Tokenize every message that only has a bound."""
        for msg_id in list(self._bounds):
            await self._resolve_one(memory, msg_id)

    async def _resolve_one(self, memory: ContextMemory, msg_id: str) -> None:
        """Replace one message's bound by its exact count."""
        bound = self._bounds.pop(msg_id)
        self._messages_total -= bound
        msg = memory.get(msg_id)
        if msg is None:
            return
        exact = await self.count_msg(msg)
        self._counts[msg_id] = exact
        self._messages_total += exact

    def _exact_system(self, sys_prompt: str) -> int | None:
        if self._system is not None and self._system[0] == sys_prompt:
            return self._system[1]
        return None

    def _system_bound(self, sys_prompt: str) -> int:
        """The exact count if known, else a bound: a long system prompt is counted when needed."""
        exact = self._exact_system(sys_prompt)
        return exact if exact is not None else _MESSAGE_OVERHEAD + _text_bound(sys_prompt)

    def _tools_bound(self, tools: list[dict] | None) -> tuple[int, bool]:
        """(tokens, exact) of the tool schemas: the cached exact count for this tool set, else
        their serialised size as a bound (also cached per tool set)."""
        if not tools:
            return 0, True
        key = tuple(_tool_key(tool) for tool in tools)
        if self._tools_key is not None and self._tools_key[0] == key:
            return self._tools_key[1], True
        if self._tools_bound_key is None or self._tools_bound_key[0] != key:
            size = _text_bound(json.dumps(tools, ensure_ascii=False, default=str))
            self._tools_bound_key = (key, size + _MESSAGE_OVERHEAD)
        return self._tools_bound_key[1], False

    def _tools_tokens(self, tools: list[dict] | None) -> int:
        """Tokens of the tool schemas, recounted only when the tool set changes.

        Serialising the schemas costs more than the rest of a step, and they change only when a
        tool is added, removed or re-described: the cache key is each tool's name, description
        size and parameter names.
        """
        if not tools:
            return 0
        key = tuple(_tool_key(tool) for tool in tools)
        if self._tools_key is not None and self._tools_key[0] == key:
            return self._tools_key[1]
        tokens = self.counter.count_tools(tools)
        self._tools_key = (key, tokens)
        return tokens

    async def _system_tokens(self, sys_prompt: str) -> int:
        if self._system is None or self._system[0] != sys_prompt:
            tokens = await self.count_msg(Msg("system", sys_prompt, "system")) if sys_prompt else 0
            self._system = (sys_prompt, tokens)
        return self._system[1]

    async def _head_tokens(self, memory: ContextMemory) -> int:
        head = memory.head_messages()
        key = tuple(f"{msg.id}:{hash(msg.content)}" for msg in head)
        if self._head is None or self._head[0] != key:
            self._head = (key, sum([await self.count_msg(msg) for msg in head]))
        return self._head[1]


_MESSAGE_OVERHEAD = 64
"""Bytes of chat template around a formatted message (role line, delimiters), rounded up."""
_BLOCK_OVERHEAD = 64
"""Bytes of template around a tool call or tool result (JSON keys, tags), rounded up."""
_MEDIA_TEXT_OVERHEAD = 256
"""Bytes a formatter may add as text around a media block (e.g. promoted tool-result images)."""


def message_bound(msg: Msg, media_token_cost: int) -> int:
    """An upper bound of ``msg``'s token count, without tokenizing it.

    A byte-level BPE token covers at least one byte of the rendered text, so the rendered size
    bounds the count; non-ASCII text counts double because Unicode normalisation (NFC) can
    expand some characters before tokenizing.
    """
    content = msg.content
    if isinstance(content, str):
        return _MESSAGE_OVERHEAD + _text_bound(content)
    total = _MESSAGE_OVERHEAD
    for block in content:
        total += _block_bound(block, media_token_cost)
    return total


def _block_bound(block: Any, media_token_cost: int) -> int:
    if not isinstance(block, dict):
        return _text_bound(str(block))
    kind = block.get("type")
    if kind == "text":
        return _text_bound(str(block.get("text", ""))) + 2
    if kind == "thinking":
        return _text_bound(str(block.get("thinking", ""))) + 2
    if kind in ("image", "audio", "video"):
        return media_token_cost + _MEDIA_TEXT_OVERHEAD
    if kind == "tool_use":
        arguments = json.dumps(block.get("input", {}), ensure_ascii=False, default=str)
        return (
            _BLOCK_OVERHEAD
            + _MESSAGE_OVERHEAD
            + _text_bound(arguments)
            + _text_bound(str(block.get("name", "")))
        )
    if kind == "tool_result":
        output = block.get("output")
        if isinstance(output, list):
            inner = sum(_block_bound(item, media_token_cost) for item in output)
        else:
            inner = _text_bound(
                output
                if isinstance(output, str)
                else json.dumps(output, ensure_ascii=False, default=str)
            )
        return _BLOCK_OVERHEAD + _MESSAGE_OVERHEAD + inner
    return _text_bound(json.dumps(block, ensure_ascii=False, default=str))


def _text_bound(text: str) -> int:
    return len(text) if text.isascii() else 2 * encoded_size(text)


def _tool_key(tool: dict) -> tuple:
    function = tool.get("function", {}) if isinstance(tool, dict) else {}
    parameters = function.get("parameters") or {}
    properties = parameters.get("properties") or {}
    return (
        function.get("name"),
        len(str(function.get("description", ""))),
        tuple(properties),
        tuple(parameters.get("required") or ()),
    )
