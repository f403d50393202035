"""What AgentScope 2.x does without the middleware, it does with it: the same stored messages and
events for a reply we have nothing to do in, its read-before-edit guard after our compaction, its
``tool_result_limit`` where it is the stricter, and an agent whose window we cannot help handed
back to 2.x. Also what stands in for the behaviours of 2.x's own compression, which the middleware
replaces (docs/agent.md, "Compatibility with AgentScope's own context handling").

``bench/agentscope_tests.py`` runs AgentScope's own agent tests with the middleware added to every
agent; these tests pin here what those found."""

from __future__ import annotations

import json
import logging
from pathlib import Path

from agentscope.agent import Agent, ContextConfig, InjectionConfig, ReActConfig
from agentscope.message import HintBlock, ToolResultBlock, UserMsg
from agentscope.permission import (
    PermissionBehavior,
    PermissionContext,
    PermissionDecision,
    PermissionMode,
)
from agentscope.state import AgentState
from agentscope.tool import Edit, FunctionTool, Read, Toolkit
from agentscope.workspace import LocalWorkspace

from agentscope_context_ext import ContextMiddleware
from agentscope_context_ext.core.pipeline import TOOLS_SHARE, tool_name
from agentscope_context_ext.core.summary import CompactSummary
from agentscope_context_ext.testing import ModelCall, ScriptedChatModel, reply, tool_call

ALLOW = PermissionDecision(behavior=PermissionBehavior.ALLOW, message="test tool")
OURS = {
    "read_file",
    "read_dialog",
    "search_dialog",
    "memory_read",
    "memory_append",
    "memory_edit",
    "daily_note",
}


def lines(n: int) -> str:
    """Return n numbered lines.

    Args:
        n (int): How many lines.
    """
    return "\n".join(f"line {i:05d} " + "x" * 80 for i in range(n))


def config(workspace: Path, **extra) -> dict:
    return {"workspace": str(workspace), "notices": False, **extra}


def make_agent(model, middlewares=(), tools=(), **kwargs) -> Agent:
    kwargs.setdefault("react_config", ReActConfig(max_iters=20))
    return Agent(
        name="worker",
        system_prompt="You work with tools.",
        model=model,
        toolkit=Toolkit(tools=[FunctionTool(lines, permission=ALLOW), *tools]),
        middlewares=list(middlewares),
        **kwargs,
    )


def plain(dumped: object) -> object:
    """A dump without what differs between two runs (ids, times)."""
    if isinstance(dumped, dict):
        return {
            key: plain(value)
            for key, value in dumped.items()
            # ids and times differ between runs; the token counts by our tools' schemas
            if key not in {"id", "created_at", "finished_at", "usage", "input_tokens"}
            and not key.endswith("_id")
        }
    if isinstance(dumped, list):
        return [plain(item) for item in dumped]
    return dumped


async def run(middlewares) -> tuple[list, list]:
    model = ScriptedChatModel([reply("counting", tool_call("lines", n=3)), "three lines"])
    # 2.x's runtime-state hint reports the prompt's size, which our tools' schemas change
    agent = make_agent(
        model, middlewares, injection_config=InjectionConfig(inject_runtime_state=False)
    )
    events = [
        plain(e.model_dump(mode="json")) async for e in agent.reply_stream(UserMsg("user", "go"))
    ]
    context = [plain(m.model_dump(mode="json")) for m in agent.state.context]
    return events, context


async def test_a_reply_we_have_nothing_to_do_in_is_what_agentscope_makes(tmp_path):
    without = await run([])
    with_us = await run([ContextMiddleware(config(tmp_path))])
    # the same events in the same places (none of ours: no cut, no compaction, no no-op
    # consolidation), and the stored messages as 2.x made them (no records in a metadata)
    assert with_us == without


async def test_our_events_go_out_at_the_replys_end(tmp_path):
    context = ContextMiddleware(config(tmp_path))
    model = ScriptedChatModel([reply("reading", tool_call("lines", n=3000)), "done"])
    agent = make_agent(model, [context])
    types = [e.type async for e in agent.reply_stream(UserMsg("user", "go"))]
    ours = [i for i, name in enumerate(types) if name == "CUSTOM"]
    assert ours, "the cut is reported"
    end = types.index("REPLY_END")
    assert ours == list(range(end - len(ours), end)), types


def bypass() -> AgentState:
    return AgentState(permission_context=PermissionContext(mode=PermissionMode.BYPASS))


