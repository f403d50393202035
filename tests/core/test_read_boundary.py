"""The boundary of a served session's file tools, in the core (design §11.4): ``ReadBoundary``,
``read_file`` and the explorer's ``list_dir``/``grep`` given one, and ``LocalStorage``, which
never goes through a link inside its folder. No framework: the served tests drive the same
through AgentScope 2.x's service (``test_served_boundary.py``)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agentscope_context_ext.core.tools import make_explorer_functions, make_read_file
from agentscope_context_ext.core.workspace import LocalStorage, ReadBoundary


@pytest.fixture
def tree(tmp_path: Path) -> dict[str, Path]:
    """A project holding a service's workspaces: two sessions' folders, a records file."""
    project = tmp_path / "project"
    ws = project / "ws"
    mine = ws / "agent-b" / "sessions" / "b1"
    theirs = ws / "agent-a" / "sessions" / "a1"
    for folder in (mine / "context_ext" / "message", theirs / "context_ext" / "message"):
        folder.mkdir(parents=True)
    (mine / "context_ext" / "message" / "m.txt").write_text("figbob says hi\n")
    (theirs / "context_ext" / "message" / "s.txt").write_text("kiwialice secret\n")
    (project / "app.db").write_text("kiwialice in the records\n")
    (project / "notes.md").write_text("a project note\n")
    return {"project": project, "ws": ws, "mine": mine, "theirs": theirs}


def boundary(tree: dict[str, Path]) -> ReadBoundary:
    return ReadBoundary.of([tree["ws"], tree["project"] / "app.db"], [tree["mine"]])


def test_the_nearest_hidden_or_own_folder_decides(tree):
    seen = boundary(tree)
    secret = tree["theirs"] / "context_ext" / "message" / "s.txt"
    assert seen.allows(tree["mine"] / "context_ext" / "message" / "m.txt")
    assert seen.allows(tree["project"] / "notes.md")
    assert not seen.allows(secret)
    assert not seen.allows(tree["mine"] / ".." / "b2")  # another session, by ..
    assert not seen.allows(tree["theirs"] / "not-there.txt")  # missing: refused alike
    assert not seen.allows(tree["project"] / "app.db")
    os.link(tree["project"] / "app.db", tree["project"] / "copy.db")  # same file, other name
    assert not seen.allows(tree["project"] / "copy.db")
    (tree["project"] / "link").symlink_to(tree["theirs"], target_is_directory=True)
    assert not seen.allows(tree["project"] / "link" / "context_ext" / "message" / "s.txt")
    # the way to the own folder may be shown, nothing beside it
    assert seen.shows(tree["ws"]) and seen.shows(tree["ws"] / "agent-b")
    assert not seen.shows(tree["ws"] / "agent-a")


async def test_read_file_refuses_in_one_line_whether_or_not_the_file_exists(tree):
    read_file = make_read_file(
        tree["mine"] / "context_ext", allowed_roots=[tree["project"]], boundary=boundary(tree)
    )
    secret = tree["theirs"] / "context_ext" / "message" / "s.txt"
    there = await read_file(str(secret))
    missing = await read_file(str(secret.with_name("gone.txt")))
    relative = await read_file(str(secret.relative_to(tree["project"])))
    assert there.startswith("Error: ") and "\n" not in there and "kiwialice" not in there
    assert there.split(" ", 2)[2] == missing.split(" ", 2)[2]  # the same words after the path
    # relative to the project root, a file of another session reads as absent: whether it
    # exists is not told (the refusal above comes before looking)
    assert relative == f"Error: file not found: {secret.relative_to(tree['project'])}"
    absent = secret.with_name("gone.txt").relative_to(tree["project"])
    assert await read_file(str(absent)) == f"Error: file not found: {absent}"
    assert "figbob" in await read_file("message/m.txt")
    assert "project note" in await read_file("notes.md")


async def test_explorer_never_lists_or_greps_a_hidden_folder(tree):
    list_dir, grep = make_explorer_functions(tree["project"], boundary(tree))
    head, hits = (await grep("kiwialice|figbob", ".")).split("\n", 1)
    assert head.startswith("1 match(es)") and "figbob says hi" in hits and "kiwi" not in hits
    assert (await list_dir("ws")).splitlines()[1:] == ["agent-b/"]
    assert (await list_dir("ws/agent-a")).startswith("Error: ws/agent-a is among")
    assert (await grep("x", "ws/agent-a")).startswith("Error: ")
    # bad paths are one line, never an exception
    assert (await list_dir("x" * 5000)).startswith("Error: ")
    assert (await grep("x", "x" * 5000)).startswith("0 match(es)")
    assert (await list_dir(None)) == "Error: None is not a path"


async def test_explorer_follows_no_link_out_of_its_root(tmp_path):
    """Not served too: a link in the project to a file outside it was read by grep (and
    listed with the target's size)."""
    project, outside = tmp_path / "project", tmp_path / "outside.txt"
    project.mkdir()
    outside.write_text("password=hunter2\n")
    (project / "leak.txt").symlink_to(outside)
    (project / "broken.txt").symlink_to(tmp_path / "gone")
    list_dir, grep = make_explorer_functions(project)
    assert (await grep("hunter2")).startswith("0 match(es)")
    assert "leak.txt" not in await list_dir(".")
    assert (await list_dir(".")).startswith(".: 0 entries")  # and a broken link is no error


def test_local_storage_goes_through_no_link_in_its_folder(tmp_path):
    store = LocalStorage(tmp_path / "b1")
    elsewhere = tmp_path / "a1"
    (elsewhere / "dialog").mkdir(parents=True)
    (elsewhere / "dialog" / "2026-01-01.jsonl").write_text('{"secret": "kiwialice"}\n')
    (store.root / "dialog").symlink_to(elsewhere / "dialog", target_is_directory=True)
    (store.root / "own.txt").symlink_to(elsewhere / "dialog" / "2026-01-01.jsonl")
    for attempt in (
        lambda: store.read("dialog/2026-01-01.jsonl"),
        lambda: list(store.lines("dialog/2026-01-01.jsonl")),
        lambda: store.append_lines("dialog/2026-01-01.jsonl", [b"{}"]),
        lambda: store.read("own.txt"),
        lambda: store.write("dialog/new.jsonl", b"x"),
    ):
        with pytest.raises(ValueError, match="passes a link"):
            attempt()
    assert store.names("dialog") == []
    assert not store.touch("own.txt")
    assert (elsewhere / "dialog" / "2026-01-01.jsonl").read_text() == '{"secret": "kiwialice"}\n'
