"""One compaction at a time per agent (issue 50): ``compact_now()`` while a reply's compaction
waits for its summary, a reply's compaction while ``compact_now()`` waits for its own, and two
``compact_now()`` at once. Whatever the order, no step fails, the summary holds every
compaction, every folded message is in ``dialog/`` (and no longer in the context) and inside the
summary's dialog references, and nothing else is lost.

A real agent of the installed major on the scripted model. The summary call the test holds waits
on an ``asyncio.Event`` the test sets, never on a clock; while it is held the other side is let
run until it waits (:func:`settle`)."""

from __future__ import annotations

import asyncio
from typing import Any

from harness_common import model_summary, session_plan
from installed_harness import dialog_views, is_compaction_call, managed, result_ids

from agentscope_context_ext.core.events import CompactionFinished
from agentscope_context_ext.testing import ModelCall, ScriptedChatModel, reply, tool_call

LOOP_TURNS = 2000
"""Turns of the event loop :func:`settle` gives the other tasks. Nothing here waits for I/O or a
thread, so what can run has run within them: unfixed, the racing side ends in a few dozen."""


async def settle(*tasks: asyncio.Future) -> None:
    """Let the other tasks run until ``tasks`` are done or each waits on what the test holds."""
    for _ in range(LOOP_TURNS):
        if all(task.done() for task in tasks):
            return
        await asyncio.sleep(0)


class Session:
    """An agent whose model follows a plan of ``fetch`` steps (``steps``: how many more the
    current reply makes before it answers) and answers summary calls with a model's memo; the
    first summary call after :meth:`hold` waits for ``gate`` (``asked`` is set when it begins)."""

    def __init__(self, tmp_path: Any, **compaction: Any) -> None:
        self.plan = session_plan(80, [2, 4, 3])
        self.step = 0
        self.steps = 0
        self.calls: list[str] = []
        """Every tool call the model made."""
        self.gate = asyncio.Event()
        self.asked = asyncio.Event()
        self.armed = False
        self.finished: list[CompactionFinished] = []
        config = {
            "workspace": str(tmp_path / "ws"),
            "max_input_tokens": 16384,
            "notices": False,
            "prompt_cache_price": 1.0,
            "long_term_memory": {"enabled": False},
            "compaction": compaction,
        }
        self.agent = managed(ScriptedChatModel(self.respond), config)
        self.manager = self.agent.manager
        self.manager.subscribe(
            lambda e: self.finished.append(e) if isinstance(e, CompactionFinished) else None
        )

    async def respond(self, call: ModelCall) -> object:
        if is_compaction_call(call):
            if self.armed:
                self.armed = False
                self.asked.set()
                await self.gate.wait()
            return model_summary(call)
        if self.steps == 0 or self.step >= len(self.plan):
            return "Paused."
        self.steps -= 1
        step, self.step = self.step, self.step + 1
        ids = [f"call-{step}-{k}" for k in range(len(self.plan[step]))]
        self.calls += ids
        calls = [
            tool_call("fetch", call_id, size_kb=size, seed=seed)
            for call_id, (size, seed) in zip(ids, self.plan[step], strict=True)
        ]
        return reply(f"step {step}", *calls)

    async def ask(self, text: str, steps: int) -> str:
        self.steps = steps
        return await self.agent.ask(text)

    def hold(self) -> None:
        """Hold the next summary call until :attr:`gate` is set."""
        self.armed = True

    async def until_asked(self, *running: asyncio.Future) -> None:
        """Until the held summary call has begun; ``running`` must not end first."""
        asked = asyncio.ensure_future(self.asked.wait())
        await asyncio.wait({asked, *running}, return_when=asyncio.FIRST_COMPLETED)
        assert asked.done(), "the summary call the test holds was never made"

    def check_whole(self, caplog: Any) -> None:
        """No step failed; the summary holds every compaction; every folded message moved to
        ``dialog/`` and is inside the summary's references; every result is somewhere."""
        manager = self.manager
        assert manager.stats.counts["warning"] == 0, caplog.text
        assert manager.stats.counts["compaction_failed"] == 0
        assert "KeyError" not in caplog.text
        summary = manager.port.summary
        assert summary is not None and self.finished
        assert summary.compactions == len(self.finished), "a summary replaced by an older one"
        stored = dialog_views(self.agent)
        context = self.agent.views()
        assert {m.id for m in stored} & {m.id for m in context} == set(), "moved, not copied"
        records = list(manager.dialog_store.iter_records(newest_first=False))
        assert len(records) == sum(e.messages_compacted for e in self.finished)
        outside = [
            (r.file, r.line)
            for r in records
            if not any(
                ref.file == r.file and ref.first_line <= r.line <= ref.last_line
                for ref in summary.dialog_refs
            )
        ]
        assert outside == [], "messages left the context with no reference in the summary"
        kept = result_ids(stored) + result_ids(context)
        assert sorted(kept) == sorted(self.calls), "every result once, in dialog/ or the context"


