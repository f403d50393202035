"""A recording HTTP proxy on loopback, in front of a real model server: every request and
response passes through unchanged (a stream chunk by chunk, as it comes) and is kept as an
:class:`Exchange`. When the client closes its connection mid-answer, the proxy closes its own
to the server, so the server sees the close as it would without the proxy (a streaming
llama-cpp-python server then stops generating)."""

from __future__ import annotations

import http.client
import json
import threading
import time
from dataclasses import asdict, dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

_HOP_HEADERS = {"connection", "keep-alive", "transfer-encoding", "content-length", "host"}


@dataclass
class Exchange:
    """One request and its response, as they went through the proxy."""

    index: int
    method: str
    path: str
    started: float
    """Seconds since the proxy started."""
    request: Any = None
    """The request's JSON body (``None`` for none, its text when not JSON)."""
    status: int = 0
    """The server's HTTP status (0: no answer, see ``error``)."""
    seconds: float = 0.0
    """From the request to the end of the response (or the close)."""
    streamed: bool = False
    """The response was an event stream."""
    body: str = ""
    """The response body as it came."""
    client_closed: bool = False
    """The client closed the connection before the response ended."""
    error: str = ""
    """Why the proxy could not get or pass on the response."""
    events: list[Any] = field(default_factory=list)
    """A streamed response's ``data:`` payloads, parsed (``[DONE]`` as the string)."""

    def response(self) -> Any:
        """An unstreamed response's JSON (``None`` when it is not JSON)."""
        try:
            return json.loads(self.body)
        except ValueError:
            return None


class RecordingProxy:
    """A proxy on 127.0.0.1 forwarding to ``upstream`` (``http://host:port``).

    Attributes:
        base (`str`): ``http://127.0.0.1:PORT``; ``url`` is its ``/v1``.
        exchanges (`list[Exchange]`): Every exchange so far, in the order they started.
    """

    def __init__(self, upstream: str) -> None:
        target = urlparse(upstream)
        self.upstream = (target.hostname or "127.0.0.1", target.port or 80)
        self.exchanges: list[Exchange] = []
        self._lock = threading.Lock()
        self._epoch = time.monotonic()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                owner._forward(self, "GET")

            def do_POST(self) -> None:
                owner._forward(self, "POST")

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        host, port = self._server.server_address[:2]
        self.base = f"http://{host}:{port}"
        self.url = f"{self.base}/v1"

    def __enter__(self) -> RecordingProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def since(self, start: int) -> list[Exchange]:
        """The exchanges from number ``start`` on."""
        with self._lock:
            return list(self.exchanges[start:])

    def count(self) -> int:
        with self._lock:
            return len(self.exchanges)

    def save(self, path: Path) -> None:
        """Every exchange as one JSON line each."""
        with path.open("w", encoding="utf-8") as out:
            for exchange in self.since(0):
                out.write(json.dumps(asdict(exchange), ensure_ascii=False) + "\n")

    def _forward(self, handler: BaseHTTPRequestHandler, method: str) -> None:
        length = int(handler.headers.get("Content-Length") or 0)
        raw = handler.rfile.read(length) if length else b""
        started = time.monotonic()
        try:
            request: Any = json.loads(raw) if raw else None
        except ValueError:
            request = raw.decode("utf-8", "replace")
        with self._lock:
            exchange = Exchange(
                len(self.exchanges), method, handler.path, round(started - self._epoch, 3), request
            )
            self.exchanges.append(exchange)
        headers = {k: v for k, v in handler.headers.items() if k.lower() not in _HOP_HEADERS}
        upstream = http.client.HTTPConnection(*self.upstream, timeout=None)
        try:
            upstream.request(method, handler.path, body=raw or None, headers=headers)
            answer = upstream.getresponse()
            exchange.status = answer.status
            exchange.streamed = "text/event-stream" in (answer.getheader("Content-Type") or "")
            handler.send_response(answer.status)
            for key, value in answer.getheaders():
                if key.lower() not in _HOP_HEADERS:
                    handler.send_header(key, value)
            handler.send_header("Connection", "close")
            if not exchange.streamed:
                body = answer.read()
                handler.send_header("Content-Length", str(len(body)))
                handler.end_headers()
                exchange.body = body.decode("utf-8", "replace")
                handler.wfile.write(body)
                return
            handler.end_headers()
            received = bytearray()
            while True:
                piece = answer.read1(65536)
                if not piece:
                    break
                received += piece
                try:
                    handler.wfile.write(piece)
                    handler.wfile.flush()
                except OSError:  # the client is gone: close ours to the server too
                    exchange.client_closed = True
                    break
            exchange.body = received.decode("utf-8", "replace")
            exchange.events = _events(exchange.body)
        except OSError as exc:
            exchange.error = f"{type(exc).__name__}: {exc}"
            exchange.client_closed = exchange.client_closed or isinstance(
                exc, BrokenPipeError | ConnectionResetError
            )
        finally:
            exchange.seconds = round(time.monotonic() - started, 3)
            upstream.close()
            handler.close_connection = True


def _events(body: str) -> list[Any]:
    events: list[Any] = []
    for line in body.splitlines():
        if not line.startswith("data:"):
            continue
        payload = line[5:].strip()
        try:
            events.append(json.loads(payload))
        except ValueError:
            events.append(payload)
    return events
