"""The summary written ahead of the trigger (issue 44, design §4.6): started in the background
when the prompt nears the trigger and used at the compaction; not ready -> extraction now and
the model's summary used when it arrives; a hanging model cut by the timeout and not waited for
after two failures; no task left behind; ``background_summary: false`` as before.

A real agent of the installed major on the scripted model; a summary call is held open on an
``asyncio.Event`` the test sets (never a sleep)."""

from __future__ import annotations

import asyncio
import gc
from typing import Any

from harness_common import session_plan
from installed_harness import dialog_views, is_compaction_call, managed, session_responder

from agentscope_context_ext import get_token_counter
from agentscope_context_ext.core.events import CompactionFinished, CompactionStarted
from agentscope_context_ext.core.messages import Message, Text
from agentscope_context_ext.core.pipeline import SummaryWriter
from agentscope_context_ext.core.pipeline._summary_ahead import SummaryAhead
from agentscope_context_ext.testing import ScriptedChatModel

PLAN = session_plan(60, [2, 4, 3])


def config(workspace: Any, **compaction: Any) -> dict:
    return {
        "workspace": str(workspace),
        "max_input_tokens": 16384,
        "notices": False,
        "prompt_cache_price": 1.0,
        "long_term_memory": {"enabled": False},
        "compaction": compaction,
    }


def run_agent(tmp_path: Any, hold: bool, order: list[str], **compaction: Any) -> Any:
    """A 40-call session whose summary calls are answered at once or (``hold``) only after
    the first compaction finished; ``order`` gets ``summary call``/``compaction`` in the
    order they happened."""
    release: asyncio.Event | None = None
    base = session_responder(PLAN)

    async def respond(call: Any) -> object:
        if is_compaction_call(call):
            order.append("summary call")
            if hold:
                await release.wait()
        return base(call)

    agent = managed(ScriptedChatModel(respond), config(tmp_path / "ws", **compaction))

    def listen(event: Any) -> None:
        if isinstance(event, CompactionStarted):
            order.append("compaction")
        if isinstance(event, CompactionFinished):
            order.append(f"finished {event.summary_source}")
            release.set()

    agent.manager.subscribe(listen)

    async def main() -> None:
        nonlocal release
        release = asyncio.Event()
        await agent.ask("Fetch every document of the plan.")

    asyncio.run(main())
    return agent


def test_the_summary_written_ahead_is_used_at_the_trigger(tmp_path) -> None:
    order: list[str] = []
    agent = run_agent(tmp_path, hold=False, order=order)
    ahead = agent.manager.pipeline.parts.compaction.ahead
    assert "finished llm" in order
    # the summary was asked for before the compaction began: the agent did not wait for it
    first = order.index("compaction")
    assert "summary call" in order[:first]
    assert order[first + 1].startswith("finished")
    assert ahead.stats.used >= 1 and ahead.stats.failed == 0
    assert agent.manager.port.summary.source == "llm"


def test_not_ready_extracts_now_and_uses_the_model_summary_when_it_arrives(tmp_path) -> None:
    order: list[str] = []
    agent = run_agent(tmp_path, hold=True, order=order)
    ahead = agent.manager.pipeline.parts.compaction.ahead
    # the first compaction could not wait for the held call: extraction, at once
    assert order.index("summary call") < order.index("compaction")
    assert order[order.index("compaction") + 1] == "finished extractive"
    # the model's answer, released then, replaced it (no prompt caching: a swap is free)
    assert ahead.stats.used_late >= 1
    assert agent.manager.port.summary.source == "llm"


def test_the_synchronous_switch_waits_as_before(tmp_path) -> None:
    order: list[str] = []
    agent = run_agent(tmp_path, hold=False, order=order, background_summary=False)
    assert agent.manager.pipeline.parts.compaction.ahead is None
    first = order.index("compaction")
    # today's order: the compaction begins, then asks the model, then finishes
    assert "summary call" not in order[:first]
    assert order[first + 1 : first + 3] == ["summary call", "finished llm"]


