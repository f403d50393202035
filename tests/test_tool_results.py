"""The two truncation stages on a real ReActAgent (design §3.2-3.4; issue 12's bugs)."""

from __future__ import annotations

import base64
from itertools import pairwise
from pathlib import Path

import pytest
from agentscope.agent import ReActAgent
from agentscope.formatter import DashScopeChatFormatter
from agentscope.message import Msg, TextBlock
from agentscope.tool import Toolkit, ToolResponse

from agentscope_context_ext import (
    enable_context_management,
    get_token_counter,
    split_notice,
)
from agentscope_context_ext.testing import ScriptedChatModel, reply, tool_call

from agent_harness import (
    BIG,
    FORMATTERS,
    make_agent,
    make_text,
    result_text,
    scripted_session,
    tool_ids,
    tool_message_text,
    tool_messages,
)

MODULE_BYTES = 27 * 1024


async def note(text: str) -> ToolResponse:
    """Write a note.

    Args:
        text (str): The note.
    """
    return ToolResponse(content=[TextBlock(type="text", text=f"noted {text}")])


async def fetch(size_kb: int) -> ToolResponse:
    """Fetch a document.

    Args:
        size_kb (int): Size in KiB.
    """
    return ToolResponse(content=[TextBlock(type="text", text=make_text(size_kb * 1024, 3))])


def _agent(script, workspace: Path, root: Path) -> tuple[ReActAgent, object]:
    toolkit = Toolkit()
    toolkit.register_tool_function(note)
    toolkit.register_tool_function(fetch)
    agent = ReActAgent(
        name="coder",
        sys_prompt="You read code.",
        model=ScriptedChatModel(script),
        formatter=DashScopeChatFormatter(),
        toolkit=toolkit,
        max_iters=50,
    )
    agent.set_console_output_enabled(False)
    manager = enable_context_management(
        agent,
        {
            "workspace": str(workspace),
            "tools": {"allowed_roots": [str(root)]},
            "long_term_memory": {"enabled": False},
        },
    )
    return agent, manager


def _result_text(agent: ReActAgent, call_id: str) -> str:
    for msg in agent.memory.messages:
        for block in msg.content if isinstance(msg.content, list) else []:
            if block.get("type") == "tool_result" and block.get("id") == call_id:
                output = block["output"]
                return output if isinstance(output, str) else output[0]["text"]
    raise AssertionError(f"no result {call_id}")


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
    agent, manager = _agent(script, workspace, root)
    await agent(Msg("user", "Read module.py, then take five notes.", "user"))

    text = _result_text(agent, "r1")
    parts = split_notice(text)
    assert parts is not None, "stage two cut the old read"
    excerpt, notice = parts
    assert notice.file_path == str(module)
    assert module.read_text(encoding="utf-8").startswith(excerpt)
    saved = (
        list((workspace / "tool_result").glob("*")) if (workspace / "tool_result").is_dir() else []
    )
    assert saved == [], "no copy of a read_file result is ever saved"
    assert manager.stats.bytes_offloaded == 0


async def test_bytes_offloaded_counts_what_stage_two_saves(workspace: Path, tmp_path: Path) -> None:
    """A 27 KB result under the stage-one limit is saved whole when stage two cuts it: the
    stat counts those bytes."""
    script = [reply("Fetching.", tool_call("fetch", "f1", size_kb=27))]
    script += [reply(f"note {i}", tool_call("note", f"n{i}", text=str(i))) for i in range(5)]
    script += ["Done."]
    agent, manager = _agent(script, workspace, tmp_path)
    await agent(Msg("user", "Fetch, then take five notes.", "user"))

    parts = split_notice(_result_text(agent, "f1"))
    assert parts is not None and parts[1].file_path.startswith("tool_result/")
    saved = workspace / parts[1].file_path
    assert saved.stat().st_size >= 27 * 1024
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
    agent, manager = _agent(script, workspace, tmp_path)
    model = agent.model.inner  # the scripted model inside the usage tap
    manager.config.truncation.recent_n = 1
    await agent(Msg("user", "Fetch six small documents.", "user"))

    prompts = [(call.messages, call.tools) for call in model.calls]
    assert len(prompts) == 7
    for (before, tools_before), (after, tools_after) in pairwise(prompts):
        assert tools_after == tools_before
        assert after[: len(before)] == before, "a prompt changed what the previous one sent"
    assert split_notice(_result_text(agent, "f0")) is None, "nothing worth cutting yet"
    assert manager.stats.retruncations == 0


