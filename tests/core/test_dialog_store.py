"""DialogStore (design §2.2, 4.4, 12.9): durable appends, dated files from validated timestamps,
backwards reads, torn and corrupt lines, de-duplication, search, concurrent writers. Framework-free:
the records are plain dicts through the core's ``DictCodec`` (an adapter's codec is checked in
test_port_contract.py)."""

from __future__ import annotations

import json
import multiprocessing
import uuid
from datetime import date
from pathlib import Path

import pytest

from agentscope_context_ext.core.workspace import DialogStore, DictCodec, dialog_date

TODAY = date(2026, 12, 2)


def msg(text: str, timestamp: str | None = "2026-12-02 10:00:00.000", role: str = "user") -> dict:
    """A saved message as a plain record (what ``DictCodec`` keeps)."""
    return {
        "id": uuid.uuid4().hex,
        "name": role,
        "role": role,
        "content": text,
        "metadata": None,
        "timestamp": timestamp,
    }


@pytest.fixture
def store(workspace: Path) -> DialogStore:
    return DialogStore(workspace, today=lambda: TODAY, codec=DictCodec())


def test_append_returns_line_ranges_and_round_trips(store: DialogStore, workspace: Path) -> None:
    first = [msg(f"m{i}") for i in range(3)]
    refs = store.append(first)
    assert [str(r) for r in refs] == ["dialog/2026-12-02.jsonl lines 1-3"]
    refs = store.append([msg("m3"), msg("m4")])
    assert [(r.first_line, r.last_line) for r in refs] == [(4, 5)]
    lines = (workspace / "dialog" / "2026-12-02.jsonl").read_text().splitlines()
    assert [json.loads(line)["content"] for line in lines] == ["m0", "m1", "m2", "m3", "m4"]
    assert json.loads(lines[0]) == first[0]


def test_files_are_chosen_by_each_message_date(store: DialogStore) -> None:
    refs = store.append([msg("a", "2026-11-30 23:59:59.000"), msg("b", "2026-12-01 00:00:01.000")])
    assert [str(r) for r in refs] == [
        "dialog/2026-11-30.jsonl lines 1-1",
        "dialog/2026-12-01.jsonl lines 1-1",
    ]
    assert store.files() == ["dialog/2026-12-01.jsonl", "dialog/2026-11-30.jsonl"]


@pytest.mark.parametrize(
    "timestamp",
    ["../../etc/passwd", "2026-13-45 00:00", "2026-02-30", "", None, "yesterday", "99999-01-01"],
)
def test_invalid_timestamps_fall_back_to_today(timestamp: str | None) -> None:
    assert dialog_date(timestamp, TODAY) == TODAY


def test_path_never_comes_from_the_timestamp(store: DialogStore, workspace: Path) -> None:
    m = msg("x", timestamp="../../../tmp/evil")
    refs = store.append([m])
    assert refs[0].file == "dialog/2026-12-02.jsonl"
    assert sorted(p.name for p in (workspace / "dialog").iterdir()) == [".lock", "2026-12-02.jsonl"]


def test_read_defaults_to_the_end_of_the_newest_file(store: DialogStore) -> None:
    store.append([msg(f"m{i}") for i in range(120)])
    file, records = store.read(limit=5)
    assert file == "dialog/2026-12-02.jsonl"
    assert [r.line for r in records] == [116, 117, 118, 119, 120]
    assert [r.msg["content"] for r in records] == ["m115", "m116", "m117", "m118", "m119"]
    _, records = store.read("2026-12-02", start_line=2, limit=3)
    assert [r.msg["content"] for r in records] == ["m1", "m2", "m3"]


def test_read_argument_errors(store: DialogStore) -> None:
    assert store.read() == (None, [])
    with pytest.raises(ValueError, match="YYYY-MM-DD"):
        store.read("../../etc")
    with pytest.raises(ValueError, match="limit"):
        store.read(limit=0)
    assert store.read("2020-01-01") == ("dialog/2020-01-01.jsonl", [])


def test_backwards_reading_across_chunks(store: DialogStore) -> None:
    big = "y" * 70_000  # lines larger than the 64 KiB read chunk
    store.append([msg(f"{i}:{big}") for i in range(5)])
    records = list(store.iter_records())
    assert [r.line for r in records] == [5, 4, 3, 2, 1]
    assert [r.msg["content"].split(":")[0] for r in records] == ["4", "3", "2", "1", "0"]


