"""Compact text renderings of AgentScope messages.

Used wherever messages are shown to a model or a person outside the live prompt: the dialog
tools, keyword search over saved dialog, and the input of the summary model. Tool outputs are
cut at their truncation notice (the path of the offloaded file is kept, it is what makes the
rest recoverable), media blocks become placeholders, never base64.
"""

from __future__ import annotations

import json
from typing import Any

from agentscope.message import Msg

from .core.truncation import split_notice

__all__ = ["block_text", "message_text", "offload_paths", "output_text", "render_message"]

_MEDIA_TYPES = ("image", "audio", "video")


def output_text(output: Any) -> str:
    """The text of a tool result's ``output``: a string, or its text blocks joined by newlines
    (as stage one joins them before saving)."""
    if isinstance(output, str):
        return output
    if isinstance(output, list):
        return "\n".join(
            str(item.get("text", ""))
            for item in output
            if isinstance(item, dict) and item.get("type") == "text"
        )
    return "" if output is None else str(output)


def offload_paths(msg: Msg) -> list[str]:
    """The files named by the truncation notices of ``msg``'s tool results."""
    if not isinstance(msg.content, list):
        return []
    paths = []
    for block in msg.content:
        if isinstance(block, dict) and block.get("type") == "tool_result":
            parts = split_notice(output_text(block.get("output")))
            if parts is not None:
                paths.append(parts[1].file_path)
    return paths


def block_text(block: dict[str, Any], max_chars: int | None = None) -> str:
    """One content block as text: ``[tool_use name {...}]``, ``[tool_result name] ...``, etc.

    Args:
        block (`dict`): An AgentScope content block.
        max_chars (`int | None`): Cut long texts to this many characters (``None``: no cut).
    """
    kind = block.get("type")
    if kind == "text":
        return _clip(str(block.get("text", "")), max_chars)
    if kind == "thinking":
        return "[thinking] " + _clip(str(block.get("thinking", "")), max_chars)
    if kind == "tool_use":
        arguments = json.dumps(block.get("input", {}), ensure_ascii=False, default=str)
        return f"[tool_use {block.get('name')} id={block.get('id')}] {_clip(arguments, max_chars)}"
    if kind == "tool_result":
        output = block.get("output", "")
        if isinstance(output, list):
            text = "\n".join(
                block_text(item, max_chars) for item in output if isinstance(item, dict)
            )
        else:
            text = str(output)
        parts = split_notice(text)
        if parts is not None:
            excerpt, notice = parts
            text = _clip(excerpt, max_chars) + (
                f"\n[... full output: {notice.file_path}, {notice.total_lines} lines]"
            )
        else:
            text = _clip(text, max_chars)
        return f"[tool_result {block.get('name')} id={block.get('id')}] {text}"
    if kind in _MEDIA_TYPES:
        source = block.get("source") or {}
        where = source.get("url") if isinstance(source, dict) else None
        if where and not str(where).startswith("data:"):
            return f"[{kind}: {where}]"
        return f"[{kind}]"
    return f"[{kind}]"


def message_text(msg: Msg, max_chars: int | None = None) -> str:
    """The text of every block of ``msg``, one block per line."""
    if isinstance(msg.content, str):
        return _clip(msg.content, max_chars)
    return "\n".join(
        block_text(block, max_chars) for block in msg.content if isinstance(block, dict)
    )


def render_message(msg: Msg, max_chars: int | None = 2000) -> str:
    """``role(name) timestamp: text`` on one header line, then the blocks."""
    header = f"{msg.role}({msg.name}) {msg.timestamp}"
    return f"{header}: {message_text(msg, max_chars)}"


def _clip(text: str, max_chars: int | None) -> str:
    if max_chars is None or len(text) <= max_chars:
        return text
    return f"{text[:max_chars]}... [{len(text) - max_chars} more characters]"
