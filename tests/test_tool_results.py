"""The two truncation stages on a real ReActAgent (SPEC 3.2-3.4; issue 12's bugs)."""

from __future__ import annotations

from pathlib import Path

from agentscope.agent import ReActAgent
from agentscope.formatter import DashScopeChatFormatter
from agentscope.message import Msg, TextBlock
from agentscope.tool import Toolkit, ToolResponse

from agentscope_context_ext import enable_context_management, split_notice
from agentscope_context_ext.testing import ScriptedChatModel, reply, tool_call

from agent_harness import make_text

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
