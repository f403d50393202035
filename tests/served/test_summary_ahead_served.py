"""The summary written ahead in AgentScope 2.x's own service (issue 44, design §4.6): the agent
and its middleware are built anew each turn, so a summary still written when a turn ends is
cancelled there (its request closed) and started again by the next turn, never left running
and never waited for. The summary model never answers here (it is held on a
``threading.Event`` released at the end): every turn still ends, and each compaction says why
its summary is extractive.

Skipped when ``agentscope.app`` cannot be imported (AgentScope 1.x, or 2.x without the
``serve`` extra)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from llm_servers import ModelServer, Reply
from served_app import ServedApp, reply_end

pytest.importorskip(
    "agentscope.app",
    reason="AgentScope's service (agentscope.app, 2.x with the 'service' extra) is not installed",
)
pytest.importorskip("uvicorn", reason="uvicorn (AgentScope's 'service' extra) is not installed")
pytest.importorskip("aiosqlite", reason="aiosqlite (the SQL storage's driver) is not installed")

from test_served_app import big_text, custom, scripted

from agentscope_context_ext import context_middleware_factory

TURNS = 6


def test_a_served_turn_never_waits_for_the_summary_and_leaves_none_running(tmp_path: Path):
    files = tmp_path / "files"
    files.mkdir()
    for turn in range(1, TURNS + 1):
        (files / f"big-{turn}.txt").write_text(big_text(turn))
    answer = scripted(files)
    release = threading.Event()
    summary_calls: list[int] = []

    def respond(request: dict) -> Reply:
        if not request.get("tools"):  # the summary call: held until the test ends
            summary_calls.append(1)
            release.wait(timeout=600)
        return answer(request)

    factory = context_middleware_factory(
        {"max_input_tokens": 16384, "long_term_memory": {"enabled": False}}
    )
    notices: list[str] = []
    try:
        with (
            ModelServer("openai", respond) as model,
            ServedApp(tmp_path / "app", extra_agent_middlewares=factory) as served,
        ):
            credential = served.create_credential(model.url)
            agent = served.create_agent("reader", "You read files.")
            session = served.create_session(agent, credential)
            for turn in range(1, TURNS + 1):
                events = served.chat(agent, session, f"TURN-{turn}: read big-{turn}.txt")
                assert reply_end(events)["finished_reason"] == "completed"
                notices += [value["text"] for value in custom(events, "context_ext.notice")]
    finally:
        release.set()
    compacted = [text for text in notices if "compacted" in text]
    assert compacted, notices
    # the model never answered: extraction at once, saying why
    assert all("the summary written ahead was not ready" in text for text in compacted)
    # cancelled at each turn's end and started again by a later turn
    assert len(summary_calls) >= 2
