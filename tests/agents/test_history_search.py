"""History search (design §6.2): the ranked index of a conversation's dialog and saved outputs
(``core/search``), the agent's ``search_dialog`` over it, and the scopes of a served session.

Everything is real: dialog files written by ``DialogStore``, saved outputs by
``ToolResultStore``, the index file SQLite makes, processes that share it, a real Redis server
(the ``redis_url`` fixture) and, on AgentScope 2.x, the placements ``served_placement`` makes in a
real ``LocalWorkspace``. The tools are called as an agent calls them, and the ``read on:`` call a
hit gives is followed literally."""

from __future__ import annotations

import ast
import inspect
import json
import multiprocessing
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from neutral_port import MessageCodec, assistant, results, user

from agentscope_context_ext.core.messages import Message, ToolCall, ToolResult
from agentscope_context_ext.core.search import (
    Conversation,
    HistoryIndex,
    HistoryScope,
    index_location,
    parse_query,
    search_history,
)
from agentscope_context_ext.core.search._index import _SCHEMA
from agentscope_context_ext.core.tools import make_dialog_tools, make_read_file
from agentscope_context_ext.core.workspace import (
    DialogStore,
    LocalStorage,
    Storage,
    SubStorage,
    ToolResultStore,
    open_storage,
)

pytestmark = pytest.mark.usefixtures("search_engine")

DAY = "2026-12-02"
TS = f"{DAY} 09:00:00"
DIALOG = f"dialog/{DAY}.jsonl"

# ------------------------------------------------------------------------------ helpers


def said(text: str, msg_id: str | None = None, timestamp: str = TS) -> Message:
    """A user's message of the day the tests use."""
    return user(text, msg_id=msg_id, timestamp=timestamp)


def dialog(where: Path | str | Storage) -> DialogStore:
    return DialogStore(where, codec=MessageCodec())


def filler(count: int, start: int = 0) -> list[Message]:
    """Messages that match none of the tests' queries."""
    return [said(f"routine status update {i} everything nominal") for i in range(start, count)]


def found(storage: Storage, query: str, limit: int = 50) -> list[tuple[str, str, int]]:
    """``(kind, file, line)`` of each hit, best first, from a fresh index object (as a new
    process would search)."""
    result = search_history([Conversation(storage)], query, limit)
    return [(hit.kind, hit.file, hit.line) for hit in result.hits]


def lines_of(storage: Storage, query: str, limit: int = 50) -> list[int]:
    """The dialog lines of the hits, best first."""
    return [line for kind, _, line in found(storage, query, limit) if kind == "message"]


def read_ons(answer: str) -> list[str]:
    """The ``read on:`` calls of a ``search_dialog`` answer, best hit first."""
    return [line.split("read on: ", 1)[1] for line in answer.splitlines() if "read on: " in line]


async def follow(call: str, *tools: Any) -> str:
    """Make the call a hit names (``read_dialog(date='...', start_line=4, limit=5)``) with the
    tool of that name, its keyword arguments taken literally."""
    node = ast.parse(call, mode="eval").body
    assert isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and not node.args, call
    by_name = {tool.__name__: tool for tool in tools}
    arguments = {keyword.arg: ast.literal_eval(keyword.value) for keyword in node.keywords}
    return await by_name[node.func.id](**arguments)


def start_line(call: str) -> int:
    """The ``start_line`` of a ``read on:`` call."""
    return int(call.split("start_line=", 1)[1].split(",")[0].rstrip(")"))


def one_error_line(answer: object) -> bool:
    return isinstance(answer, str) and answer.startswith("Error: ") and "\n" not in answer


def forget_index(storage: Storage) -> None:
    """Remove a Redis workspace's index file from this user's cache folder."""
    path = index_location(storage)
    for suffix in ("", "-journal", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)


