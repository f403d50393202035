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
from urllib.parse import urlparse, urlunparse

from opentelemetry.sdk.trace import SpanProcessor
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from .errors import TracingError

__all__ = ["DEFAULT_PROJECT", "TraceExport", "export_traces", "traces_endpoint"]

logger = logging.getLogger("agentscope_context_ext")

DEFAULT_PROJECT = "agentscope-context-ext"
"""``service.name`` of the traces when no project is given (Studio lists traces by it)."""
CONNECT_TIMEOUT = 3.0


def traces_endpoint(url: str, receiver: str = "a trace receiver") -> str:
    """``url``'s OTLP/HTTP traces endpoint: ``http://host:port`` -> ``.../v1/traces`` (a URL
    whose path already ends in ``/v1/traces`` is kept; a query is kept after the path).

    Raises:
        `TracingError`: ``url`` is not an http(s) URL with a host and a valid port.
    """
    expected = f"{url!r} is not the URL of {receiver}: expected http://HOST:PORT"
    if not isinstance(url, str):
        raise TracingError(expected)
    try:
        parsed = urlparse(url.strip())
        parsed.port  # noqa: B018 - raises on a port out of range
    except ValueError as exc:  # a malformed IPv6 address, a port out of range
        raise TracingError(f"{url!r} is not the URL of {receiver}: {exc}") from None
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise TracingError(expected)
    path = parsed.path.rstrip("/")
    if not path.endswith("/v1/traces"):
        path += "/v1/traces"
    return urlunparse(parsed._replace(path=path, params="", fragment=""))


def _reachable(endpoint: str, receiver: str) -> None:
    parsed = urlparse(endpoint)
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    try:
        with socket.create_connection((parsed.hostname, port), timeout=CONNECT_TIMEOUT):
            pass
    except OSError as exc:
        reason = " ".join(str(exc).split())[:200] or type(exc).__name__
        base = f"{parsed.scheme}://{parsed.netloc}"
        raise TracingError(f"cannot reach {receiver} at {base}: {reason}") from None


class _Switchboard(SpanProcessor):
    """The one span processor of ours on the provider: hands each span to the open exports
    (a tuple replaced on every change, so a span ending while an export closes reaches every
    other one)."""

    def __init__(self) -> None:
        self.exports: tuple[Any, ...] = ()
        self.lock = threading.Lock()

    def add(self, processor: Any) -> None:
        with self.lock:
            self.exports = (*self.exports, processor)

    def remove(self, processor: Any) -> bool:
        with self.lock:
            kept = tuple(p for p in self.exports if p is not processor)
            removed = len(kept) != len(self.exports)
            self.exports = kept
        return removed

    def on_start(self, span: Any, parent_context: Any = None) -> None:
        for processor in self.exports:
            processor.on_start(span, parent_context=parent_context)

    def on_end(self, span: Any) -> None:
        for processor in self.exports:
            processor.on_end(span)

    def shutdown(self) -> None:
        with self.lock:
            exports, self.exports = self.exports, ()
        for processor in exports:
            processor.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return all(processor.force_flush(timeout_millis) for processor in self.exports)


class _Recorded(SpanExporter):
    """The OTLP exporter, remembering whether an export failed since it was last asked."""

    def __init__(self, exporter: Any) -> None:
        self.exporter = exporter
        self.failed = threading.Event()

    def export(self, spans: Any) -> SpanExportResult:
        try:
            result = self.exporter.export(spans)
        except Exception:  # noqa: BLE001 - the batch thread must go on
            result = SpanExportResult.FAILURE
        if result is not SpanExportResult.SUCCESS:
            self.failed.set()
        return result

    def shutdown(self) -> None:
        self.exporter.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.exporter.force_flush(timeout_millis)


def _within(seconds: float, work: Any) -> bool:
    """Run ``work()`` (which may block on the network) in a thread; ``False`` when it did not
    finish in ``seconds`` or returned false."""
    outcome: list[bool] = []
    thread = threading.Thread(target=lambda: outcome.append(bool(work())), daemon=True)
    thread.start()
    thread.join(max(seconds, 0.0))
    return bool(outcome) and outcome[0]


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
    _exporter: _Recorded | None = field(repr=False, default=None)
    _board: _Switchboard | None = field(repr=False, default=None)

    @property
    def closed(self) -> bool:
        return self._processor is None

    def flush(self, timeout: float = 10.0) -> bool:
        """Send the spans ended so far; ``False`` if the receiver did not take them all within
        ``timeout`` seconds (refused, an error status, no answer) since the last flush."""
        processor, exporter = self._processor, self._exporter
        if processor is None or exporter is None:
            return True
        sent = _within(timeout, lambda: processor.force_flush(int(timeout * 1000)))
        failed = exporter.failed.is_set()
        exporter.failed.clear()
        return sent and not failed

    def close(self, timeout: float = 5.0, warn: bool = True) -> None:
        """Flush and stop this export, waiting at most ``timeout`` seconds for the receiver
        (the other exports and the provider go on); ``warn``: log when spans were left."""
        processor, board = self._processor, self._board
        if processor is None or board is None:
            return
        self._processor = None
        with _board_lock:
            _open.pop(self.endpoint, None)
        board.remove(processor)
        if not _within(timeout, lambda: processor.shutdown() or True) and warn:
            logger.warning("could not send the last spans to %s", self.endpoint)


_open: dict[str, TraceExport] = {}
"""The open exports by endpoint: a second ``trace_to`` of the same receiver is the same export
(a notebook cell run twice must not send every span twice)."""


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

    Returns:
        `TraceExport`: A new export, or the one already open to the same endpoint.

    Raises:
        `TracingError`: A bad URL, or (``check``) no receiver listening there.
    """
    endpoint = traces_endpoint(url, receiver)
    with _board_lock:
        already = _open.get(endpoint)
    if already is not None:
        return already
    if check:
        _reachable(endpoint, receiver)
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    name = project or DEFAULT_PROJECT
    board = _switchboard(name)
    exporter = _Recorded(OTLPSpanExporter(endpoint=endpoint, timeout=10))
    processor = BatchSpanProcessor(exporter)
    from opentelemetry import trace

    resource = getattr(trace.get_tracer_provider(), "resource", None)
    named = resource.attributes.get("service.name") if resource is not None else None
    export = TraceExport(
        endpoint=endpoint,
        project=named if isinstance(named, str) else name,
        _processor=processor,
        _exporter=exporter,
        _board=board,
    )
    with _board_lock:
        if endpoint in _open:  # another thread opened it meanwhile
            processor.shutdown()
            return _open[endpoint]
        _open[endpoint] = export
    board.add(processor)
    atexit.register(export.close)
    return export
