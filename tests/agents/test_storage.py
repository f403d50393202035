"""The storage contract (issue 15): every workspace store on a local folder and on a real Redis
server behaves the same, hostile input included. The ``storage`` fixture runs each test on both
backends (Redis: the server ``ACE_REDIS_URL`` names; skipped without one unless
``ACE_REQUIRE_REDIS=1``). The stores are the core's (dialog records as plain dicts); the agents
sharing a Redis workspace are managed agents of the installed AgentScope."""

from __future__ import annotations

import multiprocessing
import threading
import uuid
from datetime import date

import pytest

from agentscope_context_ext.core.errors import WorkspaceError
from agentscope_context_ext.core.longterm import LongTermMemory
from agentscope_context_ext.core.workspace import DialogStore, ToolResultStore, open_storage
from agentscope_context_ext.core.workspace._keys import check_key

INVALID_UTF8 = b"ok \xff\xfe bytes\n"


def msg(text: str, timestamp: str | None = None) -> dict:
    """A saved user message as a plain record (the core's ``DictCodec``)."""
    return {"id": uuid.uuid4().hex, "role": "user", "content": text, "timestamp": timestamp}


def test_values_round_trip_whole(storage) -> None:
    assert storage.read("tool_result/a.txt") is None
    for data in (b"", b"x" * 10_000_000, INVALID_UTF8, b"a\x00b"):
        storage.write("tool_result/a.txt", data)
        assert storage.read("tool_result/a.txt") == data
    assert storage.read("tool_result/a.txt", 3) == b"a\x00b"[:3]
    assert storage.names("tool_result") == ["a.txt"]
    assert storage.mtime("tool_result/a.txt") is not None
    seen = storage.version("tool_result/a.txt")
    storage.write("tool_result/a.txt", b"changed")
    assert seen is not None and storage.version("tool_result/a.txt") != seen
    assert storage.version("tool_result/none.txt") is None
    assert storage.touch("tool_result/a.txt") and not storage.touch("tool_result/none.txt")
    assert storage.delete("tool_result/a.txt") and not storage.delete("tool_result/a.txt")
    assert storage.names("tool_result") == [] and storage.read("tool_result/a.txt") is None


def test_logs_number_lines_in_append_order(storage) -> None:
    assert storage.append_lines("dialog/d.jsonl", [b"1", b"2"]) == 0
    assert storage.append_lines("dialog/d.jsonl", [b"3"]) == 2
    assert storage.line_count("dialog/d.jsonl") == 3
    assert list(storage.lines("dialog/d.jsonl")) == [(1, b"1"), (2, b"2"), (3, b"3")]
    assert list(storage.lines("dialog/d.jsonl", 3)) == [(3, b"3")]
    assert list(storage.lines_backwards("dialog/d.jsonl")) == [(3, b"3"), (2, b"2"), (1, b"1")]
    assert storage.read("dialog/d.jsonl") == b"1\n2\n3\n"
    assert storage.names("dialog") == ["d.jsonl"]
    assert storage.line_count("dialog/none.jsonl") == 0
    assert list(storage.lines_backwards("dialog/none.jsonl")) == []


def test_a_long_log_pages(storage) -> None:
    lines = [str(i).encode() for i in range(2_500)]
    storage.append_lines("dialog/long.jsonl", lines)
    assert [n for n, _ in storage.lines("dialog/long.jsonl")] == list(range(1, 2_501))
    backwards = list(storage.lines_backwards("dialog/long.jsonl"))
    assert backwards[0] == (2_500, b"2499") and backwards[-1] == (1, b"0")


@pytest.mark.parametrize("key", ["../x", "/etc/passwd", "a/../../b", "", "a//b", "x y", "a\x00b"])
def test_hostile_keys_are_refused(storage, key: str) -> None:
    with pytest.raises(ValueError, match="not a workspace key"):
        storage.write(key, b"x")
    with pytest.raises(ValueError):
        check_key(key)


def test_the_lock_is_exclusive(storage) -> None:
    inside: list[int] = []
    overlaps: list[int] = []

    def worker(n: int) -> None:
        for _ in range(20):
            with storage.lock("memory/.lock"):
                inside.append(n)
                if len(inside) > 1:
                    overlaps.append(n)
                inside.pop()

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert overlaps == []


