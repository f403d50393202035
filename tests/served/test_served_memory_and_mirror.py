"""Adversarial tests of the served-agent work (``context_middleware_factory``, ``WorkspaceMirror``,
``ContextMiddleware`` per turn, ``agentscope-context serve``): each test is one bug, shown with
real AgentScope 2.x objects and the package's scripted model; the CLI ones run the command."""

from __future__ import annotations

import asyncio
import hashlib
import socket
import subprocess
import tempfile

import pytest

from agentscope_context_ext import agentscope_major

if agentscope_major() < 2:
    pytest.skip("create_app and the 2.x middleware are AgentScope 2.x's", allow_module_level=True)

from agentscope.event import ReplyEndEvent
from agentscope.message import ToolResultBlock, UserMsg
from agentscope.tool import LocalBackend
from served_app import agent_file, run_cli, service_missing
from served_turns import (
    Worker,
    config,
    custom,
    local_workspace,
    system_text,
)

from agentscope_context_ext import ContextConfig, context_middleware_factory
from agentscope_context_ext.agentscope2._mirror import WorkspaceMirror
from agentscope_context_ext.agentscope2._served import served_placement
from agentscope_context_ext.cli._main import main
from agentscope_context_ext.testing import ModelCall, ScriptedChatModel, reply, tool_call

needs_service = pytest.mark.skipif(service_missing() is not None, reason=str(service_missing()))


# --------------------------------------------------------------------------- the mirror


async def test_pull_brings_a_change_of_memory_md_that_kept_its_size(tmp_path):
    """Another worker rewrote Memory.md in the sandbox (``memory_edit`` "tabs" -> "TABS", or a
    consolidation of the same length): the next turn here must see it. ``pull`` compares sizes
    only (``_mirror.py`` ``entry.size_bytes == have[0]``), so the stale copy stays, the model is
    shown the old memory and this worker's next write pushes it over the other's change."""
    remote, local = tmp_path / "sandbox" / "context_ext", tmp_path / "copy"
    remote.mkdir(parents=True)
    (remote / "Memory.md").write_text("- The user prefers tabs.\n", encoding="utf-8")
    backend = LocalBackend()
    assert await WorkspaceMirror(lambda: backend, str(remote), local).pull() == 1

    (remote / "Memory.md").write_text("- The user prefers TABS.\n", encoding="utf-8")
    next_turn = WorkspaceMirror(lambda: backend, str(remote), local)
    await next_turn.pull()
    assert (local / "Memory.md").read_text(encoding="utf-8") == "- The user prefers TABS.\n"


class SlowSandbox(LocalBackend):
    """A sandbox whose reads of ``Memory.md`` take a while (an ``exec`` round trip): each one
    waits until the test lets it answer."""

    def __init__(self) -> None:
        super().__init__()
        self.reading = asyncio.Event()
        self.answer = asyncio.Event()

    async def read_file(self, path: str) -> bytes:
        data = await super().read_file(path)
        if path.endswith("Memory.md"):
            self.reading.set()
            await self.answer.wait()
        return data


async def test_a_pull_does_not_undo_a_memory_write_made_while_it_reads(tmp_path):
    """Two sessions of one agent in one worker share the agent's Memory.md copy. Session B's
    turn starts (its pull) while session A's memory tool appends to Memory.md. ``pull`` decides
    from a listing made before its awaits and then replaces the file without the store's lock
    and without looking again: the working tree's pull reads the sandbox's Memory.md, finds it
    differs from the copy (A's write landed meanwhile) and writes the sandbox's older text over
    it. A's write is gone, here and, at the next push, in the sandbox."""
    from agentscope_context_ext.core.longterm import LongTermMemory

    remote, local = tmp_path / "sandbox" / "context_ext", tmp_path / "copy"
    remote.mkdir(parents=True)
    (remote / "Memory.md").write_text("# Facts\n- The user prefers tabs.\n", encoding="utf-8")
    sandbox = SlowSandbox()
    sandbox.answer.set()
    await WorkspaceMirror(lambda: sandbox, str(remote), local).pull()  # in step
    sandbox.answer.clear()
    sandbox.reading.clear()

    session_b = asyncio.ensure_future(WorkspaceMirror(lambda: sandbox, str(remote), local).pull())
    reading = asyncio.ensure_future(sandbox.reading.wait())
    await asyncio.wait([session_b, reading], timeout=30, return_when=asyncio.FIRST_COMPLETED)
    reading.cancel()
    LongTermMemory(local).append("The API listens on port 8443.", section="Facts")  # session A
    sandbox.answer.set()
    await session_b
    assert "port 8443" in (local / "Memory.md").read_text(encoding="utf-8")


