"""Claude Code session logs (``~/.claude/projects/*/<session>.jsonl``) as AgentScope messages.

One JSON record per line. Only ``user`` and ``assistant`` records carry conversation; progress,
snapshots, queue operations and sidechain (sub-agent) records are skipped. The API streams one
assistant message as several records sharing ``message.id``; they are merged. Each
``tool_result`` becomes its own ``system`` message, as ``ReActAgent`` stores them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from agentscope.message import Msg


def load_claude_code(path: str | Path) -> list[Msg]:
    """Read a Claude Code session JSONL file into messages, oldest first.

    Sidechain (sub-agent) records are skipped, unless the file holds nothing else: then it is a
    sub-agent's own log (e.g. the compaction agent's) and those records are the conversation.

    Raises:
        `ValueError`: The file holds no Claude Code conversation records.
    """
    msgs = _load(path, include_sidechains=False)
    return msgs or _load(path, include_sidechains=True)


def _load(path: str | Path, include_sidechains: bool) -> list[Msg]:
    msgs: list[Msg] = []
    tool_names: dict[str, str] = {}
    by_message_id: dict[str, Msg] = {}
    with open(path, encoding="utf-8") as handle:
        for line_no, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ValueError(f"line {line_no} is not JSON: {exc.msg}") from None
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
                msg = Msg("assistant", blocks, "assistant", timestamp=timestamp)
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
                    msgs.append(Msg("system", [result], "system", timestamp=timestamp))
                elif block.get("type") == "text" and str(block.get("text", "")).strip():
                    texts.append(str(block["text"]))
                elif block.get("type") == "image":
                    texts.append("[image]")
            if texts:
                msgs.append(Msg("user", "\n".join(texts), "user", timestamp=timestamp))
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
