"""The README's Python examples run as written (offline), and what their comments and the text
around them claim is what they do, so the docs cannot rot."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import dashscope
import pytest

README = Path(__file__).resolve().parent.parent / "README.md"
TEXT = README.read_text(encoding="utf-8")
BLOCKS = re.findall(r"```python\n(.*?)```", TEXT, re.S)


def _run(block: str, name: str) -> dict[str, Any]:
    namespace: dict[str, Any] = {"__name__": "__readme__"}
    exec(compile(block, f"README.md {name}", "exec"), namespace)
    return namespace


def _block(marker: str) -> str:
    found = [block for block in BLOCKS if marker in block]
    assert len(found) == 1, f"exactly one README example should contain {marker!r}"
    return found[0]


def _after(heading_text: str, fence: str = "```\n") -> str:
    """The first plain fenced block after ``heading_text``."""
    rest = TEXT[TEXT.index(heading_text) :]
    start = rest.index(fence) + len(fence)
    return rest[start : rest.index("```", start)]


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_readme_example_runs(
    index: int, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    if "RedisSession" in BLOCKS[index]:  # the many-workers example needs the test server
        monkeypatch.setenv("ACE_REDIS_URL", request.getfixturevalue("redis_url"))
    _run(BLOCKS[index], f"example {index + 1}")


def test_many_workers_example_does_what_it_says(
    redis_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    import redis

    client = redis.Redis.from_url(redis_url.split("?")[0])
    for key in client.scan_iter(match="readme*", count=1000):  # a fresh conversation
        client.delete(key)
    monkeypatch.setenv("ACE_REDIS_URL", redis_url)
    _run(_block("session = RedisSession("), "many workers")
    # "both requests, both answers": the second worker had the first worker's conversation
    printed = capsys.readouterr().out.strip().splitlines()[-1]
    assert printed == str(
        ["I use the ed editor.", "Noted.", "Which editor do I use?", "You use ed."]
    )


def test_readme_starts_with_the_two_commands() -> None:
    setup = TEXT[TEXT.index("## Set up") : TEXT.index("## What it does")]
    assert 'pip install -e ".[dev]" && agentscope-context demo' in setup
    assert "python -m pytest" in setup


def test_quick_start_does_what_its_comments_say(tmp_path: Path) -> None:
    ns = _run(_block("enable_context_management(\n"), "quick start")
    manager, agent, module = ns["manager"], ns["agent"], ns["module"]
    # "dialog/, tool_result/, Memory.md live here"
    assert Path(manager.workspace).resolve() == (tmp_path / ".agentscope-context").resolve()
    # "read_file cut its own output to the window share, with a notice" pointing at the source
    results = [
        block
        for msg in agent.memory.messages
        if isinstance(msg.content, list)
        for block in msg.content
        if block.get("type") == "tool_result"
    ]
    assert len(results) == 1
    output = "".join(part["text"] for part in results[0]["output"] if part.get("type") == "text")
    assert len(output.encode()) < len(module.read_bytes())
    assert "<<<TRUNCATED>>>" in output and f"file_path={module}" in output
    share = int(manager.config.truncation.max_window_share * manager.max_input_tokens)
    assert manager.counter.count_text(output) <= share
    # "no copy is saved" (README, Give an agent read_file)
    assert not list((tmp_path / ".agentscope-context" / "tool_result").glob("*.txt"))
    # the enable paragraph: what was changed, all undone by detach()
    changes = manager.attachment.changes
    assert {"agent.memory", "agent.model"} <= set(changes)
    assert any("post_acting" in change for change in changes)
    assert any("pre_reasoning" in change for change in changes)
    assert {"tool 'read_dialog'", "tool 'search_dialog'"} <= set(changes)
    manager.detach()
    assert "read_file" not in agent.toolkit.tools and not agent._instance_pre_reasoning_hooks


def test_long_term_example_does_what_its_comments_say() -> None:
    ns = _run(_block("LongTermMemory("), "long-term memory")
    memory = ns["memory"]
    # "False: already there"
    assert memory.append("user prefers  METRIC units") is False
    assert memory.read().count("metric units") == 1
    assert memory.daily_notes()


def test_truncation_example_does_what_its_comments_say() -> None:
    ns = _run(_block("truncate_text_output"), "truncation")
    html, path, excerpt, older = (ns[key] for key in ("html", "path", "excerpt", "older"))
    # "~440 KB of tool output"
    assert 430_000 <= len(html.encode()) <= 450_000
    # "full text first: nothing is lost"
    # (the path is relative to the workspace, as the agent is shown it)
    assert (Path(".agentscope-context") / path).read_text(encoding="utf-8") == html
    # stage one, then stage two on the same file
    assert len(excerpt.encode()) <= 51200 + 1024 and len(older.encode()) <= 3000 + 1024
    # the notice the README shows is the one printed (the hash name aside)
    shown = _after("The notice at the end of `older` reads:")
    actual = older[older.index("<<<TRUNCATED>>>") :]
    name = Path(path).name
    assert actual.replace(name, "....txt").strip() == shown.strip()


def test_token_example_is_exact() -> None:
    ns = _run(_block("get_token_counter("), "tokens")
    # "exact, offline"
    tokenizer = dashscope.get_tokenizer("qwen-plus")
    assert ns["counter"].count_text("你好, world") == len(tokenizer.encode("你好, world"))


def test_summary_claim_is_what_b7_measured() -> None:
    claim = " ".join(TEXT[TEXT.index("benchmark B7: it keeps") :][:120].split())
    percent = int(re.search(r"keeps (\d+)% of the identifiers", claim).group(1))
    results = (README.parent / "docs" / "benchmarks.md").read_text(encoding="utf-8")
    b7 = results[results.index("## B7") : results.index("Before issue 11")]
    rows = [line.split("|")[1:-1] for line in b7.splitlines() if re.match(r"\| \w+#\d", line)]
    assert rows, "docs/benchmarks.md has the B7 table"
    for row in rows:
        assert float(row[4].strip().rstrip("%")) >= percent
        ours, theirs = (int(x.replace(",", "")) for x in row[7].split("/"))
        assert ours <= theirs * 0.8, "the README says the summary is shorter (two thirds)"


def test_session_example_restores_what_it_says(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    _run(_block("AtomicJSONSession(save_dir="), "atomic session")
    # "2 messages restored", from a session file written whole
    assert "2 messages restored" in capsys.readouterr().out
    assert [p.name for p in (tmp_path / "sessions").iterdir()] == ["me.json"]


def test_the_overflow_example_is_refused_as_it_says(capsys: pytest.CaptureFixture) -> None:
    _run(_block("except ContextOverflowError as error:"), "never over the window")
    tokens, window = capsys.readouterr().out.splitlines()[0].split()
    assert int(tokens) > int(window) == 16384, "refused, with its figures"