class CountingSandbox(LocalBackend):
    """A sandbox that counts its calls (each one an ``exec`` round trip in Docker or E2B)."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    async def list_dir(self, path: str, *, recursive: bool = False) -> list[str]:
        self.calls += 1
        return await super().list_dir(path, recursive=recursive)

    async def stat(self, path: str):
        self.calls += 1
        return await super().stat(path)

    async def read_file(self, path: str) -> bytes:
        self.calls += 1
        return await super().read_file(path)


async def test_a_pull_of_an_unchanged_memory_costs_a_bounded_number_of_round_trips(tmp_path):
    """Daily notes are never deleted (only backups rotate), and each turn's pull asks the
    sandbox about every in-step file that "changes in place": one ``stat`` each (HEAD), or one
    whole ``read_file`` each (the working tree). An agent with a year of notes pays hundreds of
    sandbox round trips before every turn's first step, for nothing that changed."""
    remote, local = tmp_path / "sandbox" / "context_ext", tmp_path / "copy"
    (remote / "memory").mkdir(parents=True)
    (remote / "Memory.md").write_text("# Facts\n", encoding="utf-8")
    for day in range(1, 61):
        note = remote / "memory" / f"2026-{1 + (day - 1) // 28:02d}-{1 + (day - 1) % 28:02d}.md"
        note.write_text(f"- note {day}\n", encoding="utf-8")
    sandbox = CountingSandbox()
    await WorkspaceMirror(lambda: sandbox, str(remote), local).pull()
    sandbox.calls = 0
    await WorkspaceMirror(lambda: sandbox, str(remote), local).pull()  # the next turn
    assert sandbox.calls <= 5, f"{sandbox.calls} sandbox calls for an unchanged memory"


async def test_a_push_with_nothing_to_write_does_not_rewrite_the_manifest(tmp_path):
    """``push`` runs after every ``on_acting`` and every ``on_compress_context``, for each
    mirror, and its ``finally`` always rewrites ``.mirror.json`` (``atomic_write_bytes``: a file
    fsync and a folder fsync), also when nothing changed: four to eight fsyncs per reasoning
    step on the request path, which a slow disk turns into latency of every step."""
    remote, local = tmp_path / "sandbox" / "context_ext", tmp_path / "copy"
    remote.mkdir(parents=True)
    (remote / "Memory.md").write_text("# Facts\n", encoding="utf-8")
    mirror = WorkspaceMirror(LocalBackend, str(remote), local)
    await mirror.pull()
    await mirror.push()
    manifest = local / ".mirror.json"
    before = manifest.stat().st_ino, manifest.stat().st_mtime_ns
    assert await mirror.push() == 0
    assert (manifest.stat().st_ino, manifest.stat().st_mtime_ns) == before


class FindFails(LocalBackend):
    """A sandbox whose recursive listing failed once: ``BackendBase.list_dir`` runs ``find`` and
    returns ``[]`` whenever it exits non-zero (one unreadable folder, a file that vanished during
    the walk, an exec timeout), while ``test -d`` on the folder still succeeds."""

    def __init__(self) -> None:
        super().__init__()
        self.failing = False

    async def list_dir(self, path: str, *, recursive: bool = False) -> list[str]:
        if self.failing:
            return []
        return await super().list_dir(path, recursive=recursive)


