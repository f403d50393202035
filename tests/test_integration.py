"""The extension on a real ReActAgent, Toolkit and formatters, driven by the scripted model
(issue 3's "done when" list). No network, no mocks of our own code."""

from __future__ import annotations

import difflib
import os
from pathlib import Path

import pytest
from agentscope.agent import ReActAgent
from agentscope.formatter import DashScopeChatFormatter, OpenAIChatFormatter
from agentscope.message import Msg, TextBlock
from agentscope.session import JSONSession
from agentscope.tool import Toolkit, ToolResponse

from agentscope_context_ext import (
    ContextReActAgent,
    DialogStore,
    enable_context_management,
    get_token_counter,
    split_notice,
)
from agentscope_context_ext.testing import ScriptedChatModel, reply, tool_call

from agent_harness import (
    is_agent_call,
    is_compaction_call,
    make_agent,
    make_text,
    model_summary,
    prompt_orphans,
    scripted_session,
    session_plan,
    tool_ids,
)

FORMATTERS = [DashScopeChatFormatter, OpenAIChatFormatter]
BIG = make_text(200 * 1024, seed=1)


def result_text(msg: Msg) -> str:
    output = msg.content[0]["output"]
    return output if isinstance(output, str) else "".join(b.get("text", "") for b in output)


def tool_messages(call) -> list[dict]:
    return [m for m in call.messages if m.get("role") == "tool"]


def tool_message_text(message: dict) -> str:
    content = message.get("content")
    if isinstance(content, list):
        return "".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return str(content)


# ----------------------------------------------------------------- stage one and two


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


# ------------------------------------------------------------------- long sessions

SIZES_KB = [1, 4, 200, 12, 2, 60, 1, 30, 150, 8, 3, 90]


@pytest.mark.parametrize("window", [16384, 32768])
@pytest.mark.parametrize("formatter_class", FORMATTERS)
async def test_long_session_stays_in_window_without_orphans_or_loss(
    workspace: Path, window: int, formatter_class: type
) -> None:
    plan = session_plan(total_calls=62, sizes_kb=SIZES_KB)
    assert any(len(step) > 1 for step in plan), "the plan has parallel calls"
    model = scripted_session(plan)
    agent = make_agent(model, formatter_class())
    manager = enable_context_management(
        agent, {"workspace": str(workspace), "max_input_tokens": window}
    )
    events = []
    manager.subscribe(events.append)
    user = Msg("user", "Fetch every document and analyse them.", "user")
    final = await agent(user)
    assert final.get_text_content() == "All documents fetched."

    counter = get_token_counter("qwen")
    agent_calls = [c for c in model.calls if is_agent_call(c)]
    assert len(agent_calls) == len(plan) + 1
    for call in agent_calls:
        assert counter.count_formatted(call.messages, call.tools) <= window
        assert prompt_orphans(call.messages) == []
    assert manager.stats.compactions > 1
    assert not [e for e in events if e.type == "context_overflow"]

    # The summary message comes first and names real dialog files with real line ranges.
    last = agent_calls[-1].messages
    assert last[0]["role"] == "system"
    summary_text = str(
        last[1]["content"] if isinstance(last[1]["content"], str) else last[1]["content"][0]["text"]
    )
    assert summary_text.startswith("<context-summary>")
    store = DialogStore(workspace)
    for ref in agent.memory.compact_summary.dialog_refs:
        assert f"{ref.file} lines {ref.first_line}-{ref.last_line}" in summary_text
        assert (workspace / ref.file).is_file()
        assert store.line_count(ref.file) >= ref.last_line

    # Every message the agent produced is exactly once in dialog/ or memory, in order.
    saved = [r.msg for r in store.iter_records(newest_first=False)]
    sequence = saved + agent.memory.messages
    ids = [m.id for m in sequence]
    assert len(ids) == len(set(ids)), "no message twice"
    total_calls = sum(len(step) for step in plan)
    assert len(sequence) == 1 + len(agent_calls) + total_calls
    assert sequence[0].id == user.id
    steps = [m.get_text_content() for m in sequence if m.role == "assistant"]
    assert steps == [f"step {i}" for i in range(len(plan))] + ["All documents fetched."]
    seen_calls: set[str] = set()
    for msg in sequence:
        for call_id in tool_ids(msg, "tool_result"):
            assert call_id in seen_calls, "each result after its call"
        seen_calls.update(tool_ids(msg, "tool_use"))
    # Every offloaded result is on disk, whole.
    for msg in sequence:
        for block in msg.content if isinstance(msg.content, list) else []:
            if block.get("type") == "tool_result":
                parts = split_notice(
                    block["output"]
                    if isinstance(block["output"], str)
                    else block["output"][0]["text"]
                )
                if parts:
                    assert (workspace / parts[1].file_path).is_file()


