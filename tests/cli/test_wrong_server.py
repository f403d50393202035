"""An agent file pointed at a server that does not speak its provider's API is one line and exit
2, naming the server, the endpoint and what it answered, on either AgentScope major: through the
real clients (``ollama``, ``openai``, ``anthropic``, ``dashscope``) against loopback servers that
speak another protocol or answer HTML. So is a server that speaks the API but answers an HTTP
error. Before, each client failed its own way: ``internal error: JSONDecodeError(...)``,
``ResponseError('<!DOCTYPE HTML>...``, ``AttributeError("'str' object has no attribute
'choices'")``, exit 1.

So is a model server that is not running, or whose process crashes while it answers, for
every command that calls a model (``chat``, ``consolidate``; ``serve``'s stream:
tests/served/test_served_refusals.py): the line names its URL. Before, ``chat`` said ``cannot
reach qwen2.5-coder-1.5b-instruct: Connection error.`` and ``consolidate`` ``internal error:
APIConnectionError('Connection error.')`` with exit 1."""

from __future__ import annotations

import io
import json
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml
from crashing_server import CrashingServer, dead_url
from harness_common import make_text
from llm_servers import ModelServer, Reply

from agentscope_context_ext import LongTermMemory
from agentscope_context_ext.cli import main
from agentscope_context_ext.compat import agentscope_major
from agentscope_context_ext.core.errors import WorkspaceError
from agentscope_context_ext.core.longterm import read_state
from agentscope_context_ext.core.model_servers import unreachable


