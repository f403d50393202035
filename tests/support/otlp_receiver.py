"""A loopback OTLP/HTTP trace receiver for the tests: what AgentScope Studio's ``/v1/traces``
takes (protobuf or JSON), decoded with ``opentelemetry-proto`` into plain span records.

.. code-block:: python

    with OtlpReceiver() as receiver:
        export = trace_to(receiver.url, project="tests")
        ...  # run an agent
        export.flush()
        spans = receiver.spans()
"""

from __future__ import annotations

import gzip
import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from google.protobuf.json_format import Parse
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

__all__ = ["OtlpReceiver", "SpanRecord", "records", "span_tree"]


@dataclass
class SpanRecord:
    """One received span, as plain data."""

    name: str
    trace_id: str
    span_id: str
    parent_id: str
    attributes: dict[str, Any]
    status: int
    status_message: str
    service: str
    scope: str
    start_ns: int
    end_ns: int
    events: list[str] = field(default_factory=list)

    @property
    def conversation(self) -> str | None:
        return self.attributes.get("gen_ai.conversation.id")


def _value(any_value: Any) -> Any:
    kind = any_value.WhichOneof("value")
    if kind is None:
        return None
    if kind == "array_value":
        return [_value(item) for item in any_value.array_value.values]
    if kind == "kvlist_value":
        return {item.key: _value(item.value) for item in any_value.kvlist_value.values}
    return getattr(any_value, kind)


def records(request: ExportTraceServiceRequest) -> list[SpanRecord]:
    out: list[SpanRecord] = []
    for resource_spans in request.resource_spans:
        resource = {kv.key: _value(kv.value) for kv in resource_spans.resource.attributes}
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                out.append(
                    SpanRecord(
                        name=span.name,
                        trace_id=span.trace_id.hex(),
                        span_id=span.span_id.hex(),
                        parent_id=span.parent_span_id.hex(),
                        attributes={kv.key: _value(kv.value) for kv in span.attributes},
                        status=span.status.code,
                        status_message=span.status.message,
                        service=str(resource.get("service.name", "")),
                        scope=scope_spans.scope.name,
                        start_ns=span.start_time_unix_nano,
                        end_ns=span.end_time_unix_nano,
                        events=[event.name for event in span.events],
                    )
                )
    return out


class OtlpReceiver:
    """``POST /v1/traces`` on 127.0.0.1 (a free port), in a thread; ``url`` is the base URL."""

    def __init__(self, status: int = 200) -> None:
        self._spans: list[SpanRecord] = []
        self._lock = threading.Lock()
        self.requests = 0
        self.rejected: list[str] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length)
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                kind = self.headers.get("Content-Type", "")
                if self.path != "/v1/traces":
                    receiver.rejected.append(f"path {self.path}")
                    self.send_response(404)
                    self.end_headers()
                    return
                request = ExportTraceServiceRequest()
                if "json" in kind:
                    Parse(body.decode("utf-8"), request)
                else:
                    request.ParseFromString(body)
                with receiver._lock:
                    receiver.requests += 1
                    receiver._spans.extend(records(request))
                answer = ExportTraceServiceResponse().SerializeToString()
                self.send_response(status)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args: Any) -> None:
                return None

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> OtlpReceiver:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()

    def spans(self) -> list[SpanRecord]:
        with self._lock:
            return list(self._spans)


def span_tree(spans: list[SpanRecord]) -> str:
    """The spans as an indented tree of names (children in start order), for assertions and
    failure messages."""
    by_parent: dict[str, list[SpanRecord]] = {}
    ids = {span.span_id for span in spans}
    for span in sorted(spans, key=lambda s: s.start_ns):
        parent = span.parent_id if span.parent_id in ids else ""
        by_parent.setdefault(parent, []).append(span)
    lines: list[str] = []

    def walk(parent: str, depth: int) -> None:
        for span in by_parent.get(parent, []):
            lines.append("  " * depth + span.name)
            walk(span.span_id, depth + 1)

    walk("", 0)
    return "\n".join(lines)


def as_json(spans: list[SpanRecord]) -> str:
    """The spans as JSON (debugging)."""
    return json.dumps([span.__dict__ for span in spans], indent=1, default=str)
