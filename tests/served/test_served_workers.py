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
import threading
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from llm_servers import ModelServer, Reply
from served_app import ServeProcess, service_missing

WINDOW = 16384
TURNS = 6
KILLED_TURN = 4
DB = 15
"""The Redis database of this test (AgentScope's records and bus, and our store): flushed
before and after; no other test uses it."""
DEADLINE = 120.0

pytestmark = pytest.mark.skipif(
    service_missing("redis") is not None, reason=str(service_missing("redis"))
)


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


def replies(worker: ServeProcess, session: str, count: int) -> list[dict]:
    """The stored messages once ``count`` replies are stored and the session is idle."""

    def done(stored: list[dict]) -> bool:
        answers = [m for m in stored if m["role"] == "assistant" and "read." in json.dumps(m)]
        return len(answers) >= count

    return worker.replies(session, done, DEADLINE)


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
    workers: list[ServeProcess] = []
    try:
        with ModelServer("openai", script) as model:
            agent_file = tmp_path / "agent.yaml"
            agent_file.write_text(
                "name: reader\nsystem_prompt: You read files.\n"
                "model: {provider: openai-compatible, model: scripted, "
                f"base_url: '{model.url}', stream: false}}\n"
                "tools: {agentscope_builtins: true}\n"  # the turns read with AgentScope's Read
                f"context: {{max_input_tokens: {WINDOW}, workspace: '{store_url}', "
                "long_term_memory: {enabled: false}}\n",
                encoding="utf-8",
            )
            args = ["--agent", str(agent_file), "--port", "0", "--storage", server]
            args += ["--workspaces", str(tmp_path / "ws")]
            for _ in range(2):  # one after the other: the second finds the agent registered
                workers.append(ServeProcess(args, tmp_path))
            one, two = workers
            assert one.agent_id == two.agent_id
            agent = one.agent_id
            session = one.new_session()
            alive = list(workers)
            for turn in range(1, TURNS + 1):
                worker = alive[turn % len(alive)]  # alternate while both live
                if turn == KILLED_TURN:
                    worker.chat(session, f"TURN-{turn}: read big-{turn}.txt")
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
                worker.chat(session, f"TURN-{turn}: read big-{turn}.txt")
                replies(worker, session, turn)
            stored = replies(alive[0], session, TURNS)
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