async def test_a_listing_that_failed_does_not_delete_the_copy_and_then_the_sandboxs_files(
    tmp_path,
):
    """The working tree's pull deletes every in-step file the listing lacks ("another worker
    deleted it"), guarded only by "the listing is empty and the folder does not exist". A
    listing that failed is empty while the folder exists: the whole copy goes (Memory.md, the
    dialog), the turn's stores start afresh (a Memory.md with only the new fact, a dialog
    numbered from line 1 again) and the push writes those over the sandbox's files."""
    from agentscope_context_ext.core.longterm import LongTermMemory

    remote, local = tmp_path / "sandbox" / "context_ext", tmp_path / "copy"
    remote.mkdir(parents=True)
    (remote / "Memory.md").write_text("# Facts\n- The user prefers tabs.\n", encoding="utf-8")
    sandbox = FindFails()
    await WorkspaceMirror(lambda: sandbox, str(remote), local).pull()

    sandbox.failing = True
    turn = WorkspaceMirror(lambda: sandbox, str(remote), local)
    await turn.pull()  # the next turn's pull; its listing failed
    sandbox.failing = False
    LongTermMemory(local).append("The API listens on port 8443.", section="Facts")
    await turn.push()
    assert "prefers tabs" in (remote / "Memory.md").read_text(encoding="utf-8")


class SandboxAway(LocalBackend):
    """A sandbox whose listing calls fail while ``away`` (a dropped connection, an exec
    timeout), as ``_sync`` expects a sandbox's transport to fail."""

    def __init__(self) -> None:
        super().__init__()
        self.away = False

    async def list_dir(self, path: str, *, recursive: bool = False) -> list[str]:
        if self.away:
            raise ConnectionError("the sandbox did not answer")
        return await super().list_dir(path, recursive=recursive)

    async def scandir(self, path: str):
        if self.away:
            raise ConnectionError("the sandbox did not answer")
        return await super().scandir(path)


async def test_a_pull_that_failed_is_not_followed_by_a_push_over_the_sandboxs_files(tmp_path):
    """A new worker (or a wiped cache: the copies are in the temp directory) whose first pull
    fails: ``_sync`` makes it a warning and the turn goes on with an empty copy. The stores start
    afresh (a Memory.md with only the turn's fact, a dialog numbered from line 1), and the next
    push, once the sandbox answers, writes every one of them over the sandbox's files: nothing
    in the manifest says those files exist there. The same happens after a symlink loop in the
    workspace (``scandir``/``os.walk`` raise ``ELOOP`` at every pull)."""
    from agentscope_context_ext.core.longterm import LongTermMemory

    remote, local = tmp_path / "sandbox" / "context_ext", tmp_path / "new-worker"
    remote.mkdir(parents=True)
    (remote / "Memory.md").write_text("# Facts\n- The user prefers tabs.\n", encoding="utf-8")
    sandbox = SandboxAway()
    sandbox.away = True
    turn = WorkspaceMirror(lambda: sandbox, str(remote), local)
    with pytest.raises(ConnectionError):
        await turn.pull()  # the middleware ends the turn here (WorkspaceError)
    sandbox.away = False
    LongTermMemory(local).append("The API listens on port 8443.", section="Facts")
    with pytest.raises(RuntimeError, match="not pulled"):
        await turn.push()  # a copy not known to be in step pushes nothing
    assert "prefers tabs" in (remote / "Memory.md").read_text(encoding="utf-8")


