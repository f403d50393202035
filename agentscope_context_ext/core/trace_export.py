"""Sending traces to AgentScope Studio (or any OTLP/HTTP receiver): the tracer provider, its
exporter, and a clean stop (design §9.1).

:func:`export_traces` installs an OpenTelemetry SDK ``TracerProvider`` (or joins the one already
installed) with a batch exporter to ``<url>/v1/traces``, the OTLP/HTTP path Studio and every
OpenTelemetry collector take; the returned :class:`TraceExport` flushes and detaches itself
(``close()``, also run at the interpreter's exit). Each export hangs off one switchboard
processor of ours, so an export can be closed without touching the others (OpenTelemetry has
no way to remove a processor from a provider).
"""

from __future__ import annotations

import atexit
import logging
import socket
import threading
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlparse

from opentelemetry.sdk.trace import SpanProcessor

from .errors import TracingError

__all__ = ["DEFAULT_PROJECT", "TraceExport", "export_traces", "traces_endpoint"]

logger = logging.getLogger("agentscope_context_ext")

DEFAULT_PROJECT = "agentscope-context-ext"
"""``service.name`` of the traces when no project is given (Studio lists traces by it)."""
CONNECT_TIMEOUT = 3.0


def traces_endpoint(url: str, receiver: str = "a trace receiver") -> str:
    """``url``'s OTLP/HTTP traces endpoint: ``http://host:port`` -> ``.../v1/traces`` (a URL
    that already ends in ``/v1/traces`` is kept).

    Raises:
        `TracingError`: ``url`` is not an http(s) URL with a host.
    """
    parsed = urlparse(url.strip()) if isinstance(url, str) else None
    if parsed is None or parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise TracingError(f"{url!r} is not the URL of {receiver}: expected http://HOST:PORT")
    try:
        parsed.port  # noqa: B018 - raises on a port out of range
    except ValueError as exc:
        raise TracingError(f"{url!r}: {exc}") from None
    base = url.strip().rstrip("/")
    return base if base.endswith("/v1/traces") else f"{base}/v1/traces"


def _reachable(endpoint: str, receiver: str) -> None:
    parsed = urlparse(endpoint)
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    try:
        with socket.create_connection((parsed.hostname, port), timeout=CONNECT_TIMEOUT):
            pass
    except OSError as exc:
        reason = " ".join(str(exc).split())[:200] or type(exc).__name__
        base = endpoint.removesuffix("/v1/traces")
        raise TracingError(f"cannot reach {receiver} at {base}: {reason}") from None


class _Switchboard(SpanProcessor):
    """The one span processor of ours on the provider: hands each span to the open exports."""

    def __init__(self) -> None:
        self.exports: list[Any] = []
        self.lock = threading.Lock()

    def on_start(self, span: Any, parent_context: Any = None) -> None:
        for processor in self.exports:
            processor.on_start(span, parent_context=parent_context)

    def on_end(self, span: Any) -> None:
        for processor in self.exports:
            processor.on_end(span)

    def shutdown(self) -> None:
        with self.lock:
            exports, self.exports = self.exports, []
        for processor in exports:
            processor.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return all(processor.force_flush(timeout_millis) for processor in list(self.exports))


_board: _Switchboard | None = None
_board_lock = threading.Lock()


def _switchboard(project: str) -> _Switchboard:
    """The switchboard on the global provider, installing an SDK provider named ``project``
    when there is none yet (one provider per process: OpenTelemetry allows no other)."""
    global _board
    from opentelemetry import trace
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider

    with _board_lock:
        provider = trace.get_tracer_provider()
        if _board is not None and isinstance(provider, TracerProvider):
            return _board
        if not isinstance(provider, TracerProvider):
            provider = TracerProvider(resource=Resource.create({"service.name": project}))
            trace.set_tracer_provider(provider)
        _board = _Switchboard()
        provider.add_span_processor(_board)
        return _board


@dataclass
class TraceExport:
    """One open export of spans to a receiver.

    Attributes:
        endpoint (`str`): Where the spans go (``<url>/v1/traces``).
        project (`str`): ``service.name`` of the traces (the provider's, when one was already
            installed with its own name).
    """

    endpoint: str
    project: str
    _processor: Any = field(repr=False, default=None)
    _board: _Switchboard | None = field(repr=False, default=None)

    def flush(self, timeout: float = 10.0) -> bool:
        """Send the spans ended so far; ``False`` if the receiver did not take them in time."""
        if self._processor is None:
            return True
        return bool(self._processor.force_flush(int(timeout * 1000)))

    def close(self) -> None:
        """Flush and stop this export (the others and the provider go on)."""
        processor, board = self._processor, self._board
        if processor is None or board is None:
            return
        self._processor = None
        with board.lock:
            if processor in board.exports:
                board.exports.remove(processor)
        try:
            processor.shutdown()  # flushes what is queued first
        except Exception:  # noqa: BLE001 - at exit: a receiver gone must not fail the program
            logger.warning("could not send the last spans to %s", self.endpoint)


def export_traces(
    url: str,
    project: str | None = None,
    *,
    check: bool = True,
    receiver: str = "a trace receiver",
) -> TraceExport:
    """Send OpenTelemetry spans to ``url`` (AgentScope Studio, or any OTLP/HTTP receiver).

    Args:
        url (`str`): ``http://HOST:PORT`` of Studio (its ``/v1/traces`` is used), or a full
            ``.../v1/traces`` endpoint.
        project (`str | None`): ``service.name`` of the traces, what Studio lists them by
            (default ``agentscope-context-ext``); a provider installed earlier keeps its own.
        check (`bool`): Connect to the receiver first and fail now if it does not answer.
        receiver (`str`): What the receiver is called in an error message.

    Raises:
        `TracingError`: A bad URL, or (``check``) no receiver listening there.
    """
    endpoint = traces_endpoint(url, receiver)
    if check:
        _reachable(endpoint, receiver)
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    name = project or DEFAULT_PROJECT
    board = _switchboard(name)
    processor = BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint, timeout=10))
    with board.lock:
        board.exports.append(processor)
    from opentelemetry import trace

    resource = getattr(trace.get_tracer_provider(), "resource", None)
    named = resource.attributes.get("service.name") if resource is not None else None
    export = TraceExport(
        endpoint=endpoint,
        project=named if isinstance(named, str) else name,
        _processor=processor,
        _board=board,
    )
    atexit.register(export.close)
    return export
