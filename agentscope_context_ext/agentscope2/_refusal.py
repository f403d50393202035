"""A served turn the extension refuses, said on the reply's own stream (design §11.3).

AgentScope's service reports a reply that raises with its own classifier, which knows HTTP
statuses and network errors: a refusal of ours (``ContextOverflowError``, ``WorkspaceError``,
any ``ContextExtError``) reached the client as "The reply failed with an unknown error." and
the terminal as a traceback. A refusal is an answer, not a crash: :func:`refusal` ends the
reply with a ``context_ext.error`` event carrying the one-line message and a ``ReplyEndEvent``
(``finished_reason`` error) whose ``error.message`` is that line, which the service stores with
the reply; the terminal gets one log line. :class:`RefusedTurn` does it for a turn whose
middleware could not be made at all (a workspace that cannot be written).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import AsyncGenerator, Callable
from typing import Any

from agentscope.event import (
    CustomEvent,
    EventBase,
    ReplyEndEvent,
    ReplyFinishedReason,
    ReplyStartEvent,
)
from agentscope.middleware import MiddlewareBase
from agentscope.types import ErrorInfo, ErrorType

from ..core.agent_file import ModelUnreachable
from ..core.errors import ConfigError, ContextExtError, ContextOverflowError

__all__ = ["ERROR_EVENT", "RefusedTurn", "one_line", "refusal"]

logger = logging.getLogger("agentscope_context_ext")

ERROR_EVENT = "context_ext.error"
"""The event of a refusal (the name the pipeline's own ``error`` event has on the stream)."""


def one_line(error: BaseException) -> str:
    """An error's message on one line (its class name when it has none)."""
    return " ".join(str(error).split()) or type(error).__name__


def _error_type(error: ContextExtError) -> ErrorType:
    """2.x's classification of a refusal, for clients that go by ``error.type``."""
    if isinstance(error, ContextOverflowError):
        return ErrorType.INVALID_REQUEST  # the request could not be made
    if isinstance(error, ModelUnreachable):
        return ErrorType.CONNECTION
    if isinstance(error, ConfigError):
        return ErrorType.SETUP
    return ErrorType.INTERNAL


def refusal(
    agent: Any,
    error: ContextExtError,
    reply_id: str | None,
    pending: list[CustomEvent],
) -> list[EventBase]:
    """The events that end a reply refused with ``error``, after the extension's ``pending``
    ones: the pipeline's own ``context_ext.error`` event (the parts of an overflow) gets the
    message, or a new one carries it; a ``ReplyStartEvent`` first when the reply had not
    started (``reply_id`` is ``None``); the ``ReplyEndEvent`` saying why last.

    Args:
        agent: The 2.x ``Agent`` whose reply it is.
        error (`ContextExtError`): The refusal.
        reply_id (`str | None`): The reply's id, ``None`` before its ``ReplyStartEvent``.
        pending (`list[CustomEvent]`): The extension's events not sent yet.
    """
    message = one_line(error)
    session_id = str(getattr(agent.state, "session_id", "") or "")
    what = "failed" if isinstance(error, ModelUnreachable) else "refused"
    logger.warning("session %s: reply %s: %s", session_id or "?", what, message)
    described = {"error": type(error).__name__, "message": message}
    events: list[EventBase] = []
    if reply_id is None:
        reply_id = uuid.uuid4().hex
        events.append(ReplyStartEvent(session_id=session_id, reply_id=reply_id, name=agent.name))
    said = False
    for event in pending:
        if event.name == ERROR_EVENT and not said:
            value = event.value if isinstance(event.value, dict) else {}
            event = CustomEvent(name=ERROR_EVENT, value={**value, **described})
            said = True
        events.append(event)
    if not said:
        events.append(CustomEvent(name=ERROR_EVENT, value=described))
    events.append(
        ReplyEndEvent(
            session_id=session_id,
            reply_id=reply_id,
            finished_reason=ReplyFinishedReason.ERROR,
            error=ErrorInfo(type=_error_type(error), message=message),
        )
    )
    return events


class RefusedTurn(MiddlewareBase):
    """The middleware of a turn that cannot have context management: it refuses the reply
    with ``error`` before the agent runs (what ``context_middleware_factory`` returns when
    the session's files cannot be placed).

    Args:
        error (`ContextExtError`): Why.
    """

    def __init__(self, error: ContextExtError) -> None:
        self.error = error

    async def on_reply(
        self, agent: Any, input_kwargs: dict, next_handler: Callable[..., AsyncGenerator]
    ) -> AsyncGenerator:
        for event in refusal(agent, self.error, None, []):
            yield event
