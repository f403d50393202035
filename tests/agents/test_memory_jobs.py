"""Summarizer jobs outlive the event loop (design §7, issue 42): a job that did not finish keeps
its journal entry and runs at the next start; ``completed`` means written (``Memory.md`` changed
or the Summarizer answered ``[SILENT]``).

Both AgentScope majors catch the cancel of a background agent's task and return an ordinary
"interrupted" reply; taken for the Summarizer's answer, a job cancelled when ``asyncio.run``
ended, by ``summarizer.cancel()``, a timed-out ``drain()`` or Ctrl-C counted as done and its
journal entry went. Each case here runs real agents of the installed AgentScope on the scripted
model: the first start stops the job in flight, the next start (a new agent and manager on the
same workspace) writes the fact."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from harness_common import SUMMARIZER_MARKER, make_text, model_summary
from installed_harness import is_compaction_call, system_text
from test_long_term_memory import session_agent, summarizer_responder

from agentscope_context_ext.core.longterm import LongTermMemory
from agentscope_context_ext.testing import ModelCall, ScriptedChatModel, reply, tool_call

FACT = "User said: I prefer metric units in every report"
TESTS = Path(__file__).resolve().parent
SUPPORT = TESTS.parent / "support"  # the helpers the test modules import


def jobs(workspace: Path) -> list[Path]:
    return sorted((workspace / "memory" / "jobs").glob("*.json"))


def memory(workspace: Path) -> str:
    return LongTermMemory(workspace).read()


class Session:
    """The answers of a dev agent's model: one tool call, then an answer; compaction calls
    answered with a summary; the Summarizer either diligent (``summarizer_responder``) or
    stuck (it waits for ever, after setting ``started``)."""

    def __init__(self, stuck: bool) -> None:
        self.stuck = stuck
        self.started: asyncio.Event | None = None
        self.summarizer_calls = 0
        self.steps = 0

    async def __call__(self, call: ModelCall) -> object:
        if SUMMARIZER_MARKER in system_text(call):
            self.summarizer_calls += 1
            if self.stuck:
                self.started.set()
                await asyncio.Event().wait()
            return summarizer_responder(call)
        if is_compaction_call(call):
            return model_summary(call)
        self.steps += 1
        if self.steps == 1:
            # (a long output: a summary of it is smaller, so the compaction is made)
            return reply("Installing.", tool_call("shell", "c1", cmd="pip install requests"))
        return "Noted."

    def model(self) -> ScriptedChatModel:
        self.started = asyncio.Event()
        return ScriptedChatModel(self)


async def start_a_job(workspace: Path, session: Session) -> tuple:
    """A turn that tells the agent a preference, a compaction, and the Summarizer job it
    starts, in flight."""
    agent, manager = session_agent(workspace, session.model())
    await agent.ask("I prefer metric units in every report. Install requests.")
    await manager.compact_now()
    assert manager.stats.compactions == 1
    await asyncio.wait_for(session.started.wait(), 60)  # (a failure, not a wait, if it hangs)
    assert manager.summarizer.pending() == 1
    return agent, manager


async def next_start(workspace: Path) -> Session:
    """A new agent and manager on the same workspace: its first turn resumes the journal."""
    session = Session(stuck=False)
    agent, manager = session_agent(workspace, session.model())
    await agent.ask("hello again")
    await manager.drain()
    return session


def assert_kept_then_written(workspace: Path, manager: object) -> None:
    """The job stopped in flight stayed journaled, not counted done; the next start writes it,
    and the start after that has nothing left to do."""
    assert len(jobs(workspace)) == 1, "the job that did not finish keeps its journal entry"
    assert FACT not in memory(workspace)
    assert manager.summarizer.completed == 0 and manager.summarizer.interrupted == 1
    record = json.loads(jobs(workspace)[0].read_text())
    assert "I prefer metric units" in record["transcript"] and record["errors"] == []

    resumed = asyncio.run(next_start(workspace))
    assert resumed.summarizer_calls >= 1
    assert FACT in memory(workspace)
    assert jobs(workspace) == [], "a job done leaves the journal"
    assert not (workspace / "memory" / "jobs" / "failed").exists()

    again = asyncio.run(next_start(workspace))
    assert again.summarizer_calls == 0, "a job is done once"
    assert memory(workspace).count(FACT) == 1


def test_a_job_in_flight_when_asyncio_run_ends_runs_at_the_next_start(workspace: Path) -> None:
    async def main() -> object:
        _, manager = await start_a_job(workspace, Session(stuck=True))
        return manager  # asyncio.run cancels the job as it closes the loop

    manager = asyncio.run(main())
    assert_kept_then_written(workspace, manager)


def test_a_cancelled_job_runs_at_the_next_start(workspace: Path) -> None:
    async def main() -> object:
        _, manager = await start_a_job(workspace, Session(stuck=True))
        manager.summarizer.cancel()
        await manager.drain()
        assert manager.summarizer.pending() == 0
        return manager

    manager = asyncio.run(main())
    assert_kept_then_written(workspace, manager)


def test_a_timed_out_drain_stops_waiting_not_the_job(workspace: Path) -> None:
    async def main() -> object:
        _, manager = await start_a_job(workspace, Session(stuck=True))
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(manager.drain(), 0.05)  # the job never answers
        assert manager.summarizer.pending() == 1, "giving up the wait leaves the job running"
        assert manager.summarizer.interrupted == 0
        return manager  # then the loop ends under it

    manager = asyncio.run(main())
    assert_kept_then_written(workspace, manager)


def test_ctrl_c_during_a_reply_keeps_the_job_for_the_next_start(workspace: Path) -> None:
    """A real SIGINT to a process in ``asyncio.run(...)``, while the agent's reply and the
    Summarizer's job both wait for the model."""
    script = textwrap.dedent(
        f"""
        import asyncio, sys
        sys.path[:0] = [{str(TESTS)!r}, {str(SUPPORT)!r}]
        from test_memory_jobs import Session, start_a_job
        from pathlib import Path

        class Interrupted(Session):
            async def __call__(self, call):
                if self.steps >= 2 and self.started.is_set():
                    print("READY", flush=True)  # both wait: the agent's call and the job's
                    await asyncio.Event().wait()
                return await super().__call__(call)

        async def main():
            agent, manager = await start_a_job(Path({str(workspace)!r}), Interrupted(stuck=True))
            await agent.ask("and now?")

        asyncio.run(main())
        """
    )
    child = subprocess.Popen(
        [sys.executable, "-c", script],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        # (the agent's console lines come first)
        for line in child.stdout:
            if line.strip() == "READY":
                break
        else:
            pytest.fail(f"the child ended before it was ready: {child.stderr.read()[-2000:]}")
        child.send_signal(signal.SIGINT)
        child.communicate(timeout=60)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert len(jobs(workspace)) == 1, "Ctrl-C left the job journaled"
    assert FACT not in memory(workspace)
    asyncio.run(next_start(workspace))
    assert FACT in memory(workspace) and jobs(workspace) == []


async def test_an_answer_that_wrote_nothing_is_not_done(workspace: Path) -> None:
    """A Summarizer that says it recorded the fact but called no tool (nor answered
    [SILENT]) did not do the job: it is retried, then recorded as failed, never counted
    done."""

    def respond(call: ModelCall) -> object:
        if SUMMARIZER_MARKER in system_text(call):
            return "I have recorded the user's preference."
        if is_compaction_call(call):
            return model_summary(call)
        return "Noted."

    agent, manager = session_agent(workspace, ScriptedChatModel(respond), summarizer_retries=2)
    await agent.ask("I prefer metric units in every report. " + make_text(6000, seed=1))
    await manager.compact_now()
    assert manager.stats.compactions == 1
    await manager.drain()
    assert manager.summarizer.completed == 0 and manager.summarizer.failed == 1
    failed = list((workspace / "memory" / "jobs" / "failed").glob("*.json"))
    errors = json.loads(failed[0].read_text())["errors"]
    assert len(errors) == 2 and all("NotWritten" in error for error in errors)
    assert jobs(workspace) == []


async def test_a_job_that_wrote_is_done_once(workspace: Path) -> None:
    session = Session(stuck=False)
    agent, manager = session_agent(workspace, session.model())
    await agent.ask("I prefer metric units in every report. Install requests.")
    await manager.compact_now()
    await manager.drain()
    assert FACT in memory(workspace)
    assert manager.summarizer.completed == 1 and manager.summarizer.interrupted == 0
    assert manager.stats.counts["memory_written"] == 1
    assert jobs(workspace) == []
    assert manager.summarizer.resume_pending() == 0, "nothing left to resume"


async def test_errors_are_journaled_and_attempts_count_across_starts(workspace: Path) -> None:
    """A job that failed once, then was stopped, has one attempt fewer at the next start."""
    failures = {"left": 1}
    second_attempt = asyncio.Event()

    async def respond(call: ModelCall) -> object:
        if SUMMARIZER_MARKER in system_text(call):
            if failures["left"]:
                failures["left"] -= 1
                return RuntimeError("summarizer model is down")
            second_attempt.set()
            await asyncio.Event().wait()  # the second attempt never answers
        if is_compaction_call(call):
            return model_summary(call)
        return "Noted."

    agent, manager = session_agent(workspace, ScriptedChatModel(respond), summarizer_retries=2)
    await agent.ask("I prefer metric units in every report. " + make_text(6000, seed=1))
    await manager.compact_now()
    assert manager.stats.compactions == 1
    await asyncio.wait_for(second_attempt.wait(), 60)  # the first attempt failed meanwhile
    manager.summarizer.cancel()
    await manager.drain()
    (entry,) = jobs(workspace)
    record = json.loads(entry.read_text())
    assert len(record["errors"]) == 1 and "model is down" in record["errors"][0]

    def failing(call: ModelCall) -> object:
        if SUMMARIZER_MARKER in system_text(call):
            return RuntimeError("still down")
        return "Noted."

    agent, manager = session_agent(workspace, ScriptedChatModel(failing), summarizer_retries=2)
    await agent.ask("hello again")
    await manager.drain()
    failed = list((workspace / "memory" / "jobs" / "failed").glob("*.json"))
    errors = json.loads(failed[0].read_text())["errors"]
    assert len(errors) == 2 and "still down" in errors[1], "one attempt left, not two"


async def test_a_cancelled_consolidation_merges_its_notes_next_time(workspace: Path) -> None:
    """The same swallowed cancel in the consolidation agent: its interrupted reply was taken
    for an answer and the day's notes were marked merged though nothing was written."""
    from agentscope.formatter import DashScopeChatFormatter
    from test_long_term_memory import consolidator_model

    from agentscope_context_ext import consolidate

    ltm = LongTermMemory(workspace)
    ltm.add_daily_note("Shell: fish", day="2026-12-01")
    gate, thinking = asyncio.Event(), asyncio.Event()
    task = asyncio.create_task(
        consolidate(ltm, consolidator_model(gate=gate, thinking=thinking), DashScopeChatFormatter())
    )
    await asyncio.wait_for(thinking.wait(), 60)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert not (workspace / "memory" / ".consolidation.json").exists(), "nothing marked merged"
    result = await consolidate(ltm, consolidator_model(), DashScopeChatFormatter())
    assert result.status == "consolidated" and "- Shell: fish" in ltm.read()
