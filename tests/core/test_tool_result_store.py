"""ToolResultStore (design §2.2, 12.11): atomic saves, and a TTL cleanup that only ever deletes
its own files, runs at start and at most once an hour."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from agentscope_context_ext import ToolResultStore
from agentscope_context_ext.core.workspace import CLEANUP_INTERVAL_SECONDS


class Clock:
    def __init__(self, now: float = 1_800_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def _age(path: Path, seconds_ago: float, clock: Clock) -> None:
    when = clock.now - seconds_ago
    os.utime(path, (when, when))


def test_save_writes_the_exact_text_and_returns_a_relative_path(workspace: Path) -> None:
    store = ToolResultStore(workspace)
    text = "line one\r\nзначение 中文 😀\n\x00nul\n"
    relative = store.save(text)
    assert re.fullmatch(r"tool_result/[0-9a-f]{32}\.txt", relative)
    assert (workspace / relative).read_bytes() == text.encode()
    assert store.is_own_path(relative)
    assert not store.is_own_path("tool_result/../Memory.md")
    assert not list((workspace / "tool_result").glob(".*.tmp")), "no temp file left behind"


def test_invalid_text_is_saved_with_original_bytes_or_replacement(workspace: Path) -> None:
    store = ToolResultStore(workspace)
    raw = b"ok \xff\xfe bytes"
    relative = store.save(raw.decode("utf-8", errors="surrogateescape"))
    assert (workspace / relative).read_bytes() == raw
    relative = store.save("lone \ud800 surrogate")
    assert (workspace / relative).read_bytes() == "lone \ufffd surrogate".encode()
    # bytes and a surrogate that stands for none, in one text: the bytes are kept
    relative = store.save("ok \udcff and \ud800")
    assert (workspace / relative).read_bytes() == b"ok \xff and " + "\ufffd".encode()


def test_save_failure_raises_oserror(workspace: Path) -> None:
    # tool_result/ cannot be created: the caller must learn it, and keep the original text.
    (workspace / "tool_result").write_text("a file where the folder should be")
    with pytest.raises(OSError):
        ToolResultStore(workspace).save("x")


def test_cleanup_deletes_only_expired_own_files(workspace: Path, tmp_path: Path) -> None:
    clock = Clock()
    store = ToolResultStore(workspace, ttl_days=7, clock=clock)
    old = workspace / store.save("old")
    fresh = workspace / store.save("fresh")
    _age(old, 8 * 86400, clock)
    _age(fresh, 6 * 86400, clock)
    foreign = workspace / "tool_result" / "notes.txt"
    foreign.write_text("not ours")
    _age(foreign, 30 * 86400, clock)
    subdir = workspace / "tool_result" / ("a" * 32 + ".txt")
    subdir.mkdir()
    outside = tmp_path / "outside.txt"
    outside.write_text("precious")
    _age(outside, 30 * 86400, clock)
    link = workspace / "tool_result" / ("b" * 32 + ".txt")
    link.symlink_to(outside)

    removed = store.cleanup()

    assert removed == [f"tool_result/{old.name}"]
    assert not old.exists()
    assert fresh.exists() and foreign.exists() and subdir.is_dir()
    assert link.is_symlink(), "a symlink is never deleted by TTL cleanup"
    assert outside.read_text() == "precious", "the symlink's target is never touched"


def test_cleanup_keeps_what_it_is_told_to(workspace: Path) -> None:
    clock = Clock()
    store = ToolResultStore(workspace, ttl_days=1, clock=clock)
    named, unnamed = store.save("named"), store.save("unnamed")
    for path in (named, unnamed):
        _age(workspace / path, 2 * 86400, clock)
    assert store.cleanup(keep=[named]) == [unnamed]
    assert (workspace / named).is_file()
    asked = []
    clock.now += CLEANUP_INTERVAL_SECONDS
    store.maybe_cleanup(lambda: asked.append(1) or [named])
    assert asked == [1] and (workspace / named).is_file()
    assert store.maybe_cleanup(lambda: asked.append(2) or []) is None and asked == [1]


def test_cleanup_runs_at_start_then_at_most_hourly(workspace: Path) -> None:
    clock = Clock()
    store = ToolResultStore(workspace, ttl_days=1, clock=clock)
    first = workspace / store.save("a")
    _age(first, 2 * 86400, clock)
    assert store.maybe_cleanup() == [f"tool_result/{first.name}"]  # at start

    second = workspace / store.save("b")
    _age(second, 2 * 86400, clock)
    clock.now += CLEANUP_INTERVAL_SECONDS - 1
    assert store.maybe_cleanup() is None  # not due yet
    assert second.exists()
    clock.now += 1
    assert store.maybe_cleanup() == [f"tool_result/{second.name}"]


def test_a_store_made_anew_each_turn_cleans_up_at_most_hourly_too(workspace: Path) -> None:
    clock = Clock()
    first_turn = ToolResultStore(workspace, ttl_days=1, clock=clock)
    assert first_turn.maybe_cleanup() == []  # at start: ran, nothing to delete
    old = workspace / first_turn.save("a")
    _age(old, 2 * 86400, clock)
    clock.now += 60
    next_turn = ToolResultStore(workspace, ttl_days=1, clock=clock)  # a served agent's next turn
    assert next_turn.maybe_cleanup() is None  # the first turn's cleanup counts
    clock.now += CLEANUP_INTERVAL_SECONDS
    assert ToolResultStore(workspace, ttl_days=1, clock=clock).maybe_cleanup() == [
        f"tool_result/{old.name}"
    ]


def test_cleanup_of_a_missing_folder_is_empty(workspace: Path) -> None:
    assert ToolResultStore(workspace).cleanup() == []


def test_bad_ttl_is_rejected(workspace: Path) -> None:
    with pytest.raises(ValueError, match="ttl_days"):
        ToolResultStore(workspace, ttl_days=0)
    with pytest.raises(ValueError, match="ttl_days"):
        ToolResultStore(workspace).cleanup(ttl_days=-1)


def test_the_parts_of_a_message_share_one_file_and_each_reads_back(storage) -> None:
    """Many parts of one user message in one saved file, each part on lines of its own and
    read back byte for byte (bytes that were not UTF-8 included), on both backends."""
    store = ToolResultStore(storage)
    broken = b"caf\xe9 au lait\n".decode("utf-8", errors="surrogateescape")
    parts = ["first part", "second\nwith lines\n", "", "third", broken, "last, no newline"]
    path, starts = store.save_message_parts(parts)
    assert path.startswith("message/") and starts == [1, 2, 4, 5, 6, 7]
    for part, start in zip(parts, starts, strict=True):
        size = len(part.encode("utf-8", errors="surrogateescape"))
        assert store.read_message_part(path, start, size) == part
    assert store.read_message_part(path, 99, 3) is None, "past the end"
    assert store.read_message_part("tool_result/../x.txt", 1, 1) is None, "not ours"
    # one part alone is saved exactly as save_message saves it
    assert store.save_message_parts(["only"]) == (store.save_message("only"), [1])
