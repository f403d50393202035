"""``agentscope-context search`` (design §6.2, §10): one conversation's workspace, a served place
with its sessions list, a folder of served agents' workspaces and a Redis store; best hit first
with path and line; bad input is one line and exit 2."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from agentscope_context_ext.cli import main
from agentscope_context_ext.core.search import HistoryScope
from agentscope_context_ext.core.workspace import (
    DialogStore,
    LocalStorage,
    Storage,
    SubStorage,
    ToolResultStore,
    open_storage,
)

pytestmark = pytest.mark.usefixtures("search_engine")


def message(i: int, text: str, day: str = "2026-12-03") -> dict:
    return {
        "id": str(uuid.uuid5(uuid.NAMESPACE_OID, f"{i}:{text}")),
        "role": "user" if i % 2 == 0 else "assistant",
        "timestamp": f"{day}T10:{i % 60:02d}:00",
        "content": [{"type": "text", "text": text}],
    }


def fill(workspace: Path | Storage, texts: list[str]) -> DialogStore:
    store = DialogStore(workspace)
    store.append([message(i, text) for i, text in enumerate(texts)])
    return store


def run(capsys: pytest.CaptureFixture, *args: str) -> tuple[int, str, str]:
    code = main(["search", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_one_conversation_best_hit_first_with_path_and_line(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    workspace = tmp_path / "ws"
    fill(workspace, ["deploy the api", "the cache_key of sessions", "cache misses", "unrelated"])
    saved = ToolResultStore(workspace).save("line one\n" * 40 + "ERROR cache_key mismatch\n")
    code, out, err = run(capsys, str(workspace), "cache_key")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == "2 hit(s) in 1 conversation, best first:"
    paths = [line.split()[1] for line in lines[1:] if line[0].isdigit()]
    assert set(paths) == {"dialog/2026-12-03.jsonl:2", f"{saved}:41"}, out
    code, out, _ = run(capsys, str(workspace), "cache_key", "--json", "--limit", "1")
    answer = json.loads(out)
    assert code == 0 and len(answer["hits"]) == 1 and answer["all_terms"] is True
    assert answer["hits"][0]["path"] in ("dialog/2026-12-03.jsonl", saved)
    code, out, _ = run(capsys, str(workspace), "nothing-like-this")
    assert code == 0 and out.startswith("nothing in 1 conversation matches")


@pytest.mark.parametrize(
    ("args", "reason"),
    [
        (['"'], "no words to search for"),
        (["*"], "no words to search for"),
        (["x", "--limit", "0"], "--limit must be between 1 and 10,000"),
        (["x", "--limit", "99999999999999999999"], "--limit must be between 1 and 10,000"),
        (["x", "--scope", "galaxy"], "--scope must be one of"),
        (["x", "--scope", "agent"], "--scope agent needs --agent"),
        (["x", "--user", "nobody"], "no conversation matches --user nobody"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture, args: list[str], reason: str
) -> None:
    workspace = tmp_path / "ws"
    fill(workspace, ["something said"])
    code, out, err = run(capsys, str(workspace), *args)
    assert code == 2 and out == "", out
    assert err.count("\n") == 1 and reason in err and err.startswith("agentscope-context search:")


def test_a_folder_that_is_not_a_workspace_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    code, _, err = run(capsys, str(tmp_path / "missing"), "x")
    assert code == 2 and "not a workspace directory" in err
    (tmp_path / "empty").mkdir()
    code, _, err = run(capsys, str(tmp_path / "empty"), "x")
    assert code == 2 and "no saved history here" in err and err.count("\n") == 1
    code, _, err = run(capsys, "ftp://example.org/ws", "x")
    assert code == 2 and err.count("\n") == 1


def served(root: Storage, agent: str, user: str, session: str, text: str) -> None:
    """A served session as ``served_placement`` lays it out: its folder and its line in the
    place's sessions list."""
    folder = f"sessions/{session}/context_ext"
    fill(SubStorage(root, folder), [text])
    HistoryScope(root, agent, user, session, folder).register()


