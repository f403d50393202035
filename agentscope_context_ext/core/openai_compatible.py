"""Request shapes for OpenAI-compatible servers stricter than OpenAI's own API (the agent file's
``model.compat``), as plain functions on formatted messages; each AgentScope major applies them
in its own formatter and model subclass (``_build.py``, ``_build2.py``).

llama-cpp-python's server is the case they were written for: its chat templates take a message's
``content`` as a string, so a list of parts (AgentScope's format for system and user messages)
or a ``null`` content (an assistant turn with only tool calls) fails with HTTP 500; and it only
offers the tools to the model when ``tool_choice`` is ``"auto"``. The tests check both against a
loopback server imitating that behaviour, not against llama.cpp itself.
"""

from __future__ import annotations

from typing import Any

__all__ = ["string_content"]


def string_content(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``messages`` (OpenAI chat format) with each content a string: a list of text parts
    joined by newlines, ``None`` as ``""``. A list holding an image or audio part stays a list,
    since no string can carry it."""
    plain = []
    for message in messages:
        content = message.get("content")
        if content is None:
            message = {**message, "content": ""}
        elif isinstance(content, list) and all(
            isinstance(part, dict) and part.get("type") == "text" for part in content
        ):
            message = {**message, "content": "\n".join(str(part["text"]) for part in content)}
        plain.append(message)
    return plain