@pytest.fixture(params=["local", "redis"])
def where(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A workspace on both backends, as the string a process opens it by: a folder, then a
    Redis URL (its index file is removed from the cache folder afterwards)."""
    if request.param == "local":
        yield str(tmp_path / "workspace")
        return
    url = request.getfixturevalue("redis_url")
    yield url
    forget_index(open_storage(url))


# ------------------------------------------------------------------ ranking and recall


async def test_an_identifier_among_many_messages_is_the_top_hit(workspace: Path):
    store = dialog(workspace)
    messages = filler(300)
    short = said("we renamed compute_total_v2 before the release")
    long = said(" ".join(f"detail{i}" for i in range(150)) + " see compute_total_v2 too")
    messages.insert(137, short)
    messages.insert(20, long)  # earlier, and the word once among many: second
    messages.insert(50, said("compute the total of v2 by hand"))  # the same words, not adjacent
    messages.insert(60, said("compute_total was the old name"))
    store.append(messages)
    line = messages.index(short) + 1
    read_dialog, search_dialog = make_dialog_tools(store)

    assert lines_of(store.storage, "compute_total_v2") == [line, messages.index(long) + 1]
    answer = await search_dialog("compute_total_v2", limit=1)
    assert answer.startswith("1 hit(s) in this conversation, best first:")
    assert f"[{DIALOG} line {line}, user {TS}] we renamed compute_total_v2" in answer
    shown = await follow(read_ons(answer)[0], read_dialog)
    assert shown.splitlines()[1].startswith(f"[line {line}] ") and "compute_total_v2" in shown


async def test_bm25_ranks_the_document_where_the_word_is_denser_first(workspace: Path):
    store = dialog(workspace)
    store.append(
        [
            *filler(20),
            # equal lengths (12 words): once, then three times; then once in 60 words
            said("latency " + " ".join(f"word{i}" for i in range(11))),
            said("latency latency latency " + " ".join(f"word{i}" for i in range(9))),
            said("latency " + " ".join(f"word{i}" for i in range(59))),
            *filler(40, 20),
        ]
    )
    result = search_history([Conversation(store.storage)], "latency", 10)
    assert [hit.line for hit in result.hits] == [22, 21, 23]
    assert result.hits[0].score < result.hits[1].score < result.hits[2].score


async def test_a_quoted_phrase_matches_only_adjacent_words(workspace: Path):
    store = dialog(workspace)
    store.append(
        [
            said("the red fox jumps"),
            said("a fox that is red"),
            said("red wine and a fox"),
            said("RED FOX!"),
            said("fox red"),
        ]
    )
    assert sorted(lines_of(store.storage, '"red fox"')) == [1, 4]
    assert sorted(lines_of(store.storage, "red fox")) == [1, 2, 3, 4, 5]
    assert sorted(lines_of(store.storage, '"fox red"')) == [5]


async def test_a_trailing_star_asks_for_a_prefix(workspace: Path):
    store = dialog(workspace)
    store.append([said("configuration loaded"), said("reconfigure later"), said("config ok")])
    assert sorted(lines_of(store.storage, "config*")) == [1, 3]
    assert lines_of(store.storage, "config") == [3]
    assert lines_of(store.storage, "configur*") == [1]
    assert lines_of(store.storage, "configur") == []


@pytest.mark.parametrize(
    ("query", "hit", "misses"),
    [
        ("my_var", "then set my_var to 3", ["my other var", "var my", "my_variable"]),
        ("a/b.py", "edit src/a/b.py now", ["a.py and b", "b/a.py", "a/b.pyc"]),
        ("pkg.mod.func", "call pkg.mod.func() here", ["pkg func mod", "pkg.mod.funcs", "mod.func"]),
    ],
)
async def test_identifiers_are_found_as_written(workspace: Path, query, hit, misses):
    store = dialog(workspace)
    store.append([*(said(text) for text in misses), said(hit)])
    assert lines_of(store.storage, query) == [len(misses) + 1]
    _, search_dialog = make_dialog_tools(store)
    answer = await search_dialog(query)
    assert answer.startswith("1 hit(s)") and hit in answer


async def test_cjk_words_are_found_inside_sentences(workspace: Path):
    store = dialog(workspace)
    store.append(
        [
            said("我们的数据库连接很慢"),  # 1: database connection, inside a sentence
            said("数据很多"),  # 2: data, not database
            said("库存数量不足"),  # 3: neither
            said("log: 用户数据库 error"),  # 4: CJK between Latin words
        ]
    )
    assert sorted(lines_of(store.storage, "数据")) == [1, 2, 4]  # two characters
    assert sorted(lines_of(store.storage, "数据库")) == [1, 4]  # three characters
    assert lines_of(store.storage, "连接") == [1]
    assert lines_of(store.storage, "据库连") == [1]
    assert lines_of(store.storage, "数据库 error") == [4]
    assert lines_of(store.storage, "库数") == []


LOG = "".join(f"row {i:05d} nothing here\n" for i in range(1, 3001))


async def test_a_saved_output_hit_names_its_file_and_the_line_read_file_shows(workspace: Path):
    text = LOG + "row 03001 the quasar_flux_42 overflowed\n" + "tail\n" * 10
    path = ToolResultStore(workspace).save(text)
    store = dialog(workspace)
    store.append(filler(5))
    read_dialog, search_dialog = make_dialog_tools(store)
    read_file = make_read_file(workspace)

    assert found(store.storage, "quasar_flux_42") == [("output", path, 3001)]
    answer = await search_dialog("quasar_flux_42")
    assert f"[saved output {path} line 3001]" in answer
    assert read_ons(answer) == [f"read_file(file_path={path!r}, start_line=3001)"]
    shown = await follow(read_ons(answer)[0], read_file, read_dialog)
    assert shown.splitlines()[0] == "row 03001 the quasar_flux_42 overflowed"


@pytest.mark.parametrize(
    ("query", "decoy"),
    [
        ("error", "summary: errors=0 warnings=0"),  # inside a longer word
        ("flux", "influx of rows"),  # at the end of a longer word
        ("disk", "diskless boot"),
    ],
)
async def test_the_line_of_an_output_match_is_where_the_word_is(workspace: Path, query, decoy):
    """The index matches words; the line it gives must be the line of the word, not of the
    first longer word that merely contains its letters (there, read_file shows no match)."""
    text = decoy + "\n" + LOG + f"fatal {query} at block 77\n"
    path = ToolResultStore(workspace).save(text)
    _, search_dialog = make_dialog_tools(dialog(workspace))
    assert found(LocalStorage(workspace), query) == [("output", path, 3002)]
    answer = await search_dialog(query)
    shown = await follow(read_ons(answer)[0], make_read_file(workspace))
    assert shown.splitlines()[0] == f"fatal {query} at block 77"


async def test_a_cjk_word_in_a_saved_output_names_its_line(workspace: Path):
    path = ToolResultStore(workspace).save(LOG + "第3001行：数据库连接超时\n")
    assert found(LocalStorage(workspace), "连接") == [("output", path, 3001)]


# ------------------------------------------------------------------------- bad input


async def test_bad_queries_are_answered_with_text_never_an_exception(workspace: Path):
    store = dialog(workspace)
    store.append([said("salt and pepper"), said("the cache is cold"), said("not or never")])
    _, search_dialog = make_dialog_tools(store)
    pasted = " ".join(["cache", "cold"] + [f"unrelated{i}" for i in range(2000)])  # ~20 KB
    errors = ['"', "*", "(", "", "   ", '"""', "-->", "\n\t"]
    searched = {
        "AND": "1 hit(s)",  # a word to find, not an operator
        "OR NOT": "1 hit(s)",  # the words "or" and "not"
        '"cache': "1 hit(s)",  # a stray quote
        "cache)": "1 hit(s)",
        "NEAR(cache cold)": "Nothing in this conversation holds every word; 1 hit(s)",
        "cache:cold": "No saved message",  # one identifier: the words are not adjacent
        "cache*cold": "No saved message",
        "**cache": "1 hit(s)",
        "^cache -cold +salt": "Nothing in this conversation holds every word; 2 hit(s)",
        pasted: "Nothing in this conversation holds every word; 1 hit(s)",
        "x" * 10_000: "No saved message",
    }
    for query in errors:
        answer = await search_dialog(query)
        assert one_error_line(answer), (query, answer)
    for query, start in searched.items():
        answer = await search_dialog(query)
        assert isinstance(answer, str) and answer.startswith(start), (query[:40], answer[:200])
    for query in (42, None, ["cache"], {"cache": 1}, b"cache", 3.5):
        answer = await search_dialog(query)
        assert isinstance(answer, str) and not answer.startswith("Error"), (query, answer)
    assert (await search_dialog(["cache"])).startswith("1 hit(s)")


async def test_a_term_without_letters_or_digits_is_dropped_even_if_underscores(workspace: Path):
    """``parse_query`` drops a term with no letters or digits; ``___`` has none (the index's
    tokenizer has no token for it), so ``foo ___`` is the query ``foo``."""
    store = dialog(workspace)
    store.append([said("foo bar __init__ baz")])
    _, search_dialog = make_dialog_tools(store)
    assert (await search_dialog("foo ___")).startswith("1 hit(s) in this conversation")
    assert one_error_line(await search_dialog("___"))
    assert (await search_dialog("__init__")).startswith("1 hit(s)")
    assert [term.text for term in parse_query("foo ___ _ __init__")] == ["foo", "__init__"]


async def test_bad_limits_and_scopes_are_one_error_line(tmp_path: Path):
    root = LocalStorage(tmp_path / "root")
    store, scope = place(root, "u1", "a1", "s1")
    store.append([said(f"needle number {i}") for i in range(5)])
    for tools in (make_dialog_tools(store), make_dialog_tools(store, scope)):
        _, search_dialog = tools
        assert len(read_ons(await search_dialog("needle", limit=0))) == 1
        assert len(read_ons(await search_dialog("needle", limit=-3))) == 1
        assert len(read_ons(await search_dialog("needle", limit=10**9))) == 5
        assert len(read_ons(await search_dialog("needle", limit="2"))) == 2
        for limit in ("x", 1.5, float("nan"), None, True, [3]):
            assert one_error_line(await search_dialog("needle", limit=limit)), limit
    _, search_dialog = make_dialog_tools(store, scope)
    for bad in ("galaxy", None, "", "Session", ["user"]):
        answer = await search_dialog("needle", scope=bad)
        assert one_error_line(answer) and "scope" in answer, (bad, answer)


# ------------------------------------------------------------------------- the index


async def answers_of(store: DialogStore, queries: list[str]) -> list[str]:
    """What a fresh ``search_dialog`` (a new process) answers to each query."""
    _, search_dialog = make_dialog_tools(store)
    return [await search_dialog(query) for query in queries]


CORPUS_QUERIES = ["kernel_panic", "deploy", '"blue green"', "rollb*", "数据库", "cpu7 deploy"]


def fill(storage: Storage) -> str:
    """A corpus over two days, a saved output and a replayed message; the output's path."""
    store = dialog(storage)
    log = "".join(f"step {i:04d} ok\n" for i in range(1, 2001)) + "step 2001 kernel_panic cpu7\n"
    path = ToolResultStore(storage).save(log)
    day_one = "2026-12-01 10:00:00"
    first = [
        said("plan a blue green deploy", "m-1", day_one),
        assistant("the deploy uses blue green slots", msg_id="m-2", timestamp=day_one),
        said("数据库迁移在部署之后", "m-3", day_one),
    ]
    store.append(first)
    call = ToolCall("c1", "bash", {"command": "tail -n 1 build.log"})
    store.append(
        [
            assistant(None, call, msg_id="m-4", timestamp=TS),
            results(ToolResult("c1", "bash", "step 2001 kernel_panic cpu7"), msg_id="m-5"),
            said("rollback the deploy on cpu7 hosts", "m-6"),
            said("rollbacks are cheap", "m-7"),
            said("green is the new blue", "m-8"),
        ]
    )
    store.append(first[1:])  # a crashed compaction replays what it saved
    return path


async def test_a_deleted_index_is_rebuilt_with_the_same_answers(workspace: Path):
    fill(LocalStorage(workspace))
    store = dialog(workspace)
    before = await answers_of(store, CORPUS_QUERIES)
    path = index_location(store.storage)
    assert path == workspace / ".search" / "index.sqlite" and path.is_file()
    path.unlink()
    assert await answers_of(store, CORPUS_QUERIES) == before
    assert path.is_file()


def garbage(path: Path) -> None:
    path.write_bytes(b"\x00\xffnot a database at all" * 500)


def foreign(path: Path) -> None:
    path.unlink()
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE notes(body TEXT)")
        db.execute("INSERT INTO notes VALUES ('kernel_panic deploy cpu7')")
    db.close()


def older_schema(path: Path) -> None:
    with sqlite3.connect(path) as db:
        db.execute("UPDATE meta SET value = 'agentscope-context-ext history index 0'")
    db.close()


def cut_short(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 3])