def test_a_served_place_every_session_and_the_filters(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    workdir = tmp_path / "workspaces" / "a1"
    root = LocalStorage(workdir)
    served(root, "a1", "u1", "s1", "the quarterly ledger is in ledger.csv")
    served(root, "a1", "u1", "s2", "ledger totals were wrong")
    served(root, "a1", "u2", "s3", "ledger of another user")
    code, out, err = run(capsys, str(workdir), "ledger")
    assert code == 0, err
    assert out.startswith("3 hit(s) in 3 conversation(s), best first:")
    assert "session s3 (agent a1, user u2) sessions/s3/context_ext/dialog/2026-12-03.jsonl:1" in out
    code, out, _ = run(capsys, str(workdir), "ledger", "--scope", "user", "--user", "u1")
    assert code == 0 and "2 hit(s) in 2 conversation(s)" in out and "user u2" not in out
    code, out, _ = run(capsys, str(workdir), "ledger", "--scope", "session", "--session", "s2")
    assert code == 0 and out.startswith("1 hit(s) in 1 conversation") and "s2" in out
    # serve --workspaces: a folder of agents' workspaces, each listing its sessions
    served(LocalStorage(tmp_path / "workspaces" / "a2"), "a2", "u1", "s9", "ledger in a2")
    code, out, _ = run(capsys, str(tmp_path / "workspaces"), "ledger", "--agent", "a2")
    assert code == 0 and "a2/sessions/s9/context_ext/dialog/2026-12-03.jsonl:1" in out, out
    code, out, _ = run(capsys, str(tmp_path / "workspaces"), "ledger", "--json")
    assert {hit["agent"] for hit in json.loads(out)["hits"]} == {"a1", "a2"}


def test_a_redis_store_is_searched_like_a_folder(
    redis_url: str, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    texts = ["alpha beta", "beta gamma delta", "the gamma ray", "数据库连接失败"]
    fill(tmp_path / "ws", texts)
    fill(open_storage(redis_url), texts)
    answers = []
    for workspace in (str(tmp_path / "ws"), redis_url):
        for query in ("gamma", "数据", "beta*"):
            code, out, err = run(capsys, workspace, query, "--json")
            assert code == 0, err
            answers.append([(h["file"], h["line"]) for h in json.loads(out)["hits"]])
    assert answers[:3] == answers[3:] and all(answers)


def test_rebuild_and_progress_on_a_long_history(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    workspace = tmp_path / "ws"
    store = DialogStore(workspace)
    store.append([message(i, f"entry {i} of the long log") for i in range(10_500)])
    store.append([message(10_500, "the needle_in_the_log is here")])
    code, out, err = run(capsys, str(workspace), "needle_in_the_log")
    assert code == 0 and "dialog/2026-12-03.jsonl:10501" in out
    assert "indexing: 10,000 message(s) and output(s)..." in err, "progress on long work"
    code, out, err = run(capsys, str(workspace), "needle_in_the_log", "--rebuild")
    assert code == 0 and "dialog/2026-12-03.jsonl:10501" in out and "indexing: 10,000" in err
    code, _, err = run(capsys, str(workspace), "needle_in_the_log")
    assert code == 0 and "indexing" not in err, "caught up: nothing to index again"


def test_expired_outputs_give_way_to_the_next_hits(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """A saved output the TTL cleanup deleted after it was indexed is no hit, and does not cost
    one: the next best take its place."""
    workspace = tmp_path / "ws"
    saved = ToolResultStore(workspace)
    paths = [saved.save(f"output {i}: needle " * (12 - i)) for i in range(12)]
    code, out, _ = run(capsys, str(workspace), "needle", "--json", "--limit", "5")
    assert [hit["file"] for hit in json.loads(out)["hits"]] == paths[:5], "denser first"
    for path in paths[:6]:
        (workspace / path).unlink()
    code, out, _ = run(capsys, str(workspace), "needle", "--json", "--limit", "5")
    assert code == 0 and [hit["file"] for hit in json.loads(out)["hits"]] == paths[6:11]


async def test_a_long_query_that_finds_nothing_is_answered_in_one_short_line(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    from agentscope_context_ext.core.tools import make_dialog_tools

    _, search_dialog = make_dialog_tools(fill(tmp_path / "ws", ["something said"]))
    pasted = "zzqx\n" * 2000
    answer = await search_dialog(pasted)
    assert answer.startswith("No saved message") and "\n" not in answer and len(answer) < 200
    code, out, _ = run(capsys, str(tmp_path / "ws"), pasted)
    assert code == 0 and out.count("\n") == 1 and len(out) < 200


def test_redis_without_a_private_cache_folder_searches_in_memory(
    redis_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The index of a Redis workspace lives in the user's private cache folder; when that folder
    is not private (another user could plant an index), the search runs in memory."""
    import os
    import tempfile

    from agentscope_context_ext.core.search import Conversation, search_history

    shared = tmp_path / "tmp"
    (shared / f"agentscope-context-ext-{os.getuid()}").mkdir(parents=True, mode=0o777)
    os.chmod(shared / f"agentscope-context-ext-{os.getuid()}", 0o777)
    monkeypatch.setattr(tempfile, "tempdir", str(shared))
    storage = open_storage(redis_url)
    fill(storage, ["the ledger moved", "nothing else"])
    conversation = Conversation(storage)
    result = search_history([conversation], "ledger", 5)
    assert [(h.file, h.line) for h in result.hits] == [("dialog/2026-12-03.jsonl", 1)]
    assert conversation.history().in_memory


def test_a_busy_index_is_never_dropped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Another process holding the index longer than the wait: a search that opens it then
    answers from memory, one that has it open gets an error; the index file (everyone's) is
    kept either way (it was deleted and rebuilt under the other process)."""
    import sqlite3

    from agentscope_context_ext.core.search import HistoryIndex, _index

    monkeypatch.setattr(_index, "BUSY_TIMEOUT_SECONDS", 0.0)
    workspace = tmp_path / "ws"
    store = fill(workspace, ["first words"])
    index = HistoryIndex(store.storage)
    index.refresh()
    store.append([message(7, "more words")])  # something to index: the next refresh writes
    holder = sqlite3.connect(index.path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    inode = index.path.stat().st_ino
    try:
        fresh = HistoryIndex(store.storage)
        assert fresh.refresh() == 2 and fresh.in_memory, "answered from memory"
        with pytest.raises(sqlite3.OperationalError, match="locked"):
            index.refresh()
        assert index.path.stat().st_ino == inode, "the same file, not a new one"
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert HistoryIndex(store.storage).refresh() == 1, "the index was kept: one line to add"


def test_a_query_matching_more_than_the_rank_window_ranks_the_newest_matches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past RANK_WINDOW matches of every term, BM25 ranks the newest that many (FTS5 ranks all
    matches before the first answer: 0.7 s for a word in most of a million messages, B11); fewer
    matches are ranked over all of them, and the any-term fallback is never cut."""
    from agentscope_context_ext.core.search import Conversation, _engines, search_history

    monkeypatch.setenv("ACE_SEARCH_ENGINE", "fts5")  # Tantivy ranks every match (below)
    workspace = tmp_path / "ws"
    texts = ["alpha " * 6 + "rare_word"] + [f"alpha entry {i} with filler words" for i in range(7)]
    fill(workspace, texts)

    def lines(query: str) -> list[int]:
        return [
            h.line for h in search_history([Conversation(open_storage(workspace))], query, 3).hits
        ]

    assert lines("alpha")[0] == 1, "the densest, oldest message ranks first over all matches"
    monkeypatch.setattr(_engines, "RANK_WINDOW", 5)
    assert set(lines("alpha")) <= {4, 5, 6, 7, 8}, "eight matches: the newest five are ranked"
    assert lines("rare_word") == [1], "a query with fewer matches: all of them"
    assert lines("alpha nothing_else")[0] == 1, "the any-term fallback ranks every match"


@pytest.mark.parametrize(
    ("args", "query"),
    [
        (["{ws}", "-permission"], "-permission"),
        (["{ws}", "-permission", "--limit", "5"], "-permission"),
        (["--limit", "5", "{ws}", "-permission"], "-permission"),
        (["{ws}", "-p"], "-p"),
        (["{ws}", "--", "--skip-permission"], "--skip-permission"),
    ],
)
def test_a_query_that_starts_with_a_dash_is_searched(
    tmp_path: Path, capsys: pytest.CaptureFixture, args: list[str], query: str
) -> None:
    """``search WS -permission`` printed argparse's usage: a word starting with '-' is the query
    when it stands alone, and anything after ``--`` is."""
    workspace = tmp_path / "ws"
    fill(workspace, ["run it with --skip-permission -permission -p set", "unrelated words"])
    code, out, err = run(capsys, "--json", *[arg.format(ws=workspace) for arg in args])
    assert code == 0, err
    answer = json.loads(out)
    assert answer["query"] == query and answer["hits"], out


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["{ws}", "found", "-permission"], "unrecognized arguments: -permission"),
        (["{ws}", "-a", "-b"], "required: query"),
        (["{ws}"], "required: query"),
        (["{ws}", "--json"], "required: query"),
    ],
)
def test_a_stray_dash_word_is_still_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture, args: list[str], fragment: str
) -> None:
    workspace = tmp_path / "ws"
    fill(workspace, ["found it"])
    code, out, err = run(capsys, *[arg.format(ws=workspace) for arg in args])
    assert code == 2 and out == ""
    assert fragment in err and len(err.strip().splitlines()) == 1, err


def test_a_dialog_line_nested_past_the_parser_s_depth_is_skipped(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """A hostile line in dialog/ ('[' * 100000) made search exit 1 with a RecursionError; it is
    a corrupt line like any other: skipped by the reader and the index."""
    workspace = tmp_path / "ws"
    store = fill(workspace, ["the cache_key of sessions"])
    (dialog,) = (workspace / "dialog").glob("*.jsonl")
    with dialog.open("a") as handle:
        handle.write('{"id": "x", "content": ' + "[" * 100_000 + "\n")
    assert [r.msg["id"] for r in store.iter_records()] == [
        message(0, "the cache_key of sessions")["id"]
    ]
    code, out, err = run(capsys, str(workspace), "cache_key")
    assert code == 0 and "1 hit(s)" in out, err


def test_an_engine_that_is_not_one_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    workspace = tmp_path / "ws"
    fill(workspace, ["something said"])
    monkeypatch.setenv("ACE_SEARCH_ENGINE", "lucene")
    code, out, err = run(capsys, str(workspace), "something")
    assert code == 2 and out == "" and err.count("\n") == 1
    assert "ACE_SEARCH_ENGINE must be one of tantivy, fts5" in err
