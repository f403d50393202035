"""The AgentScope 2.x adapter with real 2.x ``Agent`` objects and the package's scripted model.

Collected only when AgentScope 2.x is installed (see conftest.py)."""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import AsyncGenerator
from pathlib import Path

import pytest
from agentscope.agent import Agent, ReActConfig
from agentscope.event import ToolResultTextDeltaEvent
from agentscope.message import Base64Source, DataBlock, TextBlock, ToolResultBlock, UserMsg
from agentscope.permission import PermissionBehavior, PermissionDecision
from agentscope.state import AgentState
from agentscope.tool import FunctionTool, ToolChunk, Toolkit
from harness_common import disk_full

import agentscope_context_ext as ace
from agentscope_context_ext import (
    ContextExtError,
    ContextMiddleware,
    WorkspaceError,
    WorkspaceWriteError,
    enable_context_management,
)
from agentscope_context_ext.core.truncation import split_notice
from agentscope_context_ext.replay import prompt_pair_violations
from agentscope_context_ext.testing import ModelCall, ScriptedChatModel, reply, tool_call

ALLOW = PermissionDecision(behavior=PermissionBehavior.ALLOW, message="test tool")


def lines(n: int, tag: str = "line") -> str:
    """Return n long numbered lines.

    Args:
        n (int): How many lines.
        tag (str): The word each line starts with.
    """
    return "\n".join(f"{tag} {i:05d} " + "x" * 80 for i in range(n))


def boom(reason: str) -> str:
    """Always fail.

    Args:
        reason (str): Why.
    """
    raise RuntimeError(f"tool failed: {reason}")


def tools() -> Toolkit:
    return Toolkit(
        tools=[FunctionTool(lines, permission=ALLOW), FunctionTool(boom, permission=ALLOW)]
    )


def config(workspace: Path, **extra) -> dict:
    data = {
        "workspace": str(workspace),
        "max_input_tokens": 16384,
        "notices": False,
        "long_term_memory": {"enabled": False},
    }
    data.update(extra)
    return data


def make_agent(model, middlewares=None, toolkit=None, **kwargs) -> Agent:
    return Agent(
        name="worker",
        system_prompt="You work with tools.",
        model=model,
        toolkit=toolkit if toolkit is not None else tools(),
        middlewares=middlewares or [],
        react_config=ReActConfig(max_iters=50),
        **kwargs,
    )


def violations(model: ScriptedChatModel) -> int:
    total = 0
    for call in model.calls:
        ids = {str(c.get("id")) for m in call.messages for c in m.get("tool_calls") or []}
        total += prompt_pair_violations(call.messages, ids)
    return total


def result_blocks(agent: Agent) -> list[ToolResultBlock]:
    return [b for m in agent.state.context for b in m.content if isinstance(b, ToolResultBlock)]


def records(agent: Agent) -> list[dict]:
    """The truncation records the middleware keeps in the agent's state."""
    return list(agent.state.middle_context["agentscope_context_ext"]["results"].values())


def output(block: ToolResultBlock) -> str:
    return (
        block.output
        if isinstance(block.output, str)
        else "".join(getattr(item, "text", "") for item in block.output)
    )


async def test_the_public_names_resolve_to_the_2x_adapter():
    from agentscope_context_ext.agentscope2 import AgentManager

    assert ace.ContextMiddleware.__module__.endswith("agentscope2._middleware")
    assert issubclass(AgentManager, ace.ContextManager)  # the core's, one for both majors
    assert ace.enable_context_management is enable_context_management
    with pytest.raises(AttributeError, match=r"1\.x integration"):
        _ = ace.ContextMemory


async def test_stage_one_cuts_in_on_acting_and_read_file_reads_the_whole_output(tmp_path):
    seen: list[str] = []

    def script(call: ModelCall):
        if call.index == 0:
            return reply("reading", tool_call("lines", n=1500))
        if call.index == 1:
            notice = split_notice(call.messages[-1]["content"])
            assert notice is not None, "the tool result reached the model without a notice"
            seen.append(notice[1].file_path)
            return reply(
                "more",
                tool_call(
                    "read_file", file_path=notice[1].file_path, start_line=1401, end_line=1500
                ),
            )
        seen.append(call.messages[-1]["content"])
        return "done"

    model = ScriptedChatModel(script)
    context = ContextMiddleware(config(tmp_path))
    agent = make_agent(model, [context], offloader=context.offloader)
    await agent.reply(UserMsg("user", "go"))
    path = seen[0]
    assert (tmp_path / path).read_text(encoding="utf-8") == lines(1500)
    assert "line 01400" in seen[1] and "line 01480" in seen[1]
    first = result_blocks(agent)[0]
    assert first.metadata == {}  # our records are beside the context, not in its messages
    assert path in {record.get("path") for record in records(agent)}
    assert context.manager.stats.truncations == 1
    assert violations(model) == 0