@pytest.mark.parametrize("spoil", [garbage, foreign, older_schema, cut_short])
async def test_a_corrupt_or_foreign_index_file_is_rebuilt(workspace: Path, spoil):
    fill(LocalStorage(workspace))
    store = dialog(workspace)
    before = await answers_of(store, CORPUS_QUERIES)
    assert all(answer.startswith(("1 hit", "2 hit", "3 hit")) for answer in before), before
    path = index_location(store.storage)
    spoil(path)
    assert await answers_of(store, CORPUS_QUERIES) == before
    with sqlite3.connect(path) as db:  # ours again, and only ours
        tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master")}
        assert "notes" not in tables and {"meta", "docs", "sources"} <= tables
        schema = db.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()[0]
        assert schema.startswith(_SCHEMA + " ")
    db.close()


def rewrite(storage: Storage, key: str, lines: list[bytes]) -> None:
    """Replace a dialog log by ``lines`` (a file restored from a backup)."""
    storage.delete(key)
    if lines:
        storage.append_lines(key, lines)


def raw_lines(storage: Storage, key: str = DIALOG) -> list[bytes]:
    return [raw for _, raw in storage.lines(key)]


def records(texts: list[str], tag: str) -> list[bytes]:
    """Dialog lines of new messages, as a restored file would hold them."""
    codec = MessageCodec()
    return [
        json.dumps(codec.encode(said(text, f"{tag}-{i}"))).encode() for i, text in enumerate(texts)
    ]