async def test_incremental_count_matches_the_formatted_prompt(workspace: Path) -> None:
    plan = session_plan(total_calls=20, sizes_kb=SIZES_KB)
    model = scripted_session(plan)
    agent = make_agent(model, DashScopeChatFormatter())
    manager = enable_context_management(
        agent, {"workspace": str(workspace), "max_input_tokens": 65536}
    )
    errors = []

    async def check(agent_, kwargs):
        ours = (await manager.count()).total
        prompt = await agent.formatter.format(
            [Msg("system", agent.sys_prompt, "system"), *await agent.memory.get_memory()]
        )
        exact = await manager.counter.count(prompt, agent.toolkit.get_json_schemas())
        errors.append(abs(ours - exact) / exact)

    agent.register_instance_hook("pre_reasoning", "zz_check", check)
    await agent(Msg("user", "go", "user"))
    assert len(errors) == len(plan) + 1
    assert max(errors) < 0.01


# ------------------------------------------------------------------ summary failures


@pytest.mark.parametrize(
    "bad",
    [RuntimeError("upstream 500: internal error"), None, "lorem ipsum garbage without sections"],
    ids=["raises", "nothing", "garbage"],
)
async def test_failing_compaction_model_gives_extractive_summary(
    workspace: Path, bad: object
) -> None:
    plan = session_plan(total_calls=20, sizes_kb=SIZES_KB)

    def compaction(call):
        if isinstance(bad, BaseException):
            raise bad
        return bad

    model = scripted_session(plan, compaction=compaction)
    agent = make_agent(model, DashScopeChatFormatter())
    manager = enable_context_management(
        agent, {"workspace": str(workspace), "max_input_tokens": 16384}
    )
    await agent(Msg("user", "Fetch all documents. Never skip one.", "user"))
    assert manager.stats.compactions >= 1
    summary = agent.memory.compact_summary
    assert summary.source == "extractive"
    rendered = summary.render()
    for fragment in ("upstream 500", "lorem ipsum", "RuntimeError", "Traceback"):
        assert fragment not in rendered
    assert "Never skip one" in rendered
    saved = [r.msg.id for r in DialogStore(workspace).iter_records()]
    assert len(saved) + len(agent.memory.messages) == 1 + (len(plan) + 1) + 20


# ------------------------------------------------------------------- fault injection


async def test_dialog_write_failure_aborts_compaction_and_keeps_messages(workspace: Path) -> None:
    plan = session_plan(total_calls=14, sizes_kb=SIZES_KB)
    model = scripted_session(plan)
    agent = make_agent(model, DashScopeChatFormatter())
    (workspace / "dialog").write_text("a file where the dialog folder should be")
    manager = enable_context_management(
        agent, {"workspace": str(workspace), "max_input_tokens": 16384}
    )
    await agent(Msg("user", "go", "user"))
    assert manager.stats.counts["compaction_failed"] >= 1
    assert manager.stats.compactions == 0
    assert agent.memory.compact_summary is None
    assert len(agent.memory.messages) == 1 + (len(plan) + 1) + 14, "nothing was removed"


async def test_crash_between_dialog_write_and_memory_update_loses_nothing(
    workspace: Path, tmp_path: Path
) -> None:
    plan = session_plan(total_calls=14, sizes_kb=SIZES_KB)
    model = scripted_session(plan)
    agent = make_agent(model, DashScopeChatFormatter())
    manager = enable_context_management(
        agent, {"workspace": str(workspace), "max_input_tokens": 16384}
    )
    session = JSONSession(save_dir=str(tmp_path / "sessions"))
    saved_once = {}

    class Crash(BaseException):
        pass

    async def snapshot_then_crash(event):
        # Persist the agent the moment the dialog is written, then die before the summary and
        # the memory are updated: what a power cut at that point leaves behind.
        if event.type == "dialog_saved" and not saved_once:
            saved_once["state"] = True
            await session.save_session_state(session_id="s", agent=agent)
            raise Crash()

    manager.bus._listeners.append(snapshot_then_crash)
    with pytest.raises(Crash):
        await agent(Msg("user", "go", "user"))

    fresh_model = scripted_session(plan[len([c for c in model.calls if is_agent_call(c)]) - 1 :])
    fresh = make_agent(fresh_model, DashScopeChatFormatter())
    enable_context_management(fresh, {"workspace": str(workspace), "max_input_tokens": 16384})
    await session.load_session_state(session_id="s", agent=fresh)
    in_memory = {m.id for m in fresh.memory.messages}
    on_disk = [r.msg.id for r in DialogStore(workspace).iter_records()]
    assert len(on_disk) == len(set(on_disk))
    assert in_memory & set(on_disk), "the crash left messages in both places"
    await fresh(None)  # continue: compaction writes the same messages again
    records = list(DialogStore(workspace).iter_records())
    ids = [r.msg.id for r in records]
    assert len(ids) == len(set(ids)), "duplicates are ignored on read"
    assert in_memory <= set(ids) | {m.id for m in fresh.memory.messages}


