"""A frozen Redis workspace (design §2.3): a real ``redis-server`` stopped with SIGSTOP, as a
failover or a partition leaves it: connections accepted, no answer. Each call fails within its
deadline with a :class:`WorkspaceError`, the breaker then fails calls at once, the event loop
stays free for the other sessions meanwhile, and SIGCONT brings everything back.

"The loop stays free" is counted, never timed: another coroutine on the loop counts the
iterations it made while a store call was waiting in a portal (``waits_pending()``), which a
call blocking the loop would never let it make; and the store counts the calls that did block a
loop's thread (``blocking_calls``): none may."""

from __future__ import annotations

import asyncio
import json
import shutil
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from harness_common import make_text, session_plan
from installed_harness import managed, result_text, scripted_session, stored_views

from agentscope_context_ext import WorkspaceError, WorkspaceWriteError
from agentscope_context_ext.core.truncation import split_notice
from agentscope_context_ext.core.workspace import (
    Breaker,
    ToolResultStore,
    in_portal,
    open_storage,
    waits_pending,
)
from agentscope_context_ext.core.workspace._redis_storage import RedisStorage

DEADLINE = 0.5
"""The tests' ``workspace_timeout``: short, so that a frozen call costs little."""


class RedisServer:
    """A private ``redis-server`` on a free loopback port, frozen and thawed by signals."""

    def __init__(self, folder: Path) -> None:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        arguments = ["--bind", "127.0.0.1", "--port", str(self.port), "--dir", str(folder)]
        arguments += ["--save", "", "--appendonly", "no"]
        self.process = subprocess.Popen(
            ["redis-server", *arguments], stdout=subprocess.PIPE, text=True
        )
        for line in self.process.stdout:
            if "Ready to accept connections" in line:
                # keep reading its log, or a full pipe would stall the server
                threading.Thread(target=self.process.stdout.read, daemon=True).start()
                break
        else:
            raise RuntimeError("redis-server did not start")
        self.url = f"redis://127.0.0.1:{self.port}/0?prefix=frozen"
        self.frozen = False

    def freeze(self) -> None:
        self.process.send_signal(signal.SIGSTOP)
        self.frozen = True

    def thaw(self) -> None:
        self.process.send_signal(signal.SIGCONT)
        self.frozen = False

    def stop(self) -> None:
        if self.frozen:
            self.thaw()
        self.process.kill()
        self.process.wait(60)


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[RedisServer]:
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server is not installed")
    pytest.importorskip("redis", reason="the redis client is not installed")
    server = RedisServer(tmp_path)
    try:
        yield server
    finally:
        server.stop()