async def test_the_consolidation_bookkeeping_reaches_the_workspace(tmp_path):
    """``memory/.consolidation.json`` (when the daily consolidation last ran, which notes it
    merged) starts with a dot, and ``WorkspaceMirror._local_files`` skips every dotfile: it never
    reaches the sandbox. A second worker (or this one after its /tmp copy is gone) runs the day's
    consolidation again, and merges the notes already merged."""
    memory = {"enabled": True, "consolidation_time": "00:00", "summarize_on_compaction": False}
    # the first turn notes something, so that the day's consolidation has a note to merge
    note = reply("noted", tool_call("daily_note", text="Deploys go through staging."))
    model = ScriptedChatModel(lambda call: note if call.index == 0 else "hello")
    workspace = await local_workspace(tmp_path / "agent-1")
    first = Worker(
        workspace,
        context_middleware_factory(
            config(long_term_memory=memory), mirror=True, cache=tmp_path / "one"
        ),
        model,
    )
    events = await first.turn("alice", "agent-1", "s1", "hi")
    assert custom(events, "context_ext.consolidated")  # today's consolidation ran here

    second = Worker(
        workspace,
        context_middleware_factory(
            config(long_term_memory=memory), mirror=True, cache=tmp_path / "two"
        ),
        model,
    )
    second.states = first.states
    events = await second.turn("alice", "agent-1", "s1", "hi again")
    assert not custom(events, "context_ext.consolidated")  # ... and not once more there


async def test_the_default_copy_is_not_in_a_folder_another_user_of_the_machine_can_plant(
    tmp_path, monkeypatch
):
    """Without ``cache=``, the local copies are in ``<tmp>/agentscope-ctx`` (``_served.py``
    ``context_middleware_factory``): a fixed name in the world-writable temp directory. Whoever
    creates it first (a symlink to a folder of theirs) receives every dialog, saved tool result
    and Memory.md of the service; and the folders are made world-readable (0755, the dialog
    0644)."""
    system_tmp = tmp_path / "tmp"
    system_tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(system_tmp))
    planted = tmp_path / "someone-else"
    planted.mkdir()
    (system_tmp / "agentscope-ctx").symlink_to(planted, target_is_directory=True)

    model = ScriptedChatModel(
        lambda call: (
            "read it"
            if any(isinstance(b, ToolResultBlock) for b in call.msgs[-1].content)
            else reply(None, tool_call("big_output", tag="secret"))
        )
    )
    workspace = await local_workspace(tmp_path / "agent-1")
    worker = Worker(workspace, context_middleware_factory(config(), mirror=True), model)
    await worker.turn("alice", "agent-1", "s1", "read secret")
    assert not [p for p in planted.rglob("*") if p.is_file()]


# --------------------------------------------------------------------------- placement


async def test_two_user_ids_never_share_a_memory_folder(tmp_path):
    """``_safe_id`` keeps an id that looks like a path segment and digests any other one into
    ``id-<hex>``, which itself looks like a segment: the user ``id-<digest of alice@corp>`` gets
    the memory of ``alice@corp`` (memory_scope="user"), session ``id-<digest>`` the dialog of the
    session it digests."""
    workspace = await local_workspace(tmp_path / "agent-1")
    settings = ContextConfig.load(config(long_term_memory={"enabled": True}))
    alice = "alice@corp.example"
    mallory = "id-" + hashlib.sha256(alice.encode("utf-8")).hexdigest()[:32]
    of_alice = served_placement(settings, alice, "agent-1", "s1", workspace, memory_scope="user")
    of_mallory = served_placement(
        settings, mallory, "agent-1", "s2", workspace, memory_scope="user"
    )
    assert of_alice.long_term != of_mallory.long_term


async def test_an_id_with_a_trailing_newline_is_hashed_not_kept(tmp_path):
    """``_ID_RE`` ends in ``$``, which also matches before a final newline: ``"s1\\n"`` is kept
    as a path segment. With a store of our own the key it makes is then refused by
    ``check_key`` and the factory raises a bare ``ValueError`` instead of placing the session."""
    factory = context_middleware_factory(config(workspace=str(tmp_path / "store")))
    workspace = await local_workspace(tmp_path / "agent-1")
    middlewares = await factory("alice", "agent-1", "s1\n", workspace)
    assert "\n" not in str(middlewares[0].placement.workspace)


