"""``serve``'s terminal: an expected failure of a turn in one line, not a traceback.

AgentScope's service logs every failed reply with ``logger.exception`` on its logger (``as``):
a model server that is down printed the whole ``openai.APIConnectionError`` traceback, some
forty lines, for a failure the client is told about anyway. :class:`OneLineFailures`, a filter
``serve`` puts on that logger, keeps such a record's message and adds the error's own line
instead of the traceback when the error is expected: the model's server unreachable or
answering an HTTP error, a time-out, a refusal of ours. Anything else (a bug) keeps its
traceback; so does everything with ``-v``.
"""

from __future__ import annotations

import logging

from ..core.errors import ContextExtError
from ..core.model_servers import connection_failure, error_chain
from ._refusal import one_line

__all__ = ["AGENTSCOPE_LOGGER", "OneLineFailures", "expected_failure"]

AGENTSCOPE_LOGGER = "as"
"""The name of AgentScope 2.x's logger (``agentscope._logging``)."""


def expected_failure(error: BaseException) -> bool:
    """Whether ``error`` (or what it wraps) is a failure a served turn can expect: a refusal
    of ours, a network error or time-out, or an HTTP error answer of the model's server."""
    if connection_failure(error):
        return True
    return any(
        isinstance(exc, ContextExtError) or isinstance(getattr(exc, "status_code", None), int)
        for exc in error_chain(error)
    )


class OneLineFailures(logging.Filter):
    """A record of an expected failure (:func:`expected_failure`) without its traceback: its
    message, then ``: <ErrorClass>: <the error's line>``."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        if error is not None and expected_failure(error):
            record.msg = f"{record.getMessage()}: {type(error).__name__}: {one_line(error)}"
            record.args = None
            record.exc_info = None
            record.exc_text = None
        return True
