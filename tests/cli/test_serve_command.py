"""``agentscope-context serve``: started as a subprocess on loopback, driven over HTTP with the
lines it prints; its bad input is one line and exit code 2.

The agent file's model is an OpenAI-protocol loopback server with scripted answers."""

from __future__ import annotations

import json
import re
import signal
import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from llm_servers import ModelServer, Reply
from served_app import ServeProcess, agent_file, run_cli, serve_options, service_missing

from agentscope_context_ext import agentscope_major

needs_service = pytest.mark.skipif(service_missing() is not None, reason=str(service_missing()))

START_SECONDS = 90
STREAM_SECONDS = 60
ROOT = Path(__file__).resolve().parents[2]


@needs_service
def test_serve_runs_the_agent_file_with_context_management(tmp_path):
    big = tmp_path / "big.txt"
    big.write_text("".join(f"line {i:05d} " + "z" * 70 + "\n" for i in range(2000)))

    def respond(request: dict) -> Reply:
        if not request.get("tools"):
            return Reply(text="## Goal\n- read big.txt")
        if any(m.get("role") == "tool" for m in request["messages"]):
            return Reply(text="It has 2000 lines.")
        return Reply(tool_calls=[("call-1", "grep", {"pattern": "line", "path": "big.txt"})])

    with ModelServer("openai", respond) as model:
        spec = agent_file(tmp_path, model.url)
        with spec.open("a", encoding="utf-8") as handle:
            handle.write("tools:\n  explorer: {roots: ['.']}\n")
        served = ServeProcess(serve_options(tmp_path, spec), tmp_path)
        try:
            assert served.url.startswith("http://127.0.0.1:")
            session = served.new_session()
            agent = served.agent_id
            served.chat(session, "x")
            messages = served.replies(
                session, lambda stored: any(m["role"] == "assistant" for m in stored), START_SECONDS
            )
        finally:
            stderr = served.stop()
    assert "It has 2000 lines." in json.dumps(messages[-1])
    # the tool result the model got was cut by stage one, and the whole output is saved in
    # the session's folder of the agent's workspace
    tool_messages = [m for r in model.requests for m in r["messages"] if m.get("role") == "tool"]
    assert tool_messages and all(len(str(m["content"])) < 60_000 for m in tool_messages)
    saved = list((tmp_path / "ws" / agent / "sessions" / session / "context_ext").rglob("*.txt"))
    assert any("line 01999" in p.read_text() for p in saved)
    assert "Traceback" not in stderr


def stream_events(lines: Iterator[str], last: Callable[[dict], bool]) -> list[dict]:
    """The SSE events of ``lines`` up to the one ``last`` says is the last, or the stream's
    end. A deadline, since the server's heartbeats (every 30 s) keep a stream that never ends
    from timing out."""
    deadline = time.monotonic() + STREAM_SECONDS
    events: list[dict] = []
    for line in lines:
        if line.startswith("data:"):
            events.append(json.loads(line[len("data:") :].strip()))
            if last(events[-1]):
                break
        if time.monotonic() > deadline:
            raise AssertionError(f"the stream did not end; its events: {events}")
    return events


@needs_service
def test_sigterm_stops_serve_with_a_stream_open_which_ends_with_a_final_event(tmp_path):
    with ModelServer("openai", lambda request: Reply(text="hello")) as model:
        served = ServeProcess(serve_options(tmp_path, agent_file(tmp_path, model.url)), tmp_path)
        try:
            session = served.new_session()
            params = {"agent_id": served.agent_id}
            with served.client.stream(
                "GET", f"/sessions/{session}/stream", params=params, timeout=30
            ) as stream:
                lines = stream.iter_lines()
                served.chat(session, "hi")
                events = stream_events(lines, lambda event: event["type"] == "REPLY_END")
                served.process.send_signal(signal.SIGTERM)
                closing = stream_events(lines, lambda event: False)  # to the stream's end
            code = served.process.wait(timeout=10)
        finally:
            stderr = served.stop()
    assert events[-1]["finished_reason"] == "completed"
    assert [(e["type"], e.get("name")) for e in closing] == [
        ("CUSTOM", "context_ext.server_stopping")
    ]
    assert code == 0, stderr
    assert stderr.strip().splitlines()[-1] == "stopped" and "Traceback" not in stderr


def busy_port() -> socket.socket:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(1)
    return sock


