"""The read_file tool (design §3.4, 6.1): ranges, truncation with notices pointing at the source,
Markdown limits, allowed roots and symlink escapes, and one-line errors. The core's tool function,
framework-free (its schema and a call by a real agent are in test_port_contract.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agentscope_context_ext.core.config import TruncationConfig
from agentscope_context_ext.core.tools import make_read_file
from agentscope_context_ext.core.truncation import split_notice


async def call(tool, **kwargs) -> str:
    text = await tool(**kwargs)
    assert isinstance(text, str)
    return text


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    monkeypatch.chdir(root)
    return root


@pytest.fixture
def tool(workspace: Path, project: Path):
    return make_read_file(
        workspace,
        TruncationConfig(
            first_max_bytes=1000,
            second_max_bytes=200,
            markdown_first_max_bytes=4000,
            markdown_second_max_bytes=1000,
        ),
    )


def numbered(n: int) -> str:
    return "".join(f"line {i:04d} " + "-" * 30 + "\n" for i in range(1, n + 1))


async def test_reads_a_small_file_whole(tool, project: Path) -> None:
    (project / "a.txt").write_text("one\ntwo\n")
    assert await call(tool, file_path="a.txt") == "one\ntwo\n"


async def test_line_range_carries_a_partial_read_notice(tool, project: Path) -> None:
    (project / "a.txt").write_text(numbered(50))
    text = await call(tool, file_path="a.txt", start_line=10, end_line=12)
    excerpt, notice = split_notice(text)
    assert excerpt == "".join(numbered(12).splitlines(keepends=True)[9:12])
    assert notice.partial_read
    assert (notice.start_line, notice.next_line, notice.total_lines) == (10, 13, 50)
    assert notice.file_path == "a.txt", "the notice points at the source file itself"
    # Reading to the end needs no notice.
    assert (
        await call(tool, file_path="a.txt", start_line=49)
        == numbered(50).splitlines(True)[48] + numbered(50).splitlines(True)[49]
    )


async def test_large_file_is_truncated_with_a_notice_on_the_source(
    tool,
    project: Path,
    workspace: Path,
) -> None:
    content = numbered(500)
    (project / "big.log").write_text(content)
    text = await call(tool, file_path="big.log")
    excerpt, notice = split_notice(text)
    assert len(excerpt.encode()) <= 1000
    assert notice.file_path == "big.log"
    assert notice.total_lines == 500
    assert not (workspace / "tool_result").exists(), "read_file never saves a copy"
    # Following notices rebuilds the file exactly.
    parts = [excerpt]
    while True:
        text = await call(
            tool,
            file_path=notice.file_path,
            start_line=notice.next_line,
            start_byte=notice.next_byte,
        )
        split = split_notice(text)
        if split is None:
            parts.append(text)
            break
        excerpt, notice = split
        parts.append(excerpt)
    assert "".join(parts) == content


async def test_huge_single_line_continues_by_byte_offset(tool, project: Path) -> None:
    content = '{"k": "' + "v" * 5000 + '"}'
    (project / "min.json").write_text(content)
    first = await call(tool, file_path="min.json")
    excerpt, notice = split_notice(first)
    assert excerpt == content[:1000]
    assert (notice.next_line, notice.next_byte) == (1, 1000)
    rest = await call(tool, file_path="min.json", start_line=1, start_byte=1000)
    assert split_notice(rest)[0] == content[1000:2000]


async def test_markdown_files_get_the_markdown_limit(tool, project: Path) -> None:
    (project / "SKILL.md").write_text(numbered(80))  # ~3.4 KB: over 1000, under 4000
    (project / "notes.md.txt").write_text(numbered(80))
    assert split_notice(await call(tool, file_path="SKILL.md")) is None
    assert split_notice(await call(tool, file_path="notes.md.txt")) is not None


async def test_reads_saved_tool_results_in_the_workspace(
    tool, workspace: Path, project: Path
) -> None:
    (workspace / "tool_result").mkdir()
    name = "f" * 32 + ".txt"
    (workspace / "tool_result" / name).write_text("saved \x00 output\n")
    assert await call(tool, file_path=f"tool_result/{name}") == "saved \x00 output\n"


async def test_outside_allowed_roots_is_refused(tool, tmp_path: Path, project: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("top secret")
    for path in (str(secret), "../secret.txt", "/etc/passwd"):
        text = await call(tool, file_path=path)
        assert text.startswith("Error: ") and "outside" in text
        assert "top secret" not in text
        assert "\n" not in text


async def test_symlink_escaping_the_root_is_refused(tool, tmp_path: Path, project: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("top secret")
    (project / "innocent.txt").symlink_to(secret)
    (project / "dir_link").symlink_to(tmp_path)
    for path in ("innocent.txt", "dir_link/secret.txt"):
        text = await call(tool, file_path=path)
        assert text.startswith("Error: ") and "outside" in text


async def test_symlink_inside_the_root_is_fine(tool, project: Path) -> None:
    (project / "real.txt").write_text("real\n")
    (project / "alias.txt").symlink_to(project / "real.txt")
    assert await call(tool, file_path="alias.txt") == "real\n"


async def test_extra_allowed_roots(workspace: Path, tmp_path: Path, project: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "x.txt").write_text("x\n")
    tool = make_read_file(workspace, allowed_roots=[str(data)])
    assert await call(tool, file_path=str(data / "x.txt")) == "x\n"
    (project / "p.txt").write_text("p\n")
    assert "outside" in await call(tool, file_path=str(project / "p.txt"))


@pytest.mark.parametrize(
    ("setup", "kwargs", "fragment"),
    [
        (None, {"file_path": "missing.txt"}, "file not found"),
        ("dir", {"file_path": "folder"}, "is a directory"),
        ("bin", {"file_path": "image.png"}, "binary"),
        (None, {"file_path": ""}, "non-empty"),
        ("txt", {"file_path": "a.txt", "start_line": 0}, "start_line must be at least 1"),
        ("txt", {"file_path": "a.txt", "start_line": 5, "end_line": 2}, "end_line"),
        ("txt", {"file_path": "a.txt", "start_line": 99}, "past the end"),
        ("txt", {"file_path": "a.txt", "start_byte": 500}, "start_byte"),
        ("txt", {"file_path": "a.txt", "start_line": "x"}, "whole number"),
        ("txt", {"file_path": "a.txt", "start_line": float("inf")}, "start_line must be a whole"),
        ("txt", {"file_path": "a.txt", "start_line": 1.7}, "got 1.7"),
        ("txt", {"file_path": "a.txt", "start_line": float("nan")}, "whole number"),
        ("txt", {"file_path": "a.txt", "end_line": 2.5}, "end_line must be a whole"),
        ("txt", {"file_path": "a.txt", "start_byte": True}, "start_byte must be a whole"),
        ("fifo", {"file_path": "pipe"}, "not a regular file"),
    ],
)
async def test_errors_are_one_line_strings(
    tool,
    project: Path,
    setup: str | None,
    kwargs: dict,
    fragment: str,
) -> None:
    if setup == "dir":
        (project / "folder").mkdir()
    elif setup == "bin":
        (project / "image.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    elif setup == "txt":
        (project / "a.txt").write_text("one\ntwo\n")
    elif setup == "fifo":
        os.mkfifo(project / "pipe")
    text = await call(tool, **kwargs)
    assert text.startswith("Error: ")
    assert fragment in text
    assert "\n" not in text


async def test_whole_numbers_in_any_spelling_are_read(tool, project: Path) -> None:
    (project / "a.txt").write_text("one\ntwo\nthree\n")
    for start in (2, 2.0, "2"):
        assert (await call(tool, file_path="a.txt", start_line=start)).startswith("two\n")


async def test_invalid_utf8_becomes_replacement_characters(tool, project: Path) -> None:
    (project / "latin1.txt").write_bytes("café\n".encode("latin-1"))
    assert await call(tool, file_path="latin1.txt") == "caf\ufffd\n"


async def test_empty_file(tool, project: Path) -> None:
    (project / "empty.txt").write_text("")
    assert await call(tool, file_path="empty.txt") == "(the file is empty)"


async def test_window_cap_bounds_the_excerpt(workspace: Path, project: Path) -> None:
    tool = make_read_file(workspace, max_bytes_cap=300)
    (project / "big.txt").write_text(numbered(100))
    excerpt, _ = split_notice(await call(tool, file_path="big.txt"))
    assert len(excerpt.encode()) <= 300
