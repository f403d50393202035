"""Stage one and stage two, result by result, for every state a result can be in (design §3.2-3.4;
issue 12). Core only: real stores and counter, no AgentScope."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from agentscope_context_ext.core.config import TruncationConfig
from agentscope_context_ext.core.messages import Media
from agentscope_context_ext.core.pipeline import (
    ResultSlot,
    ResultTruncator,
    SaveFaults,
    TruncationRecord,
    Window,
)
from agentscope_context_ext.core.tokens import get_token_counter
from agentscope_context_ext.core.truncation import split_notice, truncate_fresh
from agentscope_context_ext.core.workspace import ToolResultStore

CONFIG = TruncationConfig(first_max_bytes=4096, second_max_bytes=512, exempt_tools=["raw"])
BIG = "".join(f"line {i:05d} of a long output\n" for i in range(600))  # ~17 KB
SMALL = "ok\n"
MID = "".join(f"row {i:04d}\n" for i in range(200))  # ~1.8 KB: under stage one, over stage two
PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"0" * 64).decode()


def truncator(workspace: Path) -> ResultTruncator:
    # a window whose share (a quarter) is 100,000 tokens: no cap in practice
    return ResultTruncator(
        CONFIG, ToolResultStore(workspace), get_token_counter("qwen"), Window(400_000)
    )


def read_notice_text(path: Path) -> str:
    return truncate_fresh(BIG, max_bytes=2000, file_path=str(path), total_lines=600)


@pytest.mark.parametrize(
    ("case", "tool", "text", "tool_input", "cut", "saved", "state"),
    [
        ("small fresh", "shell", SMALL, {}, False, False, {"stage": 1}),
        ("large fresh", "shell", BIG, {}, True, True, {"stage": 1, "path": "tool_result/"}),
        ("exempt", "raw", BIG, {}, False, False, {"stage": 1, "exempt": True}),
        (
            "markdown keeps more",
            "read_doc",
            BIG[:6000],
            {"file_path": "guide.md"},
            False,
            False,
            {"markdown": True},
        ),
        (
            "read_file whole",
            "read_file",
            MID,
            {"file_path": "SRC"},
            False,
            False,
            {"source_file": True},
        ),
        (
            "read_file cut itself",
            "read_file",
            "NOTICE",
            {"file_path": "SRC"},
            False,
            False,
            {"source_file": True},
        ),
        ("forged notice", "shell", "NOTICE", {}, False, False, {"stage": 1}),
    ],
)
def test_stage_one(
    workspace: Path, tmp_path: Path, case, tool, text, tool_input, cut, saved, state
) -> None:
    source = tmp_path / "module.py"
    source.write_text(BIG)
    tool_input = {k: (str(source) if v == "SRC" else v) for k, v in tool_input.items()}
    if text == "NOTICE":
        text = read_notice_text(source)
    slot = ResultSlot("c1", tool, text, (), tool_input)
    change, outcome = truncator(workspace).stage_one(slot)
    assert (change is not None) == cut, case
    for key, value in state.items():
        if isinstance(value, str) and value.endswith("/"):
            assert getattr(slot.record, key).startswith(value), case
        else:
            assert getattr(slot.record, key) == value, case
    files = (
        list((workspace / "tool_result").glob("*")) if (workspace / "tool_result").is_dir() else []
    )
    assert bool(files) == saved, case
    if cut:
        _, notice = split_notice(change.text)
        assert (workspace / notice.file_path).read_text() == text
        assert outcome.bytes_offloaded == len(text.encode())
    # a second pass is a no-op
    assert truncator(workspace).stage_one(slot) == (None, None)


@pytest.mark.parametrize(
    ("case", "tool", "make", "cut", "copies"),
    [
        ("small stays", "shell", "small", False, 0),
        ("under stage one, over stage two: saved now", "shell", "mid", True, 1),
        ("already cut: same file, shorter excerpt", "shell", "big", True, 1),
        ("read_file read whole: notice to the source, no copy", "read_file", "read_whole", True, 0),
        ("read_file cut itself: re-cut, no copy", "read_file", "read_cut", True, 0),
        ("exempt stays", "raw", "big", False, 0),
    ],
)
def test_stage_two(workspace: Path, tmp_path: Path, case, tool, make, cut, copies) -> None:
    source = tmp_path / "module.py"
    source.write_text(MID if make == "read_whole" else BIG)
    stages = truncator(workspace)
    tool_input = {"file_path": str(source)} if tool == "read_file" else {}
    text = {"small": SMALL, "mid": MID, "big": BIG, "read_whole": MID}.get(make)
    if make == "read_cut":
        text = read_notice_text(source)
    slot = ResultSlot("c1", tool, text, (), tool_input)
    change, _ = stages.stage_one(slot)
    if change is not None:
        slot.text = change.text
    change, outcome = stages.stage_two(slot)
    assert (change is not None) == cut, case
    after = (
        sorted((workspace / "tool_result").glob("*"))
        if (workspace / "tool_result").is_dir()
        else []
    )
    assert len(after) == copies, case
    assert slot.record.stage == 2 or slot.record.exempt, case
    if cut:
        excerpt, notice = split_notice(change.text)
        assert len(excerpt.encode()) <= CONFIG.second_max_bytes + 100, case
        if tool == "read_file":
            assert notice.file_path == str(source), case
            assert source.read_text().startswith(excerpt), case
            assert outcome.bytes_offloaded == 0
        else:
            assert (workspace / notice.file_path).read_text() == {"mid": MID, "big": BIG}[make]
    assert stages.stage_two(slot) == (None, None) or not stages.needs_stage_two(slot)


def test_old_media_become_placeholders_with_a_saved_copy(workspace: Path) -> None:
    slot = ResultSlot(
        "c1",
        "screenshot",
        "the page",
        (Media("image", "image/png", data=PNG), Media("image", "image/png", url="https://x/y.png")),
    )
    stages = truncator(workspace)
    assert stages.stage_one(slot) == (None, None), "recent media stay"
    assert stages.stage_two_preview(slot) == (True, 2 * 1280)
    change, outcome = stages.stage_two(slot)
    saved, linked = change.media
    assert isinstance(saved, str) and "saved copy: tool_result/" in saved
    copy = workspace / saved.split("saved copy: ")[1].rstrip("]")
    assert copy.read_bytes() == base64.b64decode(PNG)
    assert isinstance(linked, str) and "https://x/y.png" in linked
    assert outcome.media_replaced == 2


def test_a_window_share_cap_shortens_the_excerpt(workspace: Path) -> None:
    # a window whose share (a quarter) is 300 tokens
    stages = ResultTruncator(
        CONFIG, ToolResultStore(workspace), get_token_counter("qwen"), Window(1200)
    )
    slot = ResultSlot("c1", "shell", BIG)
    change, outcome = stages.stage_one(slot)
    excerpt, _ = split_notice(change.text)
    assert get_token_counter("qwen").count_text(excerpt) <= 300 - 160
    assert outcome.tokens_after < outcome.tokens_before


def test_a_failed_save_keeps_the_result_whole(workspace: Path) -> None:
    (workspace / "tool_result").write_text("a file where the folder should be")
    slot = ResultSlot("c1", "shell", BIG)
    stages = truncator(workspace)
    assert stages.stage_one(slot) == (None, None)
    assert slot.record.save_failed and slot.record.stage == 0, "tried again next step"
    assert [fault.key for fault in stages.faults.open] == ["c1"]
    assert [fault.key for fault in stages.faults.unreported()] == ["c1"]
    assert stages.faults.unreported() == [], "reported once"
    (workspace / "tool_result").unlink()  # space again
    change, _ = stages.stage_one(slot)
    assert change is not None and stages.faults.open == [] and slot.record.save_failed is None


def test_media_that_cannot_be_saved_stays_in_the_context(workspace: Path) -> None:
    image = Media("image", "image/png", data=PNG)
    slot = ResultSlot("c1", "screenshot", "the page", (image,), record=TruncationRecord(stage=1))
    (workspace / "tool_result").write_text("a file where the folder should be")
    stages = truncator(workspace)
    change, _ = stages.stage_two(slot)
    assert change is None or change.media == (image,), "kept, not dropped"
    assert stages.needs_stage_two(slot), "looked at again later"
    assert stages.faults.open


def test_media_that_is_not_base64_is_saved_as_text(workspace: Path) -> None:
    junk = "this is not base64 at all!"
    slot = ResultSlot("c1", "screenshot", "", (Media("image", "image/png", data=junk),))
    change, _ = truncator(workspace).stage_two(slot)
    (placeholder,) = change.media
    assert "not valid base64" in placeholder
    assert (workspace / placeholder.rsplit(": ", 1)[1].rstrip("]")).read_text() == junk


def test_an_exempt_tool_is_never_cut_even_unseen_by_stage_one(workspace: Path) -> None:
    slot = ResultSlot("c1", "raw", BIG)  # e.g. added while truncation was off
    stages = truncator(workspace)
    assert not stages.needs_stage_two(slot)
    assert stages.stage_two(slot) == (None, None)


def test_save_faults_are_reported_once_and_close_when_their_call_leaves() -> None:
    faults = SaveFaults()
    full = OSError(28, "No space left on device")
    for what, key in (("tool_result", "c1"), ("tool_result", "c2#media0"), ("dialog", "dialog")):
        faults.failed(what, key, "ws", full)
    faults.failed("tool_result", "c1", "ws", full)  # the retry fails too: still one fault
    assert [f.key for f in faults.unreported()] == ["c1", "c2#media0", "dialog"]
    assert faults.unreported() == []
    assert faults.open[0].error == "No space left on device"
    faults.forget_unless({"c2"})  # c1 was compacted whole into dialog/
    assert [f.key for f in faults.open] == ["c2#media0", "dialog"]
    faults.saved("dialog")
    assert [f.key for f in faults.open] == ["c2#media0"]