async def test_an_edit_after_its_read_was_compacted_away_is_refused(tmp_path):
    target = tmp_path / "notes.txt"
    target.write_text("alpha\nbeta\n", encoding="utf-8")
    model = ScriptedChatModel(
        [
            reply("reading", tool_call("Read", file_path=str(target))),
            "read it",
            reply("more", tool_call("lines", n=2000)),
            "got them",
            reply(
                "editing",
                tool_call("Edit", file_path=str(target), old_string="beta", new_string="gamma"),
            ),
            "edited?",
        ]
    )
    context = ContextMiddleware(
        config(tmp_path / "ws", max_input_tokens=32768, compaction={"model": "extractive"})
    )
    agent = make_agent(model, [context], [Read(), Edit()], state=bypass())
    await agent.reply(UserMsg("user", "read notes.txt"))
    assert await agent.state.tool_context.get_cache(str(target)) is not None
    await agent.reply(UserMsg("user", "now the lines"))
    await context.manager.compact_now()
    assert not any(
        b.name == "Read" for m in agent.state.context for b in m.content if b.type == "tool_call"
    ), "the read was compacted away"
    await agent.reply(UserMsg("user", "change beta to gamma"))
    (edit,) = [
        b
        for m in agent.state.context
        for b in m.content
        if isinstance(b, ToolResultBlock) and b.name == "Edit"
    ]
    assert "you must first read it" in edit.output[0].text
    assert target.read_text(encoding="utf-8") == "alpha\nbeta\n"


async def test_a_read_kept_in_the_context_keeps_its_cache(tmp_path):
    """Of two files read, the one whose ``Read`` the compaction folds loses its cache; the one
    whose ``Read`` stays keeps it (2.x's rule: the reads the kept context still shows)."""
    from agentscope.message import AssistantMsg, ToolCallBlock

    old, new = tmp_path / "old.txt", tmp_path / "new.txt"

    def read_step(path: Path, call_id: str) -> AssistantMsg:
        call = ToolCallBlock(id=call_id, name="Read", input=json.dumps({"file_path": str(path)}))
        result = ToolResultBlock(id=call_id, name="Read", output="     1\tx")
        return AssistantMsg("worker", [call, result])

    context = ContextMiddleware(config(tmp_path / "ws"))
    agent = make_agent(ScriptedChatModel(["hi"]), [context], [Read()], state=bypass())
    agent.state.context.extend([read_step(old, "r1"), read_step(new, "r2")])
    for path in (old, new):
        path.write_text("x\n", encoding="utf-8")
        await agent.state.tool_context.cache_file(file_path=str(path), lines=["x\n"])
    port = context.bind(agent).port
    await port.remove(port.message_ids()[:1])  # what a compaction does with what it folded
    assert await agent.state.tool_context.get_cache(str(old)) is None
    assert await agent.state.tool_context.get_cache(str(new)) is not None


async def offered(tmp_path: Path, window: int) -> tuple[set[str], int]:
    model = ScriptedChatModel(["hi"], context_size=window)
    context = ContextMiddleware(config(tmp_path))
    agent = make_agent(model, [context])
    await agent.reply(UserMsg("user", "hi"))
    shown = [t for t in model.calls[0].tools or [] if tool_name(t) in OURS]
    return {tool_name(t) for t in shown}, context.manager.counter.count_tools(shown)


async def test_our_tools_take_a_tenth_of_the_window_at_most(tmp_path):
    names, cost = await offered(tmp_path / "a", 131072)
    # what can be of use on a fresh agent: nothing to edit or re-read in an empty Memory.md,
    # no dialog to read yet
    assert names == {"read_file", "memory_append", "daily_note"}
    assert cost <= 400
    for window in (1000, 2000, 4096):
        names, cost = await offered(tmp_path / str(window), window)
        assert cost <= window * TOOLS_SHARE, (window, names)


async def test_memory_edit_and_read_are_offered_when_memory_md_has_something(tmp_path):
    (tmp_path / "Memory.md").write_text("## Facts\n- The API listens on 8443.\n", encoding="utf-8")
    names, _ = await offered(tmp_path, 131072)
    assert {"memory_edit", "memory_append"} <= names
    assert "memory_read" not in names  # the prompt shows the whole file


async def test_an_agent_its_window_cannot_hold_is_handed_back_to_agentscope(tmp_path, caplog):
    """The system prompt alone is over the compaction trigger: nothing of ours can help, so the
    middleware detaches at first use, saying so once, and 2.x's own compression runs."""
    model = ScriptedChatModel(["first", "second"], context_size=200)
    context = ContextMiddleware(config(tmp_path))
    agent = Agent(
        name="worker",
        system_prompt="You are thorough. " * 60,
        model=model,
        middlewares=[context],
    )
    with caplog.at_level(logging.WARNING, logger="agentscope_context_ext"):
        await agent.reply(UserMsg("user", "hello " * 50))
        await agent.reply(UserMsg("user", "again"))
    lines_said = [r.message for r in caplog.records if "context management is off" in r.message]
    assert len(lines_said) == 1 and "worker" in lines_said[0]
    assert context.manager.detached and agent.offloader is None
    assert not {t["function"]["name"] for t in await agent.toolkit.get_tool_schemas(None)} & OURS
    # 2.x's own compression ran (its summary failed on the scripted model: it truncated)
    assert context.stats.compactions == 0
    assert "Some earlier messages were truncated" in str(agent.state.summary)


