"""A small, version-neutral view of conversation messages.

The core of the package (truncation, the cut, the summary, the renderings) works on this view,
never on an AgentScope ``Msg``: AgentScope 1.x keeps content blocks as dicts, 2.x as pydantic
models, and both map onto these few plain records (slotted dataclasses, built fresh for each
use and never changed by the core). Adapters build the view
(``agentscope_context_ext.agentscope1``); nothing here imports AgentScope.

A message is a role, a name, a timestamp and an ordered tuple of parts:

- :class:`Text` and :class:`Thinking`: prose;
- :class:`ToolCall`: a tool call with its parsed arguments;
- :class:`ToolResult`: a tool's answer, its text joined in one string, plus its media;
- :class:`Media`: an image, audio or video block (never its bytes as text).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = [
    "MEDIA_KINDS",
    "Media",
    "Message",
    "Part",
    "Text",
    "Thinking",
    "ToolCall",
    "ToolResult",
    "string_values",
]

MEDIA_KINDS = ("image", "audio", "video")
"""The media block types of AgentScope (2.x calls them all ``data``)."""


@dataclass(slots=True)
class Text:
    """Visible text of a message."""

    text: str


@dataclass(slots=True)
class Thinking:
    """A model's reasoning text (not sent back to most providers, but worth summarising)."""

    text: str


@dataclass(slots=True)
class Media:
    """An image, audio or video block."""

    kind: str
    """``image``, ``audio`` or ``video``."""
    media_type: str = ""
    """e.g. ``image/png`` (empty when unknown)."""
    url: str | None = None
    """Where it is, for URL sources (``None`` for inline data)."""
    data: str | None = None
    """Base64 data, for inline sources."""


@dataclass(slots=True)
class ToolCall:
    """A tool call: id, tool name and parsed arguments."""

    id: str
    name: str
    arguments: Mapping[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class ToolResult:
    """A tool's answer to the call with the same id."""

    id: str
    name: str
    text: str = ""
    """All text of the output as the model sees it, text blocks joined by newlines (an excerpt
    and its truncation notice, once truncated)."""
    media: tuple[Media, ...] = ()
    """Media blocks of the output, in order."""
    full_text: str | None = None
    """The whole output, read back from ``tool_result/`` when ``text`` is an excerpt (for the
    summary, which must not lose what the excerpt cut); ``None`` when not loaded."""

    @property
    def complete_text(self) -> str:
        """The whole output when it was loaded, else what the model sees."""
        return self.full_text if self.full_text is not None else self.text


Part = Text | Thinking | ToolCall | ToolResult | Media


@dataclass(slots=True)
class Message:
    """One message of the conversation, oldest-first order is the caller's."""

    id: str
    role: Literal["user", "assistant", "system"] | str
    name: str = ""
    timestamp: str = ""
    parts: tuple[Part, ...] = ()

    @property
    def text(self) -> str:
        """The visible text parts, joined by newlines."""
        return "\n".join(part.text for part in self.parts if isinstance(part, Text))

    @property
    def thinking(self) -> str:
        """The thinking parts, joined by newlines."""
        return "\n".join(part.text for part in self.parts if isinstance(part, Thinking))

    @property
    def tool_calls(self) -> list[ToolCall]:
        """The tool calls this message makes."""
        return [part for part in self.parts if isinstance(part, ToolCall)]

    @property
    def tool_results(self) -> list[ToolResult]:
        """The tool results this message carries."""
        return [part for part in self.parts if isinstance(part, ToolResult)]

    def raw_strings(self) -> Iterator[str]:
        """Every string the message holds, unescaped, one per place: texts, thinking, every
        string argument of its tool calls (nested ones included) and every tool output."""
        for part in self.parts:
            if isinstance(part, Text | Thinking):
                yield part.text
            elif isinstance(part, ToolCall):
                yield from string_values(dict(part.arguments))
            elif isinstance(part, ToolResult):
                yield part.complete_text

    def raw_text(self) -> str:
        """:meth:`raw_strings` joined by newlines: what a keyword search or a fidelity check
        should look in."""
        return "\n".join(self.raw_strings())


def string_values(value: Any) -> Iterator[str]:
    """Every string inside a JSON-like value (dict values, list items), depth first."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from string_values(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from string_values(item)
