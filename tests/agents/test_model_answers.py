"""What the ``openai-compatible`` model and the summary call do with answers a real server gives
only now and then (B12 saw each against llama-cpp-python's server, which cannot be made to
produce them on demand), on either AgentScope major, through the real ``openai`` client against
loopback imitations (``llm_servers.ModelServer``):

- a stream cut short (``[DONE]`` with no finish reason: llama-cpp-python ends a stream when
  another request waits for its one slot): asked again unstreamed;
- an answer that is empty, streamed and not: asked once more for text (``tool_choice:
  none``), then ``chat`` says so and exits 1;
- a summary call still running at ``compaction.summary_timeout_seconds``: its request closed,
  its partial answer dropped, no second attempt;
- HTML entities in answers (``compat.unescape_html``): turned back into characters, in the
  text and in a tool call's arguments.

What the real server does every time is in test_local_model.py.
"""

from __future__ import annotations

import asyncio
import io
import json
import threading
from pathlib import Path
from typing import Any

import pytest
import yaml
from llm_servers import ModelServer, Reply

from agentscope_context_ext import get_token_counter
from agentscope_context_ext.adapter import installed
from agentscope_context_ext.agentfile import build_model
from agentscope_context_ext.cli import main
from agentscope_context_ext.core.agent_file import ModelSettings
from agentscope_context_ext.core.messages import Message, Text
from agentscope_context_ext.core.pipeline import SummaryWriter

SUMMARY = "## Goal\n- Rename `parse_config`\n## Progress\n- Renamed it\n## Next Steps\n- Docs\n"


