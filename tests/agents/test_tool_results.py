"""The two truncation stages (design §3.2-3.4; issue 12's bugs) on a managed agent of the
installed AgentScope, with core tools (plain functions returning text): a file read whole is cut
later with a notice to its source, stage two's saves are counted, the batched policy keeps every
prompt a byte-for-byte extension of the previous one, a 200 KB result is cut, saved, read back
and cut again, and the window share caps stage one. Images in a tool result, counted by their
media cost and replaced by a saved copy once old, run framework-free on the neutral port (a
core tool answers text only) and on a 1.x agent's own image blocks. Stage one inside the tool
call, before a result is printed (issue 17), uses 1.x's print hook and tool responses: marked
``agentscope1`` (2.x shows what the model gets on its event stream, see agentscope2/test_agentscope2_adapter.py)."""

from __future__ import annotations

import base64
from itertools import pairwise
from pathlib import Path

import pytest
from harness_common import BIG, make_text, tool_message_text, tool_messages
from installed_harness import (
    FORMATTERS,
    is_agent_call,
    managed,
    result_text,
    scripted_session,
)
from neutral_port import NeutralAgent, NeutralManager, assistant

from agentscope_context_ext import get_token_counter, split_notice
from agentscope_context_ext.compat import agentscope_major
from agentscope_context_ext.core.messages import Media, ToolCall
from agentscope_context_ext.testing import ModelCall, ScriptedChatModel, reply, tool_call

if agentscope_major() < 2:  # the tests marked agentscope1
    from agentscope.agent import ReActAgent
    from agentscope.formatter import DashScopeChatFormatter
    from agentscope.message import Msg, TextBlock
    from agentscope.tool import Toolkit, ToolResponse

    from agentscope_context_ext import enable_context_management

    from agent_harness import result_text as msg_result_text
    from agent_harness import tool_ids

MODULE_BYTES = 27 * 1024


async def note(text: str) -> str:
    """Write a note.

    Args:
        text (str): The note.
    """
    return f"noted {text}"


async def fetch(size_kb: int) -> str:
    """Fetch a document.

    Args:
        size_kb (int): Size in KiB.
    """
    return make_text(size_kb * 1024, 3)


def _agent(script, workspace: Path, root: Path, **truncation):
    config = {
        "workspace": str(workspace),
        "tools": {"allowed_roots": [str(root)]},
        "long_term_memory": {"enabled": False},
    }
    if truncation:
        config["truncation"] = truncation
    model = ScriptedChatModel(script)
    return managed(model, config, tools=[note, fetch], max_iters=50), model


async def test_a_file_read_whole_is_cut_at_stage_two_with_a_notice_to_the_source(
    workspace: Path, tmp_path: Path
) -> None:
    """A read_file result is never copied: read whole at stage one (under the limit, no notice),
    cut later by stage two, its notice points at the source file and nothing is saved."""
    root = tmp_path / "project"
    root.mkdir()
    module = root / "module.py"
    module.write_text(make_text(MODULE_BYTES, 9), encoding="utf-8")
    script = [reply("Reading.", tool_call("read_file", "r1", file_path=str(module)))]
    script += [reply(f"note {i}", tool_call("note", f"n{i}", text=str(i))) for i in range(5)]
    script += ["Done."]
    agent, _ = _agent(script, workspace, root)
    assert await agent.ask("Read module.py, then take five notes.") == "Done."

    text = result_text(agent, "r1")
    parts = split_notice(text)
    assert parts is not None, "stage two cut the old read"
    excerpt, notice = parts
    assert notice.file_path == str(module)
    assert module.read_text(encoding="utf-8").startswith(excerpt)
    saved = (
        list((workspace / "tool_result").glob("*")) if (workspace / "tool_result").is_dir() else []
    )
    assert saved == [], "no copy of a read_file result is ever saved"
    assert agent.manager.stats.bytes_offloaded == 0


async def test_bytes_offloaded_counts_what_stage_two_saves(workspace: Path, tmp_path: Path) -> None:
    """A 27 KB result under the stage-one limit is saved whole when stage two cuts it: the
    stat counts those bytes."""
    script = [reply("Fetching.", tool_call("fetch", "f1", size_kb=27))]
    script += [reply(f"note {i}", tool_call("note", f"n{i}", text=str(i))) for i in range(5)]
    script += ["Done."]
    agent, _ = _agent(script, workspace, tmp_path)
    assert await agent.ask("Fetch, then take five notes.") == "Done."
    manager = agent.manager

    parts = split_notice(result_text(agent, "f1"))
    assert parts is not None and parts[1].file_path.startswith("tool_result/")
    saved = workspace / parts[1].file_path
    assert saved.read_text(encoding="utf-8") == make_text(27 * 1024, 3)
    assert manager.stats.retruncations >= 1
    assert manager.stats.bytes_offloaded == saved.stat().st_size