class Clock:
    """The breaker's clock, moved by the test (the cool-down is not waited for)."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class OtherSession:
    """Another session on the same event loop: it counts its iterations, and those it made
    while a synchronous store call was waiting in a portal (the loop was free then)."""

    def __init__(self) -> None:
        self.iterations = 0
        self.while_waiting = 0
        self._stopped = False

    async def run(self) -> None:
        while not self._stopped:
            self.iterations += 1
            if waits_pending():
                self.while_waiting += 1
            await asyncio.sleep(0.001)

    def stop(self) -> None:
        self._stopped = True


def redis_storage(url: str, clock: Clock, timeouts: int = 3) -> RedisStorage:
    storage = open_storage(url, timeout=DEADLINE)
    assert isinstance(storage, RedisStorage)
    storage.calls.breaker = Breaker(timeouts=timeouts, cooldown=30, clock=clock)
    return storage


# ------------------------------------------------------------------------ the store


def test_a_frozen_server_fails_each_call_in_time_then_at_once_and_recovers(
    redis_server: RedisServer,
) -> None:
    clock = Clock()
    storage = redis_storage(redis_server.url, clock, timeouts=2)
    storage.write("notes/a.md", b"before")
    redis_server.freeze()
    for _ in range(2):
        with pytest.raises(WorkspaceError) as slow:
            storage.read("notes/a.md")
        message = str(slow.value)
        assert f"did not answer within {DEADLINE:g} s" in message and "\n" not in message
        assert "redis-cli ping" in message and "workspace_timeout" in message
    with pytest.raises(WorkspaceError) as fast:  # the breaker: no call is made
        storage.write("notes/b.md", b"during")
    assert "is not answering (2 calls in a row" in str(fast.value)
    assert "30 s more" in str(fast.value)
    redis_server.thaw()
    with pytest.raises(WorkspaceError):  # still cooling down: not asked yet
        storage.read("notes/a.md")
    clock.now += 30
    assert storage.read("notes/a.md") == b"before", "one probe, answered: closed again"
    storage.write("notes/b.md", b"after")
    assert storage.read("notes/b.md") == b"after"
    assert not storage.calls.breaker.is_open


def test_every_store_on_a_frozen_server_knows_it_is_away(redis_server: RedisServer) -> None:
    """The breaker is the server's: once two calls of one store ran out of time, a store opened
    afterwards on the same server (another prefix, the next request's) fails at once, its
    opening check included; after SIGCONT and the cool-down one probe closes it for all."""
    first = open_storage(redis_server.url, timeout=DEADLINE)
    other_url = redis_server.url.replace("prefix=frozen", "prefix=other")
    clock = Clock()
    breaker = first.calls.breaker
    breaker.clock = clock  # the server's breaker, on the test's clock
    try:
        redis_server.freeze()
        for _ in range(2):
            with pytest.raises(WorkspaceError, match="did not answer"):
                first.read("k")
        with pytest.raises(WorkspaceError) as refused:
            open_storage(other_url, timeout=DEADLINE)
        assert "cannot reach the workspace" in str(refused.value)
        assert "is not answering (2 calls in a row" in str(refused.value), "no call was made"
        redis_server.thaw()
        clock.now += 10
        second = open_storage(other_url)
        assert second.calls.breaker is breaker and not breaker.is_open
        assert first.read("k") is None
    finally:
        breaker.clock = time.monotonic


async def test_a_call_in_a_portal_leaves_the_loop_free_and_one_outside_is_counted(
    redis_server: RedisServer,
) -> None:
    storage = redis_storage(redis_server.url, Clock(), timeouts=10)  # its ping: counted
    opened = storage.calls.blocking_calls
    storage.write("k", b"v")  # blocks the loop (no portal): counted, the check can fail
    assert storage.calls.blocking_calls == opened + 1
    redis_server.freeze()
    other = OtherSession()
    ticking = asyncio.get_running_loop().create_task(other.run())

    async def turn() -> None:
        storage.read("k")

    with pytest.raises(WorkspaceError, match="did not answer"):
        await in_portal(turn())
    waited_in_portal = other.while_waiting
    with pytest.raises(WorkspaceError, match="did not answer"):
        storage.read("k")  # outside any portal: the loop itself waits
    other.stop()
    await ticking
    assert waited_in_portal >= 2, "the other session ran while the call waited"
    assert other.while_waiting == waited_in_portal, "nothing ran while the loop was blocked"
    assert storage.calls.blocking_calls == opened + 2


async def test_a_cancelled_turn_stops_waiting_for_a_frozen_server(
    redis_server: RedisServer,
) -> None:
    storage = redis_storage(redis_server.url, Clock(), timeouts=1)
    opened = storage.calls.blocking_calls
    redis_server.freeze()

    async def turn() -> None:
        storage.append_lines("dialog/x.jsonl", [b"line"])

    task = asyncio.get_running_loop().create_task(in_portal(turn()))
    while waits_pending() == 0:
        await asyncio.sleep(0.001)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert not storage.calls.breaker.is_open, "a call given up is no timeout"
    assert storage.calls.blocking_calls == opened


async def test_a_lock_held_elsewhere_is_waited_for_on_the_loop(redis_server: RedisServer) -> None:
    waiter = redis_storage(redis_server.url, Clock())
    holder = redis_storage(redis_server.url, Clock())
    opened = waiter.calls.blocking_calls
    held = holder.lock("memory/.lock")
    await asyncio.to_thread(held.__enter__)
    other = OtherSession()

    async def release_when_waited_for() -> None:
        while not other.while_waiting:  # the waiter is pausing between its tries
            await asyncio.sleep(0.001)
        await asyncio.to_thread(held.__exit__, None, None, None)

    async def turn() -> str:
        with waiter.lock("memory/.lock", timeout=30):
            return "taken"

    ticking = asyncio.get_running_loop().create_task(other.run())
    releasing = asyncio.get_running_loop().create_task(release_when_waited_for())
    assert await in_portal(turn()) == "taken"
    await releasing
    other.stop()
    await ticking
    assert waiter.calls.blocking_calls == opened


# ------------------------------------------------------------------------ an agent's turn


def pasted(kb: int) -> str:
    return "".join(f"pasted line {i:05d} " + "y" * 60 + "\n" for i in range(kb * 1024 // 80))


async def test_a_turn_on_a_frozen_workspace_ends_with_a_clear_error_and_recovers(
    redis_server: RedisServer,
) -> None:
    """A message larger than the window must be saved to be cut: on a frozen store the turn
    is refused within a few deadlines (nothing sent, nothing lost) while another session on
    the loop keeps running; after SIGCONT the same agent saves, cuts and answers."""
    model = scripted_session(session_plan(total_calls=1, sizes_kb=[1]))
    config = {"workspace": redis_server.url, "workspace_timeout": DEADLINE}
    agent = managed(model, {**config, "max_input_tokens": 16384})
    storage = agent.manager.storage
    opened = storage.calls.blocking_calls
    clock = Clock()
    storage.calls.breaker = Breaker(cooldown=30, clock=clock)
    events = []
    agent.manager.subscribe(events.append)
    redis_server.freeze()
    other = OtherSession()
    ticking = asyncio.get_running_loop().create_task(other.run())
    text = pasted(120)  # ~30k tokens on a 16k window
    with pytest.raises(WorkspaceWriteError) as refused:
        await agent.ask(text)
    other.stop()
    await ticking
    message = str(refused.value)
    assert "over the 16,384-token window" in message and "nothing was sent" in message
    assert redis_server.url.split("?")[0] in message and "\n" not in message
    assert other.while_waiting >= 2, "the other session ran while the turn waited"
    assert storage.calls.blocking_calls == opened, "no call blocked the loop"
    assert not any(c for c in model.calls), "no prompt over the window was sent"
    assert any(e.type == "save_failed" for e in events)
    assert any(e.type == "error" for e in events)

    redis_server.thaw()
    clock.now += 30
    assert await agent.ask("go on")
    # the pasted message, now older than "go on", was compacted: saved whole in dialog/
    assert any(view.text == text for view in stored_views(redis_server.url)), "nothing lost"
    assert storage.calls.blocking_calls == opened


async def test_a_result_the_frozen_store_cannot_take_stays_whole_and_is_saved_later(
    redis_server: RedisServer,
) -> None:
    """Stage one cannot save on a frozen store: the result stays whole (or, cut by 2.x
    itself, is held in memory), the turn goes on with ``save_failed`` events; once the server
    answers, the next step saves it and cuts it to its notice."""
    model = scripted_session([[(60, 1)]])
    config = {"workspace": redis_server.url, "workspace_timeout": DEADLINE}
    agent = managed(model, {**config, "max_input_tokens": 65536})
    clock = Clock()
    agent.manager.storage.calls.breaker = Breaker(cooldown=30, clock=clock)
    opened = agent.manager.storage.calls.blocking_calls
    events = []
    agent.manager.subscribe(events.append)
    redis_server.freeze()
    other = OtherSession()
    ticking = asyncio.get_running_loop().create_task(other.run())
    assert await agent.ask("fetch the document") == "All documents fetched."
    other.stop()
    await ticking
    failed = [e for e in events if e.type == "save_failed"]
    assert failed and "is not answering" in failed[-1].data["error"]
    assert other.while_waiting >= 2
    assert agent.manager.storage.calls.blocking_calls == opened
    whole = make_text(60 * 1024, seed=1)
    kept = result_text(agent, "call-0-0")
    assert kept == whole or kept.startswith(whole[:1000]), "not cut: nothing was saved"

    redis_server.thaw()
    clock.now += 30
    await agent.ask("thanks")
    notice = split_notice(result_text(agent, "call-0-0"))
    assert notice is not None, "saved and cut once the store answered"
    saved = ToolResultStore(redis_server.url).read_text(notice[1].file_path)
    assert saved == whole


# ------------------------------------------------------------------ a served agent (2.x)


@pytest.mark.agentscope2
def test_a_served_turn_on_a_frozen_workspace_ends_in_seconds_and_other_sessions_go_on(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    """``create_app`` with ``workspace: redis://...``: Redis stops (SIGSTOP) between two turns.
    A turn that needs the store (a message over the window, to be saved and cut) ends with the
    refusal; another session's turn, which does not need it, is answered; the service's loop
    is never blocked meanwhile; after SIGCONT the first session carries on, nothing lost."""
    pytest.importorskip("agentscope.app", reason="AgentScope's service is not installed")
    pytest.importorskip("uvicorn", reason="uvicorn is not installed")
    from llm_servers import ModelServer, Reply
    from served_app import ServedApp, reply_end, reply_text

    from agentscope_context_ext import context_middleware_factory
    from agentscope_context_ext.adapter import installed

    base = context_middleware_factory(
        {
            "workspace": redis_server.url,
            "workspace_timeout": DEADLINE,
            "max_input_tokens": 16384,
            "long_term_memory": {"enabled": False},
        }
    )
    seen: dict = {"events": [], "middlewares": {}}
    clock = Clock()

    async def factory(user_id, agent_id, session_id, workspace=None):
        seen["loop"] = asyncio.get_running_loop()
        middlewares = await base(user_id, agent_id, session_id, workspace)
        middleware = middlewares[-1]
        store = middleware.storage.base  # the session's SubStorage of the one Redis store
        if "store" not in seen:
            seen["store"] = store
            store.calls.breaker = Breaker(cooldown=30, clock=clock)
        seen["middlewares"][session_id] = middleware
        middleware.subscribe(seen["events"].append)
        return middlewares

    def respond(request: dict) -> Reply:
        return Reply(text=f"answer {len(request.get('messages', []))}")

    with (
        ModelServer("openai", respond) as model,
        ServedApp(tmp_path / "app", extra_agent_middlewares=factory, timeout=60) as served,
    ):
        credential = served.create_credential(model.url)
        agent = served.create_agent("assistant", "You help.")
        first = served.create_session(agent, credential, name="first")
        second = served.create_session(agent, credential, name="second")
        assert reply_end(served.chat(agent, first, "hello"))["finished_reason"] == "completed"
        store = seen["store"]
        opened = store.calls.blocking_calls
        assert opened == 0, "the first turn (the session registered) blocked nothing either"
        other = OtherSession()
        ticking = asyncio.run_coroutine_threadsafe(other.run(), seen["loop"])

        redis_server.freeze()
        text = pasted(120)  # ~30k tokens on a 16k window: must be saved to be cut
        refused = served.chat(agent, first, text)
        assert reply_end(refused)["finished_reason"] != "completed"
        errors = [e for e in seen["events"] if e.type == "error"]
        assert errors and errors[-1].data["reason"] == "workspace write failed"
        assert (
            "is not answering" in errors[-1].data["error"]
            or "did not answer" in (errors[-1].data["error"])
        )
        answered = served.chat(agent, second, "are you there?")
        assert reply_end(answered)["finished_reason"] == "completed"
        assert reply_text(answered).startswith("answer"), "another session goes on"
        seen["loop"].call_soon_threadsafe(other.stop)
        ticking.result(30)
        assert other.while_waiting >= 2, "the service's loop ran while the store was waited on"
        assert store.calls.blocking_calls == opened, "no call blocked the service's loop"

        redis_server.thaw()
        clock.now += 30
        assert reply_end(served.chat(agent, first, "go on"))["finished_reason"] == "completed"
        dialog = installed.open_dialog(seen["middlewares"][first].storage)
        kept = [dialog.codec.view(r.msg) for r in dialog.iter_records(newest_first=False)]
        assert any(view.text == text for view in kept), "the pasted message is in dialog/"


@pytest.mark.agentscope2
def test_serve_answers_while_its_redis_workspace_is_frozen(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    """``agentscope-context serve`` with ``workspace: redis://...`` in the agent file's context:
    with the server stopped, a turn that needs the store ends (its run is over, the message
    kept); another session is answered meanwhile, and the service answers ``/health`` all
    along (each request within a deadline far below the store's: a blocked loop misses it)."""
    from llm_servers import ModelServer, Reply
    from served_app import ServeProcess, agent_file, serve_options, service_missing

    missing = service_missing()
    if missing:
        pytest.skip(missing)

    def respond(request: dict) -> Reply:
        return Reply(text=f"answer {len(request.get('messages', []))}")

    with ModelServer("openai", respond) as model:
        spec = agent_file(tmp_path, model.url)
        spec.write_text(
            spec.read_text() + f"  workspace: '{redis_server.url}'\n  workspace_timeout: 3\n",
            encoding="utf-8",
        )
        served = ServeProcess(serve_options(tmp_path, spec), tmp_path)
        try:
            first, second = served.new_session(), served.new_session()

            def answered(count: int):
                return lambda stored: sum(m["role"] == "assistant" for m in stored) >= count

            served.chat(first, "hello")
            served.replies(first, answered(1), 90)
            redis_server.freeze()
            served.chat(first, pasted(120))
            served.chat(second, "are you there?")
            health = 0
            while True:  # the service keeps answering while the turns wait on the store
                assert served.client.get("/health", timeout=2.0).status_code == 200
                health += 1
                runs = [
                    served.client.get(
                        f"/sessions/{session}/messages",
                        params={"agent_id": served.agent_id, "limit": 1},
                        timeout=2.0,
                    ).json()["is_running"]
                    for session in (first, second)
                ]
                if not any(runs):
                    break
            kept = served.replies(first, lambda stored: True, 30)
            other = served.replies(second, answered(1), 30)
        finally:
            stderr = served.stop()
    assert health >= 2
    assert any(pasted(1)[:40] in json.dumps(m) for m in kept), "the pasted message is kept"
    assert kept[-1]["role"] == "assistant" and kept[-1]["finished_reason"] == "error"
    assert not any(pasted(1)[:40] in json.dumps(r) for r in model.requests), "nothing sent"
    assert "answer" in json.dumps(other[-1]), "the other session was answered"
    assert "is not answering" in stderr or "did not answer" in stderr


async def test_a_store_gone_mid_run_never_lets_a_prompt_over_the_window_out(
    redis_server: RedisServer,
) -> None:
    """The server killed after the agent started: every call fails at once (connection
    refused). Listing the dialog for the tool schemas failed outside any save path and made
    the whole pipeline a warning: the model got a prompt of ~40k tokens on a 16k window. Now
    the schemas wait for a listing that works, and the prompt is refused, nothing lost."""
    model = scripted_session(session_plan(total_calls=1, sizes_kb=[1]))
    agent = managed(
        model,
        {"workspace": redis_server.url, "workspace_timeout": DEADLINE, "max_input_tokens": 16384},
    )
    redis_server.stop()
    with pytest.raises(WorkspaceWriteError, match="over the 16,384-token window"):
        await agent.ask(pasted(120))
    assert model.calls == [], "nothing was sent"
    assert any(view.text == pasted(120) for view in agent.views()), "the message is kept"


async def test_a_store_failure_no_save_path_caught_still_leaves_the_prompt_checked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Any step may meet a store that does not answer; where no save path catches it, the step
    is a warning as before, but the prompt it did not fit is checked: over the window it is
    refused (the fault injected where the pipeline starts, on a folder workspace)."""
    from agentscope_context_ext.core.pipeline import ContextPipeline

    async def store_away(self, *args, **kwargs):
        raise WorkspaceError("the workspace redis://h:1/0 did not answer within 3 s")

    monkeypatch.setattr(ContextPipeline, "run_stage_one", store_away)
    model = scripted_session(session_plan(total_calls=1, sizes_kb=[1]))
    agent = managed(model, {"workspace": str(tmp_path / "ws"), "max_input_tokens": 16384})
    events = []
    agent.manager.subscribe(events.append)
    with pytest.raises(WorkspaceWriteError, match="did not answer within 3 s"):
        await agent.ask(pasted(120))
    assert model.calls == [], "nothing was sent"
    assert [e.type for e in events if e.type in ("warning", "error")] == ["warning", "error"]
    monkeypatch.undo()
    assert await agent.ask("go on"), "the same agent carries on once the store answers"