async def test_events_can_be_subscribed_before_the_agent_first_runs(tmp_path):
    model = ScriptedChatModel([reply("reading", tool_call("lines", n=1500)), "done"])
    context = ContextMiddleware(config(tmp_path))
    events: list[str] = []
    context.subscribe(lambda event: events.append(event.type))
    assert context.manager is None and context.stats.truncations == 0
    agent = make_agent(model, [context], offloader=context.offloader)
    await agent.reply(UserMsg("user", "go"))
    assert "tool_result_truncated" in events
    assert context.stats is context.manager.stats and context.stats.truncations == 1


async def test_compaction_is_pair_safe_lossless_and_readable_back(tmp_path):
    steps = [reply(f"step {i}", tool_call("lines", n=400, tag=f"t{i}")) for i in range(14)]
    queue = [*steps, reply("look back", tool_call("read_dialog")), "done"]

    def script(call: ModelCall):
        if not call.tools:  # the summary call (to the agent's own model): not the agent's turn
            return "The user asked for work; fourteen steps ran."
        return queue.pop(0)

    model = ScriptedChatModel(script)
    context = ContextMiddleware(config(tmp_path))
    agent = make_agent(model, [context], offloader=context.offloader)
    await agent.reply(UserMsg("user", "work"))
    stats = context.manager.stats
    assert stats.compactions >= 1
    assert violations(model) == 0
    assert all(model.counter.count_formatted(c.messages, c.tools) <= 16384 for c in model.calls)
    assert agent.state.summary == context.manager.port.summary.render()
    # every tool result that left the context is in dialog/ with its notice, and the notice's
    # file holds the whole output
    records = list(context.dialog_store.iter_records())
    saved = [b for r in records for b in r.msg.content if isinstance(b, ToolResultBlock)]
    assert saved
    for block in saved:
        notice = split_notice(output(block))
        assert notice is not None
        text = (tmp_path / notice[1].file_path).read_text(encoding="utf-8")
        assert text in {lines(400, f"t{i}") for i in range(14)}
    # the read_dialog call got the saved messages back
    last_result = output(result_blocks(agent)[-1])
    assert "step" in last_result
    # search finds what the messages say (a saved full output too), never their ids or roles
    store = context.dialog_store
    assert store.search("t3 00399") and store.search("lines step")
    assert store.search(records[0].record["id"]) == [] and store.search("assistant") == []


async def test_a_message_appended_during_a_step_is_seen_in_that_step(tmp_path):
    """Within one step the view of the context is synced once and reused (three full scans a
    step cost 2.x's replay ~10% of its hook time), yet a message appended meanwhile (here by an
    event subscriber, after the compaction's own changes) shows at once."""
    steps = [reply(f"step {i}", tool_call("lines", n=400, tag=f"t{i}")) for i in range(14)]
    model = ScriptedChatModel(
        lambda call: (
            "The user asked for work." if not call.tools else steps.pop(0) if steps else "done"
        )
    )
    context = ContextMiddleware(config(tmp_path))
    agent = make_agent(model, [context], offloader=context.offloader)
    seen = []

    def late_note(event) -> None:
        if event.type == "compaction_finished":
            port = context.manager.port
            port.message_ids()  # the step's view, synced
            agent.state.context.append(UserMsg("user", "a late note", id=f"late-{len(seen)}"))
            seen.append((f"late-{len(seen)}", set(port.message_ids())))

    context.subscribe(late_note)
    await agent.reply(UserMsg("user", "work"))
    assert seen and all(any(i.startswith(f"{late}~") for i in ids) for late, ids in seen)