async def test_batched_stage_two_leaves_results_just_over_the_limit_until_the_batch(
    workspace: Path, tmp_path: Path
) -> None:
    """A result a few bytes over ``second_max_bytes`` frees nothing when cut (the notice costs
    more than the excerpt saves), but the cut still changes the prompt: the batched policy must
    let it wait like any other change, not settle it at once as if there were nothing to cut.
    Every prompt then extends the previous one byte for byte."""
    script = [reply(f"fetch {i}", tool_call("fetch", f"f{i}", size_kb=3)) for i in range(6)]
    script += ["Done."]
    agent, model = _agent(script, workspace, tmp_path, recent_n=1)
    assert await agent.ask("Fetch six small documents.") == "Done."

    prompts = [(call.messages, call.tools) for call in model.calls]
    assert len(prompts) == 7
    for (before, tools_before), (after, tools_after) in pairwise(prompts):
        assert tools_after == tools_before
        assert after[: len(before)] == before, "a prompt changed what the previous one sent"
    assert split_notice(result_text(agent, "f0")) is None, "nothing worth cutting yet"
    assert agent.manager.stats.retruncations == 0


@pytest.mark.parametrize("layout", FORMATTERS)
async def test_200kb_result_is_truncated_saved_read_back_and_retruncated(
    workspace: Path, layout: str
) -> None:
    async def big_page() -> str:
        """Return a big page."""
        return BIG

    async def big_page_small() -> str:
        """Return a small page."""
        return "tiny"

    state: dict = {}

    def respond(call: ModelCall):
        if call.index == 0:
            return reply("fetching", tool_call("big_page", "big"))
        if call.index == 1:
            text = tool_message_text(tool_messages(call)[-1])
            excerpt, notice = split_notice(text)
            state.update(excerpt=excerpt, notice=notice, prompt_text=text)
            return reply(
                "reading on",
                tool_call(
                    "read_file",
                    "more",
                    file_path=notice.file_path,
                    start_line=notice.next_line,
                    start_byte=notice.next_byte,
                ),
            )
        if call.index <= 4:
            return reply(f"small {call.index}", tool_call("big_page_small", f"s{call.index}"))
        return "done"

    model = ScriptedChatModel(respond)
    agent = managed(
        model,
        {"workspace": str(workspace), "max_input_tokens": 131072, "truncation": {"recent_n": 2}},
        tools=[big_page, big_page_small],
        layout=layout,
        system_prompt="test",
    )
    manager = agent.manager
    assert await agent.ask("get the page") == "done"
    assert all(is_agent_call(call) for call in model.calls)

    # The next prompt holds at most the stage-one excerpt plus notice.
    notice = state["notice"]
    assert len(state["excerpt"].encode()) <= 51200
    assert BIG.startswith(state["excerpt"])
    assert len(state["prompt_text"].encode()) < 51200 + 600
    # The saved file holds the exact original.
    saved = workspace / notice.file_path
    assert saved.read_text() == BIG
    assert (
        notice.file_path.startswith("tool_result/")
        and len(list((workspace / "tool_result").iterdir())) == 1
    )
    # read_file at the notice's position returned the continuation.
    continuation = result_text(agent, "more")
    rest_excerpt = split_notice(continuation)[0] if split_notice(continuation) else continuation
    assert BIG[len(state["excerpt"]) :].startswith(rest_excerpt)
    assert len(rest_excerpt) > 1000
    # After recent_n more tool-result messages, the big result is cut to second_max_bytes, same path.
    excerpt2, notice2 = split_notice(result_text(agent, "big"))
    assert notice2.file_path == notice.file_path
    assert len(excerpt2.encode()) <= 3000
    assert notice2.total_lines == notice.total_lines
    last_prompt_tool = tool_message_text(tool_messages(model.calls[-1])[0])
    assert len(last_prompt_tool.encode()) < 3000 + 600
    assert manager.stats.truncations == 1 and manager.stats.retruncations >= 1


async def test_window_share_caps_stage_one(workspace: Path) -> None:
    model = scripted_session([[(200, 1)]])
    agent = managed(model, {"workspace": str(workspace), "max_input_tokens": 32768})
    assert await agent.ask("go") == "All documents fetched."
    counter = get_token_counter("qwen")
    second = [call for call in model.calls if is_agent_call(call)][1]
    tokens = counter.count_text(tool_message_text(tool_messages(second)[0]))
    assert tokens <= 0.25 * 32768
    assert split_notice(tool_message_text(tool_messages(second)[0])) is not None


# ------------------------------------------------------------------------- images

PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
IMAGE_B64 = base64.b64encode(base64.b64decode(PNG) * 2000).decode()  # ~190 KB: len/4 ~48k