class _Answer(BaseHTTPRequestHandler):
    """Answers every request with ``status``, ``kind`` and ``body``; keeps the paths asked."""

    status = 200
    kind = "text/html"
    body = b"<html><head><title>Welcome to nginx!</title></head><body>It works</body></html>"
    paths: list[str]

    def log_message(self, *args: object) -> None:
        pass

    def _answer(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.paths.append(self.path)
        self.send_response(self.status)
        self.send_header("Content-Type", self.kind)
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    do_GET = do_POST = _answer


@contextmanager
def _serving(status: int, kind: str, body: bytes | None = None) -> Iterator[tuple[str, list]]:
    """A loopback server that answers every request the same way: ``(url, paths asked)``."""
    paths: list[str] = []
    fields = {"status": status, "kind": kind, "paths": paths}
    handler = type("Handler", (_Answer,), fields if body is None else {**fields, "body": body})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", paths
    finally:
        server.shutdown()
        server.server_close()


def _chat(tmp_path: Path, monkeypatch, provider: str, url: str, stream: bool) -> int:
    spec = {
        "model": {"provider": provider, "model": "m", "base_url": url, "stream": stream},
        "context": {"workspace": str(tmp_path / "ws")},
    }
    (tmp_path / "agent.yaml").write_text(yaml.safe_dump(spec))
    monkeypatch.setattr("sys.stdin", io.StringIO("hello\n"))
    return main(["chat", "--agent", str(tmp_path / "agent.yaml")])


def _one_line(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "Traceback" not in err and "internal error" not in err, err
    return err


@pytest.fixture(autouse=True)
def keys(monkeypatch: pytest.MonkeyPatch) -> None:
    """The hosted providers need a key to build their model; the loopback server ignores it."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    monkeypatch.setenv("DASHSCOPE_API_KEY", "test-key")


@pytest.mark.parametrize("stream", [True, False])
def test_ollama_pointed_at_an_openai_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys, stream: bool
) -> None:
    with ModelServer("openai", lambda request: Reply("hi")) as server:
        base = server.url.removesuffix("/v1")
        assert _chat(tmp_path, monkeypatch, "ollama", base, stream) == 2
    err = _one_line(capsys)
    assert (
        f"the server at {base} does not speak Ollama's API (POST /api/chat answered HTTP 404 "
        "with an HTML page 'Error response'): check model.base_url and model.provider (ollama)"
    ) in err, err


@pytest.mark.parametrize(
    ("provider", "api", "path"),
    [
        ("ollama", "Ollama's API", "/api/chat"),
        ("openai-compatible", "the OpenAI chat-completions API", "/chat/completions"),
        ("anthropic", "Anthropic's Messages API", "/v1/messages"),
        (
            "dashscope",
            *(
                ("the OpenAI chat-completions API", "/chat/completions")  # compatible mode
                if agentscope_major() >= 2
                else ("DashScope's API", "/services/aigc/text-generation/generation")
            ),
        ),
    ],
)
def test_a_web_server_answering_html(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys, provider: str, api: str, path: str
) -> None:
    """A plain web server answering 200 with a page: not streamed, since some clients read a
    streamed HTML page as an empty stream and raise nothing."""
    with _serving(200, "text/html") as (url, paths):
        assert _chat(tmp_path, monkeypatch, provider, url, stream=False) == 2
    err = _one_line(capsys)
    assert f"the server at {url} does not speak {api} (POST {path} answered HTTP 200" in err, err
    assert "with an HTML page 'Welcome to nginx!'" in err, err
    assert paths[-1] == path, "the probe asked the endpoint the provider's API has"


@pytest.mark.parametrize("stream", [True, False])
def test_openai_compatible_pointed_at_an_ollama_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys, stream: bool
) -> None:
    with ModelServer("ollama", lambda request: Reply("hi")) as server:
        assert _chat(tmp_path, monkeypatch, "openai-compatible", server.url, stream) == 2
    err = _one_line(capsys)
    assert "does not speak the OpenAI chat-completions API (POST /chat/completions" in err, err


def test_a_json_server_of_another_api(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    """A FastAPI-style 404 is JSON, but not Ollama's: its body is shown."""
    body = json.dumps({"detail": "Not Found"}).encode()
    with _serving(404, "application/json", body) as (url, _):
        assert _chat(tmp_path, monkeypatch, "ollama", url, stream=True) == 2
    err = _one_line(capsys)
    assert "does not speak Ollama's API (POST /api/chat answered HTTP 404 with " in err, err
    assert """application/json '{"detail": "Not Found"}'""" in err, err


@pytest.mark.parametrize(
    ("provider", "body", "said"),
    [
        ("ollama", {"error": 'model "m" not found, try pulling it first'}, 'model "m" not found'),
        (
            "openai-compatible",
            {"error": {"message": "Incorrect API key provided", "type": "invalid_request_error"}},
            "Incorrect API key provided",
        ),
    ],
)
def test_a_server_of_the_right_api_answering_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys, provider: str, body: dict, said: str
) -> None:
    """It speaks the API (the probe sees its error shape): what it said is the message."""
    status = 404 if provider == "ollama" else 401
    with _serving(status, "application/json", json.dumps(body).encode()) as (url, _):
        assert _chat(tmp_path, monkeypatch, provider, url, stream=False) == 2
    err = _one_line(capsys)
    assert f"the model server at {url} answered HTTP {status}: " in err and said in err, err
    assert "does not speak" not in err, err


def test_a_good_server_is_asked_nothing_more(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    """The probe runs only after a failed call: a working chat sends only its own requests."""
    with ModelServer("ollama", lambda request: Reply("hi")) as server:
        assert _chat(tmp_path, monkeypatch, "ollama", server.url, stream=True) == 0
    assert len(server.requests) == 1 and "hello" in json.dumps(server.requests[0]["messages"])


def test_consolidate_with_an_agent_file_of_the_wrong_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    workspace = tmp_path / "ws"
    LongTermMemory(workspace).add_daily_note(make_text(200, 1), day="2026-12-01")
    with ModelServer("openai", lambda request: Reply("hi")) as server:
        base = server.url.removesuffix("/v1")
        spec = {"model": {"provider": "ollama", "model": "m", "base_url": base}}
        (tmp_path / "agent.yaml").write_text(yaml.safe_dump(spec))
        code = main(["consolidate", str(workspace), "--agent", str(tmp_path / "agent.yaml")])
    assert code == 2
    err = _one_line(capsys)
    assert f"the server at {base} does not speak Ollama's API" in err, err


# -- a server that is not running, or crashes ---------------------------------------------------

REFUSED = "connection refused"


@pytest.mark.parametrize(
    ("provider", "path"),
    [
        ("openai-compatible", "/v1"),
        ("ollama", ""),
        ("anthropic", ""),
        ("dashscope", "/compatible-mode/v1" if agentscope_major() >= 2 else "/api/v1"),
    ],
)
def test_chat_with_no_server_names_the_url(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys, provider: str, path: str
) -> None:
    url = dead_url(path)
    assert _chat(tmp_path, monkeypatch, provider, url, stream=False) == 2
    assert (
        _one_line(capsys) == f"agentscope-context chat: cannot reach the model at {url}: {REFUSED}"
    )


@pytest.mark.parametrize(("when", "stream"), [("before", False), ("mid-stream", True)])
def test_chat_with_a_server_that_crashes_names_the_url(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys, when: str, stream: bool
) -> None:
    with CrashingServer(when) as server:  # type: ignore[arg-type]
        assert _chat(tmp_path, monkeypatch, "openai-compatible", server.url, stream) == 2
        assert server.crashed()
    err = _one_line(capsys)
    assert err.startswith(f"agentscope-context chat: cannot reach the model at {server.url}: "), err


def _environment_model(monkeypatch: pytest.MonkeyPatch) -> str:
    """No agent file: the OpenAI key and a base URL nothing listens on, in the environment."""
    monkeypatch.delenv("DASHSCOPE_API_KEY")
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    url = dead_url()
    monkeypatch.setenv("OPENAI_BASE_URL", url)
    return url


def test_chat_with_the_environments_model_names_the_url_it_called(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    """The URL is the one the client called, without the API's path."""
    monkeypatch.chdir(tmp_path)
    url = _environment_model(monkeypatch)
    monkeypatch.setattr("sys.stdin", io.StringIO("hello\n"))
    assert main(["chat"]) == 2
    assert _one_line(capsys).endswith(f"cannot reach the model at {url}: {REFUSED}")


def _consolidate(tmp_path: Path, url: str | None) -> int:
    """``consolidate`` of a day's notes, with an agent file's model at ``url`` (``None``: the
    environment's)."""
    workspace = tmp_path / "ws"
    LongTermMemory(workspace).add_daily_note(make_text(200, 1), day="2026-12-01")
    if url is None:
        return main(["consolidate", str(workspace)])
    spec = {"model": {"provider": "openai-compatible", "model": "m", "base_url": url}}
    (tmp_path / "agent.yaml").write_text(yaml.safe_dump(spec))
    return main(["consolidate", str(workspace), "--agent", str(tmp_path / "agent.yaml")])


def test_consolidate_with_no_server_exits_2_naming_the_url(tmp_path: Path, capsys) -> None:
    url = dead_url()
    assert _consolidate(tmp_path, url) == 2
    assert _one_line(capsys) == (
        f"agentscope-context consolidate: cannot reach the model at {url}: {REFUSED}"
    )
    memory = LongTermMemory(tmp_path / "ws")
    pending = memory.daily_notes(since=read_state(memory).get("last_note_day"))
    assert list(pending) == ["2026-12-01"], "the notes wait for the next consolidation"


def test_consolidate_with_a_server_that_crashes_exits_2(tmp_path: Path, capsys) -> None:
    with CrashingServer("before") as server:
        assert _consolidate(tmp_path, server.url) == 2
    err = _one_line(capsys)
    assert err.startswith(f"agentscope-context consolidate: cannot reach the model at {server.url}")


def test_consolidate_with_the_environments_model_exits_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    url = _environment_model(monkeypatch)
    assert _consolidate(tmp_path, None) == 2
    assert _one_line(capsys).endswith(f"cannot reach the model at {url}: {REFUSED}")


def test_the_line_names_no_password_or_query() -> None:
    """A key in the URL (``https://user:key@host/v1?key=...``) stays out of the line."""
    try:
        socket.create_connection(("127.0.0.1", int(dead_url("").rsplit(":", 1)[1])), timeout=5)
    except OSError as exc:
        error = exc
    for given, shown in (
        ("http://user:secret@127.0.0.1:8080/v1?key=secret", "http://127.0.0.1:8080/v1"),
        ("http://[::1]:8080/v1", "http://[::1]:8080/v1"),
        ("user:secret@localhost:11434", "localhost:11434"),  # an Ollama host, no scheme
    ):
        assert unreachable(error, given) == f"cannot reach the model at {shown}: {REFUSED}"


def test_an_error_of_ours_or_a_closed_output_is_not_a_connection_failure() -> None:
    try:
        try:
            raise ConnectionRefusedError(111, "Connection refused")
        except OSError as exc:
            raise WorkspaceError("cannot reach the workspace redis://127.0.0.1:9/0") from exc
    except WorkspaceError as exc:
        ours = exc
    assert unreachable(ours) is None
    assert unreachable(BrokenPipeError(32, "Broken pipe")) is None
    assert unreachable(ValueError("a bug")) is None
