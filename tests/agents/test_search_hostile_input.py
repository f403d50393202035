"""History search against a hostile agent and a hostile environment (design §6.2, §14): each
test is a finding of the adversarial review of the index, and failed before its fix."""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

import pytest
from installed_harness import managed

from agentscope_context_ext.core.search import (
    REGISTRY_KEY,
    Conversation,
    HistoryIndex,
    HistoryScope,
    search_history,
)
from agentscope_context_ext.core.tools import make_dialog_tools, make_read_file
from agentscope_context_ext.core.workspace import (
    DialogStore,
    LocalStorage,
    SubStorage,
    ToolResultStore,
)
from agentscope_context_ext.testing import ScriptedChatModel, reply, tool_call

pytestmark = pytest.mark.usefixtures("search_engine")

DAY = "2026-12-02"
KEY = b"k" * 32


def record(text: str, number: int, day: str = DAY) -> dict:
    return {"id": f"m{number:06d}", "role": "user", "timestamp": f"{day} 09:00:00", "content": text}


def session(root: LocalStorage, user: str, name: str, texts: list[str], key=KEY) -> HistoryScope:
    """A served session of agent a1 laid out as ``served_placement`` lays it out, listed."""
    folder = f"sessions/{name}/context_ext"
    DialogStore(SubStorage(root, folder)).append([record(text, i) for i, text in enumerate(texts)])
    scope = HistoryScope(root, "a1", user, name, folder, key)
    scope.register()
    return scope


def own(scope: HistoryScope) -> SubStorage:
    """The asking session's own folder."""
    return SubStorage(scope.root, scope.folder)


async def test_a_forged_line_of_the_sessions_list_grants_nothing(tmp_path: Path) -> None:
    """The list is in the agent's own 2.x workspace: its tools can append to it or rewrite it.
    A line that is not signed, or names another session's folder, or claims a session first,
    gives mallory nothing of alice's."""
    root = LocalStorage(tmp_path / "workdir")
    session(root, "alice", "s-alice", ["the vault code is 9911-SECRET"])
    mallory = session(root, "mallory", "s-mallory", ["my own notes"])
    forged = [
        # another session's folder under a new name
        {
            "agent": "a1",
            "user": "mallory",
            "session": "x",
            "folder": "sessions/s-alice/context_ext",
        },
        # alice's session claimed, with its real folder, unsigned
        {
            "agent": "a1",
            "user": "mallory",
            "session": "s-alice",
            "folder": "sessions/s-alice/context_ext",
        },
        # a folder that is a link, or outside
        {"agent": "a1", "user": "mallory", "session": "evil", "folder": "evil"},
        {"agent": "a1", "user": "mallory", "session": "up", "folder": "../other/context_ext"},
    ]
    listed = (tmp_path / "workdir" / REGISTRY_KEY).read_text()
    (tmp_path / "workdir" / REGISTRY_KEY).write_text(
        "".join(json.dumps(line) + "\n" for line in forged) + listed  # claimed first
    )
    read_dialog, search_dialog = make_dialog_tools(DialogStore(own(mallory)), mallory)
    for scope in ("agent", "user"):
        assert "9911" not in await search_dialog("vault", 10, scope)
    for name in ("x", "s-alice", "evil", "up"):
        assert (await read_dialog(session=name)).startswith("Error: no session")
    # alice still has her session
    alice = HistoryScope(root, "a1", "alice", "s-alice", "sessions/s-alice/context_ext", KEY)
    assert alice.storage_of("s-alice") is not None


def test_a_full_disk_keeps_the_index_and_answers_from_memory(tmp_path: Path) -> None:
    """SQLite's "database or disk is full" in the middle of a catch-up: the search answers
    from memory, and the index file (with what it had) is kept, not taken for a corrupt one."""
    workspace = tmp_path / "ws"
    store = DialogStore(workspace)
    store.append([record("first entry about kiwi", 1)])
    index = HistoryIndex(store.storage)
    assert [h.line for h in index.search(_terms("kiwi"), 5)] == [1]
    store.append([record(f"entry {i} " + "filler " * 200 + "kiwi", 10 + i) for i in range(300)])
    index._connect().execute("PRAGMA max_page_count = 1")  # the disk is full now
    hits = index.search(_terms("kiwi"), 400)
    assert len(hits) == 301 and index.in_memory, "every message, from memory"
    assert index.path.is_file()
    with sqlite3.connect(index.path) as db:
        assert db.execute("SELECT count(*) FROM docs").fetchone()[0] == 1, "kept as it was"
    db.close()


def _terms(query: str):
    from agentscope_context_ext.core.search import parse_query

    return parse_query(query)