async def test_a_stricter_tool_result_limit_is_agentscopes_to_apply(tmp_path):
    """2.x's ``tool_result_limit`` would cut even our excerpt: the result is left to 2.x's split,
    whose offloader (here the user's ``LocalWorkspace``) holds the rest."""
    workdir = tmp_path / "local"
    model = ScriptedChatModel([reply("reading", tool_call("lines", n=2000)), "done"])
    context = ContextMiddleware(config(tmp_path / "ws"))
    agent = make_agent(
        model,
        [context],
        offloader=LocalWorkspace(workdir=str(workdir)),
        context_config=ContextConfig(tool_result_limit=500),
        state=AgentState(session_id="s1"),
    )
    await agent.reply(UserMsg("user", "go"))
    (result,) = [
        b for m in agent.state.context for b in m.content if isinstance(b, ToolResultBlock)
    ]
    text = result.output[0].text
    assert "<system-reminder>The remaining content has been omitted" in text
    (saved,) = (workdir / "sessions" / "s1").glob("tool_result-*.txt")
    kept = text.split("\n<<<TRUNCATED>>>\n", 1)[0]
    assert kept + saved.read_text(encoding="utf-8") == lines(2000)
    assert context.stats.truncations == 0  # ours left it to 2.x


async def test_a_looser_tool_result_limit_sees_our_excerpt_only(tmp_path):
    model = ScriptedChatModel([reply("reading", tool_call("lines", n=2000)), "done"])
    context = ContextMiddleware(config(tmp_path, max_input_tokens=32768))
    agent = make_agent(model, [context], offloader=context.offloader)
    await agent.reply(UserMsg("user", "go"))
    (result,) = [
        b for m in agent.state.context for b in m.content if isinstance(b, ToolResultBlock)
    ]
    assert "<<<TRUNCATED>>>\nThe output above was truncated." in result.output[0].text
    assert "system-reminder" not in result.output[0].text  # 2.x's split found nothing to cut
    assert context.stats.truncations == 1


# --- what stands in for 2.x's own compression ------------------------------------------------


async def test_the_instructions_2x_passes_reach_our_summary(tmp_path):
    """``compress_context(instructions=HintBlock(...))`` (2.x's hint to its summary writer) is
    the instruction our summary call gets."""
    seen: list[str] = []

    def respond(call: ModelCall) -> object:
        text = str(call.messages)
        if "Keep every port number" in text:
            seen.append(text)
        if call.index == 0:
            return reply("reading", tool_call("lines", n=1500))
        return "done" if call.index == 1 else "## Goal\n- read\n## Progress\n- read lines"

    model = ScriptedChatModel(respond)
    context = ContextMiddleware(config(tmp_path, max_input_tokens=32768))
    agent = make_agent(model, [context])
    await agent.reply(UserMsg("user", "go"))
    await agent.reply(UserMsg("user", "and?"))
    await agent.compress_context(
        context_config=agent.context_config,
        instructions=HintBlock(hint="Keep every port number."),
    )
    assert context.stats.compactions == 1 and seen


async def test_a_failed_summary_still_shrinks_the_context(tmp_path):
    """2.x truncates when its summary fails; ours falls back to the extractive summary: the
    context shrinks, nothing is lost, no error text becomes the summary."""

    def respond(call: ModelCall) -> object:
        if call.index == 0:
            return reply("reading", tool_call("lines", n=1500))
        if call.index == 1:
            return "done"
        raise RuntimeError("the summary model is down")

    model = ScriptedChatModel(respond)
    context = ContextMiddleware(config(tmp_path, max_input_tokens=32768))
    agent = make_agent(model, [context])
    await agent.reply(UserMsg("user", "go"))
    before = len(agent.state.context)
    await context.manager.compact_now()
    summary = CompactSummary.model_validate(
        agent.state.middle_context["agentscope_context_ext"]["summary"]
    )
    assert summary.source == "extractive" and "summary model is down" not in summary.render()
    assert context.stats.compactions == 1
    assert len(agent.state.context) < before or not agent.state.context


async def test_the_offload_pointer_is_not_repeated(tmp_path):
    """2.x adds its offload reminder once; our summary names each dialog file once, with its
    line ranges, however many compactions wrote to it."""
    model = ScriptedChatModel(
        [
            reply("a", tool_call("lines", n=1500)),
            "one",
            reply("b", tool_call("lines", n=1500)),
            "two",
        ]
    )
    context = ContextMiddleware(
        config(tmp_path, max_input_tokens=32768, compaction={"model": "extractive"})
    )
    agent = make_agent(model, [context])
    for ask in ("first", "second"):
        await agent.reply(UserMsg("user", ask))
        await context.manager.compact_now()
    assert context.stats.compactions == 2
    guide = agent.state.summary.split("## Raw Dialog", 1)[1]
    files = {ref.file for ref in context.manager.port.summary.dialog_refs}
    assert files
    for file in files:
        assert guide.count(f"- {file} lines") == 1, guide
