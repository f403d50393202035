"""What every replayed side of B8 shares: the recorded assistant blocks as AgentScope 2.x content
blocks, a tool that returns its recorded outputs, and the strings of a formatted prompt.

Only the standard library at the top: ``bench/qwenpaw_side.py`` imports this in QwenPaw's venv
(AgentScope 2.0.10), B8 in the package's (2.0.11); AgentScope is imported where it is used.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["assistant_blocks", "next_reply", "replayed_tool", "strings_of"]


def assistant_blocks(blocks: list[dict]) -> list[Any]:
    """Recorded assistant blocks (``text``, ``thinking``, ``tool_use`` dicts) as 2.x blocks;
    empty thinking is left out."""
    from agentscope.message import TextBlock, ThinkingBlock, ToolCallBlock

    made: list[Any] = []
    for block in blocks:
        if block["type"] == "text":
            made.append(TextBlock(text=block["text"]))
        elif block["type"] == "thinking" and block.get("thinking"):
            made.append(ThinkingBlock(thinking=block["thinking"]))
        elif block["type"] == "tool_use":
            arguments = block["input"]
            if not isinstance(arguments, str):
                arguments = json.dumps(arguments, ensure_ascii=False)
            made.append(ToolCallBlock(id=block["id"], name=block["name"], input=arguments))
    return made


def next_reply(queue: list[list[dict]]) -> list[Any] | str:
    """The next recorded assistant message of the turn that has content (taken off
    ``queue``), as 2.x blocks; ``"ok"`` once the turn's messages are used up."""
    while queue:
        blocks = assistant_blocks(queue.pop(0))
        if blocks:
            return blocks
    return "ok"


def replayed_tool(name: str, outputs: dict[str, list[str]]) -> Any:
    """A 2.x ``FunctionTool`` named ``name`` that returns the next of ``outputs[name]`` (``""``
    once they run out), whatever it is called with; always allowed."""
    from agentscope.permission import PermissionBehavior, PermissionDecision
    from agentscope.tool import FunctionTool

    async def replayed(**kwargs: Any) -> str:
        return outputs[name].pop(0) if outputs.get(name) else ""

    return FunctionTool(
        replayed,
        name=name,
        description=f"replayed {name}",
        input_schema={"type": "object", "properties": {}, "additionalProperties": True},
        permission=PermissionDecision(behavior=PermissionBehavior.ALLOW, message="replay"),
    )


def strings_of(value: Any) -> str:
    """Every string in a formatted prompt or record, joined by newlines (not its JSON: escaping
    would hide a name with a quote or a backslash in it)."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        return "\n".join(strings_of(item) for item in value.values())
    if isinstance(value, list | tuple):
        return "\n".join(strings_of(item) for item in value)
    return ""
