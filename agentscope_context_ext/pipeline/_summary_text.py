"""Pure functions around the summary (SPEC 4.2): the compaction prompt's input, parsing the
model's Markdown answer, and the extractive fallback used when the model fails.

Nothing here calls a model or touches a file.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from agentscope.message import Msg

from ..memory import SECTION_TITLES, CompactSummary
from ..rendering import block_text, offload_paths, output_text
from ..truncation import split_notice

_BLOCK_CHARS = 1500
_ITEM_CHARS = 400
_MAX_ITEMS = {
    "goal": 6,
    "constraints": 12,
    "progress": 30,
    "key_decisions": 12,
    "next_steps": 10,
    "critical_context": 40,
}

# "## Key Decisions", "### key decisions:", "**Next Steps**" ... -> field name
_HEADING_RE = re.compile(
    r"^\s{0,3}(?:#{1,6}\s*|\*\*)\s*([A-Za-z][A-Za-z \-_]*?)\s*:?\s*(?:\*\*)?\s*:?\s*$"
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
_CONSTRAINT_RE = re.compile(
    r"\b(must|never|always|don't|do not|please|should not|shouldn't|only|avoid)\b|必须|不要|务必|请|禁止|一定|不能",
    re.IGNORECASE,
)
_DECISION_RE = re.compile(
    r"\b(decid\w*|chose|choose|going to|will use|instead|switch\w* to|prefer\w*)\b|决定|改用|采用",
    re.IGNORECASE,
)
_NEXT_RE = re.compile(
    r"\b(next|then|todo|remaining|still need|will|plan)\b|下一步|接下来|然后|待办", re.IGNORECASE
)
_CRITICAL_RE = re.compile(
    r"https?://[^\s'\"<>)\]]+"  # URLs
    r"|(?:tool_result|dialog)/[\w.\-]+"  # offloaded files
    r"|(?:~|\.{1,2})?/(?:[\w.\-]+/)*[\w.\-]+\.\w{1,8}\b"  # absolute / relative file paths
    r"|\b[\w\-]+(?:/[\w.\-]+)+\.\w{1,8}\b"  # dir/file.ext
    r"|\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b"  # uuids
    r"|\b[0-9a-f]{12,40}\b",  # hashes / commit ids
)
_ERROR_HINT_RE = re.compile(r"^\s*(error|traceback|exception|fatal|failed)\b", re.IGNORECASE)
_CJK_RE = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")
_SENTENCE_SPLIT_RE = re.compile(r"(?<=[.!?。！？])\s+|\n+")


# ----------------------------------------------------------------- rendering


def render_for_summary(msgs: Sequence[Msg], block_chars: int = _BLOCK_CHARS) -> str:
    """The messages to compact, compactly: one header line per message, long blocks clipped.

    Tool outputs are cut at their truncation notice, but the path of the offloaded file is kept
    (SPEC 12.7): it is what makes the full output recoverable after compaction.
    """
    lines = []
    for msg in msgs:
        blocks = (
            msg.content
            if isinstance(msg.content, list)
            else [{"type": "text", "text": msg.content}]
        )
        body = "\n".join(block_text(b, block_chars) for b in blocks if isinstance(b, dict))
        lines.append(f"[{msg.role}:{msg.name} {msg.timestamp}]\n{body}")
    return "\n\n".join(lines)


def summary_language(msgs: Iterable[Msg], setting: str) -> str:
    """The language to write the summary in: the setting, or the users' language for ``auto``."""
    if setting and setting.lower() != "auto":
        return setting
    user_text = "".join(_msg_text(m) for m in msgs if m.role == "user")[:20000]
    if not user_text:
        return "English"
    cjk = len(_CJK_RE.findall(user_text))
    return "Chinese (简体中文)" if cjk / max(len(user_text), 1) > 0.15 else "English"


# ------------------------------------------------------------------- parsing


