"""``TokenTally``: how many tokens the model would receive (design §4 step 2, 5.1).

System prompt + summary message + messages + tool schemas, counted incrementally: each message
is counted once (by the adapter, through the agent's own formatter, so the count is that of what
is actually sent) and recounted only when the memory reports it changed. A step with no new
message re-tokenizes nothing. The tool schemas are counted by the counter, which keeps the
count of the schemas as rendered (a schema edited in any way is counted again).

Tokenizing is deferred while it cannot matter: a byte-level BPE token covers at least one byte,
so a message's UTF-8 size (doubled for non-ASCII text, which Unicode normalisation can expand)
plus its template overhead bounds its token count from above (:func:`message_bound`). While the
bounded total stays under the compaction trigger, new messages are not tokenized at all; when
it could cross, the largest unknowns are counted exactly until the bound is back under it. A
text the counter counted lately (a tool output's excerpt, counted when stage one fitted it) is
bounded by its count instead of its size, so a new large result is tokenized once, not again
here.
``count(port, ..., exact_above=None)`` always counts exactly.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass

from ..messages import Media, Message, Text, Thinking, ToolCall, ToolResult
from ..tokens import TokenCounter
from ..truncation import encoded_size, split_notice
from ._port import ContextPort

__all__ = ["PromptCount", "TokenTally", "message_bound"]


@dataclass(frozen=True)
class PromptCount:
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
    """Shift learned from the provider: its reported usage (``calibrate_with_usage``) and its
    length rejections."""
    estimated: bool = False
    """``messages`` is an upper bound (some new messages not tokenized yet, far from the trigger)."""

    @property
    def total(self) -> int:
        """Everything the model receives, as the provider is expected to count it."""
        return self.floor + self.calibration

    @property
    def floor(self) -> int:
        """Our exact count, without shifts: what a prompt is refused on (a shift makes the
        compaction come earlier, never refuses a call; design §5.1)."""
        return self.system + self.head + self.messages + self.tools


class TokenTally:
    """Keeps a running token count of a managed memory.

    Args:
        counter (`TokenCounter`): Counts the tool schemas.
    """

    def __init__(self, counter: TokenCounter) -> None:
        self.counter = counter
        self._counts: dict[str, int] = {}
        self._bounds: dict[str, int] = {}
        self._messages_total = 0
        self._epoch: int | None = None
        self._system: tuple[str, int] | None = None
        self._head: tuple[tuple, int] | None = None

    async def message_tokens(self, port: ContextPort) -> dict[str, int]:
        """Exact per-message token counts, synced with the memory's changes."""
        self._sync(port)
        await self._resolve(port)
        return self._counts

    async def count(
        self,
        port: ContextPort,
        sys_prompt: str,
        tools: list[dict] | None = None,
        exact_above: int | None = None,
    ) -> PromptCount:
        """Count the prompt the agent would send now.

        Args:
            exact_above (`int | None`): ``None`` counts exactly. Otherwise new messages are only
                bounded from above while the bounded total stays at or below this many tokens
                (the result is then marked ``estimated``).
        """
        self._sync(port)
        head = await self._head_tokens(port)
        tools_tokens = self.counter.count_tools(tools)
        if exact_above is not None:
            await self._narrow(port, sys_prompt, head + tools_tokens, exact_above)
            system = self._system_bound(sys_prompt)
            approximate = bool(self._bounds) or self._exact_system(sys_prompt) is None
            if approximate and system + head + tools_tokens + self._messages_total <= exact_above:
                return PromptCount(system, head, self._messages_total, tools_tokens, estimated=True)
        await self._resolve(port)
        return PromptCount(
            system=await self._system_tokens(port, sys_prompt),
            head=head,
            messages=self._messages_total,
            tools=tools_tokens,
        )

    def _sync(self, port: ContextPort) -> None:
        """Fold the memory's change log in: new or edited messages get an upper bound."""
        epoch, changed, removed = port.drain_changes()
        if epoch != self._epoch:
            self._epoch = epoch
            self._counts = {}
            self._bounds = {msg_id: port.bound(msg_id) for msg_id in port.message_ids()}
            self._messages_total = sum(self._bounds.values())
            return
        for msg_id in removed:
            self._messages_total -= self._counts.pop(msg_id, 0) + self._bounds.pop(msg_id, 0)
        for msg_id in changed:
            try:
                bound = port.bound(msg_id)
            except KeyError:  # a change log entry of something that is not a live message
                continue
            self._messages_total -= self._counts.pop(msg_id, 0) + self._bounds.pop(msg_id, 0)
            self._bounds[msg_id] = bound
            self._messages_total += bound

    async def _narrow(self, port: ContextPort, sys_prompt: str, fixed: int, limit: int) -> None:
        """Tokenize the largest unknowns (pending messages, the system prompt) first, and only
        until the bounded total is back under ``limit``: a bound under it decides as well as an
        exact count would. ``fixed`` is what does not change meanwhile (head and tools)."""
        if not self._bounds and self._exact_system(sys_prompt) is not None:
            return  # nothing left to narrow
        pending = sorted(self._bounds, key=self._bounds.__getitem__, reverse=True)
        index = 0
        while True:
            system = self._system_bound(sys_prompt)
            if system + fixed + self._messages_total <= limit:
                return
            system_unknown = self._exact_system(sys_prompt) is None
            next_bound = self._bounds.get(pending[index], 0) if index < len(pending) else -1
            if system_unknown and system >= next_bound:
                await self._system_tokens(port, sys_prompt)
            elif index < len(pending):
                await self._resolve_one(port, pending[index])
                index += 1
            else:
                return

    async def _resolve(self, port: ContextPort) -> None:
        """Tokenize every message that only has a bound."""
        for msg_id in list(self._bounds):
            await self._resolve_one(port, msg_id)

    async def _resolve_one(self, port: ContextPort, msg_id: str) -> None:
        """Replace one message's bound by its exact count."""
        self._messages_total -= self._bounds.pop(msg_id)
        exact = await port.count(msg_id)
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

    async def _system_tokens(self, port: ContextPort, sys_prompt: str) -> int:
        if self._system is None or self._system[0] != sys_prompt:
            tokens = await port.count_system(sys_prompt) if sys_prompt else 0
            self._system = (sys_prompt, tokens)
        return self._system[1]

    async def _head_tokens(self, port: ContextPort) -> int:
        key = port.head_key()
        if self._head is None or self._head[0] != key:
            self._head = (key, await port.count_head())
        return self._head[1]