def test_the_index_never_writes_or_deletes_through_a_link(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "index.sqlite").write_bytes(b"someone else's file")
    (tmp_path / "elsewhere.sqlite").write_bytes(b"")
    for link in ("folder", "file"):
        workspace = tmp_path / f"ws-{link}"
        DialogStore(workspace).append([record("the kiwi harvest", 1)])
        if link == "folder":
            (workspace / ".search").symlink_to(outside)
        else:
            (workspace / ".search").mkdir()
            (workspace / ".search" / "index.sqlite").symlink_to(tmp_path / "elsewhere.sqlite")
        conversation = Conversation(LocalStorage(workspace))
        assert [h.line for h in search_history([conversation], "kiwi", 5).hits] == [1]
        assert conversation.history().in_memory
    assert (outside / "index.sqlite").read_bytes() == b"someone else's file"
    assert (tmp_path / "elsewhere.sqlite").read_bytes() == b""


async def test_what_read_dialog_never_shows_is_not_searched(tmp_path: Path) -> None:
    """The index reads a record as the tools render it (the adapter's codec): 2.x's tool
    ``state`` (``success``) and ``finished_at`` are not words of the conversation."""

    async def list_dir() -> str:
        """List the project folder."""
        return "files: a.txt b.txt kiwifruit"

    answers = iter([reply(None, tool_call("list_dir", "l1")), "Listed.", "Fine."])
    model = ScriptedChatModel(lambda call: next(answers) if call.tools else "## Goal\n- list")
    config = {"workspace": str(tmp_path / "ws"), "long_term_memory": {"enabled": False}}
    agent = managed(model, config, tools=[list_dir])
    await agent.ask("list the folder")
    await agent.ask("thanks")
    await agent.manager.compact_now()
    _, search_dialog = make_dialog_tools(agent.manager.dialog_store)
    found = await search_dialog("kiwifruit")
    assert found.startswith("1 hit(s)"), found
    for word in ("success", "finished"):
        assert (await search_dialog(word)).startswith("No saved message"), word


def test_a_small_session_is_not_drowned_by_a_big_one(tmp_path: Path) -> None:
    """Each conversation ranks with its own statistics: a 2-message session's exact hit scores
    near zero there, and came after every passing mention of a 1,000-message session."""
    root = LocalStorage(tmp_path / "workdir")
    small = session(root, "alice", "small", ["kiwi rollout plan: ship kiwi on friday", "other"])
    filler = "lorem ipsum " * 40
    texts = [
        f"status {i} {filler}" + (" and kiwi maybe" if i % 80 == 0 else "") for i in range(1000)
    ]
    session(root, "alice", "big", texts)
    asking = Conversation(own(small))
    hits = search_history(small.conversations("user", asking), "kiwi", 10).hits
    assert hits[0].session is None and hits[0].line == 1, [(h.session, h.line) for h in hits]
    assert {h.session for h in hits} == {None, "big"}


def test_a_lone_surrogate_in_a_dialog_line_does_not_stop_search(tmp_path: Path) -> None:
    store = DialogStore(tmp_path / "ws")
    store.append([record("a file named bad\udcffname.txt", 1), record("the kiwi crate", 2)])
    conversation = Conversation(store.storage)
    assert [h.line for h in search_history([conversation], "kiwi", 5).hits] == [2]
    assert [h.line for h in search_history([conversation], "bad", 5).hits] == [1]


def test_searching_many_sessions_keeps_no_file_open(tmp_path: Path) -> None:
    root = LocalStorage(tmp_path / "workdir")
    first = session(root, "alice", "s0", ["kiwi zero"])
    for n in range(1, 40):
        session(root, "alice", f"s{n}", [f"kiwi {n}"])
    before = len(os.listdir("/proc/self/fd"))
    conversations = first.conversations("user", Conversation(own(first)))
    assert len(search_history(conversations, "kiwi", 100).hits) == 40
    assert len(os.listdir("/proc/self/fd")) <= before + 2, "each index closed after its search"


def test_the_sessions_list_listed_twice_or_with_giant_ids_is_read_once(tmp_path: Path) -> None:
    root = LocalStorage(tmp_path / "workdir")
    alice = session(root, "alice", "s1", ["the kiwi crate"])
    other = session(root, "alice", "s2", ["kiwi again"])
    line = (tmp_path / "workdir" / REGISTRY_KEY).read_text().splitlines()[1]
    huge = {"agent": "a1", "user": "alice", "session": "z" * 100_000, "folder": "x"}
    with open(tmp_path / "workdir" / REGISTRY_KEY, "a") as handle:
        handle.write(line + "\n" + line + "\n" + json.dumps(huge) + "\n")
    hits = search_history(alice.conversations("user", Conversation(own(alice))), "kiwi", 10).hits
    assert sorted(str(h.session) for h in hits) == ["None", "s2"]
    assert other.storage_of("z" * 100_000) is None