async def test_the_tool_schemas_are_2xs_own_after_every_kind_of_change():
    """ToolSchemas keeps a schema while its tool's name, description and input schema are
    unchanged (2.x deep-copies each one on every call); every change shows at once."""
    from agentscope.tool import ToolGroup

    from agentscope_context_ext.agentscope2._schemas import ToolSchemas

    def spare(x: int) -> str:
        """A spare tool.

        Args:
            x (int): A number.
        """
        return str(x)

    toolkit = tools()
    schemas = ToolSchemas()
    groups: list[str] = []

    async def same() -> list[dict]:
        ours = await schemas(toolkit, groups)
        assert ours == await toolkit.get_tool_schemas(groups)
        return ours

    first = await same()
    assert [id(s) for s in await same()] == [id(s) for s in first], "unchanged: kept"
    lines_tool = toolkit.tool_groups[0].tools[0]
    lines_tool.input_schema["properties"]["n"]["description"] = "How many lines, edited in place."
    await same()
    lines_tool.description = "Return numbered lines (a new description)."
    await same()
    lines_tool.name = "numbered_lines"
    await same()
    lines_tool.name = "lines"
    await toolkit.add_tool(FunctionTool(spare, permission=ALLOW))
    await same()
    await toolkit.add_tool(FunctionTool(spare, name="boom", permission=ALLOW))  # replaces one
    await same()
    toolkit.tool_groups.append(
        ToolGroup(
            "extra", "More tools.", tools=[FunctionTool(spare, name="more", permission=ALLOW)]
        )
    )
    await same()  # the meta tool appears, its schema built from the groups
    groups.append("extra")
    await same()
    toolkit.tool_groups[1].description = "More tools, described again."
    await same()
    await toolkit.remove_tool("lines")
    await same()

    class Filtered(Toolkit):  # a toolkit with schemas of its own is asked for them
        async def get_tool_schemas(self, groups=None):
            return (await super().get_tool_schemas(groups))[:1]

    toolkit = Filtered(tools=tools().tool_groups[0].tools)
    assert len(await same()) == 1


async def test_enable_context_management_on_an_existing_agent_and_detach(tmp_path):
    model = ScriptedChatModel([reply("x", tool_call("lines", n=1500)), "done"])
    agent = make_agent(model)
    before = {
        name: list(getattr(agent, name))
        for name in ("_acting_middlewares", "_compress_context_middlewares")
    }
    manager = enable_context_management(agent, config(tmp_path))
    assert agent.offloader is manager.middleware.offloader
    with pytest.raises(ContextExtError, match="already enabled"):
        enable_context_management(agent, config(tmp_path))
    await agent.reply(UserMsg("user", "go"))
    assert manager.stats.truncations == 1
    names = {t["function"]["name"] for t in await agent.toolkit.get_tool_schemas([])}
    assert {"read_file", "read_dialog", "search_dialog"} <= names
    manager.detach()
    assert agent.offloader is None
    assert not hasattr(agent, "context_manager")
    for name, value in before.items():
        assert getattr(agent, name) == value
    names = {t["function"]["name"] for t in await agent.toolkit.get_tool_schemas([])}
    assert not names & {"read_file", "read_dialog", "search_dialog"}


async def test_the_middleware_added_twice_acts_once(tmp_path):
    model = ScriptedChatModel([reply("x", tool_call("lines", n=1500)), "done"])
    context = ContextMiddleware(config(tmp_path))
    agent = make_agent(model, [context, context])
    await agent.reply(UserMsg("user", "go"))
    stats = context.manager.stats
    assert stats.truncations == 1 and stats.counts["tool_result_truncated"] == 1
    assert result_blocks(agent)[0].metadata == {}
    (record,) = records(agent)
    assert record["stage"] == 1 and record["path"].startswith("tool_result/")


async def test_two_middlewares_on_one_agent_or_one_on_two_agents_are_clear_errors(tmp_path):
    first, second = ContextMiddleware(config(tmp_path)), ContextMiddleware(config(tmp_path))
    agent = make_agent(ScriptedChatModel(["hi"]), [first, second])
    with pytest.raises(ContextExtError, match="one per agent"):
        await agent.reply(UserMsg("user", "go"))
    shared = ContextMiddleware(config(tmp_path))
    await make_agent(ScriptedChatModel(["a"]), [shared]).reply(UserMsg("user", "go"))
    with pytest.raises(ContextExtError, match="of its own"):
        await make_agent(ScriptedChatModel(["b"]), [shared]).reply(UserMsg("user", "go"))


async def test_an_agent_without_a_toolkit_gets_the_tools(tmp_path):
    model = ScriptedChatModel([reply("x", tool_call("read_dialog")), "done"])
    context = ContextMiddleware(config(tmp_path))
    agent = Agent(name="bare", system_prompt="s", model=model, middlewares=[context])
    await agent.reply(UserMsg("user", "go"))
    assert "No dialog has been saved yet" in output(result_blocks(agent)[0])


