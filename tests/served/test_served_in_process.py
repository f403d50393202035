"""The served agent in process: what ``create_app`` does each turn (a new agent, model and
middleware; the state loaded from what the service stored after the last reply; the agent's own
2.x ``LocalWorkspace`` as its offloader), with :func:`context_middleware_factory`.

The same over real HTTP, ``create_app`` under uvicorn, is ``test_served_app.py``."""

from __future__ import annotations

import pytest
from agentscope.agent import Agent
from agentscope.event import ReplyEndEvent
from agentscope.message import ToolResultBlock, UserMsg
from agentscope.state import AgentState
from served_turns import WINDOW, Worker, big_output, config, custom

from agentscope_context_ext import (
    ConfigError,
    ContextExtError,
    context_middleware_factory,
)
from agentscope_context_ext.agentscope2 import RefusedTurn
from agentscope_context_ext.core.truncation import split_notice
from agentscope_context_ext.core.workspace import SubStorage
from agentscope_context_ext.replay import prompt_pair_violations
from agentscope_context_ext.testing import ModelCall, ScriptedChatModel, reply, tool_call


def asked(call: ModelCall) -> str:
    """The tag of the last "read <tag>" the user sent."""
    return call.text.rsplit("read ", 1)[-1].split()[0]


async def test_turns_rebuilt_each_time_compact_and_keep_everything_in_the_workspace(
    tmp_path, capsys
):
    outputs = [f"t{i}" for i in range(6)]

    def script(call: ModelCall):
        if not call.tools:  # the summary call
            return "Six turns, each read one big output."
        last = call.msgs[-1]
        if any(isinstance(b, ToolResultBlock) for b in last.content):
            return "read it"
        return reply(None, tool_call("big_output", tag=asked(call)))

    model = ScriptedChatModel(script)
    service = Worker(tmp_path / "agent-1", context_middleware_factory(config()), model)
    notices: list[str] = []
    compactions = 0
    for tag in outputs:
        events = await service.turn("alice", "agent-1", "s1", f"read {tag}")
        notices += [value["text"] for value in custom(events, "context_ext.notice")]
        compactions += len(custom(events, "context_ext.compaction_finished"))

    # compactions happened across turns, and the stream said so; stdout stayed quiet
    assert compactions >= 1
    assert any("compacted" in text for text in notices)
    assert "[context]" not in capsys.readouterr().out
    # no prompt over the window, no orphan tool result
    for call in model.calls:
        assert model.counter.count_formatted(call.messages, call.tools) <= WINDOW
        ids = {str(c.get("id")) for m in call.messages for c in m.get("tool_calls") or []}
        assert prompt_pair_violations(call.messages, ids) == 0
    # the summary survived each rebuild: it counts every compaction of every turn, and the
    # model was shown it
    state = AgentState.model_validate_json(service.states["s1"])
    assert f"compacted ({compactions} time(s)" in str(state.summary)
    assert "<context-summary>" in model.calls[-1].text
    # every output is in the session's folder of the agent's workspace, whole
    folder = tmp_path / "agent-1" / "sessions" / "s1" / "context_ext"
    saved = {p.read_text(encoding="utf-8") for p in (folder / "tool_result").glob("*.txt")}
    assert {big_output(tag) for tag in outputs} <= saved
    assert list((folder / "dialog").glob("*.jsonl"))
    # what the model saw of each output names a file the agent's read_file reads
    for call in model.calls:
        for message in call.messages:
            if message.get("role") == "tool":
                notice = split_notice(str(message.get("content")))
                if notice is not None:
                    assert (folder / notice[1].file_path).is_file()


