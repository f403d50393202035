"""Text helpers of the summary: sentences, clipping, paths shown relative to a shared root,
the cue words (English and Chinese), the labels the summary writes in each language, and the
one form a tool's own words are quoted in (:func:`tool_said`)."""

from __future__ import annotations

import math
import os
import re
from collections import Counter
from collections.abc import Sequence

__all__ = [
    "BACKTICKED_RE",
    "CONSTRAINT_RE",
    "DECISION_RE",
    "LABELS",
    "NEXT_RE",
    "clip",
    "clip_middle",
    "code_span",
    "common_root",
    "estimate_tokens",
    "relative",
    "sentences",
    "squash",
    "tool_said",
]

CONSTRAINT_RE = re.compile(
    r"\b(must|never|always|don't|do not|please|should not|shouldn't|only|avoid|make sure)\b"
    r"|必须|不要|务必|请|禁止|一定|不能|只能|避免",
    re.IGNORECASE,
)
DECISION_RE = re.compile(
    r"\b(decid\w*|chose|choose|going to|will use|instead|switch\w* to|prefer\w*|rather than|"
    r"the (?:issue|problem|cause|fix) (?:is|was))\b|决定|改用|采用|原因是|问题是",
    re.IGNORECASE,
)
NEXT_RE = re.compile(
    r"\b(next|then|todo|remaining|still need|now (?:I|let)|let me|I'll|I will|plan)\b"
    r"|下一步|接下来|然后|待办|还需要",
    re.IGNORECASE,
)
SENTENCE_SPLIT_RE = re.compile(r"(?<=[.!?。！？])\s+|\n+")
BACKTICKED_RE = re.compile(r"`([^`\n]+)`")
LABELS = {
    "en": {
        "created": "created",
        "edited": "edited",
        "read": "read",
        "listed": "listed",
        "searched": "searched",
        "lines": "lines",
        "failed": "failed",
        "ok": "ok",
        "then": "then",
        "root": "Paths are relative to",
        "unresolved": "Unresolved",
        "saved": "full output",
        "defines": "defines",
        "plan": "Plan",
        "also_read": "Also read",
        "earlier": "Earlier",
        "more": "more, in the Raw Dialog",
        "tool": "tool",
        "said": "said",
        "it_said": "it said",
    },
    "zh": {
        "created": "新建",
        "edited": "修改",
        "read": "读取",
        "listed": "列出",
        "searched": "搜索",
        "lines": "行",
        "failed": "失败",
        "ok": "成功",
        "then": "之后",
        "root": "路径相对于",
        "unresolved": "未解决",
        "saved": "完整输出",
        "defines": "定义",
        "plan": "计划",
        "also_read": "另读取",
        "earlier": "更早",
        "more": "项，见原始对话",
        "tool": "工具",
        "said": "输出",
        "it_said": "其输出",
    },
}


def estimate_tokens(text: str) -> int:
    """A conservative token estimate when no counter is given: UTF-8 bytes / 3."""
    return math.ceil(len(text.encode("utf-8", errors="replace")) / 3)


def sentences(text: str) -> list[str]:
    """``text`` split into sentences (``.!?`` and ``。！？``) and lines; very short pieces dropped."""
    return [s.strip() for s in SENTENCE_SPLIT_RE.split(text) if len(s.strip()) > 3]


def clip_middle(text: str, limit: int) -> str:
    """``text`` if it has at most ``limit`` characters, else its head and tail around a marker."""
    if len(text) <= limit:
        return text
    keep = max(limit - 20, 2)
    head, tail = text[: keep * 2 // 3], text[-(keep - keep * 2 // 3) :]
    return f"{head} […{len(text) - len(head) - len(tail)} chars…] {tail}"


def common_root(paths: Sequence[str]) -> str | None:
    """The deepest directory that at least 60% of the absolute paths share (3+ levels deep)."""
    absolute = [p for p in paths if p.startswith("/")]
    if len(absolute) < 2:
        return None
    counts: Counter[str] = Counter()
    for path in set(absolute):
        parts = path.split("/")[1:-1]
        for depth in range(3, len(parts) + 1):
            counts["/" + "/".join(parts[:depth])] += 1
    needed = math.ceil(0.6 * len(set(absolute)))
    shared = [d for d, n in counts.items() if n >= needed]
    return max(shared, key=lambda d: (d.count("/"), d)) if shared else None


def relative(path: str, root: str | None) -> str:
    if root and path.startswith(root + "/"):
        return os.path.relpath(path, root)
    return path


def squash(text: str) -> str:
    """Whitespace runs collapsed (newlines too): one item is one line."""
    return " ".join(text.split())


def clip(text: str, limit: int) -> str:
    text = squash(text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


_BACKTICK_RUN_RE = re.compile(r"`+")


def code_span(text: str) -> str:
    """``text`` as one Markdown code span, whatever backticks it holds: fenced by one more
    backtick than its longest run (CommonMark), so nothing in it can end the span early."""
    longest = max((len(run) for run in _BACKTICK_RUN_RE.findall(text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if longest and (text.startswith("`") or text.endswith("`")) else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def tool_said(tool: str | None, text: str, labels: dict[str, str]) -> str:
    """A line of a tool's output quoted as what the tool printed, never as the summary's own
    words: ``tool `bash` said: `Error: ...` `` (the line verbatim, in one code span); ``it said:
    ...`` (``tool`` ``None``) right after the call that printed it, which names the tool.

    The summary is sent as a user message; a tool's output quoted bare in it would read as the
    user's text, instructions included."""
    who = (
        labels["it_said"]
        if tool is None
        else f"{labels['tool']} {code_span(tool)} {labels['said']}"
    )
    return f"{who}: {code_span(text)}"
