"""Context management in AgentScope 2.x's own service: ``create_app`` served by uvicorn on
loopback (SQLite storage, the in-memory bus, ``LocalWorkspaceManager``), driven over HTTP, the
agent's model an OpenAI-protocol loopback server with scripted answers, and
``context_middleware_factory`` as ``extra_agent_middlewares``. The service builds agent, model and
middleware anew each turn; what must hold is what a user of the service sees.

Skipped when ``agentscope.app`` cannot be imported (AgentScope 1.x, or 2.x without the
``serve`` extra)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest
from llm_servers import ModelServer, Reply
from served_app import ServedApp, event_types, reply_end, reply_text

pytest.importorskip(
    "agentscope.app",
    reason="AgentScope's service (agentscope.app, 2.x with the 'service' extra) is not installed",
)
pytest.importorskip("uvicorn", reason="uvicorn (AgentScope's 'service' extra) is not installed")
pytest.importorskip("aiosqlite", reason="aiosqlite (the SQL storage's driver) is not installed")

from agentscope_context_ext import context_middleware_factory
from agentscope_context_ext.core.tokens import get_token_counter
from agentscope_context_ext.core.truncation import split_notice

WINDOW = 16384
SUMMARY = """## Goal
- SUMMARY-MARK: read the files the user names, one per turn; now TURN-{turn}: big-{turn}.txt.

## Progress
- Each file named so far was read with Read.

## Next Steps
- Read the next file the user names."""
TURNS = 6


def big_text(turn: int) -> str:
    """~160 KB of numbered lines, different for each turn."""
    return "".join(f"turn{turn} line {i:05d} " + "x" * 66 + "\n" for i in range(2000))


def text_of(message: dict) -> str:
    content = message.get("content")
    return content if isinstance(content, str) else json.dumps(content)


def scripted(folder: Path) -> Callable[[dict], Reply]:
    """Turn k (the user says TURN-k, maybe only in the summary by now): read big-k.txt, then
    answer; a request without tools is the compaction's summary call."""

    def respond(request: dict) -> Reply:
        messages = request.get("messages", [])
        said = " ".join(text_of(m) for m in messages if m.get("role") == "user")
        turn = max(int(k) for k in re.findall(r"TURN-(\d+):", said))
        if not request.get("tools"):  # a faithful summary keeps the request being worked on
            return Reply(text=SUMMARY.format(turn=turn))
        answered = any(m.get("tool_call_id") == f"call-{turn}" for m in messages)
        if not answered:
            path = str(folder / f"big-{turn}.txt")
            return Reply(tool_calls=[(f"call-{turn}", "Read", {"file_path": path})])
        return Reply(text=f"File {turn} read.")

    return respond


def whole(saved: str, turn: int) -> bool:
    """``saved`` is Read's output of big-<turn>.txt, every line of it (Read numbers them)."""
    lines = [line.split("\t", 1)[-1] for line in saved.splitlines()]
    return lines == big_text(turn).splitlines()


def config(**extra) -> dict:
    data = {"max_input_tokens": WINDOW, "long_term_memory": {"enabled": False}}
    data.update(extra)
    return data


def custom(events: list[dict], name: str) -> list[dict]:
    return [e.get("value") or {} for e in events if e["type"] == "CUSTOM" and e["name"] == name]


def test_many_turns_compact_across_rebuilds_and_keep_every_output(tmp_path, capfd):
    files = tmp_path / "files"
    files.mkdir()
    for turn in range(1, TURNS + 1):
        (files / f"big-{turn}.txt").write_text(big_text(turn))
    factory = context_middleware_factory(config())
    counter = get_token_counter()
    with (
        ModelServer("openai", scripted(files)) as model,
        ServedApp(tmp_path / "app", extra_agent_middlewares=factory) as served,
    ):
        credential = served.create_credential(model.url)
        agent = served.create_agent("reader", "You read files.")
        session = served.create_session(agent, credential)
        notices: list[str] = []
        compactions = 0
        for turn in range(1, TURNS + 1):
            events = served.chat(agent, session, f"TURN-{turn}: read big-{turn}.txt")
            assert reply_end(events)["finished_reason"] == "completed"
            assert reply_text(events) == f"File {turn} read."
            notices += [value["text"] for value in custom(events, "context_ext.notice")]
            compactions += len(custom(events, "context_ext.compaction_finished"))
            # our events come before the reply ends, never after
            assert event_types(events)[-1] == "REPLY_END"
        workdir = served.agent_workdir(agent)

    # compactions across turns, told on the session's stream; the server printed none of it
    assert compactions >= 1
    assert any("compacted" in text for text in notices)
    assert "[context]" not in capfd.readouterr().out
    # no prompt over the window (the exact count of what the server received)
    agent_calls = [r for r in model.requests if r.get("tools")]
    assert len(agent_calls) == 2 * TURNS
    for request in agent_calls:
        assert counter.count_formatted(request["messages"], request["tools"]) <= WINDOW
    # the model-written summary survived the per-turn rebuild: the last call still shows it
    assert "SUMMARY-MARK" in json.dumps(agent_calls[-1]["messages"])
    # every output is whole in the session's folder of the agent's workspace, and each notice
    # the model saw names a file there
    folder = workdir / "sessions" / session / "context_ext"
    saved = [p.read_text(encoding="utf-8") for p in (folder / "tool_result").glob("*.txt")]
    for turn in range(1, TURNS + 1):
        assert any(whole(text, turn) for text in saved), f"turn {turn}'s output is not saved"
    assert list((folder / "dialog").glob("*.jsonl"))
    for request in agent_calls:
        for message in request["messages"]:
            if message.get("role") == "tool":
                notice = split_notice(text_of(message))
                if notice is not None:
                    assert (folder / notice[1].file_path).is_file()


