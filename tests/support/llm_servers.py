"""Loopback HTTP servers speaking real model protocols, serving scripted replies: the OpenAI
chat-completions API (streaming SSE with tool-call deltas, and non-streaming, both with
``usage``) and the Ollama chat API (NDJSON streaming and non-streaming, with eval counts). The
real AgentScope model classes, and the ``openai``/``ollama`` clients underneath, talk to them.

A server is given a responder: ``respond(request_json) -> Reply``; it records every request. It
may be given a rejecter too, to answer some requests with HTTP 400 as a strict provider does
(:func:`plain_server_rejects`).
The reported prompt tokens are this package's own count of the request plus ``usage_offset``,
so a test knows exactly what the provider "said"."""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from agentscope_context_ext import get_token_counter


@dataclass
class Reply:
    """One scripted answer: text and/or tool calls ``(id, name, arguments)``."""

    text: str = ""
    tool_calls: list[tuple[str, str, dict]] = field(default_factory=list)


Responder = Callable[[dict], Reply]

Rejecter = Callable[[dict], str | None]
"""``reject(request_json) -> reason``: the server answers HTTP 400 with that reason (``None``:
the request is served)."""


def plain_server_rejects(request: dict) -> str | None:
    """What a plain OpenAI-compatible server refuses with HTTP 400: structured output
    (``response_format``, which some servers do not implement) and a forced ``tool_choice``
    (anything but ``auto`` or ``none``, which DeepSeek's thinking mode refuses)."""
    if "response_format" in request:
        return "response_format is not supported by this server"
    if request.get("tool_choice", "auto") not in ("auto", "none"):
        return f"tool_choice {request['tool_choice']!r} is not supported in thinking mode"
    return None


