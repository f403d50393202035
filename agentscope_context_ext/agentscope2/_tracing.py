"""Traces of a 2.x agent in AgentScope Studio (design §9.1).

AgentScope 2.x has no Studio connection of its own; Studio takes its OpenTelemetry traces
(``POST /v1/traces``), which 2.x's ``TracingMiddleware`` makes once an SDK tracer provider is
installed. :func:`trace_to` installs one exporting there; the agents this package builds carry
a ``TracingMiddleware`` in front of their :class:`ContextMiddleware` (:func:`traced`), and a
``ContextMiddleware`` placed in front of an agent's own ``TracingMiddleware`` lets it see tool
outputs after the cut (:func:`tracing_after_cuts`), so every span shows what the model saw.
"""

from __future__ import annotations

from typing import Any

from agentscope.middleware import MiddlewareBase, TracingMiddleware

from ..core.errors import StudioError, TracingError
from ..core.trace_export import TraceExport, export_traces

__all__ = ["connect_studio", "trace_to", "traced", "tracing_after_cuts"]


def trace_to(url: str, project: str | None = None, *, check: bool = True) -> TraceExport:
    """Send this process's traces to AgentScope Studio (or any OTLP/HTTP receiver) at ``url``.

    .. code-block:: python

        from agentscope.middleware import TracingMiddleware
        from agentscope_context_ext import ContextMiddleware, trace_to

        trace_to("http://127.0.0.1:3000", project="my-agent")
        context = ContextMiddleware("context.yaml")
        agent = Agent(..., middlewares=[TracingMiddleware(), context], offloader=context.offloader)

    Every reply is then an ``invoke_agent`` span with its ``chat`` and ``execute_tool`` spans,
    and the context manager's ``context.truncate``/``context.compact``/... spans among them.

    Args:
        url (`str`): ``http://HOST:PORT`` of Studio, or a full ``.../v1/traces`` endpoint.
        project (`str | None`): The traces' ``service.name`` (default ``agentscope-context-ext``).
        check (`bool`): Fail now when nothing listens at ``url``.

    Returns:
        `TraceExport`: ``flush()`` sends what has ended; ``close()`` stops (also run at exit).

    Raises:
        `TracingError`: A bad URL, or no receiver there.
    """
    return export_traces(url, project, check=check)


def traced(*middlewares: MiddlewareBase) -> list[MiddlewareBase]:
    """``middlewares`` behind a ``TracingMiddleware`` (which does nothing while no tracer
    provider is installed): its spans wrap ours, so tool spans carry the cut output."""
    return [TracingMiddleware(), *middlewares]


def tracing_after_cuts(agent: Any, ours: MiddlewareBase) -> None:
    """Put an agent's ``TracingMiddleware`` that runs inside ``ours`` around tool calls in front
    of it there: a tool span then records the output as the model gets it (cut, with its
    notice), not the tool's whole text. Model calls keep the order the user chose."""
    hooks = getattr(agent, "_acting_middlewares", None)
    if not isinstance(hooks, list) or ours not in hooks:
        return
    mine = hooks.index(ours)
    for middleware in [m for m in hooks[mine + 1 :] if isinstance(m, TracingMiddleware)]:
        hooks.remove(middleware)
        hooks.insert(hooks.index(ours), middleware)


def connect_studio(url: str, project: str, name: str) -> TraceExport:
    """``--studio-url``: the run's traces go to Studio (its Trace page), grouped by the agent's
    session (``gen_ai.conversation.id``) under ``project``. ``name`` (the run's name on 1.x)
    has no place in a trace.

    Raises:
        `StudioError`: ``url`` is not an http(s) URL, or Studio does not answer there.
    """
    try:
        return export_traces(url, project, receiver="AgentScope Studio")
    except TracingError as exc:
        raise StudioError(f"--studio-url: {exc}") from None
