"""A transcript's messages before they become an AgentScope version's ``Msg``.

Every importer reads into :class:`Record`\\ s: a role, the content as AgentScope 1.x's dict
blocks (``text``, ``thinking``, ``tool_use``, ``tool_result``, ``image``), and the id and
timestamp when the format has them. Each adapter makes its own version's messages from them
(``records_to_msgs``), so loading a transcript needs no AgentScope at all.
"""

from __future__ import annotations

from dataclasses import dataclass

from ._json import load_json

__all__ = ["Record", "record_from_dict"]


@dataclass
class Record:
    """One message of a transcript."""

    role: str
    """``user``, ``assistant``, or ``system`` (tool results, as ``ReActAgent`` stores them)."""
    content: str | list[dict]
    """Plain text, or blocks in AgentScope 1.x's dict shape."""
    name: str = ""
    """The speaker's name; the role when empty."""
    id: str | None = None
    """The message id, when the format keeps one (this package's ``dialog/`` files do)."""
    timestamp: str | None = None

    def blocks(self) -> list[dict]:
        """The content as blocks (plain text is one ``text`` block)."""
        if isinstance(self.content, str):
            return [{"type": "text", "text": self.content}] if self.content else []
        return self.content


def record_from_dict(data: dict) -> Record:
    """A record from a saved message of either AgentScope version (``Msg.to_dict()`` of 1.x,
    ``Msg.model_dump()`` of 2.x: its ``tool_call`` blocks become ``tool_use``).

    Raises:
        `ValueError`: Not a message (no role, or content of another type).
    """
    role, content = data.get("role"), data.get("content")
    if role not in ("user", "assistant", "system") or not isinstance(content, (str, list)):
        raise ValueError("a message needs a role (user, assistant, system) and a content")
    if isinstance(content, list):
        content = [_block(b) for b in content if isinstance(b, dict)]
    timestamp = data.get("timestamp") or data.get("created_at")
    return Record(
        role,
        content,
        str(data.get("name") or ""),
        str(data["id"]) if data.get("id") else None,
        str(timestamp) if timestamp else None,
    )


def _block(block: dict) -> dict:
    kind = block.get("type")
    if kind == "tool_call":  # 2.x: the input is a JSON string
        raw = block.get("input")
        try:
            arguments = load_json(raw) if isinstance(raw, str) and raw.strip() else {}
        except ValueError:
            arguments = {"raw_arguments": raw}
        return {
            "type": "tool_use",
            "id": str(block.get("id")),
            "name": str(block.get("name")),
            "input": arguments if isinstance(arguments, dict) else {"value": arguments},
        }
    if kind == "tool_result" and isinstance(block.get("output"), list):
        return {**block, "output": [_block(b) for b in block["output"] if isinstance(b, dict)]}
    if kind == "data":  # 2.x media
        return {"type": "image", "source": block.get("source") or {}}
    return block  # 1.x blocks as they are (a replay compares them byte for byte)