@pytest.mark.parametrize("formatter_class", FORMATTERS)
async def test_200kb_result_is_truncated_saved_read_back_and_retruncated(
    workspace: Path, formatter_class: type
) -> None:
    async def big_page() -> ToolResponse:
        """Return a big page."""
        return ToolResponse(content=[TextBlock(type="text", text=BIG)])

    state: dict = {}

    def respond(call):
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

    async def big_page_small() -> ToolResponse:
        """Return a small page."""
        return ToolResponse(content=[TextBlock(type="text", text="tiny")])

    model = ScriptedChatModel(respond)
    toolkit = Toolkit()
    toolkit.register_tool_function(big_page)
    toolkit.register_tool_function(big_page_small)
    agent = ReActAgent(
        name="a", sys_prompt="test", model=model, formatter=formatter_class(), toolkit=toolkit
    )
    agent.set_console_output_enabled(False)
    manager = enable_context_management(
        agent,
        {"workspace": str(workspace), "max_input_tokens": 131072, "truncation": {"recent_n": 2}},
    )
    await agent(Msg("user", "get the page", "user"))

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
    read_msg = next(m for m in agent.memory.messages if tool_ids(m, "tool_result") == ["more"])
    continuation = result_text(read_msg)
    rest_excerpt = split_notice(continuation)[0] if split_notice(continuation) else continuation
    assert BIG[len(state["excerpt"]) :].startswith(rest_excerpt)
    assert len(rest_excerpt) > 1000
    # After recent_n more tool-result messages, the big result is cut to second_max_bytes, same path.
    big_msg = next(m for m in agent.memory.messages if tool_ids(m, "tool_result") == ["big"])
    excerpt2, notice2 = split_notice(result_text(big_msg))
    assert notice2.file_path == notice.file_path
    assert len(excerpt2.encode()) <= 3000
    assert notice2.total_lines == notice.total_lines
    last_prompt_tool = tool_message_text(tool_messages(model.calls[-1])[0])
    assert len(last_prompt_tool.encode()) < 3000 + 600
    assert manager.stats.truncations == 1 and manager.stats.retruncations >= 1


async def test_window_share_caps_stage_one(workspace: Path) -> None:
    model = scripted_session([[(200, 1)]])
    agent = make_agent(model, DashScopeChatFormatter())
    enable_context_management(agent, {"workspace": str(workspace), "max_input_tokens": 32768})
    await agent(Msg("user", "go", "user"))
    counter = get_token_counter("qwen")
    tokens = counter.count_text(tool_message_text(tool_messages(model.calls[1])[0]))
    assert tokens <= 0.25 * 32768


async def test_images_are_counted_by_media_cost_and_replaced_when_old(workspace: Path) -> None:
    png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
    image_b64 = base64.b64encode(base64.b64decode(png) * 2000).decode()  # ~190 KB: len/4 ~48k

    async def screenshot() -> ToolResponse:
        """Take a screenshot."""
        return ToolResponse(
            content=[
                TextBlock(type="text", text="screen captured"),
                {
                    "type": "image",
                    "source": {"type": "base64", "media_type": "image/png", "data": image_b64},
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
            # eager: the placeholder appears as soon as the image is old (batched waits for gain)
            "truncation": {"recent_n": 2, "retruncate": "eager"},
        },
    )
    counts = []

    async def record(agent_, kwargs):
        counts.append((await manager.count()).total)

    agent.register_instance_hook("pre_reasoning", "zz_record", record)
    await agent(Msg("user", "look", "user"))
    # While recent, the image is in context and costs the media cost, not len/4.
    assert counts[1] - counts[0] < 1280 + 400
    assert manager.stats.compactions == 0
    # Once old, it is a placeholder naming a saved copy.
    img_msg = next(m for m in agent.memory.messages if tool_ids(m, "tool_result") == ["img"])
    output = img_msg.content[0]["output"]
    assert all(b["type"] == "text" for b in output)
    placeholder = output[-1]["text"]
    assert "saved copy: tool_result/" in placeholder
    saved = workspace / placeholder.split("saved copy: ")[1].rstrip("]")
    assert saved.suffix == ".png" and saved.stat().st_size == len(
        __import__("base64").b64decode(image_b64)
    )


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
            printed.append(result_text(msg))

    agent.register_instance_hook("pre_print", "test-record", record)
    return printed


async def test_results_are_cut_before_they_are_printed(workspace: Path) -> None:
    toolkit = Toolkit()
    toolkit.register_tool_function(dump)
    agent = _dumping_agent(toolkit, "a")
    printed = _printed_results(agent)
    manager = enable_context_management(agent, {"workspace": str(workspace)})
    await agent(Msg("user", "dump", "user"))
    stored = next(m for m in agent.memory.messages if tool_ids(m, "tool_result"))
    assert printed == [result_text(stored)], "printed exactly what the model sees"
    _, notice = split_notice(printed[0])
    assert (workspace / notice.file_path).read_text() == make_text(120 * 1024, seed=1)
    assert manager.stats.truncations == 1, "cut once, not again when stored"
    assert len(list((workspace / "tool_result").iterdir())) == 1


async def test_a_streaming_tool_is_cut_as_it_streams(workspace: Path) -> None:
    toolkit = Toolkit()
    toolkit.register_tool_function(stream_dump)
    agent = _dumping_agent(toolkit, "a", tool="stream_dump")
    printed = _printed_results(agent)
    enable_context_management(agent, {"workspace": str(workspace)})
    await agent(Msg("user", "dump", "user"))
    assert len(printed) == 4 and all(len(text.encode()) <= 60 * 1024 for text in printed)
    stored = next(m for m in agent.memory.messages if tool_ids(m, "tool_result"))
    assert result_text(stored) == printed[-1]
    _, notice = split_notice(printed[-1])
    full = "".join(make_text(40 * 1024, seed=10 + piece) for piece in range(4))
    assert (workspace / notice.file_path).read_text() == full, "the whole final output"


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
    stored = sorted(result_text(m) for m in agent.memory.messages if tool_ids(m, "tool_result"))
    assert stored == sorted(printed), "the model saw what was printed"
    assert manager.stats.truncations == 4