async def test_a_match_deep_in_a_long_line_reads_on_from_its_byte(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    path = ToolResultStore(workspace).save("x" * 400_000 + " the needle_word here\nnext line\n")
    store = DialogStore(workspace)
    store.append([record(f"saved {path}", 1)])
    _, search_dialog = make_dialog_tools(store)
    found = await search_dialog("needle_word")
    call = next(line for line in found.splitlines() if "read on: read_file(" in line)
    assert "start_byte=" in call, found
    start = int(call.split("start_byte=")[1].split(")")[0].split(",")[0])
    read_file = make_read_file(workspace)
    assert "needle_word" in await read_file(path, 1, None, start)


def test_saved_text_never_drives_the_terminal(tmp_path: Path, capsys) -> None:
    from agentscope_context_ext.cli import main

    DialogStore(tmp_path / "ws").append([record("kiwi \x1b]0;HACKED\x07\x1b[2J done", 1)])
    assert main(["search", str(tmp_path / "ws"), "kiwi"]) == 0
    out = capsys.readouterr().out
    assert "kiwi" in out and "\x1b" not in out and "\x07" not in out


def test_the_command_line_names_the_right_copy(tmp_path: Path, capsys) -> None:
    """Two served workspaces listing the same agent and session (a copied folder): each hit's
    path is its own workspace's."""
    from agentscope_context_ext.cli import main

    for name, word in (("agent-1", "kiwi original"), ("agent-1.bak", "kiwi in the copy")):
        root = LocalStorage(tmp_path / "workspaces" / name)
        folder = "sessions/s1/context_ext"
        DialogStore(SubStorage(root, folder)).append([record(word, 1)])
        HistoryScope(root, "a1", "alice", "s1", folder).register()
    assert main(["search", str(tmp_path / "workspaces"), "kiwi", "--json"]) == 0
    hits = json.loads(capsys.readouterr().out)["hits"]
    by_path = {hit["path"]: hit["snippet"] for hit in hits}
    assert by_path == {
        "agent-1/sessions/s1/context_ext/dialog/2026-12-02.jsonl": "kiwi original",
        "agent-1.bak/sessions/s1/context_ext/dialog/2026-12-02.jsonl": "kiwi in the copy",
    }


def test_a_call_id_is_never_a_word_of_the_conversation(tmp_path: Path) -> None:
    """Read through the codec, a tool call renders with its id; the index reads what it says:
    its name, its arguments as written, its output."""
    from neutral_port import MessageCodec, assistant, results

    from agentscope_context_ext.core.messages import ToolCall, ToolResult
    from agentscope_context_ext.core.tools import record_view

    store = DialogStore(tmp_path / "ws", codec=MessageCodec())
    store.append(
        [
            assistant(None, ToolCall("call_kiwi_17", "Edit", {"file_path": "web/view.heex"})),
            results(ToolResult("call_kiwi_17", "Edit", "edited: three lines")),
        ]
    )
    conversation = Conversation(store.storage, view=record_view(store))
    for query, lines in (("kiwi", []), ("Edit", [1, 2]), ("view.heex", [1]), ("three", [2])):
        found = sorted(h.line for h in search_history([conversation], query, 5).hits)
        assert found == lines, query


async def test_an_accent_the_index_ignored_is_ignored_where_the_match_is_shown(
    tmp_path: Path,
) -> None:
    """The index folds diacritics (``cafe`` finds ``café``); the line and the snippet of the
    match did not, and pointed at line 1 of a 20,000-line output."""
    workspace = tmp_path / "ws"
    path = ToolResultStore(workspace).save("filler line\n" * 20_000 + "un café noir\n")
    store = DialogStore(workspace)
    store.append([record(f"saved {path}", 1), record("Ünïcödé handling in the parser", 2)])
    _, search_dialog = make_dialog_tools(store)
    found = await search_dialog("cafe")
    assert "un café noir" in found and "start_line=20001" in found, found
    found = await search_dialog("unicode")
    assert "Ünïcödé handling" in found and "line 2" in found, found


def test_the_any_term_fallback_still_reads_a_conversation_searched_in_memory(
    tmp_path: Path,
) -> None:
    """Every index but the asking one's is closed between the two passes; one that lives in
    memory (its folder cannot hold an index) is built again for the any-term pass."""
    for name in ("a", "b"):
        DialogStore(tmp_path / name).append([record(f"kiwi from {name}", 1)])
    (tmp_path / "b" / ".search").write_text("a file where the index folder would be")
    conversations = [
        Conversation(LocalStorage(tmp_path / "a")),
        Conversation(LocalStorage(tmp_path / "b"), session="b"),
    ]
    result = search_history(conversations, "kiwi nothing_else", 5)
    assert not result.all_terms
    assert [(h.session, h.snippet) for h in result.hits] == [
        (None, "kiwi from a"),
        ("b", "kiwi from b"),
    ]
