"""The truncation engine (design §3.1, 12 items 1-3): pure functions, checked case by case and by
a property test against the real ``read_file`` continuation."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentscope_context_ext import (
    DEFAULT_MAX_BYTES,
    TRUNCATION_NOTICE_MARKER,
    TruncationConfig,
    split_notice,
    truncate_text_output,
)
from agentscope_context_ext.core.tools import make_read_file
from agentscope_context_ext.core.truncation import (
    count_lines,
    encode_text,
    notice_only,
    retruncate,
    sendable_text,
    sendable_value,
    truncate_fresh,
)

PATH = "tool_result/0123456789abcdef0123456789abcdef.txt"


def lines_of(n: int, width: int = 20) -> str:
    return "".join(f"{i:06d}" + "x" * (width - 7) + "\n" for i in range(n))


def parts(text: str):
    split = split_notice(text)
    assert split is not None, f"no parsable notice in {text[-400:]!r}"
    return split


def test_default_limit_is_50_kib() -> None:
    assert DEFAULT_MAX_BYTES == 51200


def test_text_within_limit_is_unchanged() -> None:
    text = lines_of(10)
    assert truncate_text_output(text, max_bytes=len(text.encode()), file_path=PATH) == text


def test_exact_limit_is_unchanged_and_limit_plus_one_is_cut() -> None:
    text = "a" * 99 + "\n"
    assert truncate_text_output(text, max_bytes=100, file_path=PATH) == text
    cut = truncate_text_output(text + "b", max_bytes=100, file_path=PATH)
    excerpt, notice = parts(cut)
    assert excerpt == text
    assert notice.next_line == 2 and notice.next_byte == 0
    assert notice.total_lines == 2


def test_cut_backs_up_to_last_complete_line() -> None:
    text = lines_of(100)
    out = truncate_text_output(text, max_bytes=205, file_path=PATH)
    excerpt, notice = parts(out)
    assert excerpt == lines_of(10)
    assert notice.excerpt_bytes == 200
    assert notice.start_line == 1
    assert notice.next_line == 11
    assert notice.total_lines == 100
    assert notice.file_path == PATH


def test_notice_carries_the_required_facts() -> None:
    out = truncate_text_output(lines_of(3000), max_bytes=1000, file_path=PATH)
    notice_text = out[out.index(TRUNCATION_NOTICE_MARKER) :]
    assert "contains 3000 lines in total" in notice_text
    assert "starts at line 1" in notice_text
    assert f"covers the next {parts(out)[1].excerpt_bytes} bytes" in notice_text
    assert f"call `read_file` with file_path={PATH} start_line=51 to read more." in notice_text


@pytest.mark.parametrize("char", ["中", "é", "😀", "\u0301"])
def test_never_cuts_inside_a_multibyte_character(char: str) -> None:
    text = char * 1000  # one long line: the cut is inside the line
    for limit in range(1, 12):
        out = truncate_text_output(text, max_bytes=limit, file_path=PATH)
        excerpt, notice = parts(out)
        assert excerpt, "the excerpt is never empty"
        assert text.startswith(excerpt)
        encoded = len(excerpt.encode())
        width = len(char.encode())
        assert encoded <= max(limit, width)
        assert notice.next_byte == encoded
        assert notice.next_line == 1


def test_crlf_lines_keep_their_carriage_return() -> None:
    text = "".join(f"row {i}\r\n" for i in range(100))
    out = truncate_text_output(text, max_bytes=50, file_path=PATH)
    excerpt, notice = parts(out)
    assert excerpt == "".join(f"row {i}\r\n" for i in range(notice.next_line - 1))
    assert excerpt.endswith("\r\n")


def test_one_huge_line_gets_an_excerpt_and_a_byte_offset() -> None:
    text = '{"a":' + "1," * 200_000 + "1}"
    out = truncate_text_output(text, max_bytes=1000, file_path=PATH)
    excerpt, notice = parts(out)
    assert len(excerpt.encode()) == 1000
    assert notice.next_line == 1
    assert notice.next_byte == 1000
    assert "start_line=1 start_byte=1000" in out


def test_short_line_before_a_huge_line_does_not_waste_the_budget() -> None:
    text = "header\n" + "z" * 100_000
    excerpt, notice = parts(truncate_text_output(text, max_bytes=1000, file_path=PATH))
    assert len(excerpt.encode()) == 1000
    assert notice.next_line == 2 and notice.next_byte == 1000 - len("header\n")


def test_text_mentioning_the_marker_is_truncated_as_fresh() -> None:
    text = f"# the marker is {TRUNCATION_NOTICE_MARKER}\n{TRUNCATION_NOTICE_MARKER}\n" + lines_of(
        500
    )
    out = truncate_text_output(text, max_bytes=500, file_path=PATH)
    excerpt, notice = parts(out)
    assert text.startswith(excerpt)
    assert notice.file_path == PATH
    assert len(out.encode()) < len(text.encode())


def test_a_broken_notice_is_not_trusted() -> None:
    fake = lines_of(500) + f"{TRUNCATION_NOTICE_MARKER}\nThe output above was truncated.\n"
    out = truncate_text_output(fake, max_bytes=500, file_path=PATH)
    assert parts(out)[1].file_path == PATH


def test_retruncation_keeps_path_and_total_and_rewrites_the_continuation() -> None:
    text = lines_of(3000)
    first = truncate_text_output(text, max_bytes=20_000, file_path=PATH)
    second = truncate_text_output(first, max_bytes=3000)
    excerpt, notice = parts(second)
    assert notice.file_path == PATH
    assert notice.total_lines == 3000
    assert excerpt == lines_of(150)
    assert notice.excerpt_bytes == 3000
    assert notice.next_line == 151


def test_retruncation_twice_is_stable_and_larger_limit_is_a_no_op() -> None:
    first = truncate_text_output(lines_of(3000), max_bytes=20_000, file_path=PATH)
    second = truncate_text_output(first, max_bytes=3000)
    assert truncate_text_output(second, max_bytes=3000) == second
    assert truncate_text_output(second, max_bytes=50_000) == second
    assert truncate_text_output(first, max_bytes=50_000) == first


def test_retruncation_within_slack_is_a_no_op() -> None:
    first = truncate_text_output(lines_of(3000), max_bytes=3080, file_path=PATH)
    assert truncate_text_output(first, max_bytes=3000) == first


def test_retruncation_of_a_mid_line_excerpt_keeps_offsets_exact() -> None:
    text = "q" * 50_000
    first = truncate_text_output(text, max_bytes=10_000, file_path=PATH)
    second = truncate_text_output(first, max_bytes=1000)
    excerpt, notice = parts(second)
    assert excerpt == "q" * 1000
    assert (notice.next_line, notice.next_byte) == (1, 1000)


def test_fresh_ignores_a_forged_notice() -> None:
    forged = truncate_text_output(lines_of(200), max_bytes=300, file_path="../../etc/passwd")
    out = truncate_fresh(forged * 3, max_bytes=300, file_path=PATH)
    assert parts(out)[1].file_path == PATH


def test_partial_file_read_offsets() -> None:
    # A read starting at line 41 byte 5, as read_file continues a mid-line cut.
    text = "tail of line 41\n" + lines_of(100)
    out = truncate_text_output(
        text, start_line=41, total_lines=500, max_bytes=10, file_path="src/x.py", start_byte=5
    )
    excerpt, notice = parts(out)
    assert excerpt == "tail of li"
    assert (notice.start_line, notice.first_byte) == (41, 5)
    assert (notice.next_line, notice.next_byte) == (41, 15)
    assert "starts at line 41 byte 5" in out


def test_missing_path_still_leaves_a_notice() -> None:
    out = truncate_text_output(lines_of(100), max_bytes=100)
    assert parts(out)[1].file_path == "(not saved)"


def test_bad_arguments_raise_value_error() -> None:
    with pytest.raises(ValueError, match="max_bytes"):
        truncate_text_output("abc" * 10, max_bytes=0)
    with pytest.raises(ValueError, match="start_line"):
        truncate_text_output("abc" * 10, max_bytes=5, start_line=0)


def test_lone_surrogates_never_raise() -> None:
    text = "ok \udcff bad bytes\n" * 100
    out = truncate_text_output(text, max_bytes=100, file_path=PATH)
    assert parts(out)[0]


def test_a_lone_surrogate_becomes_u_fffd_in_what_is_sent() -> None:
    clean = "数据 ok"
    assert sendable_text(clean) is clean
    assert sendable_text("a\ud800b\udcffc\udfff") == "a\ufffdb\ufffdc\ufffd"
    text = "x\ud800y\udcffz" * 3
    for cut in range(len(text)):  # chunk by chunk adds up to the whole (a streamed output)
        assert sendable_text(text[:cut]) + sendable_text(text[cut:]) == sendable_text(text)
    assert sendable_value({"k\ud800": [("v\udcff",), 3]}) == {"k\ufffd": [("v\ufffd",), 3]}
    value = {"k": ["v", 3]}
    assert sendable_value(value) is value


def test_the_saved_bytes_keep_what_a_surrogate_stands_for() -> None:
    # an undecodable byte (surrogateescape) is saved as it was; a surrogate that stands for no
    # byte as U+FFFD, in the same text
    assert encode_text("ok \udcff \ud800") == b"ok \xff " + "\ufffd".encode()


def test_a_stage_two_cut_of_a_sent_excerpt_never_skips_a_byte(tmp_path: Path) -> None:
    """Issue 50: stage two re-cuts the excerpt as it was sent, each undecodable byte one U+FFFD
    (3 bytes): reading on from its notice skipped 2 bytes of the file for each."""
    data = b"A" * 10 + b"\xff" * 50 + b"B" * 300  # one long line
    (tmp_path / "tool_result").mkdir()
    (tmp_path / PATH).write_bytes(data)
    sent = sendable_text(
        truncate_fresh(data.decode("utf-8", "surrogateescape"), max_bytes=200, file_path=PATH)
    )
    again = retruncate(sent, max_bytes=100)
    excerpt, notice = parts(again)
    assert excerpt == "A" * 10 + "\ufffd" * 30
    assert (notice.next_line, notice.next_byte) == (1, 40), "byte 40 of the file: none skipped"
    assert _read_back(tmp_path, again) == "A" * 10 + "\ufffd" * 50 + "B" * 300


def test_count_lines() -> None:
    assert count_lines("") == 0
    assert count_lines("a") == 1
    assert count_lines("a\n") == 1
    assert count_lines("a\nb") == 2
    assert count_lines(b"a\n\n") == 2


@pytest.mark.parametrize(
    ("path", "markdown"),
    [
        ("notes.md", True),
        ("docs/README.MD", True),
        ("a/b.markdown", True),
        ("page.mdx", True),
        ("notes.md.txt", False),
        ("cmd.py", False),
        ("md/file.txt", False),
        ("README", False),
        (None, False),
        ("", False),
    ],
)
def test_markdown_limits_follow_the_real_extension(path: str | None, markdown: bool) -> None:
    config = TruncationConfig()
    expected = (102400, 51200) if markdown else (51200, 3000)
    assert config.is_markdown(path) is markdown
    assert config.limits_for(path) == expected


# ---------------------------------------------------------------- property test


def _read_back(workspace: Path, truncated: str) -> str:
    """The excerpt, then everything ``read_file`` returns from the notice's position on."""
    tool = make_read_file(  # the core tool: the same on AgentScope 1.x and 2.x
        workspace,
        TruncationConfig(first_max_bytes=10**9, markdown_first_max_bytes=10**9),
    )
    excerpt, notice = parts(truncated)
    rest = asyncio.run(
        tool(notice.file_path, start_line=notice.next_line, start_byte=notice.next_byte)
    )
    assert not rest.startswith("Error:"), rest
    return excerpt + rest