def test_no_task_outlives_the_agent(tmp_path) -> None:
    """A summary still written when the reply ends belongs to the manager: a served turn's
    end, an interrupted turn and ``detach`` cancel it and close its model call."""
    cancelled: list[str] = []

    async def main() -> None:
        never = asyncio.Event()
        base = session_responder(session_plan(14, [8, 20, 12]))

        async def respond(call: Any) -> object:
            if is_compaction_call(call):
                try:
                    await never.wait()
                except asyncio.CancelledError:
                    cancelled.append("summary call")
                    raise
            return base(call)

        agent = managed(ScriptedChatModel(respond), config(tmp_path / "ws"))
        await agent.ask("Fetch the documents.")
        ahead = agent.manager.pipeline.parts.compaction.ahead
        assert ahead.pending  # started near the trigger, never answered
        task = ahead._job.task
        await agent.manager.pipeline.stop_background()  # what a served turn's end runs
        assert task.cancelled() and not ahead.active
        assert cancelled == ["summary call"]
        # a detached agent leaves no task either
        await agent.ask("Fetch more.")
        assert ahead.pending  # started again
        task = ahead._job.task
        agent.manager.detach()
        await asyncio.wait({task})
        # cancelled (its call closed, or never made when cancelled before it began)
        assert task.cancelled() and cancelled[0] == "summary call"
        assert [t for t in asyncio.all_tasks() if t is not asyncio.current_task()] == []

    asyncio.run(main())


def held_agent(
    tmp_path: Any,
    answered: list[str],
    gates: list[asyncio.Event],
    steps: list[int],
    asked: asyncio.Event | None = None,
) -> Any:
    """An agent whose summary calls wait for the last of ``gates`` to be set (``answered``
    gets ``call``, then ``closed`` when one was cancelled or ``answered``; ``asked`` is set at
    a call); a reply makes the last of ``steps`` steps of ``fetch`` calls, then answers."""
    base = session_responder(session_plan(40, [8, 20, 12]))

    async def respond(call: Any) -> object:
        if not is_compaction_call(call):
            if steps[-1] == 0:
                return "Paused."
            steps[-1] -= 1
        if is_compaction_call(call):
            answered.append("call")
            if asked is not None:
                asked.set()
            try:
                await gates[-1].wait()
            except asyncio.CancelledError:
                answered.append("closed")
                raise
            answered.append("answered")
        return base(call)

    return managed(ScriptedChatModel(respond), config(tmp_path / "ws"))


def in_dialog_and_context(agent: Any) -> set[str]:
    return {m.id for m in dialog_views(agent)} & {m.id for m in agent.views()}


def test_asyncio_run_twice_loses_no_summary_and_leaves_no_task(tmp_path, caplog) -> None:
    """A script's ``asyncio.run(agent.reply(...))`` per reply: a summary still written when
    the loop ends is cancelled with its call closed and started again by the next reply; one
    that arrived before the loop ended is used by the next; nothing in ``dialog/`` is still in
    the context meanwhile, and no pending file is left behind."""
    answered: list[str] = []
    gates: list[asyncio.Event] = []
    steps: list[int] = []
    agent = held_agent(tmp_path, answered, gates, steps)
    sources: list[str] = []
    agent.manager.subscribe(
        lambda e: sources.append(e.summary_source) if isinstance(e, CompactionFinished) else None
    )
    ahead = agent.manager.pipeline.parts.compaction.ahead
    pending = tmp_path / "ws" / "dialog" / "pending"

    async def ask(text: str, fetches: int) -> None:
        gates.append(asyncio.Event())  # an event of this loop
        steps.append(fetches)
        await agent.ask(text)

    # ends with a summary held
    asyncio.run(ask("Fetch the documents.", len(session_plan(14, [8, 20, 12]))))
    assert answered == ["call", "closed"] and ahead.pending is False
    assert in_dialog_and_context(agent) == set(), "saved ahead, not moved"

    async def second() -> None:
        await ask("Where are we?", 0)
        assert ahead.stats.dropped == 1, "the cancelled one is counted, not lost silently"
        assert ahead.pending  # started again
        gates[-1].set()  # it answers before this loop ends
        await asyncio.wait({ahead._job.task})

    asyncio.run(second())
    assert answered == ["call", "closed", "call", "answered"]
    # the third reply uses that answer, although its loop is gone: no summary call again
    before = len(sources)
    asyncio.run(ask("Fetch the rest.", 99))  # on to the trigger
    assert answered[4:] == ["call", "closed"]  # the next fold's, held when the loop ended
    assert ahead.stats.used == 1 and ahead.stats.used_late == 0
    assert sources[before] == "llm"  # the third reply's first: the answer of the second loop
    assert in_dialog_and_context(agent) == set(), "moved, not copied"
    agent.manager.detach()
    assert not pending.exists() or not list(pending.iterdir())
    gc.collect()
    assert "Task was destroyed" not in caplog.text