async def test_a_tool_named_like_ours_is_refused(tmp_path):
    async def read_file(file_path: str) -> str:
        """Theirs.

        Args:
            file_path (str): A path.
        """
        return "theirs"

    toolkit = Toolkit(tools=[FunctionTool(read_file, permission=ALLOW)])
    context = ContextMiddleware(config(tmp_path))
    agent = make_agent(ScriptedChatModel(["x"]), [context], toolkit=toolkit)
    with pytest.raises(ContextExtError, match=r"tools\.read_file: false"):
        await agent.reply(UserMsg("user", "go"))


async def test_parallel_calls_and_a_tool_that_raises(tmp_path):
    calls = [tool_call("lines", n=1500, tag=f"p{i}") for i in range(3)]
    model = ScriptedChatModel(
        [
            reply("three at once", *calls),
            reply("now fail", tool_call("boom", reason="disk")),
            "done",
        ]
    )
    context = ContextMiddleware(config(tmp_path))
    agent = make_agent(model, [context])
    await agent.reply(UserMsg("user", "go"))
    blocks = result_blocks(agent)
    assert [b.id for b in blocks[:3]] == [c.id for c in calls]
    assert all(split_notice(output(b)) for b in blocks[:3])
    assert "tool failed: disk" in output(blocks[3]) and blocks[3].state == "error"
    assert context.manager.stats.truncations == 3
    assert violations(model) == 0


async def test_an_interrupted_reply_leaves_no_orphan_and_the_next_reply_works(tmp_path):
    async def hang(seconds: int) -> str:
        """Wait.

        Args:
            seconds (int): How long.
        """
        raise asyncio.CancelledError()

    toolkit = tools()
    await toolkit.add_tool(FunctionTool(hang, permission=ALLOW))
    model = ScriptedChatModel(
        [
            reply("big", tool_call("lines", n=1500)),
            reply("wait", tool_call("hang", seconds=5)),
            "after",
        ]
    )
    context = ContextMiddleware(config(tmp_path))
    agent = make_agent(model, [context], toolkit=toolkit)
    first = await agent.reply(UserMsg("user", "go"))
    assert first.finished_reason == "interrupted"
    answer = await agent.reply(UserMsg("user", "again"))
    assert answer.get_text_content() == "after"
    assert violations(model) == 0
    assert split_notice(output(result_blocks(agent)[0])) is not None


async def test_a_saved_state_loads_into_a_fresh_agent_with_its_summary(tmp_path):
    steps = [reply(f"step {i}", tool_call("lines", n=400, tag=f"s{i}")) for i in range(12)]
    model = ScriptedChatModel([*steps, "done"])
    context = ContextMiddleware(config(tmp_path))
    agent = make_agent(model, [context])
    await agent.reply(UserMsg("user", "work"))
    assert context.manager.stats.compactions >= 1
    saved = agent.state.model_dump_json()
    count = (await context.manager.count()).total

    fresh_model = ScriptedChatModel(["resumed"])
    fresh_context = ContextMiddleware(config(tmp_path))
    fresh = make_agent(fresh_model, [fresh_context], state=AgentState.model_validate_json(saved))
    manager = fresh_context.bind(fresh)
    assert manager.port.summary is not None
    assert manager.port.summary.render() == agent.state.summary
    assert (await manager.count()).total == count
    await fresh.reply(UserMsg("user", "continue"))
    assert agent.state.summary in fresh_model.calls[0].text


async def test_a_summary_written_by_2x_itself_is_kept_and_saved_when_compacted(tmp_path):
    state = AgentState(summary="<system-info>Earlier: the user wants report-7781.</system-info>")
    steps = [reply(f"step {i}", tool_call("lines", n=400)) for i in range(12)]
    model = ScriptedChatModel([*steps, "done"])
    # the answers go in order: a summary asked ahead would take an agent step's (design §4.6)
    context = ContextMiddleware(config(tmp_path, compaction={"background_summary": False}))
    agent = make_agent(model, [context], state=state)
    await agent.reply(UserMsg("user", "work"))
    assert "report-7781" in model.calls[0].text
    assert context.manager.stats.compactions >= 1
    dialog = "\n".join(p.read_text(encoding="utf-8") for p in (tmp_path / "dialog").glob("*.jsonl"))
    assert "report-7781" in dialog