_MESSAGE_OVERHEAD = 64
"""Bytes of chat template around a formatted message (role line, delimiters), rounded up."""
_BLOCK_OVERHEAD = 64
"""Bytes of template around a tool call or tool result (JSON keys, tags), rounded up."""
_MEDIA_TEXT_OVERHEAD = 256
"""Bytes a formatter may add as text around a media block (e.g. promoted tool-result images)."""


_JOIN_SLACK = 4
"""Tokens added where a counted text meets the text around it (a merge across the seam)."""

KnownCount = Callable[[str], int | None]


def message_bound(msg: Message, media_token_cost: int, known: KnownCount | None = None) -> int:
    """An upper bound of ``msg``'s token count, without tokenizing it.

    A byte-level BPE token covers at least one byte of the rendered text, so the rendered size
    bounds the count; non-ASCII text counts double because Unicode normalisation (NFC) can
    expand some characters before tokenizing. ``known`` (``TokenCounter.known_count``) gives
    the count of a text counted lately: a text, or the excerpt of a truncated output, so known
    is bounded by that count.
    """
    total = _MESSAGE_OVERHEAD
    for part in msg.parts:
        if isinstance(part, Text | Thinking):
            total += _part_bound(part.text, known) + 2
        elif isinstance(part, Media):
            total += media_token_cost + _MEDIA_TEXT_OVERHEAD
        elif isinstance(part, ToolCall):
            arguments = json.dumps(dict(part.arguments), ensure_ascii=False, default=str)
            total += (
                _BLOCK_OVERHEAD
                + _MESSAGE_OVERHEAD
                + _text_bound(arguments)
                + _text_bound(part.name)
            )
        elif isinstance(part, ToolResult):
            total += _BLOCK_OVERHEAD + _MESSAGE_OVERHEAD + _part_bound(part.text, known) + 2
            total += len(part.media) * (media_token_cost + _MEDIA_TEXT_OVERHEAD)
    return total


def _part_bound(text: str, known: KnownCount | None) -> int:
    """The count of ``text`` if the counter knows it, or of its excerpt plus the notice's size
    when it is a truncated output whose excerpt it knows; else its size bound."""
    bound = _text_bound(text)
    if known is None or bound < 2 * _JOIN_SLACK:
        return bound
    exact = known(text)
    if exact is not None:
        return min(bound, exact + _JOIN_SLACK)
    parts = split_notice(text)
    if parts is not None:
        excerpt_tokens = known(parts[0])
        if excerpt_tokens is not None:
            rest = _text_bound(text[len(parts[0]) :])
            return min(bound, excerpt_tokens + rest + 2 * _JOIN_SLACK)
    return bound


def _text_bound(text: str) -> int:
    return len(text) if text.isascii() else 2 * encoded_size(text)
