"""A model server process that crashes while it answers: an OpenAI-protocol server on loopback,
in a process of its own, that ends that process (``os._exit``) at its first request, before it
answers (``before``) or after the start of a streamed answer (``mid-stream``). The operating
system then closes its sockets, as it does for a model server that crashed; every later
connection is refused. Run as a script it is the server: it prints its port, then serves.
:func:`dead_url` is a model server that is not running at all.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Literal

When = Literal["before", "mid-stream"]


def dead_url(path: str = "/v1") -> str:
    """A loopback URL nothing listens on (a port just bound and let go)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}{path}"


class CrashingServer:
    """The server process; ``url`` is its base (``http://127.0.0.1:PORT/v1``).

    Args:
        when (`When`): ``before``: it dies having read the request; ``mid-stream``: having sent
            the headers and one chunk of a streamed answer.
    """

    def __init__(self, when: When) -> None:
        self.process = subprocess.Popen(
            [sys.executable, __file__, when], stdout=subprocess.PIPE, text=True
        )
        assert self.process.stdout is not None
        port = self.process.stdout.readline().strip()  # blocks until it listens
        if not port.isdigit():
            self.close()
            raise RuntimeError(f"the crashing server did not start: {port!r}")
        self.url = f"http://127.0.0.1:{port}/v1"

    def crashed(self) -> bool:
        """Whether its process has ended (it does at its first request)."""
        return self.process.poll() is not None

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        if self.process.stdout is not None:
            self.process.stdout.close()

    def __enter__(self) -> CrashingServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _serve(when: When) -> None:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: object) -> None:
            pass

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if when == "mid-stream":
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                delta = {"role": "assistant", "content": "Let me"}
                chunk = {
                    "id": "c1",
                    "object": "chat.completion.chunk",
                    "created": 0,
                    "model": "m",
                    "choices": [{"index": 0, "delta": delta, "finish_reason": None}],
                }
                data = f"data: {json.dumps(chunk)}\n\n".encode()
                self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                self.wfile.flush()
            os._exit(1)  # the crash: no answer (or the rest of it) ever comes

    server = HTTPServer(("127.0.0.1", 0), Handler)
    print(server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    _serve(sys.argv[1])  # type: ignore[arg-type]