@pytest.mark.parametrize("change", ["shrank", "replaced with more lines", "same length"])
async def test_a_dialog_file_that_shrank_or_was_replaced_leaves_no_phantom_hits(where, change):
    storage = open_storage(where)
    store = dialog(storage)
    store.append([said(f"ephemeral note {i}") for i in range(10)])
    _, search_dialog = make_dialog_tools(store)  # one index, kept across the change
    assert len(read_ons(await search_dialog("ephemeral", limit=50))) == 10
    old = raw_lines(storage)
    if change == "shrank":
        rewrite(storage, DIALOG, old[:3])
        expected = {"ephemeral": [1, 2, 3], "durable": []}
    elif change == "replaced with more lines":
        rewrite(storage, DIALOG, records([f"durable fact {i}" for i in range(12)], "new"))
        expected = {"ephemeral": [], "durable": list(range(1, 13))}
    else:  # restored from a backup of 3 lines, then 7 new lines saved before any search
        rewrite(storage, DIALOG, old[:3])
        store.append([said(f"durable fact {i}") for i in range(7)])
        expected = {"ephemeral": [1, 2, 3], "durable": list(range(4, 11))}
    for word, lines in expected.items():
        answer = await search_dialog(word, limit=50)
        assert sorted(start_line(call) for call in read_ons(answer)) == lines, (word, answer)
        assert sorted(lines_of(storage, word)) == lines, word  # a fresh index agrees