async def test_memory_md_is_in_the_system_prompt_and_the_summarizer_writes_it(tmp_path):
    def script(call: ModelCall):
        system = call.messages[0]["content"]
        system = system if isinstance(system, str) else system[0]["text"]
        if system.startswith("You maintain Memory.md"):
            if not any(m.get("role") == "tool" for m in call.messages):
                return reply(
                    None, tool_call("memory_append", section="Facts", text="port 8443 is the API")
                )
            return "noted"
        index = sum(1 for m in call.messages if m.get("role") == "tool")
        return reply(f"s{index}", tool_call("lines", n=400)) if index < 12 else "done"

    model = ScriptedChatModel(script)
    context = ContextMiddleware(config(tmp_path, long_term_memory={"enabled": True}))
    agent = make_agent(model, [context])
    await agent.reply(UserMsg("user", "work"))
    await context.manager.drain()
    assert "port 8443 is the API" in (tmp_path / "Memory.md").read_text(encoding="utf-8")
    await agent.reply(UserMsg("user", "and now?"))
    await context.manager.drain()
    # the agent's last call (Summarizer jobs of later compactions may have run after it)
    agent_calls = [c for c in model.calls if "You work with tools" in json.dumps(c.messages[0])]
    assert "port 8443 is the API" in json.dumps(agent_calls[-1].messages[0])


@pytest.mark.parametrize("stream", [False, True])
async def test_the_providers_usage_is_compared_with_our_count(tmp_path, stream):
    model = ScriptedChatModel([reply("reading", tool_call("lines", n=20)), "done"], stream=stream)
    context = ContextMiddleware(config(tmp_path, calibrate_with_usage=True))
    agent = make_agent(model, [context])
    await agent.reply(UserMsg("user", "work"))
    stats = context.manager.stats
    # the scripted model reports the exact Qwen count of what it was sent; ours counts the
    # same prompt with the same vocabulary from the context (2.x's formatting adds a little)
    assert stats.token_count_error is not None
    assert abs(stats.token_count_error) < 0.05
    assert context.manager.pipeline.count.calibration != 0 or stats.token_count_error == 0


async def test_the_usage_is_compared_with_the_prompt_that_was_sent(tmp_path):
    from agentscope.middleware import MiddlewareBase

    class GrowingPrompt(MiddlewareBase):
        """A system prompt that differs every time it is built (a clock, a counter)."""

        calls = 0

        async def on_system_prompt(self, agent, current_prompt: str) -> str:
            self.calls += 1
            return current_prompt + "\n" + "tick " * (500 * self.calls)

    model = ScriptedChatModel([reply("reading", tool_call("lines", n=20)), "done"])
    context = ContextMiddleware(config(tmp_path))
    agent = make_agent(model, [GrowingPrompt(), context])
    await agent.reply(UserMsg("user", "work"))
    # ours is compared with the provider's count of the prompt it was sent, not of a system
    # prompt built again after the call (which here has grown by 500 tokens)
    assert context.stats.token_count_error is not None
    assert abs(context.stats.token_count_error) < 0.05


def test_a_studio_url_where_no_studio_listens_is_a_one_line_error(tmp_path, capsys):
    from agentscope_context_ext.cli import main

    code = main(["demo", "--studio-url", "http://127.0.0.1:9", "--out", str(tmp_path)])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "cannot reach AgentScope Studio at http://127.0.0.1:9" in err
    assert "\n" not in err and not (tmp_path / "report.json").exists(), "nothing ran"


def png(data: bytes, name: str | None = None) -> DataBlock:
    """An inline PNG block of ``data`` (named when ``name`` is given)."""
    source = Base64Source(data=base64.b64encode(data).decode(), media_type="image/png")
    return DataBlock(source=source) if name is None else DataBlock(name=name, source=source)


def zip_message(payload: bytes) -> UserMsg:
    """A user message with a file the scripted model's formatter does not take (a zip)."""
    return UserMsg(
        "user",
        [
            TextBlock(text="unpack this"),
            DataBlock(
                name="bundle.zip",
                source=Base64Source(
                    data=base64.b64encode(payload).decode(), media_type="application/zip"
                ),
            ),
        ],
    )


@pytest.mark.parametrize("backend", ["local", "redis"])
async def test_an_input_file_the_model_cannot_take_is_saved_on_either_backend(
    tmp_path, request, backend
):
    payload = bytes(range(256)) * 64
    workspace = tmp_path if backend == "local" else request.getfixturevalue("redis_url")
    model = ScriptedChatModel(["done"])
    context = ContextMiddleware(config(workspace))
    agent = make_agent(model, [context], offloader=context.offloader)
    await agent.reply(zip_message(payload))
    first = agent.state.context[0]
    hint = "".join(b.text for b in first.content if isinstance(b, TextBlock))
    # 2.x replaces the block by a reminder naming where the offloader saved it ...
    assert "named 'bundle.zip' is saved into " in hint, hint
    url = hint.split("saved into ", 1)[1].split("</system-reminder>", 1)[0].rstrip(".")
    if backend == "local":
        assert url.startswith("file://")
        key = "tool_result/" + url.rsplit("/", 1)[1]
    else:
        assert url.startswith("redis://") and "#tool_result/" in url
        key = url.rsplit("#", 1)[1]
    # ... and the bytes are there, exactly
    assert context.storage.read(key) == payload


