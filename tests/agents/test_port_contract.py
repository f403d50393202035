"""What an adapter must do, stated once and run on whichever AgentScope is installed (CI runs it
under both majors, so this one file covers both adapters), through ``adapter.installed`` and
real agents on the scripted model: the port the pipeline sees (messages in and out, tool-result
slots and their records written back and kept across a session reload, user text slots, the
summary set and persisted, removal, counting), pair-safe compaction with parallel calls, the
tools the model is shown, the dialog codec, and the compaction model's call."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from harness_common import SIX_SECTIONS, SIZES_KB, fetch, make_text, prompt_orphans, session_plan
from installed_harness import (
    FORMATTERS,
    call_ids,
    dialog_views,
    is_agent_call,
    is_compaction_call,
    managed,
    result_ids,
    said,
    scripted_session,
    session_responder,
    tool_names,
)

from agentscope_context_ext.adapter import installed
from agentscope_context_ext.core.messages import Text
from agentscope_context_ext.core.pipeline import ResultChange, SummaryWriter, TruncationRecord
from agentscope_context_ext.core.summary import CompactSummary
from agentscope_context_ext.core.tokens import get_token_counter
from agentscope_context_ext.core.truncation import split_notice
from agentscope_context_ext.testing import ModelCall, ScriptedChatModel, reply, tool_call

PLAN = [[(60, 1)], [(2, 2)], [(90, 3), (1, 4), (30, 5)], [(4, 6)]]
"""Four steps: a large result, a small one, three parallel calls (two large), a small one."""


def config(workspace: Path, **extra) -> dict:
    return {
        "workspace": str(workspace),
        "max_input_tokens": 131072,
        "notices": False,
        "long_term_memory": {"enabled": False},
        **extra,
    }


USER_TEXT = "fetch the documents of report-7781"


async def ran(workspace: Path, plan=PLAN, **extra):
    """A managed agent that ran ``plan`` (one user message, :data:`USER_TEXT`)."""
    agent = managed(scripted_session(plan), config(workspace, **extra))
    assert await agent.ask(USER_TEXT) == "All documents fetched."
    return agent


def slots_by_call(port) -> dict[str, tuple[str, object]]:
    """Call id -> (message id, slot), over every message with results."""
    return {
        slot.call_id: (msg_id, slot)
        for msg_id in port.result_message_ids()
        for slot in port.result_slots(msg_id)
    }


# ----------------------------------------------------------------------- messages in/out


async def test_message_ids_and_views_are_the_agents_context(workspace: Path) -> None:
    agent = await ran(workspace)
    port = agent.manager.port
    ids = port.message_ids()
    assert ids and len(ids) == len(set(ids))
    views = [port.view(msg_id) for msg_id in ids]
    assert [view.id for view in views] == ids
    assert list(said(views)) == list(said(agent.views())), "the same conversation"
    assert call_ids(views) == [
        f"call-{i}-{k}" for i, step in enumerate(PLAN) for k in range(len(step))
    ]
    assert result_ids(views) == call_ids(views), "each result after its call"
    assert next(p for p in views[-1].parts if type(p) is Text).text == "All documents fetched."
    with pytest.raises(KeyError):
        port.view("no-such-message")
    with pytest.raises(KeyError):
        port.bound("no-such-message")
    with port.one_step():
        assert port.message_ids() == ids, "reading in a step changes nothing"


async def test_counts_bounds_and_the_change_log(workspace: Path) -> None:
    agent = await ran(workspace)
    port = agent.manager.port
    for msg_id in port.message_ids():
        assert 0 < await port.count(msg_id) <= port.bound(msg_id)
    assert await port.count_system("You are a diligent research agent.") > 0
    assert await port.count_head() == 0 and port.summary is None
    epoch, _, _ = port.drain_changes()
    assert port.drain_changes() == (epoch, set(), set()), "nothing changed since"
    assert port.pending_results() == [], "stage one saw every result"
    last = port.result_message_ids()[-1]
    port.requeue(last)
    assert port.pending_results() == [last] and port.pending_results() == []


async def test_the_running_count_is_the_prompt_the_model_receives(workspace: Path) -> None:
    """The incremental count before each model call equals formatting and counting the prompt
    the model then gets (the neutral version is in core/test_token_tally.py)."""
    plan = session_plan(total_calls=20, sizes_kb=SIZES_KB)
    scripted = session_responder(plan)
    errors: list[float] = []
    holder: dict = {}

    async def respond(call: ModelCall) -> object:
        if is_agent_call(call):
            ours = (await holder["agent"].manager.count()).total
            exact = get_token_counter("qwen").count_formatted(call.messages, call.tools)
            errors.append(abs(ours - exact) / exact)
        return scripted(call)

    agent = managed(ScriptedChatModel(respond), config(workspace, max_input_tokens=65536))
    holder["agent"] = agent
    await agent.ask("go")
    assert len(errors) == len(plan) + 1
    assert max(errors) < 0.01


async def test_a_loaded_session_is_a_new_epoch_counted_as_before(workspace: Path) -> None:
    """Loading a session replaces every message: the change log says so (a new epoch, all
    recounted), the results keep their records (stage one leaves every one as it is), and the
    count is what it was."""
    agent = await ran(workspace)
    port = agent.manager.port
    tokens = (await agent.manager.count()).total
    ids = port.message_ids()
    epoch, _, _ = port.drain_changes()
    await agent.save_session("s")
    await agent.load_session("s")
    again, _, _ = port.drain_changes()
    assert again != epoch, "a new epoch: every message is counted again"
    assert port.message_ids() == ids
    truncations = agent.manager.stats.truncations
    await agent.manager.pipeline.run_stage_one()
    assert port.drain_changes() == (again, set(), set()), "stage one changed nothing"
    assert agent.manager.stats.truncations == truncations
    assert (await agent.manager.count()).total == tokens


# ------------------------------------------------------------- tool-result slots, records


async def test_result_slots_carry_the_call_and_what_stage_one_did(workspace: Path) -> None:
    agent = await ran(workspace)
    port = agent.manager.port
    slots = slots_by_call(port)
    assert sorted(slots) == sorted(call_ids(agent.views()))
    for step, calls in enumerate(PLAN):
        for k, (size_kb, seed) in enumerate(calls):
            _, slot = slots[f"call-{step}-{k}"]
            assert slot.tool == "fetch"
            assert dict(slot.tool_input) == {"size_kb": size_kb, "seed": seed}
            assert slot.record.stage >= 1, "stage one recorded it"
            full = make_text(size_kb * 1024, seed)
            if size_kb < 50:  # under stage one's 50 KiB
                assert slot.text == full and slot.record.path is None
                continue
            excerpt, notice = split_notice(slot.text)
            assert full.startswith(excerpt) and notice.file_path == slot.record.path
            assert slot.record.bytes == len(full.encode())
            assert (workspace / slot.record.path).read_text(encoding="utf-8") == full
            # the view loads the saved whole when asked to
            view = port.view(slots[slot.call_id][0], agent.manager.tool_result_store.read_text)
            loaded = next(r for r in view.tool_results if r.id == slot.call_id)
            assert loaded.full_text == full and loaded.text == slot.text


async def test_apply_writes_records_and_outputs_back(workspace: Path) -> None:
    agent = await ran(workspace)
    port = agent.manager.port
    msg_id, slot = slots_by_call(port)["call-1-0"]
    port.drain_changes()
    slot.record = dataclasses.replace(slot.record, stage=2, markdown=True, start_line=7)
    port.apply(msg_id, [slot], {slot.call_id: ResultChange("replaced output")})
    again = next(s for s in port.result_slots(msg_id) if s.call_id == slot.call_id)
    assert again.record == slot.record
    assert again.text == "replaced output"
    assert "replaced output" in port.view(msg_id).raw_text()
    _, changed, removed = port.drain_changes()
    assert msg_id in changed and not removed
    # a record written without a change of output leaves the message's count alone
    again.record = dataclasses.replace(again.record, save_failed="disk full")
    port.apply(msg_id, [again], {})
    assert next(s for s in port.result_slots(msg_id) if s.call_id == slot.call_id).record == (
        again.record
    )
    assert msg_id not in port.drain_changes()[1]


async def test_records_and_outputs_survive_a_session_save_and_reload(workspace: Path) -> None:
    agent = await ran(workspace)
    before = {
        call: (slot.text, slot.record)
        for call, (_, slot) in slots_by_call(agent.manager.port).items()
    }
    tokens = (await agent.manager.count()).total
    await agent.save_session("s")
    saved = sorted(p.name for p in (workspace / "tool_result").iterdir())

    model = scripted_session([[(60, 9)]])
    fresh = managed(model, config(workspace))
    await fresh.load_session("s")
    after = {
        call: (slot.text, slot.record)
        for call, (_, slot) in slots_by_call(fresh.manager.port).items()
    }
    assert after == before, "each result, its text and its record, as it was"
    assert (await fresh.manager.count()).total == tokens
    await fresh.ask("one more")
    # the old results are not cut again: one new truncation, for the new result only
    assert fresh.manager.stats.truncations == 1
    assert len(list((workspace / "tool_result").iterdir())) == len(saved) + 1


# -------------------------------------------------------------------------- user texts


async def test_user_text_slots_and_their_records(workspace: Path) -> None:
    agent = await ran(workspace)
    port = agent.manager.port
    views = {msg_id: port.view(msg_id) for msg_id in port.message_ids()}
    user_id = next(msg_id for msg_id, view in views.items() if view.role == "user")
    (slot,) = port.user_text_slots(user_id)
    assert slot.text == USER_TEXT and slot.record == TruncationRecord()
    others = [msg_id for msg_id, view in views.items() if view.role != "user"]
    assert others and all(port.user_text_slots(msg_id) == [] for msg_id in others)
    port.drain_changes()
    slot.record = TruncationRecord(stage=3, path="message/abc.txt", bytes=19)
    port.apply_texts(user_id, [slot], {slot.key: "fetch (offloaded)"})
    (again,) = port.user_text_slots(user_id)
    assert again.text == "fetch (offloaded)" and again.record == slot.record
    assert "fetch (offloaded)" in port.view(user_id).text
    assert user_id in port.drain_changes()[1]


# --------------------------------------------------------------------- summary, removal


async def test_the_summary_is_set_sent_and_persisted(workspace: Path) -> None:
    agent = await ran(workspace)
    port = agent.manager.port
    key = port.head_key()
    summary = CompactSummary(goal=["Keep report-7781 whole"], progress=["fetched four"])
    port.set_summary(summary)
    assert port.summary.render() == summary.render()
    assert port.head_key() != key and await port.count_head() > 0
    await agent.save_session("s")

    model = ScriptedChatModel(["resumed"])
    fresh = managed(model, config(workspace))
    await fresh.load_session("s")
    assert fresh.manager.port.summary.render() == summary.render()
    assert (await fresh.manager.count()).total == (await agent.manager.count()).total
    await fresh.ask("go on")
    sent = model.calls[0].messages
    assert sent[0]["role"] == "system" and "report-7781" in str(sent[1]["content"])
    fresh.manager.port.set_summary(None)
    assert fresh.manager.port.summary is None and await fresh.manager.port.count_head() == 0


async def test_removal_takes_messages_out_and_logs_it(workspace: Path) -> None:
    agent = await ran(workspace)
    port = agent.manager.port
    ids = port.message_ids()
    port.drain_changes()
    await port.remove(ids[:2])
    assert port.message_ids() == ids[2:]
    _, _, removed = port.drain_changes()
    assert set(ids[:2]) <= removed
    with pytest.raises(KeyError):
        port.view(ids[0])


async def test_native_messages_round_trip_through_the_dialog_codec(workspace: Path) -> None:
    agent = await ran(workspace)
    port = agent.manager.port
    codec = agent.manager.dialog_store.codec
    ids = port.message_ids()
    for msg_id, msg in zip(ids, port.native(ids), strict=True):
        again = codec.decode(codec.encode(msg))
        assert codec.view(again).parts == port.view(msg_id).parts


async def test_a_dialog_search_looks_in_what_was_said_only(workspace: Path) -> None:
    """The adapter's codec shows search the words of a message, never its id, role,
    timestamp or block types."""
    agent = await ran(workspace)
    views = agent.views()
    dialog = installed.open_dialog(workspace / "other")
    dialog.append(agent.messages())
    first = views[0]
    for word in (first.id, first.timestamp, "user", "assistant", "tool_use", "tool_call"):
        assert word and dialog.search(word) == [], word
    found = dialog.search("report-7781")
    assert [dialog.codec.view(r.msg).text for r in found] == [USER_TEXT]
    assert dialog.search("All documents fetched"), "the agent's own words are found"


# ------------------------------------------------------------------ compaction, tools


@pytest.mark.parametrize("layout", FORMATTERS)
async def test_compaction_with_parallel_calls_is_pair_safe_and_lossless(
    workspace: Path, layout: str
) -> None:
    plan = session_plan(total_calls=40, sizes_kb=SIZES_KB)
    assert any(len(step) > 1 for step in plan)
    model = scripted_session(plan)
    agent = managed(model, config(workspace, max_input_tokens=16384), layout=layout)
    await agent.ask("fetch every document")
    assert agent.manager.stats.compactions > 1
    for call in model.calls:
        assert prompt_orphans(call.messages) == [], call.index
    everything = dialog_views(agent) + agent.views()
    calls = call_ids(everything)
    assert len(calls) == len(set(calls)) == sum(len(step) for step in plan)
    assert sorted(result_ids(everything)) == sorted(calls), "every result once, with its call"
    texts = [item[2] for item in said(everything) if item[0] == "text" and item[1] == "assistant"]
    assert texts == [f"step {i}" for i in range(len(plan))] + ["All documents fetched."]


async def test_the_tools_the_model_is_shown(workspace: Path, tmp_path: Path) -> None:
    """read_file and the memory tools that can be of use from the start (memory_edit and
    memory_read not while Memory.md is empty); the dialog tools once there is a dialog; each
    answers when the model calls it."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "a.txt").write_text("".join(f"line {i:04d}\n" for i in range(1, 201)))
    plan = session_plan(total_calls=14, sizes_kb=[30, 60])
    first_reply = session_responder(plan)
    second_reply = [
        reply(
            "read",
            tool_call(
                "read_file", "r1", file_path=str(project / "a.txt"), start_line=3, end_line=4
            ),
        ),
        reply("search", tool_call("search_dialog", "s1", query="collect the documents")),
        reply("remember", tool_call("memory_append", "m1", text="Editor: helix")),
        "done",
    ]
    asked = {"second": False}

    def respond(call: ModelCall) -> object:
        if asked["second"] and is_agent_call(call):
            return second_reply.pop(0)
        return first_reply(call)

    model = ScriptedChatModel(respond)
    cfg = config(
        workspace,
        max_input_tokens=16384,
        tools={"allowed_roots": [str(project)]},
        long_term_memory={
            "enabled": True,
            "summarize_on_compaction": False,
            "consolidation_time": "off",
        },
    )
    agent = managed(model, cfg)
    assert await agent.ask("collect the documents") == "All documents fetched."
    asked["second"] = True
    assert await agent.ask("and now") == "done"
    assert agent.manager.stats.compactions >= 1
    agent_calls = [call for call in model.calls if is_agent_call(call)]
    first = tool_names(agent_calls[0])
    assert {"fetch", "read_file", "memory_append", "daily_note"} <= first
    assert not first & {"read_dialog", "search_dialog", "memory_edit", "memory_read"}
    shown = ["read_dialog" in tool_names(call) for call in agent_calls]
    start = shown.index(True)
    assert start > 0 and all(shown[start:]), "hidden until a compaction, then always shown"
    schema = next(
        t["function"] for t in agent_calls[0].tools if t["function"]["name"] == "read_file"
    )
    assert set(schema["parameters"]["properties"]) == {
        "file_path",
        "start_line",
        "end_line",
        "start_byte",
    }
    assert schema["parameters"]["required"] == ["file_path"]
    answers = {r.id: r.text for view in agent.views() for r in view.tool_results}
    assert answers["r1"].startswith("line 0003\nline 0004\n")
    assert split_notice(answers["r1"])[1].next_line == 5
    assert answers["s1"].startswith("1 hit(s) in this conversation, best first")
    assert "collect the documents" in answers["s1"]
    assert answers["m1"].startswith("Added")
    assert "Editor: helix" in (workspace / "Memory.md").read_text(encoding="utf-8")