async def test_agents_sharing_one_workspace_do_not_share_the_agents_memory(tmp_path):
    """memory_scope="agent" keeps Memory.md in ``<workdir>/context_ext`` with no agent id in the
    path. 2.x shares one workspace between agents (``IsolationPolicy.PER_USER``: one sandbox per
    user; a team worker bound to its leader's workspace): every agent of the user then reads and
    writes the same "agent" memory. With ``workspace: redis://`` the key has the agent id
    (``agents/<agent_id>/context_ext``), so the two placements disagree."""
    workspace = await local_workspace(tmp_path / "user-alice")  # one workspace, two agents
    settings = ContextConfig.load(config(long_term_memory={"enabled": True}))
    coder = served_placement(settings, "alice", "coder", "s1", workspace)
    writer = served_placement(settings, "alice", "writer", "s2", workspace)
    assert coder.long_term != writer.long_term


async def test_agents_sharing_one_workspace_do_not_share_the_users_memory_either(tmp_path):
    """memory_scope="user" is "the user's with this agent" (``context_middleware_factory``'s
    docstring; with ``workspace: redis://`` the key is ``agents/<agent_id>/context_ext/users/
    <user_id>``), but in the agent's 2.x workspace it is ``context_ext/users/<user_id>``, without
    the agent: in a workspace shared by agents (``IsolationPolicy.PER_USER``) every agent of the
    user reads the others' memory."""
    workspace = await local_workspace(tmp_path / "user-alice")
    settings = ContextConfig.load(config(long_term_memory={"enabled": True}))
    coder = served_placement(settings, "alice", "coder", "s1", workspace, memory_scope="user")
    writer = served_placement(settings, "alice", "writer", "s2", workspace, memory_scope="user")
    assert coder.long_term != writer.long_term


async def test_user_ids_that_differ_only_in_case_get_folders_that_differ_otherwise(tmp_path):
    """``_safe_id`` keeps ``Alice`` and ``alice`` as they are; on a case-insensitive file system
    (macOS's default APFS, Windows; the package supports both) the two are one folder, and with
    memory_scope="user" one user reads and writes the other's Memory.md. 2.x's user ids (the
    ``X-User-ID`` header) are case-sensitive."""
    workspace = await local_workspace(tmp_path / "agent-1")
    settings = ContextConfig.load(config(long_term_memory={"enabled": True}))
    upper = served_placement(settings, "Alice", "agent-1", "s1", workspace, memory_scope="user")
    lower = served_placement(settings, "alice", "agent-1", "s2", workspace, memory_scope="user")
    assert str(upper.long_term).casefold() != str(lower.long_term).casefold()


# --------------------------------------------------------------------------- the turn


async def test_an_interrupted_turn_does_not_wait_for_the_summarizer(tmp_path):
    """The service interrupts a run by cancelling its task; the 2.x agent turns that into a
    ``ReplyEndEvent(INTERRUPTED)``, and then ``on_reply``'s ``finally`` awaits
    ``manager.end_turn()``, which drains every Summarizer job (model calls, with retries and
    backoff). The interrupt is held up for as long as the Summarizer takes (here: a provider
    that does not answer), with the session's lock held. Its jobs are journaled and resume on
    the next turn, so an interrupted turn can cancel them."""
    summarizing, thinking, release = asyncio.Event(), asyncio.Event(), asyncio.Event()

    async def script(call: ModelCall):
        if system_text(call).startswith("You maintain Memory.md"):
            summarizing.set()
            await release.wait()
            return "noted"
        if not call.tools:
            return "summary"
        if "<context-summary>" in call.text and not thinking.is_set():
            # the step after the first compaction: its Summarizer job is running, and the
            # user stops the turn while the model thinks
            await summarizing.wait()
            thinking.set()
            await release.wait()
            return "stopped"
        if any(isinstance(b, ToolResultBlock) for b in call.msgs[-1].content):
            return "read it"
        return reply(None, tool_call("big_output", tag=call.text.rsplit("read ", 1)[-1].split()[0]))

    memory = {"enabled": True, "consolidation_time": "off"}
    worker = Worker(
        await local_workspace(tmp_path / "agent-1"),
        context_middleware_factory(config(long_term_memory=memory)),
        ScriptedChatModel(script),
    )
    task = None
    try:
        for tag in "abcdefgh":
            agent = await worker.agent("alice", "agent-1", "s1")

            async def run(agent=agent, tag=tag) -> list:
                return [e async for e in agent.reply_stream(UserMsg("user", f"read {tag}"))]

            task = asyncio.ensure_future(run())
            stopped = asyncio.ensure_future(thinking.wait())
            await asyncio.wait([task, stopped], timeout=60, return_when=asyncio.FIRST_COMPLETED)
            if thinking.is_set():
                break
            stopped.cancel()
            assert task.done(), "a turn did not end"
            worker.states["s1"] = agent.state.model_dump_json()
        assert thinking.is_set(), "no compaction happened"
        task.cancel()  # what the service's CancelDispatcher does on an interrupt
        done, _ = await asyncio.wait([task], timeout=10)  # a deadline, not a synchronisation
        assert done, "the interrupted turn is still waiting for the Summarizer"
        events = task.result()
        ends = [e for e in events if isinstance(e, ReplyEndEvent)]
        assert ends and ends[-1].finished_reason == "interrupted"
    finally:
        release.set()
        if task is not None and not task.done():
            await asyncio.gather(task, return_exceptions=True)


