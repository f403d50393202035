"""The manager (design §1; issue 12): ``Memory.md`` never reaches session state, ``compact_now``
with a streaming model, compaction notices shown and never stored, on a managed agent of the
installed AgentScope. How 1.x attaches to a ``ReActAgent`` (every change through its public API,
``detach()`` undoing it exactly, its compression config, ``ContextReActAgent``) is 1.x's own
and marked ``agentscope1``; 2.x's attachment is tested in agentscope2/test_agentscope2_adapter.py."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from harness_common import SIZES_KB, fetch, prompt_orphans, session_plan
from installed_harness import (
    all_views,
    is_agent_call,
    is_compaction_call,
    managed,
    scripted_session,
)

from agentscope_context_ext.compat import agentscope_major
from agentscope_context_ext.core.longterm import LongTermMemory
from agentscope_context_ext.testing import ScriptedChatModel

if agentscope_major() < 2:  # the tests marked agentscope1
    from agentscope.agent import ReActAgent
    from agentscope.formatter import DashScopeChatFormatter
    from agentscope.memory import InMemoryMemory
    from agentscope.message import Msg
    from agentscope.tool import Toolkit

    from agentscope_context_ext import (
        ContextMemory,
        ContextReActAgent,
        enable_context_management,
        get_token_counter,
    )

    from agent_harness import make_agent

SECRET_FACT = "User's favourite editor is ed-4711"


async def test_memory_md_never_reaches_session_state(workspace: Path) -> None:
    LongTermMemory(workspace).append(SECRET_FACT, "Personal")
    model = scripted_session(session_plan(total_calls=20, sizes_kb=[12, 30]))
    config = {"workspace": str(workspace), "max_input_tokens": 16384}
    agent = managed(model, config)
    await agent.ask("collect the documents")
    assert any(SECRET_FACT in str(call.messages) for call in model.calls), "the model saw it"
    assert agent.manager.stats.compactions >= 1
    await agent.save_session("s")
    saved = "\n".join(p.read_text(encoding="utf-8") for p in (workspace / "sessions").glob("*"))
    assert saved, "the session was saved in the workspace"
    assert "ed-4711" not in saved and "<long-term-memory>" not in saved
    # the summary itself is session state
    fresh = managed(ScriptedChatModel(["resumed"]), config)
    await fresh.load_session("s")
    assert fresh.manager.port.summary.render() == agent.manager.port.summary.render()
    assert [view.parts for view in fresh.views()] == [view.parts for view in agent.views()]


async def test_streaming_model_and_compact_now(workspace: Path) -> None:
    plan = session_plan(total_calls=6, sizes_kb=[8])
    model = scripted_session(plan, stream=True)
    agent = managed(model, {"workspace": str(workspace)})
    manager = agent.manager
    assert await agent.ask("go") == "All documents fetched."
    before = (await manager.count()).total
    after = await manager.compact_now(extra_instruction="keep document seeds")
    assert after.total < before
    assert manager.stats.compactions == 1
    assert "keep document seeds" in next(c for c in model.calls if is_compaction_call(c)).text
    # the next prompt starts with the summary and holds no orphan
    assert await agent.ask("and now?") == "All documents fetched."
    sent = [c for c in model.calls if is_agent_call(c)][-1].messages
    assert prompt_orphans(sent) == []
    first = sent[1]["content"]
    assert manager.port.summary.render() in (first if isinstance(first, str) else first[0]["text"])


# ----------------------------------------------------------------------- notices


def printed_notices(agent, capsys: pytest.CaptureFixture) -> Callable[[], list[str]]:
    """The compaction notices the agent showed: a 1.x agent prints them as messages named
    ``context`` (its ``pre_print`` hook sees them, the console off or not), 2.x on stdout."""
    if agentscope_major() >= 2:
        return lambda: [
            line for line in capsys.readouterr().out.splitlines() if line.startswith("[context]")
        ]
    printed: list = []
    agent.agent.register_instance_hook(
        "pre_print", "capture", lambda a, k: printed.append(k["msg"])
    )
    return lambda: [msg.content for msg in printed if msg.name == "context"]


async def test_compaction_notices_are_printed_not_stored(
    workspace: Path, capsys: pytest.CaptureFixture
) -> None:
    model = scripted_session(session_plan(total_calls=12, sizes_kb=SIZES_KB))
    agent = managed(model, {"workspace": str(workspace), "max_input_tokens": 16384})
    notices = printed_notices(agent, capsys)
    await agent.ask("go")
    shown = notices()
    assert agent.manager.stats.compactions >= 1
    assert len(shown) == 2 * agent.manager.stats.compactions
    assert "summarising" in shown[0] and "->" in shown[1]
    assert not [view for view in all_views(agent) if "[context]" in view.raw_text()]


async def test_notices_can_be_turned_off(workspace: Path, capsys: pytest.CaptureFixture) -> None:
    model = scripted_session(session_plan(total_calls=12, sizes_kb=SIZES_KB))
    config = {"workspace": str(workspace), "max_input_tokens": 16384, "notices": False}
    agent = managed(model, config)
    notices = printed_notices(agent, capsys)
    await agent.ask("go")
    assert agent.manager.stats.compactions >= 1
    assert notices() == []


# ----------------------------------------------- 1.x: attaching to an existing ReActAgent


def _fresh(model: ScriptedChatModel) -> ReActAgent:
    return make_agent(model, DashScopeChatFormatter())


def _hooks(agent: ReActAgent) -> dict[str, list[str]]:
    # AgentScope keeps instance hooks in one dict per hook type; compare their names only.
    return {
        name: sorted(getattr(agent, name))
        for name in dir(agent)
        if name.startswith("_instance_") and name.endswith("_hooks")
    }


@pytest.mark.agentscope1
async def test_detach_gives_back_the_agent_as_it_was(workspace: Path) -> None:
    original_model = scripted_session(session_plan(total_calls=20, sizes_kb=[12, 30]))
    agent = _fresh(original_model)
    fresh = _fresh(ScriptedChatModel([]))
    original_memory = agent.memory
    before_state = set(agent.state_dict())
    manager = enable_context_management(
        agent, {"workspace": str(workspace), "max_input_tokens": 16384}
    )
    assert isinstance(agent.memory, ContextMemory) and agent.model is not original_model
    assert agent.context_manager is manager
    await agent(Msg("user", "collect the documents", "user"))
    assert manager.stats.compactions >= 1
    kept = [msg.id for msg in agent.memory.messages]
    summary = agent.memory.compact_summary
    assert "agent.memory" in manager.attachment.changes

    manager.detach()
    assert agent.memory is original_memory and isinstance(agent.memory, InMemoryMemory)
    assert agent.model is original_model
    assert not hasattr(agent, "context_manager")
    assert set(agent.toolkit.tools) == set(fresh.toolkit.tools)
    assert _hooks(agent) == _hooks(fresh)
    assert agent.sys_prompt == fresh.sys_prompt
    assert set(agent.state_dict()) == before_state
    # what the agent knows is kept: the summary first, then the live messages
    restored = await agent.memory.get_memory()
    assert restored[0].content == summary.render()
    assert [m.id for m in restored[1:]] == kept
    assert prompt_orphans(await agent.formatter.format(restored)) == []
    # and it can be managed again
    again = enable_context_management(agent, {"workspace": str(workspace)})
    assert [m.id for m in agent.memory.messages][-len(kept) :] == kept
    again.detach()


@pytest.mark.agentscope1
async def test_compression_config_is_turned_off_and_back_on(workspace: Path) -> None:
    compression = ReActAgent.CompressionConfig(
        enable=True,
        agent_token_counter=get_token_counter("qwen"),  # ours is a TokenCounterBase too
        trigger_threshold=10_000,
        keep_recent=3,
    )
    toolkit = Toolkit()
    toolkit.register_tool_function(fetch)
    agent = ReActAgent(
        name="a",
        sys_prompt="s",
        model=ScriptedChatModel(["ok"]),
        formatter=DashScopeChatFormatter(),
        toolkit=toolkit,
        compression_config=compression,
    )
    manager = enable_context_management(agent, {"workspace": str(workspace)})
    assert agent.compression_config is None
    manager.detach()
    assert agent.compression_config is compression


@pytest.mark.agentscope1
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


@pytest.mark.agentscope1
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
