"""Showing a run in AgentScope Studio on 1.x: ``agentscope.init(studio_url=...)`` forwards every
agent message (tool results as the model sees them, the compaction notices) to Studio and sends
its traces there, where the context manager's spans join AgentScope's (design §9.1)."""

from __future__ import annotations

import logging
import os

import agentscope
from agentscope import _config as agentscope_run_config

from ..core.errors import StudioError, TracingError
from ..core.trace_export import TraceExport, export_traces, traces_endpoint

__all__ = ["connect_studio", "trace_to"]


def connect_studio(url: str, project: str, name: str) -> None:
    """Register this process's run with Studio; every agent message is forwarded from then on.
    AgentScope's warnings stay visible (a message Studio did not accept is logged, not lost in
    silence).

    Raises:
        `StudioError`: ``url`` is not an http(s) URL, or Studio does not answer there.
    """
    try:  # the URL checked as for a trace receiver, Studio's traces going there too
        traces_endpoint(url, "AgentScope Studio")
    except TracingError as exc:
        raise StudioError(f"--studio-url: {exc}") from None
    # AgentScope 1.x names no service in its traces: the project, as the 2.x traces are named.
    os.environ.setdefault("OTEL_SERVICE_NAME", project)
    try:
        agentscope.init(
            project=project, name=name, studio_url=url.rstrip("/"), logging_level="WARNING"
        )
    # requests' errors (refused, timed out, HTTP status) are OSErrors; a server that answers
    # but is not Studio is AgentScope's RuntimeError
    except (OSError, RuntimeError) as exc:
        reason = " ".join(str(exc).split())[:200]
        raise StudioError(f"cannot reach AgentScope Studio at {url}: {reason}") from None
    logging.getLogger("as").setLevel(logging.WARNING)


def trace_to(url: str, project: str | None = None, *, check: bool = True) -> TraceExport:
    """Send this process's traces (AgentScope 1.x's spans and the context manager's) to
    AgentScope Studio or any OTLP/HTTP receiver at ``url``, without registering a Studio run:
    what ``agentscope.init(tracing_url=...)`` does, with an export that can be flushed and
    closed (see the 2.x adapter's ``trace_to`` for the arguments).

    Raises:
        `TracingError`: A bad URL, or no receiver there.
    """
    export = export_traces(url, project, check=check)
    # AgentScope 1.x's decorators trace only once its run config says so (agentscope.init's
    # last step, with a tracing URL).
    agentscope_run_config.trace_enabled = True
    return export