@needs_service
@pytest.mark.parametrize(
    ("case", "expected"),
    [
        ("no-file", "no such file"),
        ("bad-yaml", "agent"),
        ("bad-storage", "not a storage URL"),
        ("busy-port", "cannot listen"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path, case, expected):
    spec = agent_file(tmp_path, "http://127.0.0.1:9/v1")
    args = ["serve", "--agent", str(spec), "--workspaces", str(tmp_path / "ws")]
    args += ["--storage", f"sqlite:///{tmp_path / 'app.db'}"]
    holder = None
    if case == "no-file":
        args[2] = str(tmp_path / "missing.yaml")
    elif case == "bad-yaml":
        spec.write_text("name: reader\nmodel: {provider: nowhere}\n", encoding="utf-8")
    elif case == "bad-storage":
        args += ["--storage", "postgres://db/app"]
    elif case == "busy-port":
        holder = busy_port()
        args += ["--port", str(holder.getsockname()[1])]
    try:
        result = run_cli(*args, cwd=tmp_path)
    finally:
        if holder is not None:
            holder.close()
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("agentscope-context serve:"), result.stderr
    assert expected in lines[0]


@pytest.mark.skipif(agentscope_major() >= 2, reason="on 2.x serve runs (the tests above)")
def test_serve_on_agentscope_1_is_refused_in_one_line(tmp_path):
    spec = agent_file(tmp_path, "http://127.0.0.1:9/v1")
    result = run_cli("serve", "--agent", str(spec), cwd=tmp_path)
    assert result.returncode == 2
    (line,) = result.stderr.strip().splitlines()
    assert "AgentScope 2.x's own service" in line


@needs_service
def test_serve_writes_nothing_in_the_folder_it_is_started_from(tmp_path):
    """Issue 45: serve left ``agentscope-context-serve/`` in the user's checkout. By default
    its records and workspaces go to $XDG_DATA_HOME/agentscope-context/serve; a turn served
    from a checkout leaves the checkout (and the agent file's folder) as it was."""
    checkout, data, files = tmp_path / "checkout", tmp_path / "data", tmp_path / "files"
    for folder in (checkout, data, files):
        folder.mkdir()

    def respond(request: dict) -> Reply:
        return Reply(text="hello")

    with ModelServer("openai", respond) as model:
        spec = agent_file(files, model.url)
        before = sorted(p.name for p in files.iterdir())
        env = {"XDG_DATA_HOME": str(data)}
        served = ServeProcess(["--agent", str(spec), "--port", "0"], checkout, env=env)
        try:
            session = served.new_session()
            served.chat(session, "hi")
            served.replies(
                session, lambda stored: any(m["role"] == "assistant" for m in stored), START_SECONDS
            )
        finally:
            served.stop()
    assert sorted(p.relative_to(checkout) for p in checkout.rglob("*")) == []
    assert sorted(p.name for p in files.iterdir()) == before
    assert (data / "agentscope-context" / "serve" / "app.db").is_file()


def _banner_in_the_docs() -> tuple[str, str, list[str]]:
    """docs/served.md's ``serve`` command for the shipped file (its file and port), and the
    lines it shows."""
    text = (ROOT / "docs" / "served.md").read_text(encoding="utf-8")
    command = re.search(
        r"^agentscope-context serve --agent (configs/agents/\S+) --port (\d+)$", text, re.M
    )
    assert command is not None, "docs/served.md: no serve command of a shipped file"
    start = text.index("```\nserving ", command.end()) + 4
    shown = text[start : text.index("\n```", start)].splitlines()
    return command.group(1), command.group(2), shown


@needs_service
def test_the_banner_in_the_docs_is_what_serve_prints_for_the_shipped_file(tmp_path):
    """docs/served.md showed a banner of another file (5 tools, 833 tokens of schemas, a 16k
    window); now it is this run's, from the repository's root, with the data folder where a
    user's is, the port the docs give and the ids named."""
    agent, port, shown = _banner_in_the_docs()
    served = ServeProcess(
        ["--agent", agent, "--port", "0"], ROOT, env={"XDG_DATA_HOME": str(tmp_path)}
    )
    try:
        printed = served.lines
        credential = served.session_body["chat_model_config"]["credential_id"]
        url, agent_id = served.url, served.agent_id
    finally:
        served.stop()
    said = [
        line.replace(url, f"http://127.0.0.1:{port}")
        .replace(str(tmp_path), "~/.local/share")
        .replace(agent_id, "AGENT_ID")
        .replace(credential, "CREDENTIAL_ID")
        for line in printed
    ]
    assert said == shown
