"""Reading a compaction model's Markdown answer, and choosing the summary language."""

from __future__ import annotations

import re
from collections.abc import Iterable

from ..messages import Message
from ._model import SECTION_TITLES, CompactSummary

__all__ = ["parse_summary", "summary_language"]

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


def parse_summary(text: str | None) -> CompactSummary | None:
    """Parse a Markdown answer with the six sections into a summary, or ``None`` if unusable.

    Usable means: a Goal section and at least two other non-empty sections. Headings may be
    ``#``-style or bold, any case, with or without a colon or a number; items may be bullets,
    numbered, or prose lines. Nested bullets stay items of their section.
    """
    if not text or not text.strip():
        return None
    sections: dict[str, list[str]] = {}
    current: str | None = None
    for line in text.splitlines():
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