async def test_images_are_counted_by_media_cost_and_replaced_when_old(workspace: Path) -> None:
    """Framework-free: a result with an image costs the media cost while recent (not its
    base64 length), and once old its image is saved and replaced by a placeholder naming the
    copy."""

    async def screenshot() -> tuple[str, tuple[Media, ...]]:
        """Take a screenshot."""
        return "screen captured", (Media("image", "image/png", data=IMAGE_B64),)

    async def noop() -> str:
        """Do nothing."""
        return "ok"

    script = [assistant("shot", ToolCall("img", "screenshot"))]
    script += [assistant(f"n{i}", ToolCall(f"n{i}", "noop")) for i in range(4)]
    manager = NeutralManager(
        {
            "workspace": str(workspace),
            "max_input_tokens": 32768,
            # eager: the placeholder appears as soon as the image is old (batched waits for gain)
            "truncation": {"recent_n": 2, "retruncate": "eager"},
        },
        tools=[screenshot, noop],
        system_prompt="s",
    )
    agent = NeutralAgent(manager, lambda turn: script[turn.index] if turn.index < 5 else "done")
    assert await agent.ask("look") == "done"
    counts = [turn.counted_tokens for turn in agent.turns]
    assert counts == [turn.prompt_tokens for turn in agent.turns]
    # While recent, the image is in context and costs the media cost, not len/4.
    assert counts[1] - counts[0] < 1280 + 400
    assert manager.stats.compactions == 0
    # Once old, it is a placeholder naming a saved copy.
    (result,) = [r for m in agent.port.messages for r in m.tool_results if r.id == "img"]
    assert result.media == ()
    placeholder = result.text.splitlines()[-1]
    assert "saved copy: tool_result/" in placeholder
    saved = workspace / placeholder.split("saved copy: ")[1].rstrip("]")
    assert saved.suffix == ".png"
    assert saved.read_bytes() == base64.b64decode(IMAGE_B64)


@pytest.mark.agentscope1
async def test_a_1x_image_block_is_counted_by_media_cost_and_replaced_when_old(
    workspace: Path,
) -> None:
    """The same on a 1.x agent: its image block in a ``ToolResponse``, counted and replaced."""

    async def screenshot() -> ToolResponse:
        """Take a screenshot."""
        return ToolResponse(
            content=[
                TextBlock(type="text", text="screen captured"),
                {
                    "type": "image",
                    "source": {"type": "base64", "media_type": "image/png", "data": IMAGE_B64},
                },
            ]
        )

    async def noop() -> ToolResponse:
        """Do nothing."""
        return ToolResponse(content=[TextBlock(type="text", text="ok")])

    model = ScriptedChatModel(
        [reply("shot", tool_call("screenshot", "img"))]
        + [reply(f"n{i}", tool_call("noop", f"n{i}")) for i in range(4)]
        + ["done"]
    )
    toolkit = Toolkit()
    toolkit.register_tool_function(screenshot)
    toolkit.register_tool_function(noop)
    agent = ReActAgent(
        name="a", sys_prompt="s", model=model, formatter=DashScopeChatFormatter(), toolkit=toolkit
    )
    agent.set_console_output_enabled(False)
    manager = enable_context_management(
        agent,
        {
            "workspace": str(workspace),
            "max_input_tokens": 32768,
            "truncation": {"recent_n": 2, "retruncate": "eager"},
        },
    )
    counts = []

    async def record(agent_, kwargs):
        counts.append((await manager.count()).total)

    agent.register_instance_hook("pre_reasoning", "zz_record", record)
    await agent(Msg("user", "look", "user"))
    assert counts[1] - counts[0] < 1280 + 400
    assert manager.stats.compactions == 0
    img_msg = next(m for m in agent.memory.messages if tool_ids(m, "tool_result") == ["img"])
    output = img_msg.content[0]["output"]
    assert all(b["type"] == "text" for b in output)
    placeholder = output[-1]["text"]
    assert "saved copy: tool_result/" in placeholder
    saved = workspace / placeholder.split("saved copy: ")[1].rstrip("]")
    assert saved.suffix == ".png" and saved.stat().st_size == len(base64.b64decode(IMAGE_B64))


# ------------------------------------------------- stage one inside the tool call (issue 17)


async def dump(n: int) -> ToolResponse:
    """Dump a large document.

    Args:
        n (int): Which document.
    """
    return ToolResponse(content=[TextBlock(type="text", text=make_text(120 * 1024, seed=n))])


async def stream_dump(n: int):
    """Dump a large document in pieces, as a streaming tool does (each piece accumulated).

    Args:
        n (int): Which document.
    """
    text = ""
    for piece in range(4):
        text += make_text(40 * 1024, seed=n * 10 + piece)
        yield ToolResponse(
            content=[TextBlock(type="text", text=text)], stream=True, is_last=piece == 3
        )


