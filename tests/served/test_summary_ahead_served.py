"""The summary written ahead in AgentScope 2.x's own service (issues 44 and 50, design §4.6):
the agent and its middleware are built anew each turn, and a summary slower than a turn is kept
running in the worker at the turn's end, for the session's next turn; it is never waited for,
never started again while it is written, and used by the compaction it was written for.

The summary model is held until the test releases it (a ``threading.Event`` for the loopback
model server; an ``asyncio.Event`` of the service's loop, set from the test's thread, for the
scripted compaction model), never a sleep.

Skipped when ``agentscope.app`` cannot be imported (AgentScope 1.x, or 2.x without the
``serve`` extra)."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest
from llm_servers import ModelServer, Reply
from served_app import ServedApp, reply_end

pytest.importorskip(
    "agentscope.app",
    reason="AgentScope's service (agentscope.app, 2.x with the 'service' extra) is not installed",
)
pytest.importorskip("uvicorn", reason="uvicorn (AgentScope's 'service' extra) is not installed")
pytest.importorskip("aiosqlite", reason="aiosqlite (the SQL storage's driver) is not installed")

from test_served_app import SUMMARY, big_text, custom, scripted

from agentscope_context_ext import context_middleware_factory
from agentscope_context_ext.testing import ScriptedChatModel

TURNS = 16
CONFIG = {"max_input_tokens": 16384, "long_term_memory": {"enabled": False}}


def files_of(tmp_path: Path, lines: int = 2000) -> Path:
    """``big-<turn>.txt`` of ``lines`` lines (2,000: more than stage one keeps)."""
    files = tmp_path / "files"
    files.mkdir()
    for turn in range(1, TURNS + 1):
        (files / f"big-{turn}.txt").write_text("".join(big_text(turn).splitlines(True)[:lines]))
    return files


class Reader:
    """One session of the file reader on the served app: :meth:`turn` runs the next turn
    (read ``big-<n>.txt``), checks that it completed and collects its notices and the summary
    sources of its compactions."""

    def __init__(self, served: ServedApp, model: ModelServer) -> None:
        self.served = served
        self.agent = served.create_agent("reader", "You read files.")
        self.session = served.create_session(self.agent, served.create_credential(model.url))
        self.done = 0
        self.notices: list[str] = []
        self.sources: list[str] = []

    def turn(self) -> None:
        self.done += 1
        assert self.done <= TURNS, "more turns than files"
        text = f"TURN-{self.done}: read big-{self.done}.txt"
        events = self.served.chat(self.agent, self.session, text)
        assert reply_end(events)["finished_reason"] == "completed"  # it did not wait
        self.notices += [value["text"] for value in custom(events, "context_ext.notice")]
        finished = custom(events, "context_ext.compaction_finished")
        self.sources += [value["summary_source"] for value in finished]


def test_a_served_turn_never_waits_for_the_summary_nor_starts_it_again(tmp_path: Path):
    """The summary model never answers here: every turn still ends, each compaction says why
    its summary is extractive, and the one summary call goes on across the turns (kept in the
    worker) instead of being cancelled and asked again each turn."""
    answer = scripted(files_of(tmp_path))
    release = threading.Event()
    summary_calls: list[int] = []

    def respond(request: dict) -> Reply:
        if not request.get("tools"):  # the summary call: held until the test ends
            summary_calls.append(1)
            release.wait(timeout=600)
        return answer(request)

    factory = context_middleware_factory(CONFIG)
    try:
        with (
            ModelServer("openai", respond) as model,
            ServedApp(tmp_path / "app", extra_agent_middlewares=factory) as served,
        ):
            reader = Reader(served, model)
            for _ in range(8):
                reader.turn()
    finally:
        release.set()
    compacted = [text for text in reader.notices if "compacted" in text]
    assert compacted, reader.notices
    # the model never answered: extraction at once, saying why
    assert all("the summary written ahead was not ready" in text for text in compacted)
    assert len(summary_calls) == 1, "kept running from turn to turn, never asked again"


class HeldSummary:
    """The compaction model's answers (a six-section memo): the first is held until
    :meth:`release` (called from the test's thread); ``asked`` and ``answered`` tell the test."""

    def __init__(self) -> None:
        self.calls = 0
        self.cancelled = 0
        self.asked = threading.Event()
        self.answered = threading.Event()
        self._gate: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    async def respond(self, call: Any) -> str:
        self.calls += 1
        if self.calls == 1:
            self._loop, self._gate = asyncio.get_running_loop(), asyncio.Event()
            self.asked.set()
            try:
                await self._gate.wait()
            except asyncio.CancelledError:
                self.cancelled += 1
                raise
            self.answered.set()
        return SUMMARY.format(turn=0)

    def release(self) -> None:
        assert self._loop is not None and self._gate is not None
        self._loop.call_soon_threadsafe(self._gate.set)


def test_a_summary_slower_than_a_turn_is_used_by_a_later_turns_compaction(tmp_path: Path):
    """Asked for in one turn, answered after that turn ended: the compaction of a later turn
    uses it (model-written), and no other summary call was made for it."""
    answer = scripted(files_of(tmp_path, lines=40))  # each turn a step towards the trigger
    held = HeldSummary()
    factory = context_middleware_factory(CONFIG, compaction_model=ScriptedChatModel(held.respond))
    with (
        ModelServer("openai", answer) as model,
        ServedApp(tmp_path / "app", extra_agent_middlewares=factory) as served,
    ):
        reader = Reader(served, model)
        while not held.asked.is_set():  # turns until the summary is asked for
            reader.turn()
        assert reader.sources == [], "asked for ahead of the compaction it is for"
        held.release()
        assert held.answered.wait(60)  # (a failure, not a wait, if it hangs)
        while not reader.sources:  # turns until the compaction it was written for
            reader.turn()
    assert reader.sources[0] == "llm", reader.notices
    assert held.calls == 1 and held.cancelled == 0
