"""A small, version-neutral view of conversation messages.

The core of the package (truncation, the cut, the summary, the renderings) works on this view,
never on an AgentScope ``Msg``: AgentScope 1.x keeps content blocks as dicts, 2.x as pydantic
models, and both map onto these few plain records (slotted dataclasses, built fresh for each
use and never changed by the core). Adapters build the view
(``agentscope_context_ext.agentscope1``); nothing here imports AgentScope.

A message is a role, a name, a timestamp and an ordered tuple of parts:

- :class:`Text` and :class:`Thinking`: prose;
- :class:`Reminder`: text the agent framework inserted for the model (a ``<system-reminder>``,
  2.x's ``HintBlock``, 1.x's ``<system-hint>``): sent as text, but nobody's words;
- :class:`ToolCall`: a tool call with its parsed arguments;
- :class:`ToolResult`: a tool's answer, its text joined in one string, plus its media;
- :class:`Media`: an image, audio or video block (never its bytes as text).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = [
    "MEDIA_KINDS",
    "REMINDER_TAGS",
    "Media",
    "Message",
    "Part",
    "Reminder",
    "Text",
    "Thinking",
    "ToolCall",
    "ToolResult",
    "string_values",
    "text_parts",
]

MEDIA_KINDS = ("image", "audio", "video")
"""The media block types of AgentScope (2.x calls them all ``data``)."""


@dataclass(slots=True)
class Text:
    """Visible text of a message."""

    text: str


@dataclass(slots=True)
class Reminder(Text):
    """Text the agent framework put into the conversation for the model, not anybody's words:
    AgentScope 2.x's ``<system-reminder>`` texts and ``HintBlock``\\ s (the runtime state it
    injects at each reply, an input file it could not pass on, the last iteration's hint), 1.x's
    ``<system-hint>`` messages, the reminders in a Claude Code transcript.

    A subclass of :class:`Text` because the model receives it as text: every token count sees
    it. Everything that reads what someone *said* skips it (:attr:`Message.text`: the summary's
    goal and next steps, the summary language), and every rendering labels it as a reminder.
    """

    @property
    def body(self) -> str:
        """The text inside the reminder's tags (the whole text when it has none)."""
        return _TAG_RE.sub("", self.text).strip()


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
    failed: bool | None = None
    """The framework's own verdict when it records one (2.x: the result's state is ``error``,
    ``denied`` or ``interrupted``); ``None``: the output's shape says (1.x records none, and a
    tool that returns ``"Error: ..."`` as text succeeded as far as 2.x knows)."""

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
        """What the sender wrote: the text parts without the :class:`Reminder` parts, joined by
        newlines."""
        return "\n".join(part.text for part in self.parts if type(part) is Text)

    @property
    def reminders(self) -> list[Reminder]:
        """The reminders the framework put into this message."""
        return [part for part in self.parts if isinstance(part, Reminder)]

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
        """Every string the message holds, unescaped, one per place: texts (reminders too:
        nothing the message holds is hidden from a search), thinking, every string argument of
        its tool calls (nested ones included) and every tool output."""
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


REMINDER_TAGS = ("system-reminder", "system-hint")
"""The tags a framework wraps its reminders in: ``<system-reminder>`` (AgentScope 2.x, Claude
Code), ``<system-hint>`` (AgentScope 1.x)."""

_TAGS = "|".join(REMINDER_TAGS)
_REMINDER_RE = re.compile(rf"<({_TAGS})>(.*?)</\1>", re.DOTALL)
_TAG_RE = re.compile(rf"</?(?:{_TAGS})>")


def text_parts(text: str) -> tuple[Text, ...]:
    """A text block as its parts: :class:`Reminder` for each ``<system-reminder>`` or
    ``<system-hint>`` span, :class:`Text` for the rest; the one place that recognises them.

    A block that holds no reminder is one ``Text``, a block that is one reminder one
    ``Reminder``. Where a reminder shares a block with other text, the line break between them
    is left out of both parts, and blank text between two reminders goes with the first, so
    ``"\\n".join`` of the parts' texts is the block again when each reminder stands on lines
    of its own (the token count of the block does not change).
    """
    if "<system-" not in text:  # the common case, without a regex
        return (Text(text),)
    pieces: list[tuple[bool, str]] = []
    position = 0
    for match in _REMINDER_RE.finditer(text):
        pieces.append((False, text[position : match.start()]))
        pieces.append((True, match[0]))
        position = match.end()
    if not pieces:
        return (Text(text),)
    pieces.append((False, text[position:]))
    parts: list[Text] = []
    last = len(pieces) - 1
    for index, (reminder, piece) in enumerate(pieces):
        if reminder:
            parts.append(Reminder(piece))
            continue
        if not piece.strip():  # blank: it goes with the reminder next to it
            if 0 < index < last:
                piece = piece.removeprefix("\n")  # the line break the join puts back
            if not piece:
                continue
            if index == 0:
                pieces[1] = (True, piece + pieces[1][1])
            else:
                parts[-1] = Reminder(parts[-1].text + piece)
            continue
        if index > 0:
            piece = piece.removeprefix("\n")
        if index < last:
            piece = piece.removesuffix("\n")
        parts.append(Text(piece))
    return tuple(parts)