async def test_an_input_file_that_cannot_be_saved_stops_the_reply_and_drops_nothing(
    tmp_path, monkeypatch
):
    model = ScriptedChatModel(["done"])
    context = ContextMiddleware(config(tmp_path))
    agent = make_agent(model, [context], offloader=context.offloader)

    monkeypatch.setattr(context.tool_result_store, "save_media", disk_full)
    with pytest.raises(WorkspaceError, match=r"No space left on device.*nothing was dropped"):
        await agent.reply(zip_message(b"PK\x03\x04 data"))
    # the message did not enter the context with its file replaced by a 'removed' hint
    assert not any(
        "unsupported input file" in getattr(b, "text", "")
        for m in agent.state.context
        for b in m.content
    )


@pytest.mark.parametrize("backend", ["local", "redis"])
async def test_max_image_num_applies_and_every_image_it_takes_out_is_saved(
    tmp_path, request, backend
):
    images = [b"\x89PNG\r\n\x1a\n" + bytes([i]) * 300 for i in range(7)]
    workspace = tmp_path if backend == "local" else request.getfixturevalue("redis_url")
    model = ScriptedChatModel(["seen"] * 7)
    context = ContextMiddleware(config(workspace))
    # no offloader in the constructor: the middleware sets its own (2.x would drop the images)
    agent = make_agent(model, [context])
    for i, data in enumerate(images):
        block = png(data, f"shot{i}.png")
        # the image between two texts: replaced in place, its message looks the same from
        # outside (same first and last block)
        content = [TextBlock(text=f"look at {i}"), block, TextBlock(text="what is it?")]
        await agent.reply(UserMsg("user", content))
    assert agent.offloader is context.offloader
    kept = [b for m in agent.state.context for b in m.content if isinstance(b, DataBlock)]
    assert len(kept) == agent.context_config.max_image_num == 5
    reminders = [
        b.text
        for m in agent.state.context
        for b in m.content
        if isinstance(b, TextBlock) and "is offloaded into" in b.text
    ]
    # the two oldest went out (2.x runs the limit before its count: after the 6th and 7th
    # image arrived), each saved byte for byte where its reminder says
    assert len(reminders) == 2
    for text, data, name in zip(reminders, images[:2], ("shot0.png", "shot1.png"), strict=True):
        assert f"named '{name}'" in text
        url = text.split("offloaded into ", 1)[1].split(", you can", 1)[0]
        key = url.rsplit("#", 1)[1] if backend == "redis" else "tool_result/" + url.rsplit("/")[-1]
        assert context.storage.read(key) == data
    # the prompt the model got last holds five images, and our count saw the change
    last = model.calls[-1].messages
    assert sum(json.dumps(m).count("data:image/png;base64,") for m in last) == 5
    # the scripted model reports the exact count of each prompt; ours matched it (an image
    # replaced in place and still counted would be 1,280 tokens off)
    assert abs(context.manager.stats.token_count_error) < 0.05


async def test_max_image_num_applies_to_images_inside_tool_results(tmp_path):
    async def screenshots() -> AsyncGenerator[ToolChunk, None]:
        """Take six screenshots."""
        yield ToolChunk(
            content=[png(b"\x89PNG" + bytes([i]) * 200, f"shot{i}.png") for i in range(6)]
        )

    model = ScriptedChatModel([reply("looking", tool_call("screenshots")), "seen", "ok"])
    context = ContextMiddleware(config(tmp_path))
    toolkit = Toolkit(tools=[FunctionTool(screenshots, permission=ALLOW)])
    agent = make_agent(model, [context], toolkit=toolkit, offloader=context.offloader)
    await agent.reply(UserMsg("user", "look"))
    await agent.reply(UserMsg("user", "and now?"))
    # six images in one tool result, five allowed: the oldest went out, saved, before the
    # model saw the context again (the images sit in a tool result's output, not at the top)
    images = [
        item
        for block in result_blocks(agent)
        if isinstance(block.output, list)
        for item in block.output
        if isinstance(item, DataBlock)
    ]
    assert len(images) == agent.context_config.max_image_num == 5
    assert "shot0.png" not in {image.name for image in images}
    last = model.calls[-1].messages
    assert sum(json.dumps(m).count("data:image/png;base64,") for m in last) == 5