# ------------------------------------------------------------------------ overflow


async def test_oversized_newest_message_overflows_without_looping(workspace: Path) -> None:
    model = ScriptedChatModel(["first answer", "second answer", "third answer"])
    toolkit = Toolkit()
    agent = ReActAgent(
        name="a",
        sys_prompt="S " * 3000,
        model=model,
        formatter=DashScopeChatFormatter(),
        toolkit=toolkit,
    )
    agent.set_console_output_enabled(False)
    manager = enable_context_management(
        agent, {"workspace": str(workspace), "max_input_tokens": 8192}
    )
    events = []
    manager.subscribe(events.append)
    await agent(Msg("user", "small question", "user"))
    huge = Msg("user", "please read: " + make_text(40 * 1024, seed=3), "user")
    await agent(huge)
    assert [e for e in events if e.type == "context_overflow"]
    assert huge.id in [m.id for m in agent.memory.messages], "the user's message is kept"
    assert "please read: 3:00000" in model.calls[1].text, "and the model saw it"
    await agent(Msg("user", "and now?", "user"))
    assert manager.stats.counts["compaction_started"] <= 2, "a bounded number of compactions"
    kept_or_saved = {m.id for m in agent.memory.messages} | DialogStore(workspace).message_ids()
    assert huge.id in kept_or_saved


# ------------------------------------------------------------------ session reload


async def test_session_reload_gives_the_same_prompts(workspace: Path, tmp_path: Path) -> None:
    plan = session_plan(total_calls=24, sizes_kb=SIZES_KB)
    config = {"workspace": str(workspace), "max_input_tokens": 16384}

    straight_ws = tmp_path / "straight"
    straight = make_agent(scripted_session(plan), DashScopeChatFormatter())
    enable_context_management(straight, {**config, "workspace": str(straight_ws)})
    first = Msg("user", "part one", "user")
    second = Msg("user", "part two", "user")
    await straight(first)
    await straight(second)

    half = make_agent(scripted_session(plan), DashScopeChatFormatter())
    enable_context_management(half, config)
    await half(first)
    session = JSONSession(save_dir=str(tmp_path / "sessions"))
    await session.save_session_state(session_id="s", agent=half)

    done = len([c for c in half.model.inner.calls if is_agent_call(c)]) - 1
    resumed_model = scripted_session(plan[done:])
    resumed = make_agent(resumed_model, DashScopeChatFormatter())
    enable_context_management(resumed, config)
    await session.load_session_state(session_id="s", agent=resumed)
    await resumed(second)

    straight_tail = [c.messages for c in straight.model.inner.calls if is_agent_call(c)][
        -len(resumed_model.calls) :
    ]
    resumed_prompts = [c.messages for c in resumed_model.calls if is_agent_call(c)]
    straight_tail = straight_tail[-len(resumed_prompts) :]
    expected, actual = _strip_volatile(straight_tail), _strip_volatile(resumed_prompts)
    diff = "\n".join(
        difflib.unified_diff(expected[0].split("\\n"), actual[0].split("\\n"), lineterm="", n=1)
    )
    assert expected == actual, diff[:3000]


def _strip_volatile(prompts: list[list[dict]]) -> list[str]:
    """Prompts with the one part that differs between two runs by construction (the summary's
    wall-clock timestamp) replaced by a placeholder. Saved-result paths are content hashes and
    stay as they are."""
    import re

    text = repr(prompts)
    text = re.sub(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:\.\d+)?", "TIME", text)
    return [text]


# ---------------------------------------------------------------------------- media


async def test_images_are_counted_by_media_cost_and_replaced_when_old(workspace: Path) -> None:
    png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
    image_b64 = png * 2000  # ~190 KB of base64: len/4 would be ~48k tokens

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