class EndingServer(ModelServer):
    """OpenAI protocol; a streamed answer ends as ``ending`` says: ``cut`` (its first half,
    then ``[DONE]`` with no finish reason), ``stall`` (all of its text, then nothing but
    keep-alive comments until the client closes: ``closed`` is set then), else whole."""

    def __init__(self, respond: Any, ending: str) -> None:
        super().__init__("openai", respond)
        self.ending = ending
        self.closed = threading.Event()
        self._stop = threading.Event()

    def close(self) -> None:
        self._stop.set()
        super().close()

    def _openai(self, handler: Any, request: dict) -> None:
        if not request.get("stream") or self.ending not in ("cut", "stall"):
            super()._openai(handler, request)
            return
        text = self.respond(request).text
        handler.send_response(200)
        handler.send_header("Content-Type", "text/event-stream")
        handler.end_headers()
        if self.ending == "cut":
            text = text[: len(text) // 2]
        base = {"id": "c", "created": 0, "model": "m", "object": "chat.completion.chunk"}
        for delta in ({"role": "assistant", "content": ""}, {"content": text}):
            chunk = {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}
            handler.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
        handler.wfile.flush()
        if self.ending == "cut":
            handler.wfile.write(b"data: [DONE]\n\n")
            handler.wfile.flush()
            return
        while not self._stop.is_set():
            try:
                handler.wfile.write(b": keep-alive\n\n")
                handler.wfile.flush()
            except OSError:
                self.closed.set()
                return
            self._stop.wait(0.05)  # the pace of the keep-alives, not a synchronisation


def _agent_file(tmp_path: Path, url: str, stream: bool, compat: dict | None = None) -> Path:
    model: dict[str, Any] = {
        "provider": "openai-compatible",
        "model": "m",
        "base_url": url,
        "stream": stream,
    }
    if compat is not None:
        model["compat"] = compat
    folder = tmp_path / "project"
    (folder / "it's").mkdir(parents=True, exist_ok=True)
    (folder / "it's" / "found.txt").write_text("found\n")
    spec = {
        "model": model,
        "tools": {"explorer": {"roots": [str(folder)]}},
        "context": {
            "workspace": str(tmp_path / "ws"),
            "max_input_tokens": 16384,
            "long_term_memory": {"enabled": False},
        },
    }
    path = tmp_path / "agent.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def _chat(monkeypatch: pytest.MonkeyPatch, agent: Path, line: str) -> int:
    monkeypatch.setattr("sys.stdin", io.StringIO(line + "\n"))
    return main(["chat", "--agent", str(agent)])


def test_a_stream_cut_short_is_asked_again_unstreamed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    """(The cut half was the answer.)"""
    answer = "The handler reads the settings file and returns its rows in order."
    with EndingServer(lambda request: Reply(answer), "cut") as server:
        assert _chat(monkeypatch, _agent_file(tmp_path, server.url, True), "explain") == 0
    assert f"assistant: {answer}" in capsys.readouterr().out
    assert [r["stream"] for r in server.requests] == [True, False]


@pytest.mark.parametrize("stream", [True, False])
def test_an_empty_answer_is_an_error_never_exit_0(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys, stream: bool
) -> None:
    """(``chat`` printed ``assistant: `` and exited 0.) The chat goes on with the next message,
    and exits 1 at the end."""
    with EndingServer(
        lambda request: Reply("Hi." if "bye" in json.dumps(request) else ""), "whole"
    ) as server:
        code = _chat(monkeypatch, _agent_file(tmp_path, server.url, stream), "hello there\nbye")
    captured = capsys.readouterr()
    assert code == 1, captured.err
    assert "Traceback" not in captured.err
    assert captured.err.strip().splitlines() == [
        "[error] m answered nothing (an empty answer) to: hello there",
        "agentscope-context chat: m answered 1 message(s) with nothing (an empty answer), the "
        "first: hello there",
    ]
    assert "assistant: Hi." in captured.out, "the next message was answered"
    # an empty answer to a request with tools is asked once more, for text (tool_choice none,
    # unstreamed); still empty, it is the model's own
    assert [(r["tool_choice"], r["stream"]) for r in server.requests] == [
        ("auto", stream),
        ("none", False),
        ("auto", stream),
    ]


def _conversation() -> list[Message]:
    return [
        Message("u1", "user", parts=(Text("Rename `parse_config` in lib/config.py."),)),
        Message("a1", "assistant", parts=(Text("Renamed it to `load_config`."),)),
    ]


def test_a_summary_call_at_its_timeout_is_closed_and_its_partial_answer_dropped() -> None:
    """(``asyncio.wait_for`` returned what AgentScope's model made of the cancellation, the
    partial answer, as if it were whole; then a second attempt waited as long again.)"""
    with EndingServer(lambda request: Reply(SUMMARY), "stall") as server:
        settings = ModelSettings(
            provider="openai-compatible", model="m", base_url=server.url, stream=False
        )
        model, formatter = build_model(settings)
        writer = SummaryWriter(
            installed.model_call(model, formatter, max_tokens=300),
            get_token_counter("qwen"),
            8192,
            1024,
            timeout=0.5,
        )
        result = asyncio.run(writer.summarize(_conversation(), None))
        assert server.closed.wait(30), "the abandoned call's request was closed"
    assert result.summary.source == "extractive"
    assert result.attempts == 1, "no second attempt after a timeout"
    assert result.failures == [
        "TimeoutError: no answer within 0.5 s (compaction.summary_timeout_seconds)"
    ]
    (request,) = server.requests
    assert request["stream"] is True, "the summary call streams: a closed stream stops a server"
    assert request["max_tokens"] == 300


def _calling(path: str, text: str):
    def respond(request: dict) -> Reply:
        if any(m.get("role") == "tool" for m in request["messages"]):
            return Reply(text)
        return Reply("", [("call-1", "list_dir", {"path": path})])

    return respond


@pytest.mark.parametrize("unescape", [True, False])
def test_html_entities_in_answers_are_unescaped_when_asked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys, unescape: bool
) -> None:
    """llama-cpp-python's ``chatml-function-calling`` template HTML-escapes the prompt, so its
    model writes ``&#39;``: they reached summary.md and Memory.md."""
    respond = _calling("it&#39;s", "It&#39;s &quot;found.txt&quot; &amp; nothing else.")
    with EndingServer(respond, "whole") as server:
        agent = _agent_file(tmp_path, server.url, False, {"unescape_html": unescape})
        assert _chat(monkeypatch, agent, "what is in it's?") == 0
    out = capsys.readouterr().out
    tool = next(m for m in server.requests[1]["messages"] if m["role"] == "tool")
    call = next(m for m in server.requests[1]["messages"] if m.get("tool_calls"))
    arguments = json.loads(call["tool_calls"][0]["function"]["arguments"])
    if unescape:
        assert 'assistant: It\'s "found.txt" & nothing else.' in out
        assert arguments == {"path": "it's"} and "found.txt" in tool["content"]
    else:
        assert "assistant: It&#39;s &quot;found.txt&quot; &amp; nothing else." in out
        assert arguments == {"path": "it&#39;s"} and "found.txt" not in tool["content"]