def test_an_interrupted_reply_leaves_the_summary_running_for_the_next(tmp_path) -> None:
    """A reply cancelled while its summary is written (the user stopped it, the loop lives
    on): the summary goes on, and the next reply's compaction uses it."""
    answered: list[str] = []
    gates: list[asyncio.Event] = []
    steps: list[int] = []
    asked = asyncio.Event()
    agent = held_agent(tmp_path, answered, gates, steps, asked)
    ahead = agent.manager.pipeline.parts.compaction.ahead
    sources: list[str] = []
    agent.manager.subscribe(
        lambda e: sources.append(e.summary_source) if isinstance(e, CompactionFinished) else None
    )

    async def main() -> None:
        gates.append(asyncio.Event())
        steps.append(len(session_plan(14, [8, 20, 12])))
        reply = asyncio.ensure_future(agent.ask("Fetch the documents."))
        await asyncio.wait(
            {reply, asyncio.ensure_future(asked.wait())}, return_when="FIRST_COMPLETED"
        )
        assert not reply.done(), "stopped while the summary is written"
        reply.cancel()
        await asyncio.wait({reply})
        assert ahead.pending and answered == ["call"], "not cancelled with the reply"
        gates[-1].set()
        await asyncio.wait({ahead._job.task})
        before = len(sources)
        steps.append(99)
        await agent.ask("Go on.")
        assert sources[before] == "llm"
        assert answered[:2] == ["call", "answered"]

    asyncio.run(main())
    assert in_dialog_and_context(agent) == set()


# ------------------------------------------------------------- the model's failures, in core


def views(n: int) -> list[Message]:
    return [
        Message(f"m{i}", "user", "user", "", (Text(f"Please look at `module_{i}.py`."),))
        for i in range(n)
    ]


class Port:
    """What SummaryAhead reads of a memory: ids, views, the summary."""

    def __init__(self, msgs: list[Message]) -> None:
        self.msgs = msgs
        self.summary = None

    def message_ids(self) -> list[str]:
        return [m.id for m in self.msgs]


def test_a_hanging_model_is_cut_by_the_timeout_and_not_waited_for_after_two() -> None:
    from agentscope_context_ext.core.pipeline._window_size import Window

    calls: list[str] = []
    answer = {"hang": True}

    async def call_model(instruction: str, content: str) -> str:
        calls.append("call")
        if answer["hang"]:
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                calls.append("closed")
                raise
        return (
            "## Goal\n- look at the modules\n## Constraints\n- none\n## Progress\n- read them\n"
            "## Key Decisions\n- none\n## Next Steps\n- go on\n## Critical Context\n- `module_1.py`\n"
        )

    async def main() -> None:
        counter = get_token_counter("auto")
        writer = SummaryWriter(call_model, counter, 16384, 800, timeout=0.05)
        msgs = views(6)
        ahead = SummaryAhead(
            writer, Port(msgs), lambda path: None, Window(16384, 0.8), lambda key: None
        )
        for failures in (1, 2):
            ahead.start([m.id for m in msgs[:4]], msgs[:4], None)
            await asyncio.wait({ahead._job.task})
            assert ahead.outcome() is None and ahead.failures == failures
        assert calls == ["call", "closed", "call", "closed"]  # each call closed at its timeout
        assert not ahead.reliable
        # a third attempt in the background: the compaction does not wait for it
        ahead.start([m.id for m in msgs[:4]], msgs[:4], None)
        count = type("Count", (), {"total": 14000})()
        assert ahead.wait_point(count, 13107, 15000) == 13107
        ahead.drop()
        # it answers (in the background): worth waiting for again
        answer["hang"] = False
        ahead.start([m.id for m in msgs[:4]], msgs[:4], None)
        assert ahead.wait_point(count, 13107, 15000) == 13107  # not yet
        await asyncio.wait({ahead._job.task})
        result = ahead.outcome()
        assert result is not None and result.written and ahead.reliable
        used = ahead.use([m.id for m in msgs[:5]], msgs[:5], None)
        assert used is not None and used.summary.source == "llm" and used.attempts == 1
        assert ahead.stats.gap_messages == 1  # the fifth, folded beside it by extraction
        ahead.start([m.id for m in msgs[:4]], msgs[:4], None)
        assert ahead.wait_point(count, 13107, 15000) == 15000  # written now: waited for
        assert ahead.wait_point(type("Count", (), {"total": 15001})(), 13107, 15000) == 13107
        await ahead.close()
        assert not ahead.active

    asyncio.run(main())


def test_after_a_failed_summary_the_next_one_is_started(tmp_path) -> None:
    """A failed attempt is tried again once the prompt grew (it once kept being postponed, so
    no summary was ever started again)."""
    base = session_responder(PLAN)
    failing = [2]  # the first attempt and its stricter retry

    def respond(call: Any) -> object:
        if is_compaction_call(call) and failing[0]:
            failing[0] -= 1
            return RuntimeError("the summary model is away")
        return base(call)

    agent = managed(ScriptedChatModel(respond), config(tmp_path / "ws"))
    asyncio.run(agent.ask("Fetch every document of the plan."))
    ahead = agent.manager.pipeline.parts.compaction.ahead
    assert ahead.stats.failed == 1 and ahead.failures == 0  # it answered since
    assert ahead.stats.used >= 1
    assert agent.manager.stats.counts["warning"] == 0  # a model's error is a failed attempt


