"""AgentScope Studio (design §11): the package works unchanged under ``agentscope.init(studio_url=...)``
and its compaction notices reach Studio as pushed messages. The stub server speaks the endpoints
the AgentScope client calls; it runs in a subprocess because ``agentscope.init`` installs
process-wide hooks.

Studio is AgentScope 1.x's (2.0.11 has no Studio connection): the runs in Studio are 1.x tests
(marked ``agentscope1``); on either major a Studio URL that cannot be used is one line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from served_app import agent_file

STUB = Path(__file__).parent.parent / "support" / "studio_stub.py"
CLI = "import sys; from agentscope_context_ext.cli import main; sys.exit(main(sys.argv[1:]))"


@pytest.mark.agentscope1
def test_compaction_notices_arrive_in_studio() -> None:
    done = subprocess.run(
        [sys.executable, str(STUB)], capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    received = json.loads(done.stdout)
    assert received["runs"] and received["runs"][0]["project"] == "context-ext-test"
    assert received["connected"] >= 1
    assert received["compactions"] >= 1
    pushed = [m["msg"] for m in received["messages"]]
    notices = [m for m in pushed if m["name"] == "context"]
    assert len(notices) == 2 * received["compactions"]
    assert any("compacted:" in m["content"] and "->" in m["content"] for m in notices)
    assert any(m["name"] == "reader" for m in pushed), "the agent's own messages arrive too"
    assert "context" not in received["memory_names"], "notices are never stored in memory"
    # Studio shows what the model saw: every large result as its excerpt with the notice.
    results = [_result_text(m) for m in pushed if _is_tool_result(m)]
    assert received["truncations"] >= 4
    assert sum("<<<TRUNCATED>>>" in text for text in results) >= received["truncations"]
    limit = received["first_max_bytes"]
    assert max(len(text.encode()) for text in results) <= limit + 1024, "within stage one"
    # The background Summarizer ran, and none of its messages reached the run.
    assert received["summarizer_calls"] >= 1
    assert not [m for m in pushed if m["name"] in ("summarizer", "consolidator")]


def _cli(*argv: str) -> dict:
    done = subprocess.run(
        [sys.executable, str(STUB), "cli", *argv],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.agentscope1
def test_demo_with_studio_url_is_a_run_in_studio(tmp_path: Path) -> None:
    received = _cli("demo", "--out", str(tmp_path / "demo"))
    assert received["exit_code"] == 0
    assert [run["project"] for run in received["runs"]] == ["cli-test"]
    pushed = [m["msg"] for m in received["messages"]]
    results = [_result_text(m) for m in pushed if _is_tool_result(m)]
    assert any("<<<TRUNCATED>>>" in text for text in results), "Studio shows the excerpts"
    assert any(m["name"] == "context" and "compacted:" in m["content"] for m in pushed)
    # its traces carry the context manager's spans among AgentScope's (design §9.1)
    spans = received["spans"]
    assert spans.count("context.compact") >= 2, sorted(set(spans))
    assert "context.truncate" in spans and "invoke_agent explorer" in spans
    assert received["services"] == ["cli-test"], "the traces are named by the project"


@pytest.mark.agentscope1
def test_replay_with_studio_url_shows_the_replayed_messages(tmp_path: Path) -> None:
    big = "".join(f"{i:06d} a line of a long log\n" for i in range(8000))
    transcript = tmp_path / "t.json"
    transcript.write_text(
        json.dumps(
            [
                {"role": "user", "content": "look at the log"},
                {
                    "role": "assistant",
                    "content": "",
                    "tool_calls": [
                        {
                            "id": "c1",
                            "type": "function",
                            "function": {"name": "cat", "arguments": '{"path": "log"}'},
                        }
                    ],
                },
                {"role": "tool", "tool_call_id": "c1", "content": big},
                {"role": "assistant", "content": "The log is long."},
            ]
        )
    )
    received = _cli("replay", str(transcript), "--out", str(tmp_path / "replay"))
    assert received["exit_code"] == 0
    pushed = [m["msg"] for m in received["messages"]]
    results = [_result_text(m) for m in pushed if _is_tool_result(m)]
    assert len(results) == 1 and "<<<TRUNCATED>>>" in results[0]
    assert any(m["role"] == "assistant" and "log is long" in str(m["content"]) for m in pushed)


UNUSABLE = "cannot reach AgentScope Studio at http://127.0.0.1:9"
"""What either major says of a Studio URL where no Studio answers (1.x registers a run there,
2.x sends its traces there)."""


@pytest.mark.parametrize("command", ["demo", "replay", "chat", "serve"])
def test_an_unreachable_or_bad_studio_url_is_one_line(tmp_path: Path, command: str) -> None:
    transcript = tmp_path / "t.json"
    transcript.write_text(json.dumps([{"role": "user", "content": "hi"}]))
    argv = {
        "demo": ["demo"],
        "replay": ["replay", str(transcript)],
        "chat": ["chat"],
        "serve": ["serve", "--agent", str(agent_file(tmp_path))],
    }[command]
    for url, fragment in (
        ("http://127.0.0.1:9", UNUSABLE),
        ("ftp://studio", "expected http://HOST:PORT"),
        ("", "expected http://HOST:PORT"),
        ("http://[::1", "Invalid IPv6 URL"),
    ):
        done = subprocess.run(
            [sys.executable, "-c", CLI, *argv, "--studio-url", url],
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
            cwd=tmp_path,
        )
        assert done.returncode == 2, done.stderr
        assert fragment in done.stderr and "Traceback" not in done.stderr
        assert len(done.stderr.strip().splitlines()) == 1, done.stderr


def _is_tool_result(msg: dict) -> bool:
    content = msg["content"]
    return isinstance(content, list) and any(b.get("type") == "tool_result" for b in content)


def _result_text(msg: dict) -> str:
    output = next(b for b in msg["content"] if b.get("type") == "tool_result")["output"]
    if isinstance(output, str):
        return output
    return "".join(b.get("text", "") for b in output if isinstance(b, dict))


@pytest.mark.agentscope1
def test_a_server_that_is_not_studio_is_one_line(tmp_path: Path) -> None:
    # answers every request with 200 {}: the run registers, but Studio's socket never connects
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
    from threading import Thread

    class Anything(BaseHTTPRequestHandler):
        def _ok(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"{}")

        do_GET = do_POST = _ok

        def log_message(self, *args: object) -> None:
            return None

    server = ThreadingHTTPServer(("127.0.0.1", 0), Anything)
    Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        done = subprocess.run(
            [sys.executable, "-c", CLI, "demo", "--studio-url", url, "--out", str(tmp_path)],
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
    finally:
        server.shutdown()
        server.server_close()
    assert done.returncode == 2, done.stderr[-2000:]
    assert f"cannot reach AgentScope Studio at {url}" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
