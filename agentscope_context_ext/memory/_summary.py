"""The summary as the one user-role message at the head of the context (SPEC 2.1)."""

from __future__ import annotations

from agentscope.message import Msg

from ..core.summary import CompactSummary

SUMMARY_MSG_NAME = "context_summary"


def summary_to_msg(summary: CompactSummary, msg_id: str) -> Msg:
    """The summary as one user-role message with a stable id and timestamp."""
    msg = Msg(
        SUMMARY_MSG_NAME, summary.render(), "user", timestamp=summary.created_at.replace("T", " ")
    )
    msg.id = msg_id
    return msg
