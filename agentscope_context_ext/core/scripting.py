"""What the scripted models of both AgentScope versions share: the script itself (replies in
order, or a function of each call), the calls received, and the prompt's text."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any

from .tokens import TokenCounter, get_token_counter

__all__ = ["Scripted", "prompt_text"]


def prompt_text(messages: list[dict]) -> str:
    """All textual content of a formatted prompt, for assertions and scripted decisions."""
    parts = []
    for message in messages:
        content = message.get("content")
        if isinstance(content, str):
            parts.append(content)
        elif isinstance(content, list):
            for item in content:
                if isinstance(item, dict) and isinstance(item.get("text"), str):
                    parts.append(item["text"])
    return "\n".join(parts)


class Scripted:
    """The script of a scripted model (a mixin for the 1.x and 2.x ``ScriptedChatModel``)."""

    calls: list[Any]

    def _set_script(
        self,
        script: Sequence[Any] | Callable[[Any], Any],
        when_exhausted: str | None,
        counter: TokenCounter | None,
    ) -> None:
        self._responder = script if callable(script) else None
        self._script = list(script) if not callable(script) else []
        self.when_exhausted = when_exhausted
        self._counter = counter
        self.calls = []

    @property
    def prompts(self) -> list[list[dict]]:
        """The formatted prompt of every call, in order."""
        return [call.messages for call in self.calls]

    def extend(self, replies: Sequence[Any]) -> None:
        """Append replies to a list script."""
        self._script.extend(replies)

    @property
    def counter(self) -> TokenCounter:
        """The token counter of ``usage`` (exact Qwen unless given)."""
        if self._counter is None:
            self._counter = get_token_counter("qwen")
        return self._counter

    async def _next(self, call: Any) -> Any:
        if self._responder is not None:
            answer = self._responder(call)
            return await answer if inspect.isawaitable(answer) else answer
        if self._script:
            return self._script.pop(0)
        if self.when_exhausted is None:
            raise RuntimeError(f"ScriptedChatModel: script exhausted at call {call.index + 1}")
        return self.when_exhausted