async def test_an_interrupt_does_not_lose_the_summarizer_job_it_stops(tmp_path):
    """What an interrupted turn does with the Summarizer's jobs must keep them for the next
    turn (their journal, ``memory/jobs/<id>.json``). A job is a 2.x ``Agent.reply``
    (``_longterm.agent_runner``), and a 2.x agent swallows a ``CancelledError``
    (``interruption_raise_cancelled_error`` is off by default): cancelling the job's task
    (``SummarizerService.cancel``, called by the working tree's ``abandon_turn``) makes
    ``reply`` return the interruption message, ``_run`` takes that for a summary and deletes the
    journal. The compacted messages never reach Memory.md."""
    fact = "the API listens on port 8443"
    summarizing, thinking, release = asyncio.Event(), asyncio.Event(), asyncio.Event()

    async def script(call: ModelCall):
        if system_text(call).startswith("You maintain Memory.md"):
            if any(m.get("role") == "tool" for m in call.messages):
                return "noted"
            summarizing.set()
            await release.wait()  # the Summarizer's model is slow
            return reply(None, tool_call("memory_append", section="Facts", text=fact))
        if not call.tools:
            return "summary"
        if "<context-summary>" in call.text and not thinking.is_set():
            await summarizing.wait()
            thinking.set()
            await release.wait()
            return "stopped"
        if any(isinstance(b, ToolResultBlock) for b in call.msgs[-1].content):
            return "read it"
        if "read" not in call.text.rsplit("\n", 1)[-1] and "hello" in call.text:
            return "hi"
        return reply(None, tool_call("big_output", tag=call.text.rsplit("read ", 1)[-1].split()[0]))

    memory = {"enabled": True, "consolidation_time": "off"}
    workdir = tmp_path / "agent-1"
    worker = Worker(
        await local_workspace(workdir),
        context_middleware_factory(config(long_term_memory=memory)),
        ScriptedChatModel(script),
    )
    task = None
    try:
        for tag in "abcdefgh":
            agent = await worker.agent("alice", "agent-1", "s1")

            async def run(agent=agent, tag=tag) -> list:
                return [e async for e in agent.reply_stream(UserMsg("user", f"read {tag}"))]

            task = asyncio.ensure_future(run())
            stopped = asyncio.ensure_future(thinking.wait())
            await asyncio.wait([task, stopped], timeout=60, return_when=asyncio.FIRST_COMPLETED)
            if thinking.is_set():
                break
            stopped.cancel()
            assert task.done(), "a turn did not end"
            worker.states["s1"] = agent.state.model_dump_json()
        assert thinking.is_set(), "no compaction happened"
        task.cancel()  # the interrupt, while the Summarizer's model call is under way
        await asyncio.wait([task], timeout=10)  # the fixed code ends the turn at once
    finally:
        release.set()  # the model answers from now on
        if task is not None:
            await asyncio.gather(task, return_exceptions=True)
    worker.states["s1"] = agent.state.model_dump_json()
    await worker.turn("alice", "agent-1", "s1", "hello")  # the next turn resumes what is left
    memory_md = workdir / "context_ext"
    texts = [p.read_text(encoding="utf-8") for p in memory_md.rglob("Memory.md")]
    assert any(fact in text for text in texts), "the stopped job's summary was lost"