async def test_the_compaction_model_gets_the_instruction_and_the_messages(
    workspace: Path,
) -> None:
    """``model_call`` of the adapter: the SummaryWriter's two texts reach the model as a system
    instruction and one user message, and its answer's text comes back."""
    model = ScriptedChatModel([SIX_SECTIONS])
    writer = SummaryWriter(
        installed.model_call(model),
        get_token_counter("qwen"),
        32768,
        2048,
    )
    agent = await ran(workspace)
    result = await writer.summarize(agent.views(), None)
    assert result.summary.source == "llm" and result.attempts == 1
    assert result.summary.goal == ["Collect the documents the user asked for"]
    (call,) = model.calls
    assert [m["role"] for m in call.messages] == ["system", "user"]
    assert "## Goal" in str(call.messages[0]["content"])
    assert USER_TEXT in str(call.messages[1]["content"])
    assert not call.tools, "plain text: no tools, no structured output"
    assert is_compaction_call(call)


async def test_a_streamed_answer_is_read_whole(workspace: Path) -> None:
    model = ScriptedChatModel([SIX_SECTIONS], stream=True, chunk_chars=7)
    answer = await installed.model_call(model)("You compact the earlier part.", "hello")
    assert answer == SIX_SECTIONS


async def test_compaction_moves_the_oldest_messages_to_the_dialog(workspace: Path) -> None:
    plan = session_plan(total_calls=16, sizes_kb=[30, 200, 60, 12])
    agent = managed(scripted_session(plan), config(workspace, max_input_tokens=16384))
    await agent.ask("collect the documents")
    manager = agent.manager
    assert manager.stats.compactions >= 1
    summary = manager.port.summary
    assert summary is not None and summary.dialog_refs
    saved = dialog_views(agent)
    assert saved[0].text == "collect the documents", "the oldest first"
    assert not set(call_ids(saved)) & set(call_ids(agent.views())), "moved, not copied"
    assert (workspace / "summary.md").read_text(encoding="utf-8") == summary.render() + "\n"
    assert fetch.__name__ in {r.name for view in saved for r in view.tool_results}