async def test_a_deleted_dialog_file_leaves_no_phantom_hits(where):
    storage = open_storage(where)
    store = dialog(storage)
    store.append([said("kept message alpha", timestamp="2026-12-01 09:00:00")])
    store.append([said(f"forgotten message {i}") for i in range(4)])
    read_dialog, search_dialog = make_dialog_tools(store)
    assert len(read_ons(await search_dialog("forgotten"))) == 4
    assert storage.delete(DIALOG)
    assert (await read_dialog(date=DAY, start_line=1)).startswith("Error: no messages")
    answer = await search_dialog("forgotten")
    assert answer.startswith("No saved message"), answer
    assert (await search_dialog("alpha")).startswith("1 hit(s)")


async def test_lines_saved_after_a_search_are_found_by_the_next_one(where):
    """A crash between a dialog write and the index loses nothing: the index is caught up
    from the files, whoever wrote them (here also another process)."""
    storage = open_storage(where)
    store = dialog(storage)
    store.append(filler(5))
    read_dialog, search_dialog = make_dialog_tools(store)
    assert (await search_dialog("walrus")).startswith("No saved message")
    store.append([said("the walrus arrived")])
    answer = await search_dialog("walrus")
    assert answer.startswith("1 hit(s)") and "start_line=6" in answer
    script = (
        "import sys\n"
        "from agentscope_context_ext.core.workspace import DialogStore\n"
        "DialogStore(sys.argv[1]).append([{'id': 'other-1', 'role': 'user', "
        f"'timestamp': '{TS}', 'parts': [{{'type': 'text', 'text': 'a walrus from afar'}}]}}])\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, where], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    answer = await search_dialog("walrus")
    assert answer.startswith("2 hit(s)") and "a walrus from afar" in answer
    assert "start_line=7" in answer
    assert "a walrus from afar" in await follow(
        next(call for call in read_ons(answer) if "start_line=7" in call), read_dialog
    )


async def test_a_torn_last_line_is_skipped_and_the_next_appends_are_found(workspace: Path):
    store = dialog(workspace)
    store.append([said(f"whole line {i}") for i in range(3)])
    read_dialog, search_dialog = make_dialog_tools(store)
    assert len(read_ons(await search_dialog("whole"))) == 3
    with open(workspace / DIALOG, "ab") as handle:  # a writer died mid-line
        handle.write(b'{"id": "torn-1", "role": "user", "parts": [{"type": "text", "text": "torn')
    answer = await search_dialog("torn")
    assert answer.startswith("No saved message"), answer
    assert len(read_ons(await search_dialog("whole"))) == 3
    store.append([said("after the crash one"), said("after the crash two")])
    answer = await search_dialog("crash")
    assert sorted(read_ons(answer)) == [
        f"read_dialog(date='{DAY}', start_line=5, limit=5)",
        f"read_dialog(date='{DAY}', start_line=6, limit=5)",
    ]
    shown = await follow(f"read_dialog(date='{DAY}', start_line=5, limit=1)", read_dialog)
    assert "[line 5]" in shown and "after the crash one" in shown
    assert lines_of(LocalStorage(workspace), "torn") == []  # a rebuilt index agrees
    assert sorted(lines_of(LocalStorage(workspace), "crash")) == [5, 6]


async def test_a_torn_line_written_before_the_first_search_is_skipped(workspace: Path):
    store = dialog(workspace)
    store.append([said("first words")])
    with open(workspace / DIALOG, "ab") as handle:
        handle.write(b'{"id": "torn-2", "role": "user", "parts": [{"type": "te')
    store.append([said("second words")])
    assert sorted(lines_of(store.storage, "words")) == [1, 3]
    assert lines_of(store.storage, "te") == []


async def test_an_unusable_index_location_answers_from_memory(tmp_path: Path):
    twin, blocked = tmp_path / "twin", tmp_path / "blocked"
    for folder in (twin, blocked):
        fill(LocalStorage(folder))
    (blocked / ".search").write_text("a file where the index folder would go")
    expected = await answers_of(dialog(twin), CORPUS_QUERIES)
    assert await answers_of(dialog(blocked), CORPUS_QUERIES) == expected
    conversation = Conversation(LocalStorage(blocked))
    search_history([conversation], "deploy")
    assert conversation.index is not None and conversation.index.in_memory
    assert conversation.index.size() == 0
    # it keeps catching up, in memory
    store = dialog(blocked)
    _, search_dialog = make_dialog_tools(store)
    assert (await search_dialog("narwhal")).startswith("No saved message")
    store.append([said("a narwhal appears")])
    assert (await search_dialog("narwhal")).startswith("1 hit(s)")
    assert (blocked / ".search").read_text() == "a file where the index folder would go"


async def test_a_message_replayed_twice_is_found_once(where):
    storage = open_storage(where)
    store = dialog(storage)
    twice = said("the replayed okapi", "m-okapi")
    store.append([said("before"), twice])
    _, search_dialog = make_dialog_tools(store)
    assert len(read_ons(await search_dialog("okapi"))) == 1
    store.append([twice, said("after the okapi")])  # the same id again, and a new one
    answer = await search_dialog("okapi")
    assert sorted(read_ons(answer)) == [
        f"read_dialog(date='{DAY}', start_line=2, limit=5)",
        f"read_dialog(date='{DAY}', start_line=4, limit=5)",
    ]
    assert sorted(lines_of(storage, "okapi")) == [2, 4]  # rebuilt from nothing: the same


# ------------------------------------------------------------------------ concurrency

WRITES = 60
PER_WRITE = 4


def _catch_up(where: str, ready: Any, done: Any) -> None:
    """A process that searches (and so catches up) the shared index until told to stop, then
    checks that it holds every message exactly once."""
    storage = open_storage(where)
    index = HistoryIndex(storage)
    index.refresh()
    ready.set()
    rounds = 0
    while not done.is_set() or rounds < 3:
        index.search(parse_query("stamp*"), 5)
        HistoryIndex(storage).refresh()  # and a fresh connection each round
        rounds += 1
    index.refresh()
    messages = [doc for doc in index.documents() if doc[0] == "message"]
    if len(messages) != WRITES * PER_WRITE + 1 or len(set(messages)) != len(messages):
        sys.exit(f"{len(messages)} indexed, {len(set(messages))} distinct")


@pytest.mark.slow
def test_processes_catching_up_one_index_while_another_appends(where):
    storage = open_storage(where)
    store = dialog(storage)
    store.append([said("stamp0000 first")])
    spawn = multiprocessing.get_context("spawn")
    done = spawn.Event()
    readies = [spawn.Event() for _ in range(2)]
    procs = [spawn.Process(target=_catch_up, args=(where, ready, done)) for ready in readies]
    for proc in procs:
        proc.start()
    try:
        for ready in readies:
            assert ready.wait(120), "a searcher did not start"
        for batch in range(WRITES):
            store.append(
                [said(f"stamp{batch:02d}{k} payload{batch}x{k}") for k in range(PER_WRITE)]
            )
    finally:
        done.set()
        for proc in procs:
            proc.join(300)
    assert [proc.exitcode for proc in procs] == [0, 0]
    messages = [doc for doc in HistoryIndex(storage).documents() if doc[0] == "message"]
    assert len(messages) == WRITES * PER_WRITE + 1 == len(set(messages))
    assert sorted(line for _, _, line in messages) == list(range(1, WRITES * PER_WRITE + 2))
    for batch in (0, 17, WRITES - 1):
        for k in range(PER_WRITE):
            assert lines_of(storage, f"payload{batch}x{k}") == [2 + batch * PER_WRITE + k]


# ------------------------------------------------------------------------------ Redis


async def test_a_local_folder_and_redis_give_the_same_hits_in_the_same_order(
    workspace: Path, redis_url: str
):
    local, remote = LocalStorage(workspace), open_storage(redis_url)
    try:
        assert fill(local) == fill(remote)
        queries = [*CORPUS_QUERIES, "step", "blue", "green deploy", "absent"]
        for query in queries:
            ours = search_history([Conversation(local)], query, 20)
            theirs = search_history([Conversation(remote)], query, 20)
            assert [(h.file, h.line, h.kind, h.snippet) for h in ours.hits] == [
                (h.file, h.line, h.kind, h.snippet) for h in theirs.hits
            ], query
        assert found(local, "step") and found(local, "blue")
        assert await answers_of(dialog(local), queries) == await answers_of(dialog(remote), queries)
        assert index_location(remote).is_file()
    finally:
        forget_index(remote)


# ------------------------------------------------------------------------------ scopes


def place(
    root: Storage, user_id: str, agent: str, session: str
) -> tuple[DialogStore, HistoryScope]:
    """A served session's folder under ``root``, written down in the place's list."""
    folder = f"agents/{agent}/sessions/{session}/context_ext"
    scope = HistoryScope(root, agent, user_id, session, folder)
    scope.register()
    return dialog(SubStorage(root, folder)), scope


SESSIONS = [("u1", "a1", "s1"), ("u1", "a1", "s2"), ("u1", "a2", "s3"), ("u2", "a1", "s4")]
"""Who had which session: u1 with a1 (s1, s2) and with a2 (s3); u2 with a1 (s4)."""


def seed(store: DialogStore, session: str) -> str:
    """The session's dialog: a word of its own and a shared one; a saved output; its path."""
    store.append([said(f"only{session} sharedword from {session}")])
    return ToolResultStore(store.storage).save(
        LOG + f"{session} output line sharedoutput{session}\n"
    )


def sessions_named(answer: str) -> set[str]:
    """The sessions a ``search_dialog`` answer's hits are in (``this`` for the asking one)."""
    names = set()
    for call in read_ons(answer):
        names.add(call.split("session=")[1].strip("')") if "session=" in call else "this")
    return names


async def check_scopes(placements: dict[str, Any], readers: dict[str, Any]) -> None:
    """From u1's s1: each scope covers what it should and never u2's s4; reading another
    session is allowed for u1's own and refused for s4. ``placements[s]`` is ``(store,
    history)``, ``readers[s]`` the ``read_file`` of the session."""
    outputs = {s: seed(store, s) for s, (store, _) in placements.items()}
    store, history = placements["s1"]
    read_dialog, search_dialog = make_dialog_tools(store, history)
    read_file = readers["s1"]

    assert sessions_named(await search_dialog("sharedword", 20)) == {"this"}
    assert sessions_named(await search_dialog("sharedword", 20, "session")) == {"this"}
    assert sessions_named(await search_dialog("sharedword", 20, "agent")) == {"this", "s2"}
    assert sessions_named(await search_dialog("sharedword", 20, "user")) == {"this", "s2", "s3"}
    for scope in ("session", "agent", "user"):
        answer = await search_dialog("onlys4", 20, scope)
        assert answer.startswith("No saved message") and "s4" not in answer.split(":")[0], answer
        answer = await search_dialog("sharedoutputs4", 20, scope)
        assert answer.startswith("No saved message") and "s4 output" not in answer, answer
    answer = await search_dialog("onlys3", 20, "user")
    assert answer.startswith("1 hit(s) in this user's conversations") and "session s3" in answer
    shown = await follow(read_ons(answer)[0], read_dialog, read_file)
    assert "onlys3 sharedword from s3" in shown
    answer = await search_dialog("sharedoutputs2", 20, "agent")
    assert f"read_file(file_path={outputs['s2']!r}, start_line=3001, session='s2')" in answer
    shown = await follow(read_ons(answer)[0], read_dialog, read_file)
    assert shown.splitlines()[0] == "s2 output line sharedoutputs2"

    # reading another session: the user's own, never another user's
    assert "onlys2" in await read_dialog(session="s2")
    assert "onlys3" in await read_dialog(date=DAY, start_line=1, session="s3")
    for session in ("s4", "s9", "../s4", "agents/a1/sessions/s4/context_ext"):
        assert one_error_line(await read_dialog(session=session)), session
        answer = await read_file(file_path=outputs["s4"], start_line=3001, session=session)
        assert one_error_line(answer) and "s4 output" not in answer, (session, answer)
    assert "sharedoutputs2" in await read_file(
        file_path=outputs["s2"], start_line=3001, session="s2"
    )
    assert one_error_line(await read_file(file_path="dialog/x.jsonl", session="s2"))

    # u2 sees only s4, whatever the scope
    store4, history4 = placements["s4"]
    _, search4 = make_dialog_tools(store4, history4)
    for scope in ("session", "agent", "user"):
        assert sessions_named(await search4("sharedword", 20, scope)) == {"this"}
    read4, _ = make_dialog_tools(store4, history4)
    assert one_error_line(await read4(session="s1"))


async def test_the_scopes_of_history_scope_never_reach_another_users_session(where):
    root = open_storage(where)
    placements = {s: place(root, u, a, s) for u, a, s in SESSIONS}
    readers = {
        s: make_read_file(store.storage, sessions=history.storage_of)
        for s, (store, history) in placements.items()
    }
    try:
        await check_scopes(placements, readers)
        first = placements["s1"][1]
        first.register()  # served again: listed once
        assert [e["session"] for e in first.sessions()] == ["s1", "s2", "s3", "s4"]
    finally:
        if where.startswith("redis"):
            for store, _ in placements.values():
                forget_index(store.storage)


@pytest.mark.agentscope2
@pytest.mark.parametrize("kind", ["agents workspace", "store"])
async def test_served_sessions_search_their_users_other_sessions(tmp_path: Path, kind, request):
    """The placements ``context_middleware_factory`` makes each turn: every session in one 2.x
    ``LocalWorkspace`` shared by the agents (or in a store of our own on Redis)."""
    from served_turns import local_workspace

    from agentscope_context_ext.agentscope2._served import served_placement
    from agentscope_context_ext.core.config import ContextConfig

    settings = ContextConfig.load({"long_term_memory": {"enabled": False}})
    workspace = await local_workspace(tmp_path / "shared")
    store = open_storage(request.getfixturevalue("redis_url")) if kind == "store" else None
    made = {s: served_placement(settings, u, a, s, workspace, store=store) for u, a, s in SESSIONS}
    try:
        assert all(p.history is not None for p in made.values())
        if store is None:
            listed = tmp_path / "shared" / "context_ext" / "sessions.jsonl"
            assert len(listed.read_text().splitlines()) == 4
        placements = {s: (dialog(p.storage), p.history) for s, p in made.items()}
        readers = {
            s: make_read_file(
                p.workspace if isinstance(p.workspace, Path) else p.storage,
                sessions=p.history.storage_of,
            )
            for s, p in made.items()
        }
        await check_scopes(placements, readers)
    finally:
        if store is not None:
            for p in made.values():
                forget_index(p.storage)


@pytest.mark.agentscope2
async def test_a_served_agent_searches_the_users_other_sessions_through_its_tool(tmp_path):
    """End to end on 2.x: turns of ``create_app``'s kind (a new agent and middleware each),
    alice in s2 and bob in s4 read big outputs; alice's new session s1 finds hers, not bob's."""
    from agentscope.message import ToolResultBlock
    from installed_harness import tool_names
    from served_turns import Worker, config

    from agentscope_context_ext import context_middleware_factory
    from agentscope_context_ext.testing import ModelCall, ScriptedChatModel, reply, tool_call

    asks = {  # what the model calls for the user's last request (a new call each time)
        "read beta": ("big_output", {"tag": "beta"}),
        "read gamma": ("big_output", {"tag": "gamma"}),
        "find mine": ("search_dialog", {"query": "01234", "scope": "user"}),
        "find here": ("search_dialog", {"query": "01234"}),
    }

    def script(call: ModelCall):
        if not call.tools:
            return "summary"
        if any(isinstance(b, ToolResultBlock) for b in call.msgs[-1].content):
            return "done"
        name, arguments = asks[max(asks, key=call.text.rfind)]
        return reply(None, tool_call(name, **arguments))

    model = ScriptedChatModel(script)
    worker = Worker(tmp_path / "agent-1", context_middleware_factory(config()), model)

    async def turn(user_id: str, session: str, text: str) -> ModelCall:
        """One turn; its first model call."""
        first = len(model.calls)
        await worker.turn(user_id, "agent-1", session, text)
        return model.calls[first]

    await turn("alice", "s2", "find here")  # nothing saved anywhere yet
    assert tool_text(model.calls[-1]).startswith("No saved message")
    await turn("alice", "s2", "read beta")
    # bob's first session: no dialog, no other session of his: the dialog tools are not shown
    assert "search_dialog" not in tool_names(await turn("bob", "s4", "read gamma"))
    # alice's new session: her others are worth a search from the first call
    assert "search_dialog" in tool_names(await turn("alice", "s1", "find mine"))
    answer = tool_text(model.calls[-1])
    assert answer.startswith("1 hit(s) in this user's conversations"), answer
    assert "session s2" in answer and "beta 01234" in answer
    assert "gamma" not in answer and "s4" not in answer
    await turn("alice", "s1", "find here")
    assert tool_text(model.calls[-1]).startswith("No saved message")


def tool_text(call: Any) -> str:
    """The text of the last tool result a model call was shown."""
    tools = [m for m in call.messages if m.get("role") == "tool"]
    assert tools, "no tool result in the call"
    content = tools[-1].get("content")
    if isinstance(content, list):
        return "".join(str(block.get("text", "")) for block in content)
    return str(content)


# ------------------------------------------------------------------------- the schemas


def test_scope_and_session_are_parameters_of_a_served_agents_tools_only(tmp_path: Path):
    root = LocalStorage(tmp_path / "root")
    store, history = place(root, "u1", "a1", "s1")

    def parameters(tool: Any) -> list[str]:
        return list(inspect.signature(tool).parameters)

    read_dialog, search_dialog = make_dialog_tools(store)
    assert (read_dialog.__name__, search_dialog.__name__) == ("read_dialog", "search_dialog")
    assert parameters(read_dialog) == ["date", "start_line", "limit"]
    assert parameters(search_dialog) == ["query", "limit"]
    assert "scope" not in (search_dialog.__doc__ or "")
    assert "session" not in (read_dialog.__doc__ or "")
    assert "session" not in parameters(make_read_file(tmp_path))

    read_dialog, search_dialog = make_dialog_tools(store, history)
    assert (read_dialog.__name__, search_dialog.__name__) == ("read_dialog", "search_dialog")
    assert parameters(read_dialog) == ["date", "start_line", "limit", "session"]
    assert parameters(search_dialog) == ["query", "limit", "scope"]
    assert inspect.signature(search_dialog).parameters["scope"].default == "session"
    assert inspect.signature(read_dialog).parameters["session"].default == ""
    assert "scope (str)" in (search_dialog.__doc__ or "")
    assert "session (str)" in (read_dialog.__doc__ or "")
    read_file = make_read_file(tmp_path, sessions=history.storage_of)
    assert read_file.__name__ == "read_file" and parameters(read_file)[-1] == "session"