# --------------------------------------------- kept between served turns (issue 50), in core


def kept_from(msgs: list[Message], answer: asyncio.Event, discarded: list[str]) -> Any:
    """A pipeline's SummaryAhead over ``msgs`` writing the summary of the first four (its
    model answers once ``answer`` is set), taken out as a served turn's end does."""
    from agentscope_context_ext.core.pipeline._window_size import Window

    async def call_model(instruction: str, content: str) -> str:
        await answer.wait()
        return (
            "## Goal\n- look at the modules\n## Constraints\n- none\n## Progress\n- read them\n"
            "## Key Decisions\n- none\n## Next Steps\n- go on\n## Critical Context\n- none\n"
        )

    writer = SummaryWriter(call_model, get_token_counter("auto"), 16384, 800, timeout=0.05)
    ahead = SummaryAhead(
        writer, Port(msgs), lambda path: None, Window(16384, 0.8), discarded.append
    )
    ahead.start([m.id for m in msgs[:4]], msgs[:4], None)
    ahead._job.pending_file = "dialog/pending/p1.jsonl"
    return ahead.keep()


def next_turn(
    msgs: list[Message], summary: Any = None, discarded: list[str] | None = None
) -> SummaryAhead:
    """The next turn's SummaryAhead over ``msgs`` (its deletions of pending files in
    ``discarded``)."""
    from agentscope_context_ext.core.pipeline._window_size import Window

    writer = SummaryWriter(None, get_token_counter("auto"), 16384, 800)
    port = Port(msgs)
    port.summary = summary
    gone = discarded if discarded is not None else []
    return SummaryAhead(writer, port, lambda path: None, Window(16384, 0.8), gone.append)


def test_a_kept_summary_is_taken_up_only_by_the_context_it_was_kept_from() -> None:
    from agentscope_context_ext.core.summary import CompactSummary

    async def main() -> None:
        msgs = views(8)
        answer, discarded = asyncio.Event(), []
        # the next turn's context: the same messages and more
        kept = kept_from(msgs[:6], answer, discarded)
        task = kept.job.task
        used: list[str] = []
        ahead = next_turn(msgs, discarded=used)
        assert ahead.adopt(kept) and ahead.pending and ahead._job.task is task
        answer.set()
        await asyncio.wait({task})
        assert ahead.use([m.id for m in msgs[:5]], msgs[:5], None).summary.source == "llm"
        assert used == ["dialog/pending/p1.jsonl"] and discarded == []  # used, file gone
        # another summary in place (a turn served elsewhere compacted): dropped, not used
        for other in (
            next_turn(msgs, CompactSummary(goal=["elsewhere"])),
            next_turn(msgs[2:]),  # its oldest messages compacted elsewhere
            next_turn(msgs[:3]),  # an older state
        ):
            discarded.clear()
            kept = kept_from(msgs[:6], asyncio.Event(), discarded)
            task = kept.job.task
            assert not other.adopt(kept) and not other.active
            await asyncio.wait({task})
            assert task.cancelled() and discarded == ["dialog/pending/p1.jsonl"]

    asyncio.run(main())


def test_the_shelf_drops_what_no_turn_takes_and_forgets_what_its_loop_cancelled() -> None:
    from agentscope_context_ext.core.pipeline import SummaryShelf

    shelf = SummaryShelf()

    async def main() -> None:
        msgs = views(6)
        answer, discarded = asyncio.Event(), []
        dropped = asyncio.Event()
        kept = kept_from(msgs, answer, [])
        kept.discard = lambda key: (discarded.append(key), dropped.set())
        shelf.put(("user", "agent", "s1"), kept)
        # a newer one for the same session replaces it: the older is dropped at once
        newer = kept_from(msgs, answer, discarded)
        shelf.put(("user", "agent", "s1"), newer)
        assert len(shelf) == 1 and discarded == ["dialog/pending/p1.jsonl"]
        assert kept.job is None
        discarded.clear()
        dropped.clear()
        newer.discard = kept.discard
        # written, then not taken within its timeout (0.05 s here): dropped, file deleted
        answer.set()
        async with asyncio.timeout(60):  # (a failure, not a wait, if it hangs)
            await dropped.wait()
        assert len(shelf) == 0 and discarded == ["dialog/pending/p1.jsonl"]
        # one still written when the loop ends stays on the shelf until the loop cancels it
        shelf.put(("user", "agent", "s2"), kept_from(msgs, asyncio.Event(), []))

    asyncio.run(main())
    assert len(shelf) == 0, "cancelled with its loop: forgotten"
