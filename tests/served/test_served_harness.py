"""Smoke test of ``served_app.ServedApp``: AgentScope 2.x's own service (``create_app``), served
on loopback, with no extra middleware, runs two turns of one session over HTTP; the first turn's
``Read`` call returns ~170 KB, which reaches the (loopback, scripted) model as the tool result.

``Read``, not ``Bash``: the builtin Bash tool cuts its output at 30,000 characters, while Read
returns up to 2,000 lines (of up to 2,000 characters each) with no overall cap. Both are allowed
without a confirmation in the session's default permission mode: Read is a read-only tool, and
``cat <file>`` a read-only command.

Skipped when ``agentscope.app`` cannot be imported (AgentScope 1.x, or 2.x without its
``service`` extra) or the serving pieces are missing."""

from __future__ import annotations

import json
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
pytest.importorskip(
    "aiosqlite", reason="aiosqlite (the SQL storage's sqlite driver) is not installed"
)

BIG_FILE = "big.txt"
CALL_ID = "call-big-1"


def big_text() -> str:
    """~160 KB of numbered lines."""
    return "".join(f"line {i:05d} " + "x" * 68 + "\n" for i in range(2000))


def text_of(message: dict) -> str:
    content = message.get("content")
    return content if isinstance(content, str) else json.dumps(content)


def scripted(big_file: Path) -> Callable[[dict], Reply]:
    """Turn 1: read the big file, then answer; turn 2: answer."""

    def respond(request: dict) -> Reply:
        messages = request.get("messages", [])
        turns = [
            i for i, m in enumerate(messages) if m.get("role") == "user" and "TURN-" in text_of(m)
        ]
        if not turns:  # not a turn of the conversation (none is expected here)
            return Reply(text="unexpected request")
        last_user = turns[-1]
        answered = any(m.get("role") == "tool" for m in messages[last_user + 1 :])
        if "TURN-1" in text_of(messages[last_user]) and not answered:
            return Reply(tool_calls=[(CALL_ID, "Read", {"file_path": str(big_file)})])
        if "TURN-1" in text_of(messages[last_user]):
            return Reply(text="The file has 2000 lines.")
        return Reply(text="Second answer.")

    return respond


def tool_results(request: dict, call_id: str = CALL_ID) -> list[str]:
    return [
        text_of(m)
        for m in request.get("messages", [])
        if m.get("role") == "tool" and m.get("tool_call_id") == call_id
    ]


def test_two_turns_with_a_large_tool_result(tmp_path: Path) -> None:
    big_file = tmp_path / BIG_FILE
    big_file.write_text(big_text())
    assert big_file.stat().st_size > 150_000
    with ModelServer("openai", scripted(big_file)) as model, ServedApp(tmp_path / "app") as served:
        credential = served.create_credential(model.url)
        agent = served.create_agent("harness-agent", "You answer briefly.")
        session = served.create_session(agent, credential)

        first = served.chat(agent, session, "TURN-1: how many lines has big.txt?")
        types = event_types(first)
        assert types[0] == "REPLY_START", types
        assert reply_end(first)["finished_reason"] == "completed", first[-1]
        assert "REQUIRE_USER_CONFIRM" not in types  # Read is read-only: allowed without asking
        call = next(e for e in first if e["type"] == "TOOL_CALL_START")
        assert (call["tool_call_id"], call["tool_call_name"]) == (CALL_ID, "Read")
        end = next(e for e in first if e["type"] == "TOOL_RESULT_END")
        assert end["state"] != "error", end
        assert reply_text(first) == "The file has 2000 lines."

        # The model got the whole file as the tool result (no middleware, under the limit).
        assert len(model.requests) == 2
        (result,) = tool_results(model.requests[1])
        assert len(result) > 150_000
        assert "line 00000 " in result and "line 01999 " in result

        second = served.chat(agent, session, "TURN-2: thanks")
        assert reply_text(second) == "Second answer."
        assert reply_end(second)["finished_reason"] == "completed"
        assert "TOOL_CALL_START" not in event_types(second)
        assert len(model.requests) == 3
        assert tool_results(model.requests[2]), "turn 1's tool result is in turn 2's history"

        stored = served.messages(agent, session)
        assert not stored["is_running"]
        roles = [m["role"] for m in stored["messages"]]
        assert roles == ["user", "assistant", "user", "assistant"], roles