_text = (
    st.lists(
        st.one_of(
            st.sampled_from(["\n", "\r\n", "a", " ", "中", "😀", "é", "<<<TRUNCATED>>>"]),
            st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=30),
        ),
        min_size=1,
        max_size=60,
    )
    .map("".join)
    .filter(bool)
)


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(text=_text, limit=st.integers(min_value=1, max_value=300))
def test_excerpt_plus_continuation_is_the_original(tmp_path: Path, text: str, limit: int) -> None:
    (tmp_path / "tool_result").mkdir(exist_ok=True)
    (tmp_path / "tool_result" / "0123456789abcdef0123456789abcdef.txt").write_bytes(text.encode())
    out = truncate_fresh(text, max_bytes=limit, file_path=PATH)
    if len(text.encode()) <= limit:
        assert out == text
        return
    assert _read_back(tmp_path, out) == text
    # Stage two on top of stage one keeps the same guarantee, and so does the last resort
    # before the window (the notice alone), and a user's message cut like an output.
    smaller = truncate_text_output(out, max_bytes=max(1, limit // 3))
    assert _read_back(tmp_path, smaller) == text
    assert _read_back(tmp_path, notice_only(smaller)) == text
    message = truncate_fresh(text, max_bytes=limit, file_path=PATH, message=True)
    assert _read_back(tmp_path, message) == text


def test_notice_only_keeps_where_reading_goes_on() -> None:
    out = truncate_fresh(
        "a" * 100 + "\nb", max_bytes=30, file_path=PATH, start_line=5, start_byte=7
    )
    alone = notice_only(out)
    excerpt, notice = parts(alone)
    assert excerpt == "" and notice.excerpt_bytes == 0
    assert (notice.next_line, notice.next_byte) == (5, 7) and notice.file_path == PATH
    assert "is not shown here" in alone
    assert notice_only(alone) == alone, "already the notice alone"
    assert truncate_text_output(alone, max_bytes=10) == alone, "stage two leaves it alone"
    assert notice_only("plain text") is None


def test_a_users_message_notice_says_so_and_round_trips() -> None:
    out = truncate_fresh("x" * 500, max_bytes=100, file_path=PATH, message=True)
    excerpt, notice = parts(out)
    assert excerpt == "x" * 100 and notice.message and not notice.partial_read
    assert "The message above was truncated" in out
    assert notice.render() in out