def _dumping_agent(toolkit: Toolkit, name: str, tool: str = "dump", rounds: int = 1) -> ReActAgent:
    script: list = []
    for round_ in range(rounds):
        script += [reply("dumping", tool_call(tool, f"{name}-{round_}", n=1)), "done"]
    agent = ReActAgent(
        name=name,
        sys_prompt="Dump documents.",
        model=ScriptedChatModel(script),
        formatter=DashScopeChatFormatter(),
        toolkit=toolkit,
    )
    agent.set_console_output_enabled(False)
    return agent


def _printed_results(agent: ReActAgent) -> list[str]:
    printed: list[str] = []

    def record(_agent, kwargs):  # what the console and Studio receive
        msg = kwargs["msg"]
        if tool_ids(msg, "tool_result"):
            printed.append(msg_result_text(msg))

    agent.register_instance_hook("pre_print", "test-record", record)
    return printed


@pytest.mark.agentscope1
async def test_results_are_cut_before_they_are_printed(workspace: Path) -> None:
    toolkit = Toolkit()
    toolkit.register_tool_function(dump)
    agent = _dumping_agent(toolkit, "a")
    printed = _printed_results(agent)
    manager = enable_context_management(agent, {"workspace": str(workspace)})
    await agent(Msg("user", "dump", "user"))
    stored = next(m for m in agent.memory.messages if tool_ids(m, "tool_result"))
    assert printed == [msg_result_text(stored)], "printed exactly what the model sees"
    _, notice = split_notice(printed[0])
    assert (workspace / notice.file_path).read_text() == make_text(120 * 1024, seed=1)
    assert manager.stats.truncations == 1, "cut once, not again when stored"
    assert len(list((workspace / "tool_result").iterdir())) == 1


@pytest.mark.agentscope1
async def test_a_streaming_tool_is_cut_as_it_streams(workspace: Path) -> None:
    toolkit = Toolkit()
    toolkit.register_tool_function(stream_dump)
    agent = _dumping_agent(toolkit, "a", tool="stream_dump")
    printed = _printed_results(agent)
    enable_context_management(agent, {"workspace": str(workspace)})
    await agent(Msg("user", "dump", "user"))
    assert len(printed) == 4 and all(len(text.encode()) <= 60 * 1024 for text in printed)
    stored = next(m for m in agent.memory.messages if tool_ids(m, "tool_result"))
    assert msg_result_text(stored) == printed[-1]
    _, notice = split_notice(printed[-1])
    full = "".join(make_text(40 * 1024, seed=10 + piece) for piece in range(4))
    assert (workspace / notice.file_path).read_text() == full, "the whole final output"


@pytest.mark.agentscope1
async def test_a_shared_toolkit_cuts_only_the_managed_agents_calls(workspace: Path) -> None:
    toolkit = Toolkit()
    toolkit.register_tool_function(dump)
    managed = _dumping_agent(toolkit, "managed", rounds=2)
    plain = _dumping_agent(toolkit, "plain")
    printed_plain = _printed_results(plain)
    printed_managed = _printed_results(managed)
    manager = enable_context_management(managed, {"workspace": str(workspace)})
    await plain(Msg("user", "dump", "user"))
    assert printed_plain == [make_text(120 * 1024, seed=1)], "another agent's call is untouched"
    await managed(Msg("user", "dump", "user"))
    assert manager.stats.truncations == 1

    assert "<<<TRUNCATED>>>" in printed_managed[0]

    manager.detach()
    await managed(Msg("user", "dump again", "user"))
    assert printed_managed[1] == make_text(120 * 1024, seed=1), "detached: nothing is cut"


@pytest.mark.agentscope1
async def test_parallel_tool_calls_are_all_cut_before_they_are_printed(workspace: Path) -> None:
    toolkit = Toolkit()
    toolkit.register_tool_function(dump)
    agent = ReActAgent(
        name="a",
        sys_prompt="Dump documents.",
        model=ScriptedChatModel(
            [reply("dumping", *(tool_call("dump", f"p{n}", n=n) for n in range(4))), "done"]
        ),
        formatter=DashScopeChatFormatter(),
        toolkit=toolkit,
        parallel_tool_calls=True,
    )
    agent.set_console_output_enabled(False)
    printed = _printed_results(agent)
    manager = enable_context_management(  # recent_n: no stage two after the fact
        agent, {"workspace": str(workspace), "truncation": {"recent_n": 10}}
    )
    await agent(Msg("user", "dump", "user"))
    assert len(printed) == 4 and all("<<<TRUNCATED>>>" in text for text in printed)
    stored = sorted(msg_result_text(m) for m in agent.memory.messages if tool_ids(m, "tool_result"))
    assert stored == sorted(printed), "the model saw what was printed"
    assert manager.stats.truncations == 4
