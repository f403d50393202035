"""What the 2.x middleware's hooks read out of the arguments AgentScope passes them: an event's
data as JSON, the system prompt and tool schemas of a model call, a compression's hint."""

from __future__ import annotations

from typing import Any

from ..core.truncation import sendable_text
from ._convert import output_text

__all__ = ["hint_text", "plain", "sent_parts"]


def plain(value: Any) -> Any:
    """``value`` as JSON data (an event's numbers, paths and tuples of them); its texts hold no
    lone surrogate (an error's text may: a path of undecodable bytes)."""
    if isinstance(value, dict):
        return {sendable_text(str(key)): plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(item) for item in value]
    if isinstance(value, str):
        return sendable_text(value)
    if value is None or isinstance(value, (int, float, bool)):
        return value
    return sendable_text(str(value))


def sent_parts(model_kwargs: dict) -> tuple[str, list[dict]] | None:
    """The system prompt and tool schemas of a model call, as 2.x passed them (its first
    message is the system prompt it built); None when the call does not look like that."""
    messages = model_kwargs.get("messages")
    if not messages or getattr(messages[0], "role", None) != "system":
        return None
    content = messages[0].content
    if isinstance(content, list) and len(content) == 1:  # 2.x makes its one TextBlock
        content = getattr(content[0], "text", None)
    if not isinstance(content, str):
        return None
    return content, list(model_kwargs.get("tools") or [])


def hint_text(instructions: Any) -> str | None:
    """The text of the instructions 2.x passes ``on_compress_context`` (its hint), if any."""
    if instructions is None:
        return None
    hint = getattr(instructions, "hint", instructions)
    return hint if isinstance(hint, str) else output_text(hint)