async def test_an_image_the_limit_takes_out_of_a_hint_is_counted_out(tmp_path):
    from agentscope.message import AssistantMsg, HintBlock

    shots = [png(b"\x89PNG" + bytes([i]) * 200, f"hint{i}.png") for i in range(6)]
    model = ScriptedChatModel(["seen", "seen too"])
    context = ContextMiddleware(config(tmp_path))
    agent = make_agent(model, [context], offloader=context.offloader)
    agent.state.context.append(AssistantMsg("worker", [HintBlock(hint=shots[:5])]))
    await agent.reply(UserMsg("user", "what do the hints show?"))  # five: counted as they are
    await agent.reply(UserMsg("user", [TextBlock(text="and this one?"), shots[5]]))
    hint = agent.state.context[0].content[0]
    assert [item.name for item in hint.hint if isinstance(item, DataBlock)] == [
        f"hint{i}.png" for i in range(1, 5)
    ]
    # the image 2.x replaced inside the hint left our count too: the scripted model reports
    # the exact count of the prompt it got (an image still counted is ~1,280 tokens off)
    assert abs(context.stats.token_count_error) < 0.05


async def test_an_image_that_cannot_be_saved_stays_in_the_context(tmp_path, monkeypatch):
    model = ScriptedChatModel(["seen"] * 7)
    context = ContextMiddleware(config(tmp_path))
    agent = make_agent(model, [context], offloader=context.offloader)

    monkeypatch.setattr(context.tool_result_store, "save_media", disk_full)
    for i in range(7):
        block = png(bytes([i]) * 50)
        await agent.reply(UserMsg("user", [TextBlock(text=f"look at {i}"), block]))
    kept = [b for m in agent.state.context for b in m.content if isinstance(b, DataBlock)]
    assert len(kept) == 7, "an image 2.x would have dropped without a copy is still there"
    assert not any(
        "removed to free up" in getattr(b, "text", "")
        for m in agent.state.context
        for b in m.content
    )


async def stream_lines(n: int) -> AsyncGenerator[ToolChunk, None]:
    """Stream numbered lines, 40 per chunk.

    Args:
        n (int): How many lines.
    """
    text = lines(n, "s")
    rows = text.split("\n")
    for start in range(0, n, 40):
        part = "\n".join(rows[start : start + 40]) + ("\n" if start + 40 < n else "")
        yield ToolChunk(content=[TextBlock(id="out", text=part)])


def digits(n: int) -> str:
    """n rows of single digits and commas: about a token a byte."""
    return "".join(",".join(str((r * 7 + c) % 10) for c in range(30)) + "\n" for r in range(n))


async def stream_digits(n: int) -> AsyncGenerator[ToolChunk, None]:
    """Stream rows of digits, 4 per chunk.

    Args:
        n (int): How many rows.
    """
    for start in range(0, n, 4):
        yield ToolChunk(content=[TextBlock(id="out", text=digits(min(n, start + 4))[start * 60 :])])


async def shown_tool_texts(agent: Agent, msg: UserMsg) -> tuple[dict[str, str], dict[str, int]]:
    """What a UI of ``agent.reply_stream`` shows of each tool result, and how many deltas."""
    shown: dict[str, str] = {}
    deltas: dict[str, int] = {}
    async for event in agent.reply_stream(msg):
        if isinstance(event, ToolResultTextDeltaEvent):
            shown[event.tool_call_id] = shown.get(event.tool_call_id, "") + event.delta
            deltas[event.tool_call_id] = deltas.get(event.tool_call_id, 0) + 1
    return shown, deltas


