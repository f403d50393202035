"""A loopback OpenAI-compatible server that writes at a fixed pace (B13): the first token after
``first_token`` seconds, then ``rate`` tokens a second, streamed as chat-completion chunks. The
pace is the server's (its own thread waits between chunks); the client is the real ``openai``
package, through AgentScope's ``OpenAIChatModel`` or directly.

Two kinds of request, told apart by the system message:

- a **summary** (this package's compaction prompt): a six-section memo of ``memo_tokens``
  tokens (half the ``max_tokens`` the request carries: the summary's budget), each carrying the
  request's number (``memo r7``) so the caller can tell which answers were used (the numbers of
  the memos a summary's request carries are recorded: the summary it extends was used too);
- anything else (the replayed agent's own step, :func:`pace`): ``n`` filler tokens, the
  ``max_tokens`` the request asks for.

Every request is recorded (:class:`Served`: kind, start, end, tokens written, whether the client
closed it first). Standard library only, as ``bench/_replayed.py``.
"""

from __future__ import annotations

import json
import re
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["COMPACTION_MARKER", "MEMO_MARK", "PacedServer", "Served"]

COMPACTION_MARKER = "You compact the earlier part"
MEMO_MARK = re.compile(r"memo r(\d+)")
"""A memo's mark of its request's number (``memo r7``)."""
TICK = 0.05
"""Seconds between two chunks (the chunk holds what the pace writes in that time)."""
WORD = "token "
"""One filler token (one token in every vocabulary the package counts with)."""


@dataclass
class Served:
    """One request as the server saw it."""

    number: int
    kind: str
    """``summary`` or ``agent``."""
    started: float
    ended: float = 0.0
    tokens: int = 0
    """Tokens written before the answer ended or the client went away."""
    closed_early: bool = False
    based_on: tuple[int, ...] = ()
    """A summary's: the numbers of the memos its request carried (the summary it extends)."""


class _Server(ThreadingHTTPServer):
    daemon_threads = True


class PacedServer:
    """The server on 127.0.0.1 (a free port).

    Args:
        rate (`float`): Tokens per second.
        first_token (`float`): Seconds before the first token.
    """

    def __init__(self, rate: float, first_token: float) -> None:
        self.rate = rate
        self.first_token = first_token
        self.served: list[Served] = []
        self._lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                outer._answer(self, json.loads(body))

        self.httpd = _Server(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def _answer(self, handler: BaseHTTPRequestHandler, request: dict[str, Any]) -> None:
        messages = request.get("messages") or []
        system = "\n".join(str(m.get("content")) for m in messages if m.get("role") == "system")
        cap = int(request.get("max_tokens") or request.get("max_completion_tokens") or 256)
        with self._lock:
            number = len(self.served) + 1
            record = Served(number, "summary" if COMPACTION_MARKER in system else "agent", 0.0)
            self.served.append(record)
        record.started = time.perf_counter()
        if record.kind == "summary":
            asked = "\n".join(str(m.get("content")) for m in messages)
            record.based_on = tuple(sorted({int(n) for n in MEMO_MARK.findall(asked)}))
            pieces = _memo(number, max(cap // 2, 64))
        else:
            pieces = [WORD] * max(cap, 1)
        handler.send_response(200)
        handler.send_header("Content-Type", "text/event-stream")
        handler.send_header("Connection", "close")
        handler.end_headers()
        try:
            time.sleep(self.first_token)  # the server's pace, not the client's
            per_tick = max(1, round(self.rate * TICK))
            for start in range(0, len(pieces), per_tick):
                part = pieces[start : start + per_tick]
                time.sleep(len(part) / self.rate)  # written at the pace, then sent
                _event(handler, {"choices": [{"index": 0, "delta": {"content": "".join(part)}}]})
                record.tokens += len(part)
            usage = {"prompt_tokens": 0, "completion_tokens": record.tokens, "total_tokens": 0}
            _event(
                handler,
                {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}], "usage": usage},
            )
            handler.wfile.write(b"data: [DONE]\n\n")
            handler.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            record.closed_early = True
        finally:
            record.ended = time.perf_counter()
            handler.close_connection = True


def _event(handler: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
    payload = {"id": "paced", "object": "chat.completion.chunk", "model": "paced", **body}
    handler.wfile.write(f"data: {json.dumps(payload)}\n\n".encode())
    handler.wfile.flush()


def _memo(number: int, tokens: int) -> list[str]:
    """A six-section memo of about ``tokens`` filler tokens, marked with the request's number,
    as the pieces the server writes one at a time."""
    sections = [
        "Goal",
        "Constraints",
        "Progress",
        "Key Decisions",
        "Next Steps",
        "Critical Context",
    ]
    share = max(tokens // len(sections), 4)
    pieces: list[str] = []
    for name in sections:
        pieces += [f"## {name}\n", f"- memo r{number}: "] + [WORD] * share + ["\n"]
    return pieces
