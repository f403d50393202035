"""Many workers: two ``agentscope-context serve`` processes on one Redis server, AgentScope's
``RedisStorage`` and ``RedisMessageBus`` (one run per session across processes) and this
package's workspace on the same server; the turns of one session alternate between the two
workers, and one worker is SIGKILLed in the middle of a turn, which the other takes over.

Nothing may be lost (every tool output whole in the store), no prompt may go over the window, and
the dialog holds every compacted message once."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest
from llm_servers import ModelServer, Reply

from agentscope_context_ext import agentscope_major

COMMAND = str(Path(sys.executable).with_name("agentscope-context"))
WINDOW = 16384
TURNS = 6
KILLED_TURN = 4
DB = 15
"""The Redis database of this test (AgentScope's records and bus, and our store): flushed
before and after; no other test uses it."""
DEADLINE = 120.0


def _unavailable() -> str | None:
    if agentscope_major() < 2:
        return "create_app is AgentScope 2.x's"
    try:
        import agentscope.app  # noqa: F401
        import redis  # noqa: F401
    except ImportError as exc:
        return f"AgentScope's service or the redis client is not installed ({exc.name})"
    return None


pytestmark = pytest.mark.skipif(_unavailable() is not None, reason=str(_unavailable()))


def big_text(turn: int) -> str:
    return "".join(f"turn{turn} line {i:05d} " + "w" * 66 + "\n" for i in range(2000))


def text_of(message: dict) -> str:
    content = message.get("content")
    return content if isinstance(content, str) else json.dumps(content)


class Script:
    """Turn k: Read big-k.txt, then answer; the first request of the turn to be killed holds
    until the test lets it go (the worker that sent it is dead by then)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.arrived = threading.Event()
        self.release = threading.Event()
        self.held = False

    def __call__(self, request: dict) -> Reply:
        messages = request.get("messages", [])
        said = " ".join(text_of(m) for m in messages if m.get("role") == "user")
        turn = max(int(k) for k in re.findall(r"TURN-(\d+):", said))
        if not request.get("tools"):
            return Reply(text=f"## Goal\n- Read the files the user names; now TURN-{turn}:")
        if turn == KILLED_TURN and not self.held:
            self.held = True
            self.arrived.set()
            self.release.wait(DEADLINE)
            return Reply(text="(nobody is listening)")
        if not any(m.get("tool_call_id") == f"call-{turn}" for m in messages):
            path = str(self.folder / f"big-{turn}.txt")
            return Reply(tool_calls=[(f"call-{turn}", "Read", {"file_path": path})])
        return Reply(text=f"File {turn} read.")


class Worker:
    def __init__(self, agent_file: Path, storage: str, workspaces: Path, cwd: Path) -> None:
        args = [COMMAND, "serve", "--agent", str(agent_file), "--port", "0"]
        args += ["--storage", storage, "--workspaces", str(workspaces)]
        self.process = subprocess.Popen(
            args,
            cwd=cwd,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        lines = []
        for line in self.process.stdout:  # until serve says where it listens, or exits
            lines.append(line)
            if line.startswith("stop with"):
                break
        if not lines or not lines[-1].startswith("stop with"):
            self.process.kill()
            raise AssertionError(f"serve did not start: {self.process.stderr.read()}")
        self.url = re.search(r"at (http://\S+) ", lines[0]).group(1)
        self.user = re.search(r"\(user (\S+),", lines[0]).group(1)
        session_line = next(line for line in lines if line.startswith("a session:"))
        self.session_body = json.loads(session_line.split(" -d '", 1)[1].rsplit("'", 1)[0])
        self.client = httpx.Client(base_url=self.url, headers={"X-User-ID": self.user}, timeout=30)

    def chat(self, agent: str, session: str, text: str) -> None:
        message = {"role": "user", "name": "user", "content": [{"type": "text", "text": text}]}
        response = self.client.post(
            "/chat/", json={"agent_id": agent, "session_id": session, "input": message}
        )
        assert response.status_code == 200, response.text

    def stop(self) -> None:
        self.client.close()
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def replies(worker: Worker, agent: str, session: str, count: int) -> list[dict]:
    """The stored messages once ``count`` replies are stored and the session is idle (another
    process: polled against a deadline)."""
    deadline = time.monotonic() + DEADLINE
    while True:
        response = worker.client.get(
            f"/sessions/{session}/messages", params={"agent_id": agent, "limit": 200}
        )
        stored = response.json()
        assert response.status_code == 200, stored
        answers = [m for m in stored["messages"] if m["role"] == "assistant"]
        done = [m for m in answers if "read." in json.dumps(m)]
        if len(done) >= count and not stored["is_running"]:
            return stored["messages"]
        assert time.monotonic() < deadline, f"reply {count} did not come: {stored}"
        time.sleep(0.1)


def test_two_workers_alternate_and_one_killed_mid_turn_loses_nothing(tmp_path):
    import redis

    from agentscope_context_ext.agentscope2 import open_dialog
    from agentscope_context_ext.core.tokens import get_token_counter
    from agentscope_context_ext.core.workspace import SubStorage, open_storage

    base = os.environ.get("ACE_REDIS_URL", "").strip()
    if not base:
        if os.environ.get("ACE_REQUIRE_REDIS") == "1":
            pytest.fail("ACE_REQUIRE_REDIS=1 and no ACE_REDIS_URL")
        pytest.skip("no Redis server for the tests (set ACE_REDIS_URL=redis://127.0.0.1:PORT/0)")
    parts = urlsplit(base)
    server = f"redis://{parts.hostname}:{parts.port or 6379}/{DB}"
    client = redis.Redis.from_url(server)
    client.flushdb()
    store_url = f"{server}?prefix=ctx"
    files = tmp_path / "files"
    files.mkdir()
    for turn in range(1, TURNS + 1):
        (files / f"big-{turn}.txt").write_text(big_text(turn))
    script = Script(files)
    workers: list[Worker] = []
    try:
        with ModelServer("openai", script) as model:
            agent_file = tmp_path / "agent.yaml"
            agent_file.write_text(
                "name: reader\nsystem_prompt: You read files.\n"
                "model: {provider: openai-compatible, model: scripted, "
                f"base_url: '{model.url}', stream: false}}\n"
                f"context: {{max_input_tokens: {WINDOW}, workspace: '{store_url}', "
                "long_term_memory: {enabled: false}}\n",
                encoding="utf-8",
            )
            for _ in range(2):  # one after the other: the second finds the agent registered
                workers.append(Worker(agent_file, server, tmp_path / "ws", tmp_path))
            one, two = workers
            assert one.session_body["agent_id"] == two.session_body["agent_id"]
            agent = one.session_body["agent_id"]
            session = one.client.post("/sessions/", json=one.session_body).json()["session_id"]
            alive = list(workers)
            for turn in range(1, TURNS + 1):
                worker = alive[turn % len(alive)]  # alternate while both live
                if turn == KILLED_TURN:
                    worker.chat(agent, session, f"TURN-{turn}: read big-{turn}.txt")
                    assert script.arrived.wait(DEADLINE), "the turn to kill never reached the model"
                    worker.process.kill()  # SIGKILL, in the middle of the turn
                    worker.process.wait()
                    # AgentScope's session lease is 600 s (renewed by the holder while it lives):
                    # an operator clears the dead worker's lock instead of waiting it out
                    for key in client.scan_iter(match=f"*{session}*"):
                        if b"lock" in key:
                            client.delete(key)
                    script.release.set()
                    alive.remove(worker)
                    worker = alive[0]
                worker.chat(agent, session, f"TURN-{turn}: read big-{turn}.txt")
                replies(worker, agent, session, turn)
            stored = replies(alive[0], agent, session, TURNS)
    finally:
        for worker in workers:
            worker.stop()
    counter = get_token_counter()
    agent_calls = [r for r in model.requests if r.get("tools")]
    for request in agent_calls:
        assert counter.count_formatted(request["messages"], request["tools"]) <= WINDOW
    # every output whole in the session's folder of our store on Redis
    folder = SubStorage(open_storage(store_url), f"agents/{agent}/sessions/{session}/context_ext")
    saved = [folder.read(f"tool_result/{name}").decode() for name in folder.names("tool_result")]
    for turn in range(1, TURNS + 1):
        assert any(f"turn{turn} line 01999" in text for text in saved), f"turn {turn}"
    # compacted messages are in the dialog once each, and compactions happened
    records = list(open_dialog(folder).iter_records())
    assert records
    lines = sum(folder.line_count(f"dialog/{name}") for name in folder.names("dialog"))
    assert len({r.record["id"] for r in records}) == len(records) <= lines
    assert "File 6 read." in json.dumps(stored)
    client.flushdb()