def system_text(request: dict) -> str:
    """The system messages of a request, joined."""
    return "\n".join(
        str(m.get("content")) for m in request.get("messages", []) if m.get("role") == "system"
    )


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that hung up mid-answer (a call cancelled: a summary written ahead whose
        turn ended) is what a real server sees too: not printed. Anything else is a bug of the
        scripted reply and is printed as usual."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class ModelServer:
    """A running loopback server; ``url`` is its base, ``requests`` what it received.

    Args:
        protocol (`str`): ``openai`` or ``ollama``.
        respond (`Responder`): The scripted replies.
        usage_offset (`int`): Added to our own count of each request for the reported usage.
        reject (`Rejecter | None`): Requests to answer with HTTP 400 (OpenAI protocol); each
            one is also kept in ``rejected``.
    """

    def __init__(
        self,
        protocol: str,
        respond: Responder,
        usage_offset: int = 0,
        reject: Rejecter | None = None,
    ) -> None:
        self.protocol = protocol
        self.respond = respond
        self.usage_offset = usage_offset
        self.reject = reject
        self.rejected: list[dict] = []
        self.requests: list[dict] = []
        self.reported: list[int] = []
        self._counter = get_token_counter("qwen")
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                request = json.loads(self.rfile.read(length) or b"{}")
                owner.requests.append(request)
                reason = owner.reject(request) if owner.reject is not None else None
                if reason is not None:
                    owner.rejected.append(request)
                    error = {"message": reason, "type": "invalid_request_error", "code": None}
                    _send_json(self, {"error": error}, status=400)
                elif owner.protocol == "openai" and self.path.endswith("/chat/completions"):
                    owner._openai(self, request)
                elif owner.protocol == "ollama" and self.path == "/api/chat":
                    owner._ollama(self, request)
                else:
                    self.send_error(404)

        self._server = _Server(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        host, port = self._server.server_address[:2]
        self.url = f"http://{host}:{port}" + ("/v1" if protocol == "openai" else "")

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> ModelServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---------------------------------------------------------------- usage

    def _prompt_tokens(self, request: dict) -> int:
        messages = [
            {k: v for k, v in m.items() if k in ("role", "content", "tool_calls", "tool_call_id")}
            for m in request.get("messages", [])
        ]
        try:
            tokens = self._counter.count_formatted(messages, request.get("tools") or None)
        except Exception:  # noqa: BLE001 - a request shape the counter does not know
            tokens = sum(len(json.dumps(m)) // 4 for m in messages)
        request["_reported_prompt_tokens"] = tokens + self.usage_offset  # per request: threads
        self.reported.append(tokens + self.usage_offset)
        return tokens + self.usage_offset

    # ---------------------------------------------------------------- OpenAI

    def _openai(self, handler: BaseHTTPRequestHandler, request: dict) -> None:
        reply = self.respond(request)
        prompt = self._prompt_tokens(request)
        usage = {"prompt_tokens": prompt, "completion_tokens": 7, "total_tokens": prompt + 7}
        calls = [
            {
                "id": call_id,
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(arguments)},
            }
            for call_id, name, arguments in reply.tool_calls
        ]
        finish = "tool_calls" if calls else "stop"
        base = {"id": "chatcmpl-1", "created": 0, "model": request.get("model", "m")}
        if not request.get("stream"):
            message: dict[str, Any] = {"role": "assistant", "content": reply.text or None}
            if calls:
                message["tool_calls"] = calls
            body = {
                **base,
                "object": "chat.completion",
                "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                "usage": usage,
            }
            _send_json(handler, body)
            return
        handler.send_response(200)
        handler.send_header("Content-Type", "text/event-stream")
        handler.end_headers()

        def chunk(delta: dict, finish_reason: str | None = None, **extra: Any) -> None:
            data = {
                **base,
                "object": "chat.completion.chunk",
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
                **extra,
            }
            handler.wfile.write(f"data: {json.dumps(data)}\n\n".encode())

        chunk({"role": "assistant", "content": ""})
        text = reply.text
        for start in range(0, len(text), 7):  # text in small deltas
            chunk({"content": text[start : start + 7]})
        for index, call in enumerate(calls):  # each call: its head, then its arguments in pieces
            head = {"index": index, "id": call["id"], "type": "function"}
            head["function"] = {"name": call["function"]["name"], "arguments": ""}
            chunk({"tool_calls": [head]})
            arguments = call["function"]["arguments"]
            for start in range(0, len(arguments), 5):
                piece = {"index": index, "function": {"arguments": arguments[start : start + 5]}}
                chunk({"tool_calls": [piece]})
        chunk({}, finish)
        usage_chunk = {**base, "object": "chat.completion.chunk", "choices": [], "usage": usage}
        handler.wfile.write(f"data: {json.dumps(usage_chunk)}\n\n".encode())
        handler.wfile.write(b"data: [DONE]\n\n")
        handler.wfile.flush()

    # ---------------------------------------------------------------- Ollama

    def _ollama(self, handler: BaseHTTPRequestHandler, request: dict) -> None:
        reply = self.respond(request)
        prompt = self._prompt_tokens(request)
        calls = [
            {"function": {"name": name, "arguments": arguments}}
            for _, name, arguments in reply.tool_calls
        ]
        model = request.get("model", "m")
        stamp = "2026-12-03T10:00:00Z"
        final = {
            "model": model,
            "created_at": stamp,
            "message": {"role": "assistant", "content": ""},
            "done": True,
            "done_reason": "stop",
            "prompt_eval_count": prompt,
            "eval_count": 7,
        }
        if not request.get("stream", True):
            message: dict[str, Any] = {"role": "assistant", "content": reply.text}
            if calls:
                message["tool_calls"] = calls
            _send_json(handler, {**final, "message": message})
            return
        handler.send_response(200)
        handler.send_header("Content-Type", "application/x-ndjson")
        handler.end_headers()
        pieces = [reply.text[i : i + 7] for i in range(0, len(reply.text), 7)]
        for piece in pieces:
            line = {"model": model, "created_at": stamp, "done": False}
            line["message"] = {"role": "assistant", "content": piece}
            handler.wfile.write((json.dumps(line) + "\n").encode())
        if calls:
            line = {"model": model, "created_at": stamp, "done": False}
            line["message"] = {"role": "assistant", "content": "", "tool_calls": calls}
            handler.wfile.write((json.dumps(line) + "\n").encode())
        handler.wfile.write((json.dumps(final) + "\n").encode())
        handler.wfile.flush()


def _send_json(handler: BaseHTTPRequestHandler, body: dict, status: int = 200) -> None:
    data = json.dumps(body).encode()
    handler.send_response(status)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)
