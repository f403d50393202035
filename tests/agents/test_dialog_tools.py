"""read_dialog / search_dialog (design §6.2): the core's tool functions over a real DialogStore of
neutral messages, called as an agent would; then on a managed agent of the installed AgentScope,
where they join the prompt once there is a dialog."""

from __future__ import annotations

from datetime import date
from pathlib import Path

from harness_common import session_plan
from installed_harness import is_agent_call, managed, scripted_session, tool_names
from neutral_port import MessageCodec, assistant, results, user

from agentscope_context_ext.core.messages import ToolCall, ToolResult
from agentscope_context_ext.core.tools import make_dialog_tools
from agentscope_context_ext.core.truncation import truncate_fresh
from agentscope_context_ext.core.workspace import DialogStore, ToolResultStore
from agentscope_context_ext.testing import ScriptedChatModel, reply, tool_call


def dialog(workspace: Path, today: date | None = None) -> DialogStore:
    if today is None:
        return DialogStore(workspace, codec=MessageCodec())
    return DialogStore(workspace, today=lambda: today, codec=MessageCodec())


async def test_read_dialog_newest_first_and_paging(workspace: Path) -> None:
    store = dialog(workspace, date(2026, 12, 2))
    read_dialog, _ = make_dialog_tools(store)
    assert "nothing was compacted" in await read_dialog()
    store.append([user(f"message {i}", timestamp="2026-12-02 09:00:00") for i in range(30)])
    out = await read_dialog(limit=5)
    assert out.splitlines()[0] == "dialog/2026-12-02.jsonl, lines 26-30 of 30:"
    assert "[line 30] user(user) 2026-12-02 09:00:00: message 29" in out
    assert "read_dialog(date='2026-12-02', start_line=21, limit=5)" in out
    forward = await read_dialog(date="2026-12-02", start_line=3, limit=2)
    assert "message 2" in forward and "message 3" in forward and "message 4" not in forward


async def test_read_dialog_errors_are_strings(workspace: Path) -> None:
    store = dialog(workspace)
    read_dialog, _ = make_dialog_tools(store)
    store.append([user("x")])
    assert (await read_dialog(date="../../etc/passwd")).startswith("Error:")
    assert (await read_dialog(date="2020-01-01")).startswith("Error: no messages")
    assert (await read_dialog(start_line="abc")).startswith("Error:")
    for bad in ({"date": 5}, {"date": ["2026-12-02"]}, {"start_line": 1.5}, {"limit": "inf"}):
        answer = await read_dialog(**bad)
        assert answer.startswith("Error: ") and "\n" not in answer, (bad, answer)
    assert (await read_dialog(start_line=1.0)).startswith("dialog/")


async def test_search_dialog(workspace: Path) -> None:
    store = dialog(workspace)
    _, search_dialog = make_dialog_tools(store)
    store.append([user("the staging password rotates weekly"), assistant("noted")])
    out = await search_dialog("staging password")
    assert out.startswith("1 hit(s) in this conversation") and "rotates weekly" in out
    assert "read_dialog(date=" in out and "start_line=1" in out
    assert (await search_dialog("absent words")).startswith("No saved message")
    assert (await search_dialog("  ")).startswith("Error:")


async def test_search_finds_quoted_arguments_and_offloaded_outputs(workspace: Path) -> None:
    """Every identifier of the compacted messages is reachable (issue 11, B7): strings inside
    tool arguments as written (not JSON-escaped), and the saved full text of a truncated
    output, past its excerpt."""
    saved = ToolResultStore(workspace)
    full = "line\n" * 4000 + "deep_in_the_log: checksum mismatch at block 77\n"
    path = saved.save(full)
    excerpt = truncate_fresh(full, max_bytes=300, file_path=path)
    store = dialog(workspace)
    _, search_dialog = make_dialog_tools(store)
    edit = {
        "file_path": "web/view.heex",
        "old_string": '<pre><code class="language-json">',
        "new_string": '<pre><code class="lang-json">',
    }
    store.append(
        [
            assistant(None, ToolCall("e1", "Edit", edit)),
            results(ToolResult("b1", "bash", excerpt)),
        ]
    )
    assert (await search_dialog('<pre><code class="language-json">')).startswith("1 hit(s)")
    found = await search_dialog("checksum mismatch at block 77")
    assert found.startswith("1 hit(s)") and path in found
    assert f"read_file(file_path={path!r}, start_line=4001)" in found, "the line of the match"


async def test_the_dialog_tools_join_the_prompt_once_there_is_a_dialog(workspace: Path) -> None:
    """On the installed AgentScope: read_dialog and search_dialog are offered once a dialog
    exists, counted from then on, and on a fresh agent of the same workspace at once."""
    model = scripted_session(session_plan(10, [30, 60]))
    config = {
        "workspace": str(workspace),
        "max_input_tokens": 16384,
        "notices": False,
        "long_term_memory": {"enabled": False},
    }
    agent = managed(model, config)
    await agent.ask("collect the documents")
    assert agent.manager.stats.compactions >= 1
    calls = [call for call in model.calls if is_agent_call(call)]
    shown = ["read_dialog" in tool_names(call) for call in calls]
    first = shown.index(True)
    assert first > 0 and all(shown[first:]) and not any(shown[:first])
    assert {"read_file", "search_dialog"} <= tool_names(calls[first])
    assert "read_file" in tool_names(calls[0])
    # the count the trigger uses has them too, from then on
    _, schemas = await agent.manager.prompt_parts()
    assert {"read_dialog", "search_dialog"} <= {t["function"]["name"] for t in schemas}
    # a fresh agent on this workspace offers them at once: there is a dialog to read
    again = ScriptedChatModel(["hello"])
    await managed(again, config).ask("what did we do?")
    assert "read_dialog" in tool_names(again.calls[0])


async def test_a_dialog_tool_called_before_any_dialog_still_answers(workspace: Path) -> None:
    model = ScriptedChatModel([reply("look", tool_call("read_dialog", "d1")), "done"])
    agent = managed(model, {"workspace": str(workspace), "long_term_memory": {"enabled": False}})
    assert await agent.ask("anything saved?") == "done"
    assert "read_dialog" not in tool_names(model.calls[0]), "not shown..."
    answer = next(r.text for view in agent.views() for r in view.tool_results if r.id == "d1")
    assert "nothing was compacted" in answer, "...but registered, and it answers"