async def test_a_damaged_consolidation_record_does_not_fail_every_turn(tmp_path):
    """``memory/.consolidation.json`` with a ``last_run`` that is not a string (a hand edit; in a
    sandbox, any file the agent's shell writes, now pulled like the others):
    ``last_consolidation`` catches only ``ValueError`` and ``datetime.fromisoformat(5)`` raises
    ``TypeError``; the scheduler's ``tick`` -> ``end_turn`` raises it in ``on_reply``'s
    ``finally``, so every turn's stream ends in ``TypeError`` after its reply (replacing the
    turn's own error if it had one) and the push after it never runs."""
    memory = {"enabled": True, "consolidation_time": "00:00", "summarize_on_compaction": False}
    workdir = tmp_path / "agent-1"
    for folder in ("context_ext/memory", "context_ext/agents/agent-1/memory"):  # HEAD, tree
        (workdir / folder).mkdir(parents=True)
        (workdir / folder / ".consolidation.json").write_text('{"last_run": 5}')
    worker = Worker(
        await local_workspace(workdir),
        context_middleware_factory(config(long_term_memory=memory)),
        ScriptedChatModel(lambda call: "hello"),
    )
    events = await worker.turn("alice", "agent-1", "s1", "hi")
    assert any(isinstance(e, ReplyEndEvent) for e in events)


async def test_an_interrupted_turn_still_pushes_what_it_wrote(tmp_path):
    """The working tree's ``on_reply`` skips the push when the reply ended interrupted ("the
    next turn resumes and pushes"). The next turn may be another worker's (the service gives a
    session to any worker): what this turn wrote after its last hook is not in the sandbox.
    Here a Summarizer job finished during the turn's last model call (Memory.md written in the
    local copy) and the user stopped the turn: the sandbox keeps the old Memory.md, the other
    worker builds on it, and when this worker serves again its unpushed copy overwrites that."""
    fact = "the API listens on port 8443"
    stepping, noted = asyncio.Event(), asyncio.Event()
    thinking, release = asyncio.Event(), asyncio.Event()

    async def script(call: ModelCall):
        if system_text(call).startswith("You maintain Memory.md"):
            if any(m.get("role") == "tool" for m in call.messages):
                noted.set()
                return "noted"
            await stepping.wait()  # answers once the step after the compaction is under way
            return reply(None, tool_call("memory_append", section="Facts", text=fact))
        if not call.tools:
            return "summary"
        if "<context-summary>" in call.text and not thinking.is_set():
            stepping.set()
            await noted.wait()  # the Summarizer wrote Memory.md meanwhile
            thinking.set()
            await release.wait()
            return "stopped"
        if any(isinstance(b, ToolResultBlock) for b in call.msgs[-1].content):
            return "read it"
        return reply(None, tool_call("big_output", tag=call.text.rsplit("read ", 1)[-1].split()[0]))

    memory = {"enabled": True, "consolidation_time": "off"}
    workdir = tmp_path / "agent-1"
    worker = Worker(
        await local_workspace(workdir),
        context_middleware_factory(
            config(long_term_memory=memory), mirror=True, cache=tmp_path / "copy"
        ),
        ScriptedChatModel(script),
    )
    task = None
    try:
        for tag in "abcdefgh":
            agent = await worker.agent("alice", "agent-1", "s1")

            async def run(agent=agent, tag=tag) -> list:
                return [e async for e in agent.reply_stream(UserMsg("user", f"read {tag}"))]

            task = asyncio.ensure_future(run())
            stopped = asyncio.ensure_future(thinking.wait())
            await asyncio.wait([task, stopped], timeout=60, return_when=asyncio.FIRST_COMPLETED)
            if thinking.is_set():
                break
            stopped.cancel()
            assert task.done(), "a turn did not end"
            worker.states["s1"] = agent.state.model_dump_json()
        assert thinking.is_set(), "no compaction happened"
        task.cancel()  # the interrupt
        await asyncio.gather(task, return_exceptions=True)
    finally:
        release.set()
        if task is not None:
            await asyncio.gather(task, return_exceptions=True)
    local = [p.read_text() for p in (tmp_path / "copy").rglob("Memory.md")]
    assert any(fact in text for text in local)  # written here ...
    sandbox = [p.read_text() for p in (workdir / "context_ext").rglob("Memory.md")]
    assert any(fact in text for text in sandbox)  # ... and in the workspace


