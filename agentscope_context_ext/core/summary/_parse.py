"""Reading a compaction model's Markdown answer (and telling one that only repeats its input),
and choosing the summary language."""

from __future__ import annotations

import re
from collections.abc import Iterable

from ..messages import Message
from ._model import SECTION_TITLES, CompactSummary
from ._prompt import MEMO_HEADING, MESSAGES_HEADING

__all__ = ["echoes_input", "parse_summary", "summary_language"]

_ITEM_CHARS = 600
# "## Key Decisions", "### key decisions:", "**Next Steps**" ... -> field name
_HEADING_RE = re.compile(
    r"^\s{0,3}(?:#{1,6}\s*|\*\*)\s*(?:\d+[.)]\s*)?([A-Za-z][A-Za-z \-_]*?)\s*:?\s*(?:\*\*)?\s*:?\s*$"
)
_ALIASES = {
    "goal": "goal",
    "goals": "goal",
    "constraints": "constraints",
    "constraint": "constraints",
    "progress": "progress",
    "key decisions": "key_decisions",
    "decisions": "key_decisions",
    "next steps": "next_steps",
    "next step": "next_steps",
    "critical context": "critical_context",
    "critical": "critical_context",
}
_EMPTY_ITEMS = ("(none)", "none", "n/a", "(none recorded)", "-")
_CJK_RE = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")
_THINK_RE = re.compile(r"^.*?</think>|<think>.*?(?:</think>|$)", re.DOTALL)
"""Reasoning in the answer text: ``<think>...</think>``, or the rest of it when a server cut the
opening tag off (or the answer ends inside it)."""
_BULLET_RE = re.compile(r"^\s*(?:(?:[-*+•]|\d+[.)])\s+)+")
_MESSAGE_HEADER_RE = re.compile(r"^\[(\w+):[^\]\n]*\]$")
"""The header of a rendered message: ``[role:name timestamp]`` (``_prompt._Renderer``)."""
_ECHO_LINE_CHARS = 12
"""Shorter lines (a heading, "- none") say nothing about where an answer came from."""


def parse_summary(text: str | None) -> CompactSummary | None:
    """Parse a Markdown answer with the six sections into a summary, or ``None`` if unusable.

    Usable means: a Goal section and at least two other non-empty sections. Headings may be
    ``#``-style or bold, any case, with or without a colon or a number; items may be bullets,
    numbered, or prose lines. Nested bullets stay items of their section. What a provider
    wraps around the memo is not part of it: code fences, and the ``<think>...</think>``
    that reasoning models served by Ollama or llama.cpp write into the answer text (a draft
    of the sections there would otherwise be read twice).
    """
    if not text or not text.strip():
        return None
    text = _THINK_RE.sub("", text)
    sections: dict[str, list[str]] = {}
    current: str | None = None
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            continue
        heading = _HEADING_RE.match(line)
        if heading:
            name = _ALIASES.get(heading.group(1).strip().lower().replace("_", " "))
            if name is not None:
                current = name
                sections.setdefault(current, [])
                continue
        if current is None:
            continue
        item = re.sub(r"^\s*(?:[-*+•]|\d+[.)])\s+", "", line).strip()
        if item and item.lower() not in _EMPTY_ITEMS:
            sections[current].append(item[:_ITEM_CHARS])
    filled = [name for name, items in sections.items() if items]
    if "goal" not in filled or len(filled) < 3:
        return None
    return CompactSummary(
        **{name: sections.get(name, []) for name in SECTION_TITLES},
        source="llm",
    )


def summary_language(msgs: Iterable[Message], setting: str) -> str:
    """The language to write the summary in: the setting, or the users' language for ``auto``."""
    if setting and setting.lower() != "auto":
        return setting
    user_text = "".join(m.text for m in msgs if m.role == "user")[:20000]
    if not user_text:
        return "English"
    cjk = len(_CJK_RE.findall(user_text))
    return "Chinese (简体中文)" if cjk / max(len(user_text), 1) > 0.15 else "English"


def echoes_input(answer: str, instruction: str, content: str) -> bool:
    """Whether ``answer`` repeats the compaction model's input instead of summarising it.

    A model too small to follow the instruction may answer with its prompt (Gemma 3 270M on
    llama.cpp did); with a previous memo in the input, that echo holds six valid sections and
    would pass :func:`parse_summary`, the rendered messages becoming "critical context". An
    answer echoes when it holds one of the input's own headings, or when most of its lines
    (at least three) are lines of the instruction or of the new messages. Lines of the previous
    memo do not count: a model may rightly keep them as they were.

    Args:
        answer (`str`): The model's answer.
        instruction (`str`): The system instruction it was given.
        content (`str`): The user content it was given (previous memo and new messages).
    """
    lines = [_echo_line(line) for line in answer.splitlines()]
    if any(line in (MEMO_HEADING, MESSAGES_HEADING) for line in lines):
        return True
    memo, _, messages = content.partition(MESSAGES_HEADING)
    # What the answer is asked to repeat is no sign of an echo: the previous memo's lines, the
    # six headings of the format, and the user's words (the goal quotes them). A short first
    # summary, one bullet per section, was four headings and a quoted request out of nine lines.
    kept = {_echo_line(line) for line in memo.splitlines()} | _user_lines(messages)
    given = {_echo_line(line) for line in (instruction + "\n" + messages).splitlines()} - kept
    substantial = [
        line
        for line in lines
        if len(line) >= _ECHO_LINE_CHARS and line not in kept and not _section_heading(line)
    ]
    copied = sum(line in given for line in substantial)
    return copied >= 3 and 2 * copied >= len(substantial)


def _section_heading(line: str) -> bool:
    """Whether ``line`` heads one of the six sections (in any style :func:`parse_summary`
    reads)."""
    heading = _HEADING_RE.match(line)
    return heading is not None and (
        _ALIASES.get(heading.group(1).strip().lower().replace("_", " ")) is not None
    )


def _user_lines(messages: str) -> set[str]:
    """The lines of the user's messages in the rendered input (those under a ``[user:...]``
    header, up to the next message's header)."""
    found: set[str] = set()
    user = False
    for line in messages.splitlines():
        header = _MESSAGE_HEADER_RE.match(line)
        if header:
            user = header.group(1) == "user"
        elif user:
            found.add(_echo_line(line))
    found.discard("")
    return found


def _echo_line(line: str) -> str:
    return _BULLET_RE.sub("", line).strip()