# ----------------------------------------------------------- notices and enablement


async def test_compaction_notices_are_printed_not_stored(workspace: Path) -> None:
    plan = session_plan(total_calls=12, sizes_kb=SIZES_KB)
    model = scripted_session(plan)
    agent = make_agent(model, DashScopeChatFormatter())
    printed: list[Msg] = []

    async def capture(agent_, kwargs):
        printed.append(kwargs["msg"])

    agent.register_instance_hook("pre_print", "capture", capture)
    manager = enable_context_management(
        agent, {"workspace": str(workspace), "max_input_tokens": 16384}
    )
    await agent(Msg("user", "go", "user"))
    notices = [m for m in printed if m.name == "context"]
    assert manager.stats.compactions >= 1
    assert len(notices) == 2 * manager.stats.compactions
    assert "summarising" in notices[0].content and "->" in notices[1].content
    assert not [m for m in agent.memory.messages if m.name == "context"]


async def test_notices_can_be_turned_off(workspace: Path) -> None:
    model = scripted_session(session_plan(total_calls=12, sizes_kb=SIZES_KB))
    agent = make_agent(model, DashScopeChatFormatter())
    printed: list[Msg] = []
    agent.register_instance_hook("pre_print", "capture", lambda a, k: printed.append(k["msg"]))
    enable_context_management(
        agent, {"workspace": str(workspace), "max_input_tokens": 16384, "notices": False}
    )
    await agent(Msg("user", "go", "user"))
    assert not [m for m in printed if m.name == "context"]


async def test_enable_keeps_existing_messages_and_close_undoes_hooks(workspace: Path) -> None:
    model = ScriptedChatModel(["hi"])
    agent = make_agent(model, DashScopeChatFormatter())
    earlier = Msg("user", "earlier", "user")
    await agent.memory.add(earlier, marks="keep")
    manager = enable_context_management(agent, {"workspace": str(workspace)})
    assert [m.id for m in await agent.memory.get_memory(mark="keep")] == [earlier.id]
    assert {"read_file", "read_dialog", "search_dialog"} <= set(agent.toolkit.tools)
    with pytest.raises(Exception, match="already enabled"):
        enable_context_management(agent)
    manager.close()
    assert "read_file" not in agent.toolkit.tools
    assert "agentscope_context_ext" not in agent._instance_pre_reasoning_hooks
    enable_context_management(agent, {"workspace": str(workspace)})


async def test_context_react_agent_and_config_file(workspace: Path, tmp_path: Path) -> None:
    config = tmp_path / "c.yaml"
    config.write_text(
        f"workspace: {workspace}\nmax_input_tokens: 16384\ncompaction:\n  hook_point: pre_reply\n"
    )
    toolkit = Toolkit()
    agent = ContextReActAgent(
        name="a",
        sys_prompt="s",
        model=ScriptedChatModel(["ok"]),
        formatter=DashScopeChatFormatter(),
        toolkit=toolkit,
        context_config=str(config),
    )
    agent.set_console_output_enabled(False)
    assert agent.context_manager.max_input_tokens == 16384
    assert "agentscope_context_ext" in agent._instance_pre_reply_hooks
    reply_msg = await agent(Msg("user", "hello", "user"))
    assert reply_msg.get_text_content() == "ok"
    assert len(agent.memory.messages) == 2, "the pre_reply hook's early add is not duplicated"


async def test_streaming_model_and_compact_now(workspace: Path) -> None:
    plan = session_plan(total_calls=6, sizes_kb=[8])
    model = scripted_session(plan, stream=True)
    agent = make_agent(model, DashScopeChatFormatter())
    manager = enable_context_management(agent, {"workspace": str(workspace)})
    await agent(Msg("user", "go", "user"))
    before = (await manager.count()).total
    after = await manager.compact_now(extra_instruction="keep document seeds")
    assert after.total < before
    assert manager.stats.compactions == 1
    assert "keep document seeds" in next(c for c in model.calls if is_compaction_call(c)).text
    assert prompt_orphans(await agent.formatter.format(await agent.memory.get_memory())) == []


def test_model_summary_helper_keeps_paths() -> None:
    from agentscope_context_ext.testing import ModelCall

    call = ModelCall(0, [{"role": "user", "content": "see tool_result/abc.txt"}], None)
    assert "tool_result/abc.txt" in model_summary(call)
    assert os.sep  # keep os imported for path checks on every platform