def parse_summary(text: str | None) -> CompactSummary | None:
    """Parse a Markdown answer with the six sections into a summary, or ``None`` if unusable.

    Usable means: a Goal section and at least two other non-empty sections. Headings may be
    ``#``-style or bold, any case, with or without a colon; items may be bullets or prose.
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
        if item and item.lower() not in ("(none)", "none", "n/a", "(none recorded)", "-"):
            sections[current].append(item[:_ITEM_CHARS])
    filled = [name for name, items in sections.items() if items]
    if "goal" not in filled or len(filled) < 3:
        return None
    return CompactSummary(
        **{name: sections.get(name, [])[: _MAX_ITEMS[name]] for name in SECTION_TITLES},
        source="llm",
    )


# ---------------------------------------------------------------- extractive


def extractive_summary(
    msgs: Sequence[Msg], previous: CompactSummary | None = None
) -> CompactSummary:
    """Build a summary from the messages alone, no model involved (SPEC 4.2).

    Goal from the first user messages, constraints from user sentences with must / never /
    always / don't / please, progress from each tool call and whether it succeeded, decisions
    and next steps from the last assistant texts, critical context from the paths, URLs and ids
    found anywhere in the messages. Merged with ``previous``.
    """
    user_texts = [_msg_text(m) for m in msgs if m.role == "user" and _msg_text(m).strip()]
    assistant_texts = [t for m in msgs if m.role == "assistant" if (t := _text_blocks(m)).strip()]

    goal = [_clip(t) for t in user_texts[:2]]
    constraints = _dedupe(s for t in user_texts for s in _sentences(t) if _CONSTRAINT_RE.search(s))
    progress = _tool_progress(msgs)
    tail = assistant_texts[-3:]
    decisions = _dedupe(s for t in tail for s in _sentences(t) if _DECISION_RE.search(s))
    next_steps = _dedupe(s for s in _sentences(tail[-1]) if _NEXT_RE.search(s)) if tail else []
    if tail and not next_steps:
        next_steps = [_clip(tail[-1])]
    critical = _dedupe(match for m in msgs for match in _CRITICAL_RE.findall(_full_text(m)))

    summary = CompactSummary(
        goal=goal[: _MAX_ITEMS["goal"]],
        constraints=constraints[: _MAX_ITEMS["constraints"]],
        progress=progress[-_MAX_ITEMS["progress"] :],
        key_decisions=decisions[-_MAX_ITEMS["key_decisions"] :],
        next_steps=next_steps[: _MAX_ITEMS["next_steps"]],
        critical_context=critical[-_MAX_ITEMS["critical_context"] :],
        source="extractive",
    )
    return merge_summaries(previous, summary)


def merge_summaries(previous: CompactSummary | None, new: CompactSummary) -> CompactSummary:
    """Fold ``previous`` into ``new``: the goal keeps its earliest statement, lists keep the
    newest items within their bounds, dialog references accumulate."""
    if previous is None:
        return new
    merged = {}
    for name in SECTION_TITLES:
        old_items, new_items = getattr(previous, name), getattr(new, name)
        if name == "goal":
            items = _dedupe([*old_items, *new_items])[: _MAX_ITEMS[name]]
        elif name == "next_steps":
            items = new_items or old_items  # the newest plan replaces the old one
        else:
            items = _dedupe([*old_items, *new_items])[-_MAX_ITEMS[name] :]
        merged[name] = items
    return CompactSummary(
        **merged,
        source=new.source,
        dialog_refs=[*previous.dialog_refs, *new.dialog_refs],
        compactions=previous.compactions + 1,
    )


def ensure_critical(summary: CompactSummary, msgs: Sequence[Msg]) -> CompactSummary:
    """Add the offloaded-file paths of ``msgs`` the summary lost (they make outputs recoverable)."""
    present = "\n".join(summary.critical_context + summary.progress)
    missing = [path for m in msgs for path in offload_paths(m) if path not in present]
    if not missing:
        return summary
    items = _dedupe([*summary.critical_context, *missing])[-_MAX_ITEMS["critical_context"] :]
    return summary.model_copy(update={"critical_context": items})


# ------------------------------------------------------------------- helpers


def _tool_progress(msgs: Sequence[Msg]) -> list[str]:
    calls: dict[str, str] = {}
    lines = []
    for msg in msgs:
        if not isinstance(msg.content, list):
            continue
        for block in msg.content:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "tool_use":
                arguments = ", ".join(
                    f"{k}={_clip(str(v), 80)}" for k, v in (block.get("input") or {}).items()
                )
                calls[str(block.get("id"))] = f"{block.get('name')}({arguments})"
            elif block.get("type") == "tool_result":
                call = calls.get(str(block.get("id")), f"{block.get('name')}(...)")
                text = output_text(block.get("output"))
                parts = split_notice(text)
                first_line = (parts[0] if parts else text).strip().splitlines()[:1]
                outcome = "error" if first_line and _ERROR_HINT_RE.match(first_line[0]) else "ok"
                detail = _clip(first_line[0], 120) if first_line else "(no output)"
                saved = f"; full output: {parts[1].file_path}" if parts else ""
                lines.append(f"{call} -> {outcome}: {detail}{saved}")
    return lines[-_MAX_ITEMS["progress"] :]


def _msg_text(msg: Msg) -> str:
    return msg.content if isinstance(msg.content, str) else _text_blocks(msg)


def _text_blocks(msg: Msg) -> str:
    if isinstance(msg.content, str):
        return msg.content
    return "\n".join(
        str(b.get("text", ""))
        for b in msg.content
        if isinstance(b, dict) and b.get("type") == "text"
    )


def _full_text(msg: Msg) -> str:
    if isinstance(msg.content, str):
        return msg.content
    return "\n".join(block_text(b) for b in msg.content if isinstance(b, dict))


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE_SPLIT_RE.split(text) if len(s.strip()) > 3]


def _clip(text: str, limit: int = _ITEM_CHARS) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _dedupe(items: Iterable[str]) -> list[str]:
    seen: set[str] = set()
    result = []
    for item in items:
        item = _clip(item)
        key = item.lower()
        if item and key not in seen:
            seen.add(key)
            result.append(item)
    return result
