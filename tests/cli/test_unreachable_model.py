"""A model server that is not running, or whose process crashes while it answers, is one line
naming its URL and exit code 2, for every command that calls a model (``chat``,
``consolidate``; ``serve``'s stream: tests/served/test_served_refusals.py), on either
AgentScope major, through the real clients. Before, ``chat`` said ``cannot reach
qwen2.5-coder-1.5b-instruct: Connection error.`` and ``consolidate`` ``internal error:
APIConnectionError('Connection error.')`` with exit 1."""

from __future__ import annotations

import io
import socket
from pathlib import Path

import pytest
import yaml
from crashing_server import CrashingServer, dead_url
from harness_common import make_text

from agentscope_context_ext import LongTermMemory
from agentscope_context_ext.cli import main
from agentscope_context_ext.compat import agentscope_major
from agentscope_context_ext.core.longterm import read_state
from agentscope_context_ext.core.model_servers import unreachable


def _agent_file(tmp_path: Path, provider: str, url: str, stream: bool = False) -> Path:
    spec = {
        "model": {"provider": provider, "model": "m", "base_url": url, "stream": stream},
        "context": {"workspace": str(tmp_path / "ws")},
    }
    path = tmp_path / "agent.yaml"
    path.write_text(yaml.safe_dump(spec), encoding="utf-8")
    return path


def _chat(monkeypatch: pytest.MonkeyPatch, *args: str) -> int:
    monkeypatch.setattr("sys.stdin", io.StringIO("hello\n"))
    return main(["chat", *args])


def _one_line(capsys: pytest.CaptureFixture) -> str:
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "Traceback" not in err and "internal error" not in err, err
    return err


@pytest.fixture(autouse=True)
def keys(monkeypatch: pytest.MonkeyPatch) -> None:
    """The hosted providers need a key to build their model; nothing answers anyway."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    monkeypatch.setenv("DASHSCOPE_API_KEY", "test-key")


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
    assert _chat(monkeypatch, "--agent", str(_agent_file(tmp_path, provider, url))) == 2
    assert _one_line(capsys) == f"agentscope-context chat: cannot reach the model at {url}: " + (
        "connection refused"
    )


@pytest.mark.parametrize(("when", "stream"), [("before", False), ("mid-stream", True)])
def test_chat_with_a_server_that_crashes_names_the_url(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys, when: str, stream: bool
) -> None:
    with CrashingServer(when) as server:  # type: ignore[arg-type]
        spec = _agent_file(tmp_path, "openai-compatible", server.url, stream)
        assert _chat(monkeypatch, "--agent", str(spec)) == 2
        assert server.crashed()
    err = _one_line(capsys)
    assert err.startswith(f"agentscope-context chat: cannot reach the model at {server.url}: "), err


def test_chat_with_the_environments_model_names_the_url_it_called(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    """No agent file: the URL is the one the client called (``OPENAI_BASE_URL`` here), without
    the API's path."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("DASHSCOPE_API_KEY")
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    url = dead_url()
    monkeypatch.setenv("OPENAI_BASE_URL", url)
    assert _chat(monkeypatch) == 2
    assert _one_line(capsys).endswith(f"cannot reach the model at {url}: connection refused")


def _notes(tmp_path: Path) -> Path:
    workspace = tmp_path / "ws"
    LongTermMemory(workspace).add_daily_note(make_text(200, 1), day="2026-12-01")
    return workspace


def test_consolidate_with_no_server_exits_2_naming_the_url(tmp_path: Path, capsys) -> None:
    workspace = _notes(tmp_path)
    url = dead_url()
    spec = _agent_file(tmp_path, "openai-compatible", url)
    assert main(["consolidate", str(workspace), "--agent", str(spec)]) == 2
    assert _one_line(capsys) == (
        f"agentscope-context consolidate: cannot reach the model at {url}: connection refused"
    )
    memory = LongTermMemory(workspace)
    pending = memory.daily_notes(since=read_state(memory).get("last_note_day"))
    assert list(pending) == ["2026-12-01"], "the notes wait for the next consolidation"


def test_consolidate_with_a_server_that_crashes_exits_2(tmp_path: Path, capsys) -> None:
    workspace = _notes(tmp_path)
    with CrashingServer("before") as server:
        spec = _agent_file(tmp_path, "openai-compatible", server.url)
        assert main(["consolidate", str(workspace), "--agent", str(spec)]) == 2
    err = _one_line(capsys)
    assert err.startswith(f"agentscope-context consolidate: cannot reach the model at {server.url}")


def test_consolidate_with_the_environments_model_exits_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    workspace = _notes(tmp_path)
    monkeypatch.delenv("DASHSCOPE_API_KEY")
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    url = dead_url()
    monkeypatch.setenv("OPENAI_BASE_URL", url)
    assert main(["consolidate", str(workspace)]) == 2
    assert _one_line(capsys).endswith(f"cannot reach the model at {url}: connection refused")


def test_the_line_names_no_password_or_query() -> None:
    """A key in the URL (``https://user:key@host/v1?key=...``) stays out of the line."""
    try:
        socket.create_connection(("127.0.0.1", int(dead_url("").rsplit(":", 1)[1])), timeout=5)
    except OSError as exc:
        error = exc
    refused = ": connection refused"
    for given, shown in (
        ("http://user:secret@127.0.0.1:8080/v1?key=secret", "http://127.0.0.1:8080/v1"),
        ("http://[::1]:8080/v1", "http://[::1]:8080/v1"),
        ("user:secret@localhost:11434", "localhost:11434"),  # an Ollama host, no scheme
    ):
        assert unreachable(error, given) == f"cannot reach the model at {shown}{refused}"


def test_an_error_of_ours_or_a_closed_output_is_not_a_connection_failure() -> None:
    from agentscope_context_ext.core.errors import WorkspaceError

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