async def test_two_sessions_and_two_agents_do_not_see_each_other(tmp_path):
    def script(call: ModelCall):
        if not call.tools:
            return "summary"
        if any(isinstance(b, ToolResultBlock) for b in call.msgs[-1].content):
            return "ok"
        return reply(None, tool_call("big_output", tag=asked(call)))

    model = ScriptedChatModel(script)
    factory = context_middleware_factory(config())
    one = Worker(tmp_path / "agent-1", factory, model)
    two = Worker(tmp_path / "agent-2", factory, model)
    await one.turn("alice", "agent-1", "s1", "read alpha")
    await one.turn("alice", "agent-1", "s2", "read beta")
    await two.turn("alice", "agent-2", "s3", "read gamma")

    def saved(agent: str, session: str) -> set[str]:
        folder = tmp_path / agent / "sessions" / session / "context_ext" / "tool_result"
        return {p.read_text(encoding="utf-8") for p in folder.glob("*.txt")}

    assert saved("agent-1", "s1") == {big_output("alpha")}
    assert saved("agent-1", "s2") == {big_output("beta")}
    assert saved("agent-2", "s3") == {big_output("gamma")}


async def test_a_store_of_our_own_keeps_the_same_layout(tmp_path):
    store = tmp_path / "shared"
    factory = context_middleware_factory(config(workspace=str(store)))
    model = ScriptedChatModel(
        lambda call: (
            "ok"
            if any(isinstance(b, ToolResultBlock) for b in call.msgs[-1].content)
            else reply(None, tool_call("big_output", tag="zeta"))
        )
    )
    service = Worker(tmp_path / "agent-1", factory, model)
    await service.turn("alice", "agent-1", "s1", "read zeta")
    folder = store / "agents" / "agent-1" / "sessions" / "s1" / "context_ext" / "tool_result"
    assert {p.read_text(encoding="utf-8") for p in folder.glob("*.txt")} == {big_output("zeta")}
    assert not (tmp_path / "agent-1" / "sessions" / "s1" / "context_ext").exists()


def test_sub_storage_keeps_keys_under_its_folder(tmp_path):
    from agentscope_context_ext.core.workspace import LocalStorage

    base = LocalStorage(tmp_path)
    sub = SubStorage(base, "agents/a/sessions/s")
    sub.write("tool_result/x.txt", b"data")
    assert (tmp_path / "agents/a/sessions/s/tool_result/x.txt").read_bytes() == b"data"
    assert sub.names("tool_result") == ["x.txt"]
    assert sub.append_lines("dialog/d.jsonl", [b"1", b"2"]) == 0
    assert [n for n, _ in sub.lines("dialog/d.jsonl")] == [1, 2]
    with pytest.raises(ValueError):
        sub.read("../escape")
    with pytest.raises(ValueError):
        SubStorage(base, "../up")


async def test_bad_settings_are_clear_errors_at_once(tmp_path):
    with pytest.raises(ConfigError):
        context_middleware_factory({"max_input_tokens": -5})
    with pytest.raises(ConfigError):
        context_middleware_factory(config(), memory_scope="team")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="tool names"):
        context_middleware_factory(config(), tools="lookup")
    factory = context_middleware_factory(config())
    # a turn without a workspace to put the files in is refused on its own stream
    (refused,) = await factory("alice", "agent-1", "s1", None)
    assert isinstance(refused, RefusedTurn)
    assert isinstance(refused.error, ContextExtError) and "workspace" in str(refused.error)


@pytest.mark.parametrize("scope", ["agent", "user"])
async def test_memory_md_is_the_agents_or_the_users_across_sessions(tmp_path, scope):
    def script(call: ModelCall):
        if any(isinstance(b, ToolResultBlock) for b in call.msgs[-1].content):
            return "noted"
        if "please remember" in call.text:
            return reply(None, tool_call("memory_append", text="The user prefers tabs."))
        return "hello"

    memory = {"enabled": True, "consolidation_time": "off", "summarize_on_compaction": False}
    model = ScriptedChatModel(script)
    factory = context_middleware_factory(config(long_term_memory=memory), memory_scope=scope)
    service = Worker(tmp_path / "agent-1", factory, model)
    await service.turn("alice", "agent-1", "s1", "please remember this")
    await service.turn("alice", "agent-1", "s2", "hi")
    assert "The user prefers tabs." in str(model.calls[-1].messages[0]["content"])
    await service.turn("bob", "agent-1", "s3", "hi")
    shown_to_bob = "The user prefers tabs." in str(model.calls[-1].messages[0]["content"])
    assert shown_to_bob is (scope == "agent")
    where = tmp_path / "agent-1" / "context_ext" / "agents" / "agent-1"
    if scope == "user":
        where = where / "users" / "alice"
    assert "The user prefers tabs." in (where / "Memory.md").read_text(encoding="utf-8")
    assert not list((tmp_path / "agent-1" / "sessions").glob("*/context_ext/Memory.md"))


