"""read_dialog / search_dialog (design §6.2) over a real DialogStore, called as an agent would."""

from __future__ import annotations

from datetime import date
from pathlib import Path

from agentscope.message import Msg

from agentscope_context_ext import make_dialog_tools, open_dialog


def text(response) -> str:
    return response.content[0]["text"]


async def test_read_dialog_newest_first_and_paging(workspace: Path) -> None:
    store = open_dialog(workspace, today=lambda: date(2026, 12, 2))
    read_dialog, _ = make_dialog_tools(store)
    assert "nothing was compacted" in text(await read_dialog())
    store.append(
        [Msg("user", f"message {i}", "user", timestamp="2026-12-02 09:00:00") for i in range(30)]
    )
    out = text(await read_dialog(limit=5))
    assert out.splitlines()[0] == "dialog/2026-12-02.jsonl, lines 26-30 of 30:"
    assert "[line 30] user(user) 2026-12-02 09:00:00: message 29" in out
    assert "read_dialog(date='2026-12-02', start_line=21, limit=5)" in out
    forward = text(await read_dialog(date="2026-12-02", start_line=3, limit=2))
    assert "message 2" in forward and "message 3" in forward and "message 4" not in forward


async def test_read_dialog_errors_are_strings(workspace: Path) -> None:
    store = open_dialog(workspace)
    read_dialog, _ = make_dialog_tools(store)
    store.append([Msg("user", "x", "user")])
    assert text(await read_dialog(date="../../etc/passwd")).startswith("Error:")
    assert text(await read_dialog(date="2020-01-01")).startswith("Error: no messages")
    assert text(await read_dialog(start_line="abc")).startswith("Error:")
    for bad in ({"date": 5}, {"date": ["2026-12-02"]}, {"start_line": 1.5}, {"limit": "inf"}):
        answer = text(await read_dialog(**bad))
        assert answer.startswith("Error: ") and "\n" not in answer, (bad, answer)
    assert text(await read_dialog(start_line=1.0)).startswith("dialog/")


async def test_search_dialog(workspace: Path) -> None:
    store = open_dialog(workspace)
    _, search_dialog = make_dialog_tools(store)
    store.append(
        [
            Msg("user", "the staging password rotates weekly", "user"),
            Msg("assistant", "noted", "assistant"),
        ]
    )
    out = text(await search_dialog("staging password"))
    assert out.startswith("1 message(s)") and "rotates weekly" in out
    assert text(await search_dialog("absent words")).startswith("No saved message")
    assert text(await search_dialog("  ")).startswith("Error:")


async def test_search_finds_quoted_arguments_and_offloaded_outputs(workspace: Path) -> None:
    """Every identifier of the compacted messages is reachable (issue 11, B7): strings inside
    tool arguments as written (not JSON-escaped), and the saved full text of a truncated
    output, past its excerpt."""
    from agentscope_context_ext import ToolResultStore
    from agentscope_context_ext.core.truncation import truncate_fresh

    saved = ToolResultStore(workspace)
    full = "line\n" * 4000 + "deep_in_the_log: checksum mismatch at block 77\n"
    path = saved.save(full)
    excerpt = truncate_fresh(full, max_bytes=300, file_path=path)
    store = open_dialog(workspace)
    _, search_dialog = make_dialog_tools(store)
    edit = {
        "file_path": "web/view.heex",
        "old_string": '<pre><code class="language-json">',
        "new_string": '<pre><code class="lang-json">',
    }
    store.append(
        [
            Msg(
                "assistant",
                [{"type": "tool_use", "id": "e1", "name": "Edit", "input": edit}],
                "assistant",
            ),
            Msg(
                "system",
                [{"type": "tool_result", "id": "b1", "name": "bash", "output": excerpt}],
                "system",
            ),
        ]
    )
    assert text(await search_dialog('<pre><code class="language-json">')).startswith("1 message")
    found = text(await search_dialog("checksum mismatch at block 77"))
    assert found.startswith("1 message") and path in found


async def test_the_dialog_tools_join_the_prompt_once_there_is_a_dialog(workspace: Path) -> None:
    """On 1.x as on 2.x: read_dialog and search_dialog are offered once a dialog exists."""
    from agentscope.formatter import DashScopeChatFormatter

    from agentscope_context_ext import enable_context_management

    from agent_harness import is_agent_call, make_agent, scripted_session, session_plan

    def names(call) -> set[str]:
        return {t["function"]["name"] for t in call.tools or []}

    model = scripted_session(session_plan(10, [30, 60]))
    agent = make_agent(model, DashScopeChatFormatter())
    config = {"workspace": str(workspace), "max_input_tokens": 16384, "notices": False}
    manager = enable_context_management(agent, {**config, "long_term_memory": {"enabled": False}})
    await agent(Msg("user", "collect the documents", "user"))
    assert manager.stats.compactions >= 1
    shown = ["read_dialog" in names(call) for call in model.calls if is_agent_call(call)]
    first = shown.index(True)
    assert first > 0 and all(shown[first:]) and not any(shown[:first])
    assert "read_file" in names(next(c for c in model.calls if is_agent_call(c)))
    # the registered tools are all there; the count uses what the model is shown
    assert {"read_dialog", "search_dialog"} <= set(agent.toolkit.tools)
    # a fresh agent on this workspace offers them at once: there is a dialog to read
    again = scripted_session([])
    fresh = make_agent(again, DashScopeChatFormatter())
    enable_context_management(fresh, {**config, "long_term_memory": {"enabled": False}})
    await fresh(Msg("user", "what did we do?", "user"))
    assert "read_dialog" in names(again.calls[0])
