"""``ContextChecker``: how many tokens the model would receive (SPEC 4 step 2, 5.1).

System prompt + summary message + messages + tool schemas, counted incrementally: each message
is counted once (through the agent's own formatter when there is one, so the count is that of
what is actually sent) and recounted only when the memory reports it changed. A step with no
new message re-tokenizes nothing.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from agentscope.formatter import FormatterBase
from agentscope.message import Msg

from ..memory import ContextMemory
from ..tokens import TokenCounter

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
        self._messages_total = 0
        self._epoch: int | None = None
        self._system: tuple[str, int] | None = None
        self._head: tuple[tuple[str, ...], int] | None = None
        self.messages_counted = 0
        """How many message counts were computed (not served from the running total)."""

    async def count_msg(self, msg: Msg) -> int:
        """Tokens of one message as the formatter sends it."""
        self.messages_counted += 1
        if self.formatter is not None:
            try:
                return self.counter.count_formatted(await self.formatter.format([msg]))
            except Exception as exc:  # noqa: BLE001 - any formatter quirk: count the message neutrally
                logger.debug("formatter could not format %s alone (%s)", msg.id, exc)
        return self.counter.count_msg(msg)

    async def message_tokens(self, memory: ContextMemory) -> dict[str, int]:
        """Per-message token counts, synced with the memory's changes."""
        await self._sync(memory)
        return self._counts

    async def count(
        self,
        memory: ContextMemory,
        sys_prompt: str,
        tools: list[dict] | None = None,
    ) -> ContextCount:
        """Count the prompt the agent would send now."""
        await self._sync(memory)
        return ContextCount(
            system=await self._system_tokens(sys_prompt),
            head=await self._head_tokens(memory),
            messages=self._messages_total,
            tools=self.counter.count_tools(tools),
        )

    async def _sync(self, memory: ContextMemory) -> None:
        epoch, changed, removed = memory.drain_changes()
        if epoch != self._epoch:
            self._epoch = epoch
            self._counts = {}
            for msg in memory.messages:
                self._counts[msg.id] = await self.count_msg(msg)
            self._messages_total = sum(self._counts.values())
            return
        for msg_id in removed:
            self._messages_total -= self._counts.pop(msg_id, 0)
        for msg_id in changed:
            msg = memory.get(msg_id)
            if msg is None:
                continue
            new = await self.count_msg(msg)
            self._messages_total += new - self._counts.get(msg_id, 0)
            self._counts[msg_id] = new

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