def test_the_stores_on_either_backend(storage) -> None:
    results = ToolResultStore(storage)
    path = results.save("the full output\n" * 1000)
    assert results.read_text(path) == "the full output\n" * 1000
    assert results.cleanup(ttl_days=1, keep=[path]) == []

    dialog = DialogStore(storage, today=lambda: date(2026, 12, 3))
    first = dialog.append([msg(f"m{i}", "2026-12-03 10:00:00") for i in range(3)])
    second = dialog.append([msg("m3", "2026-12-03 10:00:01")])
    assert (first[0].first_line, first[0].last_line, second[0].first_line) == (1, 3, 4)
    file, records = dialog.read("2026-12-03", start_line=2, limit=2)
    assert file == "dialog/2026-12-03.jsonl"
    assert [r.msg["content"] for r in records] == ["m1", "m2"]
    assert [r.msg["content"] for r in dialog.search("m3")] == ["m3"]

    memory = LongTermMemory(storage)
    assert memory.append("Editor: vim") and not memory.append("editor:  VIM")
    memory.add_daily_note("tried the local wheelhouse", day="2026-12-02")
    assert list(memory.daily_notes()) == ["2026-12-02"]
    assert memory.write("# Memory\n\n## Facts\n- Editor: helix\n") is not None
    assert memory.read_backup(memory.backups()[0]).count("Editor: vim") == 1
    assert memory.edit("Editor: helix", "Editor: zed") and "zed" in memory.read()


def test_a_bad_or_unreachable_redis_url_is_one_clear_error() -> None:
    for url, fragment in (
        ("redis://127.0.0.1:9/0", "cannot reach the workspace redis://127.0.0.1:9/0"),
        ("redis://:secret@127.0.0.1:9/0", "redis://:***@127.0.0.1:9/0"),
        ("redis://127.0.0.1:6379/0?colour=red", "unknown option 'colour'"),
        ("redis://127.0.0.1:6379/zero", "expected redis://"),
        ("redis://127.0.0.1:6379/0?prefix=a:b", "prefix must be"),
        ("redis://127.0.0.1:port/0", "port is not a number"),
    ):
        with pytest.raises(WorkspaceError) as raised:
            open_storage(url)
        message = str(raised.value)
        assert fragment in message and "\n" not in message, message
        assert "secret" not in message


@pytest.mark.slow
def test_four_agents_in_four_processes_share_one_redis(redis_url: str, tmp_path) -> None:
    """4 worker processes x 200 agent steps, each its own session, one Redis workspace shared
    (dialog log and Memory.md): no lost or torn dialog line, every fact present."""
    import json

    from harness_common import run_in_processes
    from installed_harness import note_results, note_taking_agent, stored_views

    tags = ("alpha", "beta", "gamma", "delta")
    run_in_processes(note_taking_agent, [(redis_url, tag, 200, str(tmp_path)) for tag in tags], 900)
    dialog = DialogStore(redis_url)
    raw = [line for f in dialog.files() for _, line in dialog.storage.lines(f)]
    assert all(json.loads(line)["id"] for line in raw), "every line whole"
    views = stored_views(redis_url)
    memory = LongTermMemory(redis_url).read()
    for tag in tags:
        results = note_results(views, tag)
        assert len(results) >= 199, (tag, len(results))
        assert json.loads((tmp_path / f"{tag}.ids.json").read_text())
        facts = [line for line in memory.splitlines() if line.startswith(f"- {tag} fact ")]
        assert len(facts) == 20, (tag, len(facts))


def _killed_in_compaction(url: str, started) -> None:
    """A worker that stops forever inside its first compaction (holding the Memory.md lock),
    where the parent kills it."""
    import asyncio

    from harness_common import session_plan
    from installed_harness import managed, scripted_session

    agent = managed(
        scripted_session(session_plan(total_calls=20, sizes_kb=[30, 200, 60, 12])),
        {"workspace": url, "max_input_tokens": 16384},
    )
    storage = agent.manager.storage

    def stop_inside(event) -> None:
        if event.type == "dialog_saved":  # the dialog is written, the memory not yet updated
            lock = storage.lock("memory/.lock")
            lock.__enter__()
            started.set()
            threading.Event().wait()

    agent.manager.subscribe(stop_inside)
    asyncio.run(agent.ask("collect the documents"))


