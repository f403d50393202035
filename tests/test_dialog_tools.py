"""read_dialog / search_dialog (SPEC 6.2) over a real DialogStore, called as an agent would."""

from __future__ import annotations

from datetime import date
from pathlib import Path

from agentscope.message import Msg

from agentscope_context_ext import DialogStore, make_dialog_tools


def text(response) -> str:
    return response.content[0]["text"]


async def test_read_dialog_newest_first_and_paging(workspace: Path) -> None:
    store = DialogStore(workspace, today=lambda: date(2026, 12, 2))
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
    store = DialogStore(workspace)
    read_dialog, _ = make_dialog_tools(store)
    store.append([Msg("user", "x", "user")])
    assert text(await read_dialog(date="../../etc/passwd")).startswith("Error:")
    assert text(await read_dialog(date="2020-01-01")).startswith("Error: no messages")
    assert text(await read_dialog(start_line="abc")).startswith("Error:")


async def test_search_dialog(workspace: Path) -> None:
    store = DialogStore(workspace)
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
