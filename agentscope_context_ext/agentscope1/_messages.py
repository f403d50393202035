"""Helpers around 1.x messages: the messages at the head of the context, the truncation
state each tool result carries in its message's ``metadata`` (so it travels with session state),
and a message's lone surrogates replaced (:func:`make_sendable`).
"""

from __future__ import annotations

from typing import Any

from agentscope.message import Msg

from ..core.summary import CompactSummary
from ..core.truncation import sendable_text, sendable_value

__all__ = [
    "LONG_TERM_MSG_ID",
    "META_KEY",
    "SUMMARY_MSG_NAME",
    "compressed_summary_message",
    "has_tool_results",
    "long_term_message",
    "make_sendable",
    "result_state",
    "summary_message",
    "summary_of",
    "text_state",
]

SUMMARY_MSG_NAME = "context_summary"
LONG_TERM_MSG_NAME = "long_term_memory"
LONG_TERM_MSG_ID = "context-long-term-memory"


def summary_message(summary: CompactSummary) -> Msg:
    """The summary as one user message; its id is stable until the next compaction.

    The structured summary travels in the message's ``metadata``, so the message alone carries
    it: saved as the first message of a session, it survives a load into any memory (a plain
    ``InMemoryMemory`` keeps it as a message) and becomes the summary again when context
    management is enabled (:func:`summary_of`).
    """
    msg = Msg(
        SUMMARY_MSG_NAME,
        summary.render(),
        "user",
        metadata={META_KEY: {"summary": summary.model_dump(mode="json")}},
        timestamp=summary.created_at.replace("T", " "),
    )
    msg.id = f"context-summary-{summary.compactions}"
    return msg


def summary_of(msg: Msg) -> CompactSummary | None:
    """The structured summary a :func:`summary_message` carries (``None`` for other messages)."""
    metadata = msg.metadata if isinstance(msg.metadata, dict) else {}
    record = metadata.get(META_KEY)
    dump = record.get("summary") if isinstance(record, dict) else None
    if not isinstance(dump, dict):
        return None
    try:
        return CompactSummary.model_validate(dump)
    except ValueError:
        return None


def long_term_message(text: str) -> Msg:
    """The long-term memory block as one user message with a fixed id."""
    msg = Msg(LONG_TERM_MSG_NAME, text, "user")
    msg.id = LONG_TERM_MSG_ID
    return msg


def compressed_summary_message(text: str) -> Msg:
    """AgentScope's own compression summary, if something ever set one."""
    msg = Msg("user", text, "user")
    msg.id = "agentscope-compressed-summary"
    return msg


META_KEY = "agentscope_context_ext"
"""Key in ``Msg.metadata`` under which this package records per-result truncation state."""


def result_state(msg: Msg) -> dict[str, dict[str, Any]]:
    """The per-tool-call truncation records of ``msg`` (created on first use)."""
    if not isinstance(msg.metadata, dict):
        msg.metadata = {}
    record = msg.metadata.setdefault(META_KEY, {})
    return record.setdefault("results", {})


def text_state(msg: Msg) -> dict[str, dict[str, Any]]:
    """The records of ``msg``'s offloaded text parts, by part (created on first use)."""
    if not isinstance(msg.metadata, dict):
        msg.metadata = {}
    record = msg.metadata.setdefault(META_KEY, {})
    return record.setdefault("texts", {})


def has_tool_results(msg: Msg) -> bool:
    """Whether ``msg`` carries at least one ``tool_result`` block."""
    return isinstance(msg.content, list) and any(
        isinstance(block, dict) and block.get("type") == "tool_result" for block in msg.content
    )


def make_sendable(msg: Msg) -> None:
    """Replace the lone surrogates of ``msg``'s texts, thinking and tool-call arguments (a user's
    text or a model's answer may hold one; its tool results are the stages', which save their
    bytes first): no provider takes them, and 1.x's ``JSONSession`` cannot save them."""
    if isinstance(msg.content, str):
        msg.content = sendable_text(msg.content)
        return
    for block in msg.content if isinstance(msg.content, list) else ():
        if isinstance(block, dict) and block.get("type") != "tool_result":
            for key, value in block.items():
                block[key] = sendable_value(value)