def test_torn_last_line_is_skipped_and_next_append_stays_whole(
    store: DialogStore, workspace: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store.append([msg("before")])
    path = workspace / "dialog" / "2026-12-02.jsonl"
    with open(path, "ab") as handle:
        handle.write(b'{"id": "torn", "name": "user", "ro')  # a crash mid-write
    refs = store.append([msg("after")])
    assert str(refs[0]) == "dialog/2026-12-02.jsonl lines 3-3"
    contents = [r.msg["content"] for r in store.iter_records(newest_first=False)]
    assert contents == ["before", "after"]
    assert "corrupt line 2" in caplog.text


def test_corrupt_lines_are_skipped_with_a_warning(
    store: DialogStore, workspace: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store.append([msg("good one")])
    path = workspace / "dialog" / "2026-12-02.jsonl"
    with open(path, "ab") as handle:
        handle.write(
            b"not json\n[1, 2]\n{}\n"
            + b"\xff\xfe\n"
            + b'{"name": "x", "role": "robot", "content": "?"}\n'
        )
    store.append([msg("good two")])
    assert [r.msg["content"] for r in store.iter_records()] == ["good two", "good one"]
    assert caplog.text.count("skipping corrupt line") == 5


def test_duplicates_after_a_crash_are_read_once(store: DialogStore) -> None:
    batch = [msg("a"), msg("b")]
    store.append(batch)
    store.append(batch)  # replayed after a crash before the memory update
    assert [r.msg["content"] for r in store.iter_records(newest_first=False)] == ["a", "b"]
    assert store.message_ids() == {m["id"] for m in batch}


def test_search_newest_first_all_words(store: DialogStore) -> None:
    store.append([msg("deploy the API to staging", "2026-11-30 09:00:00.000")])
    store.append([msg("the API key is in vault", "2026-12-01 09:00:00.000")])
    store.append([msg("lunch", "2026-12-02 09:00:00.000")])
    found = store.search("api")
    assert [r.msg["content"] for r in found] == [
        "the API key is in vault",
        "deploy the API to staging",
    ]
    assert [r.msg["content"] for r in store.search("API staging")] == ["deploy the API to staging"]
    assert store.search("api", limit=1)[0].file == "dialog/2026-12-01.jsonl"
    with pytest.raises(ValueError):
        store.search("   ")


def test_tool_blocks_are_searchable(store: DialogStore) -> None:
    store.append(
        [
            {
                **msg("", "2026-12-02 10:00:00", "assistant"),
                "content": [
                    {"type": "tool_use", "id": "1", "name": "grep", "input": {"pattern": "needle"}}
                ],
            }
        ]
    )
    assert len(store.search("grep needle")) == 1


def test_search_looks_in_what_a_message_says_never_in_its_id_role_or_timestamp(
    store: DialogStore,
) -> None:
    said = [
        {**msg("first"), "id": "xq7m3zsearchmeid"},
        {**msg("", role="assistant"), "content": [{"type": "text", "text": "second"}]},
    ]
    store.append(said)
    for word in (said[0]["id"], "m3", "user", "assistant", "2026-12-02", "text", "tool_use"):
        assert store.search(word) == [], word
    assert [r.record["id"] for r in store.search("second")] == [said[1]["id"]]


def test_plain_dict_records_are_searched_in_their_content_only(workspace: Path) -> None:
    store = DialogStore(workspace, today=lambda: TODAY)  # DictCodec is the default
    store.append(
        [
            {
                "id": "m3abc",
                "role": "user",
                "name": "m3",
                "timestamp": "2026-12-02 10:00:00",
                "content": [{"type": "text", "id": "m3x", "text": "the deploy key"}],
            },
            {"id": "b", "role": "assistant", "name": "bot", "content": "m3 is the model"},
        ]
    )
    assert [r.record["id"] for r in store.search("m3")] == ["b"]
    assert [r.record["id"] for r in store.search("deploy key")] == ["m3abc"]


def test_lone_surrogates_round_trip_exactly(store: DialogStore) -> None:
    m = msg("bad \udcff byte")
    store.append([m])
    assert next(store.iter_records()).msg["content"] == "bad \udcff byte"


def _writer(workspace: str, tag: str, count: int) -> None:
    store = DialogStore(workspace, today=lambda: TODAY)
    for i in range(count):
        store.append([msg(f"{tag}-{i}-" + "z" * 5000, "2026-12-02 10:00:00")])


@pytest.mark.slow
def test_two_processes_append_without_loss_or_interleaving(workspace: Path) -> None:
    context = multiprocessing.get_context("spawn")
    procs = [context.Process(target=_writer, args=(str(workspace), t, 100)) for t in ("a", "b")]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    lines = (workspace / "dialog" / "2026-12-02.jsonl").read_bytes().split(b"\n")
    assert lines[-1] == b""
    records = [json.loads(line) for line in lines[:-1]]  # every line is whole JSON
    assert len(records) == 200
    for tag in ("a", "b"):
        mine = [int(r["content"].split("-")[1]) for r in records if r["content"].startswith(tag)]
        assert mine == list(range(100)), "each writer's lines are complete and in order"


def test_a_pending_file_nobody_owns_is_swept_when_the_next_is_staged(
    store: DialogStore, workspace: Path
) -> None:
    """A process killed while its summary was written ahead left ``dialog/pending/<id>.jsonl``
    behind, never read and never deleted: staging the next one sweeps those a day old, and
    leaves young ones (another summary being written), foreign names and the day files."""
    import os
    import time

    pending = workspace / "dialog" / "pending"
    orphan = store.stage([msg("left by a killed process")])
    young = store.stage([msg("another summary is being written")])
    foreign = pending / "notes.txt"
    foreign.write_text("not ours")
    day_old = time.time() - 2 * 86400
    for path in (workspace / orphan, foreign):
        os.utime(path, (day_old, day_old))
    store.append([msg("a day file line")])
    current = store.stage([msg("the summary written now")])
    names = sorted(p.name for p in pending.iterdir())
    assert Path(orphan).name not in names
    assert sorted([Path(young).name, Path(current).name, "notes.txt"]) == names
    assert [r.msg["content"] for r in store.iter_records()] == ["a day file line"]