@pytest.mark.parametrize("tool", ["lines", "stream_lines", "stream_digits"])
@pytest.mark.parametrize("n", [30, 1500])
async def test_the_event_stream_shows_what_the_model_gets(tmp_path, tool, n):
    model = ScriptedChatModel([reply("reading", tool_call(tool, n=n)), "done"])
    context = ContextMiddleware(config(tmp_path))
    toolkit = tools()
    await toolkit.add_tool(FunctionTool(stream_lines, permission=ALLOW))
    await toolkit.add_tool(FunctionTool(stream_digits, permission=ALLOW))
    agent = make_agent(model, [context], toolkit=toolkit)
    shown, deltas = await shown_tool_texts(agent, UserMsg("user", "work"))
    (block,) = result_blocks(agent)
    got = output(block)
    # a UI of the event stream shows exactly what the model got: the cut text with its notice
    # (digits are about a token a byte: stage one cuts them by tokens, far below its byte limit)
    assert shown[block.id] == got
    full = {"lines": lines(n, "line"), "stream_lines": lines(n, "s"), "stream_digits": digits(n)}
    if n == 1500:
        assert split_notice(got) is not None and len(got) < len(full[tool]) // 4
        if tool != "lines":  # the start still streamed, chunk by chunk
            assert deltas[block.id] > 2
    else:
        assert got == full[tool]
        assert deltas[block.id] == (1 if tool != "stream_digits" else 8)  # chunks as they were


async def stream_surrogates(n: int) -> AsyncGenerator[ToolChunk, None]:
    """Stream lines that hold a lone surrogate, 40 per chunk.

    Args:
        n (int): How many lines.
    """
    for start in range(0, n, 40):
        part = "".join(
            f"{i:05d} bad \ud800 byte \udcff\n" for i in range(start, min(n, start + 40))
        )
        yield ToolChunk(content=[TextBlock(id="out", text=part)])


@pytest.mark.parametrize("n", [30, 6000])
async def test_a_streamed_output_s_lone_surrogates_are_replaced_in_its_events(tmp_path, n):
    """Issue 50: the chunks of a streamed output went out as events with their lone surrogates
    (a served stream cannot encode them), whether stage one cut the output or not."""
    model = ScriptedChatModel([reply("reading", tool_call("stream_surrogates", n=n)), "done"])
    context = ContextMiddleware(config(tmp_path))
    toolkit = tools()
    await toolkit.add_tool(FunctionTool(stream_surrogates, permission=ALLOW))
    agent = make_agent(model, [context], toolkit=toolkit)
    shown, _ = await shown_tool_texts(agent, UserMsg("user", "work"))
    (block,) = result_blocks(agent)
    got = output(block)
    assert shown[block.id] == got, "the events show what the model got"
    got.encode("utf-8")
    assert "00000 bad \ufffd byte \ufffd\n" in got
    assert (split_notice(got) is not None) == (n == 6000)
    agent.state.model_dump_json()


async def test_a_streamed_output_that_cannot_be_saved_is_shown_and_kept_whole(
    tmp_path, monkeypatch
):
    model = ScriptedChatModel([reply("reading", tool_call("stream_lines", n=1500)), "done"])
    context = ContextMiddleware(config(tmp_path))
    toolkit = tools()
    await toolkit.add_tool(FunctionTool(stream_lines, permission=ALLOW))
    agent = make_agent(model, [context], toolkit=toolkit)

    monkeypatch.setattr(context.tool_result_store, "save", disk_full)
    shown: dict[str, str] = {}
    deltas = 0
    # the next prompt would be over the window with the output whole: refused, as designed
    with pytest.raises(WorkspaceWriteError, match="No space left on device"):
        async for event in agent.reply_stream(UserMsg("user", "work")):
            if isinstance(event, ToolResultTextDeltaEvent):
                shown[event.tool_call_id] = shown.get(event.tool_call_id, "") + event.delta
                deltas += 1
    (block,) = result_blocks(agent)
    # stage one could not save the whole text, so it did not cut: the held chunks followed
    assert output(block) == lines(1500, "s") == shown[block.id]
    assert deltas == len(range(0, 1500, 40))


def test_a_block_added_to_a_message_already_made_sendable_is_made_sendable_too(tmp_path):
    """The port looks only at blocks added since its last look (2.x appends to a reply's
    message), and again at a whole message whose last block is no longer the one it saw."""
    from agentscope.message import AssistantMsg

    context = ContextMiddleware(config(tmp_path))
    agent = make_agent(ScriptedChatModel(["hi"]), [context])
    port = context.bind(agent).port
    msg = AssistantMsg("worker", [TextBlock(text="fine")])
    agent.state.context.append(msg)
    port.make_sendable()
    msg.content.append(TextBlock(text="bad \ud800 byte"))  # appended after the look
    port.make_sendable()
    assert msg.content[1].text == "bad \ufffd byte"
    msg.content[:] = [TextBlock(text="replaced \udfff whole")]  # a new last block
    port.make_sendable()
    assert msg.content[0].text == "replaced \ufffd whole"
    agent.state.model_dump_json()  # saveable
