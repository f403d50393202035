"""The history index's engines and what issue 46 added around them (design §6.2): Tantivy's copy
kept to the SQLite file, where the agent looks first (the query as typed, its words in a row),
snippets that show the whole match, one batched read of the day files on Redis (round trips
counted), and workers that each keep their own index of one store.

Real files, a real redis-server (``redis_url``), both engines (``search_engine``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from neutral_port import MessageCodec, user

from agentscope_context_ext.core.search import Conversation, HistoryIndex, _engines, search_history
from agentscope_context_ext.core.workspace import DialogStore, Storage, open_storage

DAY = "2026-12-02"


def said(text: str, msg_id: str | None = None, day: str = DAY) -> object:
    return user(text, msg_id=msg_id, timestamp=f"{day} 09:00:00")


def write(storage: Storage, texts: list[str], day: str = DAY) -> DialogStore:
    store = DialogStore(storage, codec=MessageCodec())
    store.append([said(text, day=day) for text in texts])
    return store


def lines(storage: Storage, query: str, limit: int = 10, path: Path | None = None) -> list[int]:
    index = HistoryIndex(storage, path=path)
    try:
        hits = search_history([Conversation(storage, index=index)], query, limit).hits
    finally:
        index.close()
    return [hit.line for hit in hits]


# ------------------------------------------------------------------------------ where it looks


@pytest.mark.usefixtures("search_engine")
def test_the_query_as_typed_comes_before_its_words_scattered(tmp_path: Path) -> None:
    """An agent pastes a name with punctuation the index does not see (``#row-id``) or a command
    (``mix credo --help``): where it stands as written comes first, then its words in a row,
    then the rest, however much more often the words come scattered elsewhere."""
    storage = open_storage(tmp_path / "ws")
    texts = [
        "the row of the table: row id, row id and id of the row again",  # 1: words only
        "style it with #row-id { color: red }",  # 2: as typed
        "help with credo: mix it, credo help, mix mix credo credo help help",  # 3: scattered
        "then run mix credo help on the file",  # 4: in a row, no dashes
        "run `mix credo --help` to list the checks",  # 5: as typed
        *[f"filler line {i} about the weather" for i in range(20)],
    ]
    write(storage, texts)
    assert lines(storage, "#row-id")[0] == 2
    assert lines(storage, "row id")[0] in (1, 2)  # words only: BM25 decides
    assert lines(storage, "mix credo --help")[:2] == [5, 4]
    assert lines(storage, "mix credo help")[0] in (4, 5), "words in a row before scattered ones"
    assert lines(storage, "mix credo help")[-1] == 3


@pytest.mark.usefixtures("search_engine")
def test_words_in_a_row_too_common_for_a_phrase_are_looked_for_among_the_best(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Words each in very many documents: their phrase is not ranked over every document (it
    would check the positions of all of them); the best hits holding them in a row still come
    first."""
    monkeypatch.setattr(_engines, "PHRASE_DOCS", 1)
    storage = open_storage(tmp_path / "ws")
    texts = [
        "help with credo: mix it, credo help, mix mix credo credo help help",  # 1: scattered
        "then run mix credo help on the file",  # 2: in a row
        *[f"filler line {i} about the weather" for i in range(20)],
    ]
    write(storage, texts)
    assert lines(storage, "mix credo help") == [2, 1]


@pytest.mark.usefixtures("search_engine")
def test_a_name_is_not_found_inside_a_longer_one(tmp_path: Path) -> None:
    storage = open_storage(tmp_path / "ws")
    write(storage, ["cache under probe_key_24 now", "cache under probe_key_2 now"])
    assert lines(storage, "probe_key_2")[0] == 2
    assert lines(storage, "probe_key_24")[0] == 1


@pytest.mark.usefixtures("search_engine")
def test_a_snippet_shows_the_whole_of_a_long_match(tmp_path: Path) -> None:
    storage = open_storage(tmp_path / "ws")
    name = "render(messages, opts \\\\ []) :: [map()] when messages: " + "x" * 250
    write(storage, ["before " * 80 + name + " after" * 80])
    hit = search_history([Conversation(storage)], name[:60], 5).hits[0]
    assert name[:60] in hit.snippet
    hit = search_history([Conversation(storage)], "render(messages, opts", 5).hits[0]
    assert "render(messages, opts" in hit.snippet, "centred on the query as typed"


# ------------------------------------------------------------------------------ the engines


def test_tantivy_ranks_every_match_however_many(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """FTS5 ranks only the newest RANK_WINDOW matches of a broad query; Tantivy's top-k reads
    the blocks that can enter it and ranks every match: the densest, oldest message first."""
    pytest.importorskip("tantivy")
    storage = open_storage(tmp_path / "ws")
    write(storage, ["alpha " * 6 + "rare_word"] + [f"alpha entry {i} filler" for i in range(7)])
    monkeypatch.setattr(_engines, "RANK_WINDOW", 5)
    index = HistoryIndex(storage, engine="tantivy")
    assert search_history([Conversation(storage, index=index)], "alpha", 3).hits[0].line == 1
    index.close()


def test_a_prefix_past_its_ranked_words_still_matches_the_rest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A prefix is ranked as its most frequent words (BM25 over each); the words beyond them
    still match, below every ranked hit."""
    pytest.importorskip("tantivy")
    monkeypatch.setattr(_engines, "PREFIX_EXPANSIONS", 2)
    storage = open_storage(tmp_path / "ws")
    texts = ["transcript here", "transcript again", "transcribe", "transcribe too", "transcend"]
    write(storage, [*texts, "other"])
    index = HistoryIndex(storage, engine="tantivy")
    hits = search_history([Conversation(storage, index=index)], "trans*", 10).hits
    index.close()
    assert sorted(hit.line for hit in hits) == [1, 2, 3, 4, 5]
    assert hits[-1].line == 5, "transcend: matched, not among the two ranked words"


def _tantivy_copy(storage: Storage) -> Path:
    from agentscope_context_ext.core.search import index_location

    (folder,) = index_location(storage).parent.glob("index.sqlite.tantivy-*")
    return folder


def test_a_tantivy_copy_ahead_of_the_file_is_cut_back(tmp_path: Path) -> None:
    """A process killed between Tantivy's commit and SQLite's leaves the copy ahead: documents
    the file never got. The next catch-up cuts them back; no phantom hit."""
    tantivy = pytest.importorskip("tantivy")
    storage = open_storage(tmp_path / "ws")
    write(storage, [f"note {i} about deploys" for i in range(5)])
    assert len(lines(storage, "deploys")) == 5
    engine = _engines.TantivyEngine()
    copy = tantivy.Index.open(str(_tantivy_copy(storage)))
    copy.register_tokenizer("ace", engine.analyzer)
    writer = copy.writer(heap_size=15_000_000, num_threads=1)
    for rowid in (6, 7):  # what the dead process had committed to Tantivy only
        document = tantivy.Document()
        document.add_unsigned("id", rowid)
        document.add_text("body", "phantom deploys nowhere")
        writer.add_document(document)
    writer.commit()
    writer.wait_merging_threads()
    del writer, copy
    write(storage, ["a real sixth note on deploys"])  # id 6 again, before any search
    assert lines(storage, "phantom") == [] and lines(storage, "sixth") == [6]
    index = HistoryIndex(storage)
    index.refresh()
    assert index.engine.index.searcher().num_docs == 6
    index.close()


@pytest.mark.parametrize("damage", ["removed", "garbage"])
def test_a_lost_or_damaged_tantivy_copy_is_made_again_from_the_file(
    tmp_path: Path, damage: str
) -> None:
    pytest.importorskip("tantivy")
    storage = open_storage(tmp_path / "ws")
    write(storage, ["kernel_panic on cpu7", "all fine", "deploy blue green"])
    before = lines(storage, "kernel_panic"), lines(storage, "deploy")
    folder = _tantivy_copy(storage)
    if damage == "removed":
        import shutil

        shutil.rmtree(folder)
    else:
        (folder / "meta.json").write_text("{not json")
    assert (lines(storage, "kernel_panic"), lines(storage, "deploy")) == before


def test_an_index_of_the_other_engine_is_rebuilt_not_half_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("tantivy")
    storage = open_storage(tmp_path / "ws")
    write(storage, ["kernel_panic on cpu7", "all fine"])
    monkeypatch.setenv("ACE_SEARCH_ENGINE", "fts5")
    assert lines(storage, "kernel_panic") == [1]
    monkeypatch.setenv("ACE_SEARCH_ENGINE", "tantivy")
    assert lines(storage, "kernel_panic") == [1]
    assert list(_tantivy_copy(storage).iterdir()), "Tantivy made its copy"
    monkeypatch.setenv("ACE_SEARCH_ENGINE", "fts5")
    assert lines(storage, "kernel_panic") == [1]
    assert not list(storage.root.glob(".search/index.sqlite.tantivy-*")), "copies removed"


def test_a_bad_engine_name_is_one_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ACE_SEARCH_ENGINE", "lucene")
    with pytest.raises(ValueError, match="ACE_SEARCH_ENGINE must be one of tantivy, fts5"):
        _engines.default_engine()


# ------------------------------------------------------------------------------ Redis, workers


def test_log_versions_in_one_read(storage: Storage) -> None:
    """``Storage.log_versions``: each log's version in one read, as :meth:`version` gives it
    for a file, ``(line count, last line)`` where appends are atomic; ``None`` if absent."""
    storage.append_lines("dialog/a.jsonl", [b"one", b"two"])
    storage.append_lines("dialog/b.jsonl", [b"three"])
    storage.write("dialog/c.txt", b"a value, not a log")
    versions = storage.log_versions(["dialog/a.jsonl", "dialog/none.jsonl", "dialog/b.jsonl"])
    if storage.atomic_appends:
        assert versions == [(2, b"two"), None, (1, b"three")]
        assert storage.log_versions(["dialog/c.txt"]) == [None]
    else:
        assert versions == [
            storage.version("dialog/a.jsonl"),
            None,
            storage.version("dialog/b.jsonl"),
        ]
    assert storage.log_versions([]) == []


class _RoundTrips:
    """Counts what reaches the Redis server: one send is one round trip (a pipeline, one)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        import redis.connection

        self.count = 0
        original = redis.connection.AbstractConnection.send_packed_command

        def counted(connection, command, check_health=True):
            self.count += 1
            return original(connection, command, check_health)

        monkeypatch.setattr(redis.connection.AbstractConnection, "send_packed_command", counted)


def test_a_search_on_redis_costs_the_same_round_trips_for_3_days_or_30(
    redis_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each search first checks every day file; on Redis that check is one batched read
    (``log_versions``), so a search with nothing new costs the same round trips whatever the
    number of days (it was three a day file)."""
    trips = _RoundTrips(monkeypatch)
    costs = {}
    for days in (3, 30):
        storage = open_storage(f"{redis_url}-{days}")
        for day in range(1, days + 1):
            write(storage, [f"note of day {day}", "deploy blue green"], day=f"2026-11-{day:02d}")
        index = HistoryIndex(storage, path=tmp_path / f"index-{days}.sqlite")
        conversation = Conversation(storage, index=index)
        search_history([conversation], "deploy", 5)  # built
        trips.count = 0
        assert search_history([conversation], "deploy", 5).hits
        costs[days] = trips.count
        index.close()
        client = storage.client
        for key in client.scan_iter(match=f"{storage.prefix}:*"):
            client.delete(key)
    assert costs[3] == costs[30], costs
    assert costs[3] <= 8, costs


@pytest.mark.usefixtures("search_engine")
def test_workers_each_keep_their_index_of_one_store_caught_up(
    storage: Storage, tmp_path: Path
) -> None:
    """Four workers of one store, each with its own index (as four processes with their own
    cache folders): each first search builds; after an append each reads only the new lines,
    and all answer alike."""
    store = write(storage, [f"routine note {i}" for i in range(30)] + ["deploy blue green"])
    workers = [(HistoryIndex(storage, path=tmp_path / f"w{n}" / "index.sqlite")) for n in range(4)]
    try:
        assert [w.refresh() for w in workers] == [31] * 4
        for round_ in range(3):
            store.append([said(f"deploy step {round_} {i}") for i in range(5)])
            assert [w.refresh() for w in workers] == [5] * 4, "only what was appended"
        answers = {
            json.dumps(
                [
                    (h.file, h.line)
                    for h in search_history([Conversation(storage, index=w)], "deploy", 20).hits
                ]
            )
            for w in workers
        }
        assert len(answers) == 1 and len(json.loads(answers.pop())) == 16
    finally:
        for worker in workers:
            worker.close()


def test_a_copy_lost_under_an_open_index_is_made_again(tmp_path: Path) -> None:
    """The copy's folder removed while a search holds the index open (another process rebuilt,
    a cleanup): the next catch-up cannot commit to it; the copy is made again from the file and
    the search answers every message."""
    pytest.importorskip("tantivy")
    import shutil

    storage = open_storage(tmp_path / "ws")
    store = write(storage, ["kernel_panic on cpu7", "all fine"])
    index = HistoryIndex(storage, engine="tantivy")
    conversation = Conversation(storage, index=index)
    assert [h.line for h in search_history([conversation], "kernel_panic", 5).hits] == [1]
    shutil.rmtree(_tantivy_copy(storage))
    store.append([said("another kernel_panic on cpu3")])
    hits = search_history([conversation], "kernel_panic", 5).hits
    assert sorted(h.line for h in hits) == [1, 3]
    assert not index.in_memory and list(_tantivy_copy(storage).iterdir())
    index.close()


def test_a_link_at_the_copy_is_never_followed(tmp_path: Path) -> None:
    """The copy's folder replaced by a link (to another user's folder, say): the search answers
    from memory and nothing is written or deleted through the link."""
    pytest.importorskip("tantivy")
    import shutil

    storage = open_storage(tmp_path / "ws")
    write(storage, ["kernel_panic on cpu7", "all fine"])
    assert lines(storage, "kernel_panic") == [1]
    folder = _tantivy_copy(storage)
    shutil.rmtree(folder)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "theirs.txt").write_text("someone else's")
    folder.symlink_to(outside, target_is_directory=True)
    index = HistoryIndex(storage, engine="tantivy")
    hits = search_history([Conversation(storage, index=index)], "kernel_panic", 5).hits
    assert [h.line for h in hits] == [1] and index.in_memory
    index.close()
    assert sorted(p.name for p in outside.iterdir()) == ["theirs.txt"]