async def test_the_summarizer_of_a_served_turn_writes_the_agents_memory_before_the_turn_ends(
    tmp_path,
):
    def script(call: ModelCall):
        system = call.messages[0]["content"]
        system = system if isinstance(system, str) else system[0]["text"]
        if system.startswith("You maintain Memory.md"):
            if not any(m.get("role") == "tool" for m in call.messages):
                fact = "the API listens on port 8443"
                return reply(None, tool_call("memory_append", section="Facts", text=fact))
            return "noted"
        if not call.tools:
            return "summary"
        if any(isinstance(b, ToolResultBlock) for b in call.msgs[-1].content):
            return "read it"
        return reply(None, tool_call("big_output", tag=asked(call)))

    memory = {"enabled": True, "consolidation_time": "off"}
    model = ScriptedChatModel(script)
    # Compaction at the trigger (no prompt caching): these turns are about what follows one.
    settings = config(long_term_memory=memory, prompt_cache_price=1.0)
    service = Worker(tmp_path / "agent-1", context_middleware_factory(settings), model)
    events: list = []
    for tag in ("a", "b", "c", "d"):
        events += await service.turn("alice", "agent-1", "s1", f"read {tag}")
    assert custom(events, "context_ext.compaction_finished")
    # the Summarizer ran within the turns (nothing is left running after a turn)
    memory_md = tmp_path / "agent-1" / "context_ext" / "agents" / "agent-1" / "Memory.md"
    assert "port 8443" in memory_md.read_text(encoding="utf-8")
    assert custom(events, "context_ext.memory_written")
    # a new session of the agent is shown it
    await service.turn("alice", "agent-1", "s2", "read e")
    agent_calls = [c for c in model.calls if "You work with tools" in str(c.messages[0])]
    assert "port 8443" in str(agent_calls[-1].messages[0])


async def test_a_workspace_reached_through_its_backend_keeps_everything_across_workers(tmp_path):
    """``mirror=True``: the stores work on a local copy that is pulled from the workspace (through
    its backend's async calls, as for a Docker or E2B sandbox) and pushed back after each step.
    A second worker with an empty copy continues the session with nothing lost."""

    def script(call: ModelCall):
        if not call.tools:
            return "summary"
        if any(isinstance(b, ToolResultBlock) for b in call.msgs[-1].content):
            return "read it"
        return reply(None, tool_call("big_output", tag=asked(call)))

    model = ScriptedChatModel(script)
    workdir = tmp_path / "agent-1"
    # Compaction at the trigger (no prompt caching): the session must compact in four turns.
    settings = config(prompt_cache_price=1.0)
    first = Worker(
        workdir, context_middleware_factory(settings, mirror=True, cache=tmp_path / "one"), model
    )
    compactions = 0
    for tag in ("a", "b", "c", "d"):
        events = await first.turn("alice", "agent-1", "s1", f"read {tag}")
        compactions += len(custom(events, "context_ext.compaction_finished"))
    assert compactions >= 1
    folder = workdir / "sessions" / "s1" / "context_ext"  # in the workspace, through the backend
    saved = {p.read_text(encoding="utf-8") for p in (folder / "tool_result").glob("*.txt")}
    assert {big_output(tag) for tag in "abcd"} <= saved
    (dialog,) = (folder / "dialog").glob("*.jsonl")
    before = dialog.read_text(encoding="utf-8")
    assert before

    # another worker: an empty local copy, the same workspace and the state the service stored
    second = Worker(
        workdir, context_middleware_factory(config(), mirror=True, cache=tmp_path / "two"), model
    )
    second.states = first.states
    compactions = 0
    for tag in ("e", "f", "g"):
        events = await second.turn("alice", "agent-1", "s1", f"read {tag}")
        assert not custom(events, "context_ext.context_warning")
        compactions += len(custom(events, "context_ext.compaction_finished"))
    assert compactions >= 1
    # the dialog was pulled before the second worker appended to it: the first one's lines
    # are still there, the new ones after them
    after = dialog.read_text(encoding="utf-8")
    assert after.startswith(before) and len(after) > len(before)
    saved = {p.read_text(encoding="utf-8") for p in (folder / "tool_result").glob("*.txt")}
    assert {big_output(tag) for tag in "abcdefg"} <= saved
    for call in model.calls:
        assert model.counter.count_formatted(call.messages, call.tools) <= WINDOW