def test_two_sessions_of_one_agent_and_two_agents_are_apart(tmp_path):
    files = tmp_path / "files"
    files.mkdir()
    for turn in (1, 2, 3):
        (files / f"big-{turn}.txt").write_text(big_text(turn))
    factory = context_middleware_factory(config())
    with (
        ModelServer("openai", scripted(files)) as model,
        ServedApp(tmp_path / "app", extra_agent_middlewares=factory) as served,
    ):
        credential = served.create_credential(model.url)
        first = served.create_agent("first", "You read files.")
        second = served.create_agent("second", "You read files.")
        s1 = served.create_session(first, credential, name="one")
        s2 = served.create_session(first, credential, name="two")
        s3 = served.create_session(second, credential, name="three")
        served.chat(first, s1, "TURN-1: read")
        served.chat(first, s2, "TURN-2: read")
        served.chat(second, s3, "TURN-3: read")

        def saved(agent: str, session: str) -> list[str]:
            folder = served.agent_workdir(agent) / "sessions" / session / "context_ext"
            return [p.read_text() for p in (folder / "tool_result").glob("*.txt")]

        for agent, session, turn in ((first, s1, 1), (first, s2, 2), (second, s3, 3)):
            (text,) = saved(agent, session)
            assert whole(text, turn)
        assert served.agent_workdir(first) != served.agent_workdir(second)


def test_a_session_searches_the_users_earlier_session_and_reads_its_output(tmp_path):
    """History across sessions (design §6.2), through the real service: session one reads a big
    file (its output saved in session one's folder); session two's first call already offers
    search_dialog with ``scope``, the agent finds the line in session one's saved output and
    reads it back with read_file(..., session=...)."""
    files = tmp_path / "files"
    files.mkdir()
    (files / "big-1.txt").write_text(big_text(1))
    wanted = "turn1 line 01234"
    found: dict[str, str] = {}

    def respond(request: dict) -> Reply:
        messages = request.get("messages", [])
        said = " ".join(text_of(m) for m in messages if m.get("role") == "user")
        answers = {m.get("tool_call_id"): text_of(m) for m in messages if m.get("role") == "tool"}
        if not request.get("tools"):
            return Reply(text=SUMMARY.format(turn=1))
        if "TURN-1:" in said:
            if "call-1" not in answers:
                return Reply(
                    tool_calls=[("call-1", "Read", {"file_path": str(files / "big-1.txt")})]
                )
            return Reply(text="File 1 read.")
        found["offered"] = json.dumps(request["tools"])
        if "find-1" not in answers:
            args = {"query": f'"{wanted}"', "scope": "agent"}
            return Reply(tool_calls=[("find-1", "search_dialog", args)])
        found["search"] = answers["find-1"]
        if "read-1" not in answers:
            call = re.search(
                r"read_file\(file_path='([^']+)', start_line=(\d+), session='([^']+)'\)",
                answers["find-1"],
            )
            if call is None:
                return Reply(text="not found")
            path, line, session = call.groups()
            args = {
                "file_path": path,
                "start_line": int(line),
                "end_line": int(line),
                "session": session,
            }
            return Reply(tool_calls=[("read-1", "read_file", args)])
        found["read"] = answers["read-1"]
        return Reply(text="Found it.")

    factory = context_middleware_factory(config())
    with (
        ModelServer("openai", respond) as model,
        ServedApp(tmp_path / "app", extra_agent_middlewares=factory) as served,
    ):
        credential = served.create_credential(model.url)
        agent = served.create_agent("reader", "You read files.")
        first = served.create_session(agent, credential, name="one")
        second = served.create_session(agent, credential, name="two")
        assert reply_text(served.chat(agent, first, "TURN-1: read big-1.txt")) == "File 1 read."
        events = served.chat(agent, second, "Where was line 1234 of the first file?")
        assert reply_text(events) == "Found it.", found.get("search")
        workdir = served.agent_workdir(agent)
    offered = json.loads(found["offered"])
    search = next(t["function"] for t in offered if t["function"]["name"] == "search_dialog")
    assert "scope" in search["parameters"]["properties"], "a served agent's search has scope"
    assert f"session {first}: saved output tool_result/" in found["search"]
    assert wanted in found["read"] and found["read"].count("turn1 line") == 1
    listed = (workdir / "context_ext" / "sessions.jsonl").read_text().splitlines()
    assert sorted(json.loads(line)["session"] for line in listed) == sorted([first, second])
