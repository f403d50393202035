"""Claude Code session logs (``~/.claude/projects/*/<session>.jsonl``) as AgentScope messages.

One JSON record per line. Only ``user`` and ``assistant`` records carry conversation; progress,
snapshots, queue operations and sidechain (sub-agent) records are skipped. The API streams one
assistant message as several records sharing ``message.id``; they are merged. Each
``tool_result`` becomes its own ``system`` message, as ``ReActAgent`` stores them.

``claude_code_records`` reads the log into :class:`Record`\\ s and needs no AgentScope at all;
an adapter makes them its AgentScope's messages (``replay.load_claude_code``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ._json import load_json
from ._records import Record

__all__ = ["ClaudeCompaction", "claude_code_compactions", "claude_code_records"]


@dataclass(frozen=True)
class ClaudeCompaction:
    """One of Claude Code's own compactions in a session log."""

    line: int
    """0-based line of the ``compact_boundary`` record: the conversation before it was compacted."""
    summary: str
    """The summary Claude Code wrote (the ``isCompactSummary`` user message after the boundary)."""
    pre_tokens: int | None
    """Claude Code's count of the context it compacted (``compactMetadata.preTokens``)."""


def claude_code_compactions(path: str | Path) -> list[ClaudeCompaction]:
    """Claude Code's own compactions in a session log, in order."""
    found: list[ClaudeCompaction] = []
    boundary: tuple[int, int | None] | None = None
    with open(path, encoding="utf-8") as handle:
        for line_no, line in enumerate(handle):
            if '"compact_boundary"' not in line and '"isCompactSummary"' not in line:
                continue
            try:
                record = load_json(line)
            except ValueError:
                continue
            if not isinstance(record, dict):
                continue
            if record.get("subtype") == "compact_boundary":
                metadata = record.get("compactMetadata") or {}
                pre = metadata.get("preTokens")
                boundary = (line_no, pre if isinstance(pre, int) else None)
            elif record.get("isCompactSummary") and boundary is not None:
                content = (record.get("message") or {}).get("content")
                text = (
                    content
                    if isinstance(content, str)
                    else "\n".join(
                        str(b.get("text", "")) for b in _blocks(content) if b.get("type") == "text"
                    )
                )
                found.append(ClaudeCompaction(boundary[0], text, boundary[1]))
                boundary = None
    return found


def claude_code_records(path: str | Path, until_line: int | None = None) -> list[Record]:
    """Read a Claude Code session JSONL file into records, oldest first.

    Sidechain (sub-agent) records are skipped, unless the file holds nothing else: then it is a
    sub-agent's own log (e.g. the compaction agent's) and those records are the conversation.

    Args:
        path (`str | Path`): The session log.
        until_line (`int | None`): Read only the lines before this 0-based line (e.g. a
            :class:`ClaudeCompaction`'s ``line``: the conversation Claude Code compacted).

    Raises:
        `ValueError`: The file holds no Claude Code conversation records.
    """
    msgs = _load(path, include_sidechains=False, until_line=until_line)
    return msgs or _load(path, include_sidechains=True, until_line=until_line)


def _load(
    path: str | Path, include_sidechains: bool, until_line: int | None = None
) -> list[Record]:
    msgs: list[Record] = []
    tool_names: dict[str, str] = {}
    by_message_id: dict[str, Record] = {}
    with open(path, encoding="utf-8") as handle:
        for line_no, line in enumerate(handle, start=1):
            if until_line is not None and line_no > until_line:
                break
            if not line.strip():
                continue
            try:
                record = load_json(line)
            except json.JSONDecodeError as exc:
                raise ValueError(f"line {line_no} is not JSON: {exc.msg}") from None
            except ValueError as exc:
                raise ValueError(f"line {line_no}: {exc}") from None
            if not isinstance(record, dict) or (
                record.get("isSidechain") and not include_sidechains
            ):
                continue
            kind = record.get("type")
            message = record.get("message")
            if kind not in ("user", "assistant") or not isinstance(message, dict):
                continue
            timestamp = _timestamp(record.get("timestamp"))
            if kind == "assistant":
                blocks = [_assistant_block(b, tool_names) for b in _blocks(message.get("content"))]
                blocks = [b for b in blocks if b is not None]
                merged = by_message_id.get(str(message.get("id")))
                if merged is not None and message.get("id"):
                    merged.content.extend(blocks)
                    continue
                if not blocks:
                    continue
                msg = Record("assistant", blocks, timestamp=timestamp)
                if message.get("id"):
                    by_message_id[str(message["id"])] = msg
                msgs.append(msg)
                continue
            texts = []
            for block in _blocks(message.get("content")):
                if block.get("type") == "tool_result":
                    call_id = str(block.get("tool_use_id"))
                    result = {
                        "type": "tool_result",
                        "id": call_id,
                        "name": tool_names.get(call_id, "tool"),
                        "output": _result_output(block.get("content")),
                    }
                    msgs.append(Record("system", [result], timestamp=timestamp))
                elif block.get("type") == "text" and str(block.get("text", "")).strip():
                    texts.append(str(block["text"]))
                elif block.get("type") == "image":
                    texts.append("[image]")
            if texts:
                msgs.append(Record("user", "\n".join(texts), timestamp=timestamp))
    if not msgs and include_sidechains:
        raise ValueError("no Claude Code user/assistant records found")
    return msgs


def _blocks(content: Any) -> list[dict]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content.strip() else []
    if isinstance(content, list):
        return [b for b in content if isinstance(b, dict)]
    return []


def _assistant_block(block: dict, tool_names: dict[str, str]) -> dict | None:
    kind = block.get("type")
    if kind == "text":
        text = str(block.get("text", ""))
        return {"type": "text", "text": text} if text.strip() else None
    if kind == "thinking":
        return {"type": "thinking", "thinking": str(block.get("thinking", ""))}
    if kind == "tool_use":
        call_id = str(block.get("id"))
        tool_names[call_id] = str(block.get("name"))
        return {
            "type": "tool_use",
            "id": call_id,
            "name": str(block.get("name")),
            "input": block.get("input") or {},
        }
    return None


def _result_output(content: Any) -> str | list[dict]:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        out: list[dict] = []
        for item in content:
            if isinstance(item, dict) and item.get("type") == "text":
                out.append({"type": "text", "text": str(item.get("text", ""))})
            elif isinstance(item, dict) and item.get("type") == "image":
                out.append({"type": "image", "source": item.get("source") or {}})
        return out
    return "" if content is None else json.dumps(content, ensure_ascii=False)


def _timestamp(value: Any) -> str | None:
    if not isinstance(value, str) or len(value) < 19:
        return None
    return value[:23].replace("T", " ").rstrip("Z")