async def test_a_change_the_sandbox_did_not_take_is_kept_and_pushed_later(tmp_path):
    from agentscope.tool import LocalBackend

    from agentscope_context_ext.agentscope2._mirror import WorkspaceMirror

    remote, local = tmp_path / "sandbox" / "ctx", tmp_path / "copy"
    backend = LocalBackend()
    away = False

    def get_backend():
        if away:
            raise RuntimeError("DockerWorkspace has no active backend")
        return backend

    mirror = WorkspaceMirror(get_backend, str(remote), local)
    await mirror.pull()
    (local / "dialog").mkdir(parents=True)
    (local / "dialog" / "d.jsonl").write_text("one\n")
    assert await mirror.push() == 1
    (local / "dialog" / "d.jsonl").write_text("one\ntwo\n")
    away = True
    with pytest.raises(RuntimeError):
        await mirror.push()
    away = False
    later = WorkspaceMirror(get_backend, str(remote), local)  # the next turn's middleware
    await later.pull()
    assert (local / "dialog" / "d.jsonl").read_text() == "one\ntwo\n"  # not the sandbox's older
    await later.push()
    assert (remote / "dialog" / "d.jsonl").read_text() == "one\ntwo\n"
    # a copy that lost a file gets it back; a file deleted here is deleted there
    (local / "dialog" / "d.jsonl").unlink()
    fresh = WorkspaceMirror(get_backend, str(remote), tmp_path / "fresh")
    assert await fresh.pull() == 1
    await later.push()
    assert not (remote / "dialog" / "d.jsonl").exists()


async def test_a_turn_whose_workspace_cannot_be_read_fails_clearly_and_calls_no_model(tmp_path):
    model = ScriptedChatModel(["hello", "hello"])
    factory = context_middleware_factory(config(), mirror=True, cache=tmp_path / "c")
    service = Worker(tmp_path / "agent-1", factory, model)
    await service.turn("alice", "agent-1", "s1", "hi")  # the workspace exists and works
    middlewares = await factory("alice", "agent-1", "s1", service.workspace)
    service.workspace._backend = None  # the sandbox disconnected: get_backend() raises
    agent = Agent(
        name="worker",
        system_prompt="You work with tools.",
        model=model,
        middlewares=middlewares,
        state=AgentState.model_validate_json(service.states["s1"]),
    )
    # served (per turn): the refusal ends the reply on its stream, with the reason
    events = [event async for event in agent.reply_stream(UserMsg("user", "again"))]
    (error,) = custom(events, "context_ext.error")
    assert error["error"] == "WorkspaceError" and "cannot be read" in error["message"]
    end = events[-1]
    assert isinstance(end, ReplyEndEvent) and end.error.message == error["message"]
    assert len(model.calls) == 1  # the failed turn called no model