def test_a_worker_killed_during_a_compaction_loses_nothing(redis_url: str) -> None:
    import json
    import os
    import signal

    url = f"{redis_url}&lock_lease=1"
    context = multiprocessing.get_context("spawn")
    started = context.Event()
    worker = context.Process(target=_killed_in_compaction, args=(url, started))
    worker.start()
    assert started.wait(300)
    os.kill(worker.pid, signal.SIGKILL)
    worker.join(60)
    dialog = DialogStore(url)
    lines = [line for f in dialog.files() for _, line in dialog.storage.lines(f)]
    assert lines and all(json.loads(line)["id"] for line in lines), "every saved line whole"
    memory = LongTermMemory(url)
    assert memory.append("after the kill"), "the dead worker's lock did not stay"
    assert DialogStore(url).append([msg("next")])[0].first_line == len(lines) + 1


def _append_many(url: str, tag: str, count: int) -> None:
    memory = LongTermMemory(url)
    dialog = DialogStore(url)
    for i in range(count):
        memory.append(f"{tag} fact {i}")
        dialog.append([msg(f"{tag} {i}", "2026-12-03 10:00:00")])


def test_four_processes_share_one_redis_workspace(redis_url: str) -> None:
    context = multiprocessing.get_context("spawn")
    workers = [
        context.Process(target=_append_many, args=(redis_url, f"w{n}", 50)) for n in range(4)
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(300)
        assert worker.exitcode == 0
    facts = [line for line in LongTermMemory(redis_url).read().splitlines() if " fact " in line]
    assert len(facts) == 200 and len(set(facts)) == 200, "every fact, once"
    dialog = DialogStore(redis_url)
    texts = [r.msg["content"] for r in dialog.iter_records(newest_first=False)]
    assert len(texts) == 200 and len(set(texts)) == 200
    assert dialog.line_count("dialog/2026-12-03.jsonl") == 200, "no torn or lost line"


async def _run_session(workspace: str) -> tuple[list, object]:
    from harness_common import session_plan
    from installed_harness import managed, scripted_session

    model = scripted_session(session_plan(total_calls=16, sizes_kb=[30, 200, 60, 12]))
    # the summary asked at the compaction: one written ahead is ready or not by the event
    # loop's turns, which a backend's round trips change
    config = {"workspace": workspace, "max_input_tokens": 16384}
    agent = managed(model, {**config, "compaction": {"background_summary": False}})
    await agent.ask("collect the documents")
    return model.calls, agent


def _in_call_order(messages: list[dict]) -> list[dict]:
    """A prompt with each run of parallel results in the order of their calls: 2.x puts a
    result into the context when its tool call ends, and a stage-one save that waits on the
    loop (Redis, design §2.3) lets a shorter call end first; what each result says is the
    same."""
    ordered: list[dict] = []
    run: list[dict] = []
    for message in [*messages, {}]:
        if message.get("role") == "tool":
            run.append(message)
            continue
        ordered += sorted(run, key=lambda m: str(m.get("tool_call_id")))
        run = []
        if message:
            ordered.append(message)
    return ordered


async def test_an_agent_on_redis_sees_exactly_what_it_sees_on_a_folder(
    redis_url: str, tmp_path
) -> None:
    from harness_common import strip_volatile
    from installed_harness import is_agent_call, read_file, tool_results

    from agentscope_context_ext.core.truncation import split_notice

    local_calls, local_agent = await _run_session(str(tmp_path / "ws"))
    redis_calls, redis_agent = await _run_session(redis_url)

    def prompts(calls) -> list[str]:
        return strip_volatile([_in_call_order(c.messages) for c in calls if is_agent_call(c)])

    assert redis_agent.manager.stats.compactions >= 1
    assert prompts(redis_calls) == prompts(local_calls), "the same prompts, byte for byte"
    # read_file follows a notice on Redis exactly as on a folder
    cut = next(r.text for r in tool_results(redis_agent.views()) if split_notice(r.text))
    notice = split_notice(cut)[1]
    args = {"file_path": notice.file_path, "start_line": notice.next_line}
    got_redis = await read_file(redis_agent, **args)
    assert got_redis == await read_file(local_agent, **args)
    assert not got_redis.startswith("Error")
    # and the dialog, Memory.md and summary are on the server
    storage = open_storage(redis_url)
    assert storage.names("dialog") and storage.read("summary.md")


def _hold_lock_forever(url: str, ready) -> None:
    storage = open_storage(url)
    with storage.lock("memory/.lock"):
        ready.set()
        threading.Event().wait()  # until killed


def test_a_killed_worker_does_not_leave_the_lock_stuck(redis_url: str) -> None:
    import os
    import signal

    url = f"{redis_url}&lock_lease=1"
    context = multiprocessing.get_context("spawn")
    ready = context.Event()
    holder = context.Process(target=_hold_lock_forever, args=(url, ready))
    holder.start()
    assert ready.wait(120)
    os.kill(holder.pid, signal.SIGKILL)
    holder.join(60)
    storage = open_storage(url)
    with storage.lock("memory/.lock", timeout=30):  # the lease of the dead holder runs out
        memory = LongTermMemory(storage)
        assert memory.append("written after the kill")
    assert "written after the kill" in LongTermMemory(url).read()


def test_cli_commands_take_a_redis_workspace(redis_url: str, tmp_path, capsys) -> None:
    from agentscope_context_ext.cli import main

    assert main(["demo", "--out", str(tmp_path / "demo"), "--workspace", redis_url]) == 0
    storage = open_storage(redis_url)
    assert storage.names("dialog") and storage.names("tool_result")
    assert not (tmp_path / "demo" / "workspace").exists(), "nothing went to the folder"
    capsys.readouterr()
    assert main(["inspect", redis_url]) == 0
    printed = capsys.readouterr().out
    assert "persistence: appendonly" in printed or "does not persist" in printed
    assert " lines " in printed and "tool_result/:" in printed
    assert main(["cleanup", redis_url, "--ttl-days", "1"]) == 0
    assert "removed 0" in capsys.readouterr().out
    assert main(["inspect", "redis://127.0.0.1:9/0"]) == 2
    assert "cannot reach the workspace" in capsys.readouterr().err


def test_inspect_warns_when_the_server_does_not_persist(redis_url: str, capsys) -> None:
    from agentscope_context_ext.cli import main

    client = open_storage(redis_url).client
    before = {k: client.config_get(k)[k] for k in ("appendonly", "save")}
    try:
        client.config_set("appendonly", "no")
        client.config_set("save", "")
        assert main(["inspect", redis_url]) == 0
        assert "WARNING: this Redis server does not persist" in capsys.readouterr().out
    finally:
        for key, value in before.items():
            client.config_set(key, value)


def _worker(url: str, part: int, out) -> None:
    """One worker process: load the conversation saved on the Redis workspace (the installed
    AgentScope's own session store there), run one part of it, save it back."""
    import asyncio

    from harness_common import session_plan
    from installed_harness import is_agent_call, managed, scripted_session

    plan = session_plan(total_calls=20, sizes_kb=[30, 200, 60, 12])
    steps = plan[:5] if part == 1 else plan[5:]
    model = scripted_session(steps)
    agent = managed(model, {"workspace": url, "max_input_tokens": 16384})

    async def run() -> None:
        await agent.load_session("conversation")
        await agent.ask(f"part {part}")
        await agent.save_session("conversation")
        calls = [c for c in model.calls if is_agent_call(c)]
        out.put(
            {
                "compactions": agent.manager.stats.compactions,
                "first_prompt": repr(calls[0].messages),
                "summary": agent.manager.port.summary is not None,
            }
        )

    asyncio.run(run())


def test_a_conversation_continues_on_another_worker(redis_url: str) -> None:
    """Two worker processes, one Redis: the agent's state in the session store the installed
    AgentScope keeps there, the workspace (dialog, saved results, Memory.md) in this package's
    Redis backend."""
    context = multiprocessing.get_context("spawn")
    results = []
    for part in (1, 2):
        out = context.Queue()
        worker = context.Process(target=_worker, args=(redis_url, part, out))
        worker.start()
        results.append(out.get(timeout=300))
        worker.join(120)
        assert worker.exitcode == 0
    first, second = results
    assert first["compactions"] >= 1 and first["summary"]
    assert "Earlier conversation was compacted" in second["first_prompt"], "the summary moved"
    assert "part 1" in second["first_prompt"] or "dialog/" in second["first_prompt"]
    dialog = DialogStore(redis_url)
    assert dialog.files(), "both workers' compactions are in one dialog log"


def _start_redis(directory, port: int, *options: str):
    """A private redis-server with AOF (appendfsync always) and ``options``; returns once it
    accepts connections (read from its log on stdout, not guessed with a sleep)."""
    import subprocess

    arguments = ["--bind", "127.0.0.1", "--port", str(port), "--dir", str(directory)]
    arguments += ["--appendonly", "yes", "--appendfsync", "always", "--save", "", *options]
    server = subprocess.Popen(["redis-server", *arguments], stdout=subprocess.PIPE, text=True)
    for line in server.stdout:
        if "Ready to accept connections" in line:
            # Keep reading its log, or a full pipe would stall the server.
            threading.Thread(target=server.stdout.read, daemon=True).start()
            return server
    raise RuntimeError("redis-server did not start")


def test_a_redis_restart_loses_nothing_acknowledged(tmp_path, redis_url: str) -> None:
    import shutil
    import signal
    import socket

    if shutil.which("redis-server") is None:
        pytest.skip("redis-server is not installed")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = _start_redis(tmp_path, port)
    url = f"redis://127.0.0.1:{port}/0?prefix=restart"
    try:
        dialog, results = DialogStore(url), ToolResultStore(url)
        refs = dialog.append([msg(f"before {i}") for i in range(50)])
        saved = results.save("acknowledged output\n" * 100)
        server.send_signal(signal.SIGKILL)  # a crash, not a clean shutdown
        server.wait(60)
        with pytest.raises(Exception) as down:  # a clear error while the server is away
            dialog.append([msg("during")])
        assert "Connection" in type(down.value).__name__ or "connect" in str(down.value).lower()
        server = _start_redis(tmp_path, port)
        assert dialog.line_count(refs[0].file) == 50, "every acknowledged line survived"
        assert results.read_text(saved) == "acknowledged output\n" * 100
        assert dialog.append([msg("after")])[0].first_line == 51
    finally:
        server.kill()
        server.wait(60)


def test_chat_continues_its_session_on_a_redis_workspace(
    redis_url: str, tmp_path, monkeypatch
) -> None:
    import json

    from installed_harness import formatter

    from agentscope_context_ext.cli import _chat, main
    from agentscope_context_ext.testing import ScriptedChatModel

    models = []

    def scripted(model_name=None):
        models.append(ScriptedChatModel(["Noted.", "It is ed-4711."]))
        return models[-1], formatter("dashscope")

    monkeypatch.setattr(_chat, "model_from_environment", scripted)
    import io

    stdin = iter([io.StringIO("my editor is ed-4711\nexit\n"), io.StringIO("which editor?\n")])
    config = tmp_path / "chat.json"
    config.write_text(json.dumps({"workspace": redis_url}))
    monkeypatch.setattr("sys.stdin", next(stdin))
    assert main(["chat", "--config", str(config)]) == 0
    monkeypatch.setattr("sys.stdin", next(stdin))
    assert main(["chat", "--config", str(config)]) == 0
    assert "ed-4711" in str(models[1].calls[0].messages), "the second chat saw the first"
    assert not (tmp_path / "redis:").exists()


def test_a_password_protected_server(tmp_path, redis_url: str) -> None:
    """The password travels in the URL, never into a message."""
    import shutil
    import socket

    if shutil.which("redis-server") is None:
        pytest.skip("redis-server is not installed")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = _start_redis(tmp_path, port, "--requirepass", "s3cret-pw")
    try:
        good = f"redis://:s3cret-pw@127.0.0.1:{port}/0?prefix=pw"
        ToolResultStore(good).save("behind a password")
        assert LongTermMemory(good).append("a fact behind a password")
        with pytest.raises(WorkspaceError) as raised:
            open_storage(f"redis://:wrong-pw@127.0.0.1:{port}/0")
        message = str(raised.value)
        assert "wrong-pw" not in message and "***" in message and "\n" not in message
    finally:
        server.kill()
        server.wait(60)