def test_compact_now_while_a_reply_waits_for_its_summary(tmp_path, caplog) -> None:
    session = Session(tmp_path, background_summary=False)

    async def main() -> None:
        session.hold()
        reply_task = asyncio.ensure_future(session.ask("Fetch every document.", steps=99))
        await session.until_asked(reply_task)  # the reply's compaction waits for its summary
        now = asyncio.ensure_future(session.manager.compact_now())
        await settle(now)
        session.gate.set()
        await asyncio.gather(reply_task, now)

    asyncio.run(main())
    session.check_whole(caplog)
    assert any(e.forced for e in session.finished) and any(not e.forced for e in session.finished)


def test_a_reply_compacts_while_compact_now_waits_for_its_summary(tmp_path, caplog) -> None:
    session = Session(tmp_path, background_summary=False)

    async def main() -> None:
        await session.ask("Fetch the first documents.", steps=4)
        assert not session.finished
        session.hold()
        now = asyncio.ensure_future(session.manager.compact_now())
        await session.until_asked(now)  # compact_now's summary is held
        # the reply's steps pass the trigger while it is held
        reply_task = asyncio.ensure_future(session.ask("Fetch every document.", steps=99))
        await settle(reply_task)
        session.gate.set()
        await asyncio.gather(reply_task, now)

    asyncio.run(main())
    session.check_whole(caplog)
    assert session.finished[0].forced, "compact_now asked first, compacted first"
    assert len(session.finished) >= 2


def test_two_compact_now_at_once(tmp_path, caplog) -> None:
    session = Session(tmp_path)  # a summary written ahead, dropped by compact_now

    async def main() -> None:
        await session.ask("Fetch the first documents.", steps=4)
        session.hold()
        first = asyncio.ensure_future(session.manager.compact_now("keep every path"))
        await session.until_asked(first)
        second = asyncio.ensure_future(session.manager.compact_now())
        await settle(second)
        session.gate.set()
        counts = await asyncio.gather(first, second)
        assert counts[1].total <= counts[0].total

    asyncio.run(main())
    session.check_whole(caplog)
    assert [e.forced for e in session.finished] == [True]  # the second had nothing left to fold


def test_a_conversation_loaded_while_the_summary_is_written_is_left_as_it_is(
    tmp_path, caplog
) -> None:
    """The fold no longer matches the context (another conversation loaded meanwhile): the
    compaction starts over on the loaded one, which is not due, and leaves it untouched; what
    it saved of the first is in ``dialog/``, not lost."""
    session = Session(tmp_path, background_summary=False)
    other = Session(tmp_path, background_summary=False)  # the same workspace

    async def main() -> None:
        await other.ask("Fetch two documents.", steps=2)
        await other.agent.save_session("other")
        session.hold()
        reply_task = asyncio.ensure_future(session.ask("Fetch every document.", steps=99))
        await session.until_asked(reply_task)
        await session.agent.load_session("other")
        session.steps = 0  # the reply answers next
        session.gate.set()
        await reply_task

    asyncio.run(main())
    manager = session.manager
    assert manager.stats.counts["warning"] == 0, caplog.text
    assert "KeyError" not in caplog.text
    assert manager.stats.counts["compaction_failed"] >= 1  # "context changed"
    loaded = [m.id for m in other.agent.views()]
    assert [m.id for m in session.agent.views()][: len(loaded)] == loaded, "left as it was"
    assert manager.port.summary is None and not session.finished
    folded = {m.id for m in dialog_views(session.agent)}
    assert folded and not folded & set(loaded)


def test_compact_now_from_inside_a_compaction_does_not_wait_for_itself(tmp_path, caplog) -> None:
    """An event listener of the compaction calling ``compact_now()`` (in the compaction's own
    task): it returns at once, compacting nothing, and the compaction goes on."""
    session = Session(tmp_path, background_summary=False)
    inner: list[Any] = []

    async def listen(event: Any) -> None:
        if type(event).__name__ == "CompactionStarted" and not inner:
            async with asyncio.timeout(60):  # (a failure, not a wait, if it hangs)
                inner.append(await session.manager.compact_now())

    session.manager.subscribe(listen)
    asyncio.run(session.ask("Fetch every document.", steps=99))
    assert inner and inner[0].total > session.finished[0].tokens_after  # nothing compacted
    session.check_whole(caplog)
    assert not any(e.forced for e in session.finished)