# --------------------------------------------------------------------------- the command


def one_line_exit_2(result: subprocess.CompletedProcess) -> None:
    assert result.returncode == 2, (result.returncode, result.stderr[-2000:])
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("agentscope-context serve:"), result.stderr


@needs_service
def test_serve_workspaces_that_is_a_file_is_bad_input(tmp_path, capsys):
    """``--workspaces`` naming a file (a user's mistake) ends in ``internal error:
    FileExistsError`` with exit code 1 (``build_app``: ``workspaces.mkdir``); likewise
    ``--storage sqlite:///<file>/app.db``."""
    spec = agent_file(tmp_path)
    (tmp_path / "a-file").write_text("x")
    code = main(
        [
            "serve",
            "--agent",
            str(spec),
            "--port",
            "0",
            "--storage",
            f"sqlite:///{tmp_path / 'app.db'}",
            "--workspaces",
            str(tmp_path / "a-file"),
        ]
    )
    err = capsys.readouterr().err
    assert code == 2, err
    assert "internal error" not in err


@needs_service
@pytest.mark.parametrize("kind", ["a-folder", "a-damaged-database"])
def test_serve_storage_that_is_not_a_database_is_one_line_and_exit_2(tmp_path, kind):
    """``--storage sqlite:///<a folder>``, or a SQLite file damaged after its header: the app's
    lifespan fails, uvicorn prints the traceback and raises ``SystemExit(3)``, which neither
    ``serve_agent_file`` (``_started``) nor ``main`` catches: tracebacks on stderr and exit code
    3, a code the CLI does not have. A check of the file before the start (the working tree's
    ``check_places``) covers the folder, not every way the lifespan can fail."""
    spec = agent_file(tmp_path)
    database = tmp_path / kind
    if kind == "a-folder":
        database.mkdir()
    else:
        database.write_bytes(b"SQLite format 3\x00" + b"\xff" * 4000)
    result = run_cli(
        "serve",
        "--agent",
        str(spec),
        "--port",
        "0",
        "--storage",
        f"sqlite:///{database}",
        "--workspaces",
        str(tmp_path / "ws"),
        cwd=tmp_path,
        timeout=60,
    )
    one_line_exit_2(result)
    assert "Traceback" not in result.stderr


@needs_service
def test_serve_storage_on_a_redis_nobody_listens_on_is_one_line_and_quick(tmp_path):
    """``--storage redis://127.0.0.1:<closed port>/0``: nothing checks the server before the app
    starts; the service's workers log connection tracebacks and ``serve`` waits out
    ``STARTUP_SECONDS`` (a minute) before it says so (the context ``workspace: redis://`` is
    pinged at once, by contrast)."""
    spec = agent_file(tmp_path)
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()  # a loopback port nobody listens on
    result = run_cli(
        "serve",
        "--agent",
        str(spec),
        "--port",
        "0",
        "--storage",
        f"redis://127.0.0.1:{port}/0",
        "--workspaces",
        str(tmp_path / "ws"),
        cwd=tmp_path,
        timeout=30,
    )
    one_line_exit_2(result)
    assert "Traceback" not in result.stderr
