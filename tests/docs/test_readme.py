"""The Python examples of the README and of the docs pages (docs/*.md) run as written
(offline), and what their comments and the text around them claim is what they do, so the docs
cannot rot.

An example whose first line is ``# AgentScope 2.x`` or ``# AgentScope 1.x`` is for that major
version; one without runs on both. The examples of the installed major (and those for both)
run here; CI runs the suite under each major, so every example runs somewhere. An example shown
on two pages (the README's quick start is also the first of docs/agent.md) runs once."""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dashscope
import pytest

from agentscope_context_ext.compat import agentscope_major

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
TEXT = README.read_text(encoding="utf-8")
PAGES = {
    path.relative_to(ROOT).as_posix(): path.read_text(encoding="utf-8")
    for path in [README, *sorted((ROOT / "docs").glob("*.md"))]
}
"""README.md and every page of the docs site, by path in the repository."""
ALL_TEXT = "\n".join(PAGES.values())
MAJOR = min(agentscope_major(), 2)
MARKS = {"# AgentScope 1.x": 1, "# AgentScope 2.x": 2}
"""The first line that says which major version an example is for."""
AGENTSCOPE1_PAGE = "docs/agentscope1.md"
"""The one page of 1.x examples: everywhere else the examples are 2.x's (or both's)."""


@dataclass(frozen=True)
class Example:
    code: str
    page: str
    """The page it is shown on first (README.md first, then docs/ by name)."""
    line: int
    """Where its fence opens on that page."""
    major: int | None
    """The major version it is for; ``None``: both."""

    @property
    def name(self) -> str:
        stem = Path(self.page).stem.lower()
        return f"{stem}-line-{self.line}-{f'{self.major}.x' if self.major else 'both'}"


FENCES = [
    (page, match.group(1).strip(), match.group(2), text.count("\n", 0, match.start()) + 1)
    for page, text in PAGES.items()
    for match in re.finditer(r"^```([^\n]*)\n(.*?)^```[ \t]*$", text, re.S | re.M)
]
EXAMPLES: list[Example] = []
for _page, _info, _code, _line in FENCES:
    if _info.split()[:1] == ["python"] and all(example.code != _code for example in EXAMPLES):
        EXAMPLES.append(Example(_code, _page, _line, MARKS.get(_code.split("\n", 1)[0].strip())))
"""Every Python example once, where it is first shown."""
RUNNABLE = [example for example in EXAMPLES if example.major in (None, MAJOR)]
"""The examples of the installed AgentScope."""

only_2x = pytest.mark.skipif(MAJOR != 2, reason="a check of an AgentScope 2.x example")
only_1x = pytest.mark.skipif(MAJOR != 1, reason="a check of an AgentScope 1.x example")


def _run(block: str, name: str) -> dict[str, Any]:
    namespace: dict[str, Any] = {"__name__": "__readme__"}
    exec(compile(block, f"docs example {name}", "exec"), namespace)
    return namespace


def _block(marker: str) -> str:
    """The one example of the installed major (or of both) that contains ``marker``."""
    found = [example.code for example in RUNNABLE if marker in example.code]
    assert len(found) == 1, f"exactly one docs example should contain {marker!r}"
    return found[0]


def _after(heading_text: str, fence: str = "```\n") -> str:
    """The first plain fenced block after ``heading_text`` (on whichever page has it)."""
    rest = ALL_TEXT[ALL_TEXT.index(heading_text) :]
    start = rest.index(fence) + len(fence)
    return rest[start : rest.index("```", start)]


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)


def test_every_example_is_for_both_majors_or_says_which() -> None:
    for page, info, code, line in FENCES:
        # an example in another Python fence (```py, ```python3, ```pycon) would never run
        language = info.split()[0].lower() if info else ""
        assert language == "python" or not language.startswith("py"), f"{page}:{line}: {info!r}"
        if info == "python":
            first = code.split("\n", 1)[0].strip()
            if first.lower().startswith("# agentscope"):
                assert first in MARKS, f"{page}:{line}: {first!r} is not one of {set(MARKS)}"
    assert {example.major for example in EXAMPLES} == {None, 1, 2}
    # 2.x first: the README's first example is for 2.x, and 1.x's are on their own page
    assert next(e for e in EXAMPLES if e.page == "README.md").major == 2
    for page, info, code, line in FENCES:
        if info == "python" and MARKS.get(code.split("\n", 1)[0].strip()) == 1:
            assert page == AGENTSCOPE1_PAGE, f"{page}:{line}: a 1.x example"


def test_an_example_shown_twice_is_the_same_example() -> None:
    """The README's quick start is also docs/agent.md's first example: shown twice, run once,
    so the two must not drift apart (then both would run, and neither would be the other)."""
    readme = [code for page, info, code, _ in FENCES if page == "README.md" and info == "python"]
    agent = [code for page, info, code, _ in FENCES if page == "docs/agent.md" and info == "python"]
    assert readme[0] == agent[0]


@pytest.mark.parametrize("example", RUNNABLE, ids=lambda example: example.name)
def test_readme_example_runs(
    example: Example, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    if "ACE_REDIS_URL" in example.code:  # the many-workers example needs the test server
        monkeypatch.setenv("ACE_REDIS_URL", request.getfixturevalue("redis_url"))
    if "agentscope.app" in example.code:  # the served-agent example needs the [serve] extra
        pytest.importorskip("aiosqlite", reason="the [serve] extra is not installed")
        pytest.importorskip("agentscope.app", reason="the [serve] extra is not installed")
    if "trace_to(" in example.code:
        _tracing_example_does_what_it_says(example)
        return
    _run(example.code, example.name)


STUDIO = "http://127.0.0.1:3000"


def _tracing_example_does_what_it_says(example: Example) -> None:
    """The tracing example, in a process of its own (a tracer provider is process-wide),
    sending to a loopback receiver in place of Studio: the reply, the tool call with the cut
    output, and the cut inside it arrive."""
    import subprocess
    import sys

    from otlp_receiver import OtlpReceiver

    assert f'trace_to("{STUDIO}"' in example.code
    with OtlpReceiver() as receiver:
        done = subprocess.run(
            [sys.executable, "-c", example.code.replace(STUDIO, receiver.url)],
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        spans = receiver.spans()
    assert done.returncode == 0, done.stderr[-2000:]
    by_name = {span.name: span for span in spans}
    assert {"invoke_agent builder", "execute_tool fetch_log", "context.truncate"} <= set(by_name)
    tool = by_name["execute_tool fetch_log"]
    assert "<<<TRUNCATED>>>" in tool.attributes["gen_ai.tool.call.result"], (
        "tool spans show the cut"
    )
    assert by_name["context.truncate"].parent_id == tool.span_id
    assert {span.service for span in spans} == {"readme"}


@only_2x
def test_the_served_example_builds_the_app_with_our_factory() -> None:
    pytest.importorskip("aiosqlite", reason="the [serve] extra is not installed")
    pytest.importorskip("agentscope.app", reason="the [serve] extra is not installed")
    namespace = _run(_block("context_middleware_factory("), "served")
    paths = namespace["app"].openapi()["paths"]
    assert "/chat/" in paths and "/sessions/{session_id}/stream" in paths


def test_many_workers_example_does_what_it_says(
    redis_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    import redis

    client = redis.Redis.from_url(redis_url.split("?")[0])
    for key in client.scan_iter(match="readme*", count=1000):  # a fresh conversation
        client.delete(key)
    monkeypatch.setenv("ACE_REDIS_URL", redis_url)
    _run(_block('"readme-session:'), "many workers")
    # "both requests, both answers": the second worker had the first worker's conversation
    printed = capsys.readouterr().out.strip().splitlines()[-1]
    assert printed == str(
        ["I use the ed editor.", "Noted.", "Which editor do I use?", "You use ed."]
    )


def test_readme_starts_with_the_two_commands() -> None:
    setup = TEXT[TEXT.index("## Set up") : TEXT.index("## What it does")]
    assert 'pip install -e ".[dev]" && agentscope-context demo' in setup
    assert "python -m pytest" in setup


def _read_file_output(
    results: list[str], module: Path, manager: Any, tmp_path: Path, ns: dict[str, Any]
) -> None:
    """What the quick start says of its one read_file result, on either major."""
    assert len(results) == 1
    output = results[0]
    # "read_file cut its own output to its share of the window and ended it with a notice
    # saying how to read on" pointing at the source
    assert len(output.encode()) < len(module.read_bytes())
    assert "<<<TRUNCATED>>>" in output and f"file_path={module}" in output
    share = int(manager.config.truncation.max_window_share * manager.max_input_tokens)
    assert manager.counter.count_text(output) <= share
    # "the model's last call got it": what the example prints is that notice
    seen = ns["seen"]
    notice = seen[seen.rindex("<<<TRUNCATED>>>") :]
    assert output.rstrip().endswith(notice.rstrip()) and "start_line=" in notice
    assert f"call `read_file` with file_path={module}" in notice
    # "'truncations': 0: stage one had nothing left to cut or save"
    stats = manager.stats.as_dict()
    assert stats["truncations"] == 0 and stats["bytes_offloaded"] == 0, stats
    # "dialog/, tool_result/, Memory.md live here"
    assert Path(manager.workspace).resolve() == (tmp_path / ".agentscope-context").resolve()
    # "no copy is saved" (docs/agent.md, Give an agent read_file)
    assert not list((tmp_path / ".agentscope-context" / "tool_result").glob("*.txt"))


def _text(output: Any) -> str:
    if isinstance(output, str):
        return output
    return "".join(
        part.get("text", "") if isinstance(part, dict) else getattr(part, "text", "")
        for part in output
    )


@only_2x
def test_quick_start_does_what_its_comments_say(tmp_path: Path) -> None:
    from agentscope.message import ToolResultBlock

    ns = _run(_block('tool_call("read_file"'), "quick start")
    context, agent, model, module = ns["context"], ns["agent"], ns["model"], ns["module"]
    manager = context.manager
    results = [
        _text(block.output)
        for msg in agent.state.context
        for block in msg.content
        if isinstance(block, ToolResultBlock)
    ]
    _read_file_output(results, module, manager, tmp_path, ns)
    # the manager is the agent's, and the stats are the manager's
    assert agent.context_manager is manager and context.stats is manager.stats
    # "what 2.x offloads by itself lands in the same workspace"
    assert agent.offloader is context.offloader
    # the tools are added at the first reply; read_dialog and search_dialog are shown to the
    # model only once there is a dialog to read (none here: nothing was compacted)
    for name in ("read_file", "read_dialog", "search_dialog", "memory_append"):
        assert asyncio.run(agent.toolkit.get_tool(name)) is not None, name
    shown = {tool["function"]["name"] for tool in model.calls[0].tools or []}
    assert "read_file" in shown and not {"read_dialog", "search_dialog"} & shown
    # "One middleware manages one agent"
    from agentscope.agent import Agent

    other = Agent(name="other", system_prompt="-", model=model, middlewares=[context])
    with pytest.raises(Exception, match="already manages agent"):
        context.bind(other)


@only_2x
def test_enable_on_an_existing_agent_does_what_it_says() -> None:
    ns = _run(_block("manager.detach()  # the agent as it was"), "enable on an Agent")
    agent, manager = ns["agent"], ns["manager"]
    # after detach(): "no middleware, tools or offloader of ours"
    middlewares = [
        m for name in dir(agent) if name.endswith("_middlewares") for m in getattr(agent, name)
    ]
    assert manager.middleware not in middlewares
    assert agent.offloader is None and not hasattr(agent, "context_manager")
    assert asyncio.run(agent.toolkit.get_tool("read_file")) is None
    assert manager.stats.as_dict()["peak_prompt_tokens"] > 0


@only_1x
def test_quick_start_on_1x_does_what_its_comments_say(tmp_path: Path) -> None:
    ns = _run(_block("enable_context_management(\n"), "quick start")
    manager, agent, module = ns["manager"], ns["agent"], ns["module"]
    results = [
        _text(block["output"])
        for msg in agent.memory.messages
        if isinstance(msg.content, list)
        for block in msg.content
        if block.get("type") == "tool_result"
    ]
    _read_file_output(results, module, manager, tmp_path, ns)
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
    # the notice the page shows is the one printed (the hash name aside)
    shown = _after("The notice at the end of `older` reads:")
    actual = older[older.index("<<<TRUNCATED>>>") :]
    name = Path(path).name
    assert actual.replace(name, "....txt").strip() == shown.strip()


def test_read_file_example_gives_the_tool() -> None:
    ns = _run(_block("make_read_file_tool("), "read_file")
    toolkit = ns["toolkit"]
    if MAJOR >= 2:
        tool = asyncio.run(toolkit.get_tool("read_file"))
        # "a FunctionTool that is always allowed"
        decision = asyncio.run(tool.check_permissions())
        assert decision.behavior.value == "allow"
    else:
        assert "read_file" in toolkit.tools


def test_token_example_is_exact() -> None:
    ns = _run(_block("get_token_counter("), "tokens")
    # "exact, offline"
    tokenizer = dashscope.get_tokenizer("qwen-plus")
    assert ns["counter"].count_text("你好, world") == len(tokenizer.encode("你好, world"))
    if MAJOR == 1:  # "On 1.x the counter is also an agentscope.token.TokenCounterBase"
        from agentscope.token import TokenCounterBase

        assert isinstance(ns["counter"], TokenCounterBase)


def test_summary_claim_is_what_b7_measured() -> None:
    claim = " ".join(ALL_TEXT[ALL_TEXT.index("benchmark B7: it keeps") :][:120].split())
    percent = int(re.search(r"keeps (\d+)% of the identifiers", claim).group(1))
    results = PAGES["docs/benchmarks.md"]
    b7 = results[results.index("## B7") : results.index("Before issue 11")]
    rows = [line.split("|")[1:-1] for line in b7.splitlines() if re.match(r"\| \w+#\d", line)]
    assert rows, "docs/benchmarks.md has the B7 table"
    for row in rows:
        assert float(row[4].strip().rstrip("%")) >= percent
        ours, theirs = (int(x.replace(",", "")) for x in row[7].split("/"))
        assert ours <= theirs * 0.8, "the docs say the summary is shorter (two thirds)"


def test_session_example_restores_what_it_says(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    _run(_block("messages restored"), "session")
    # "2 messages restored", from a session file written whole
    assert "2 messages restored" in capsys.readouterr().out
    assert [p.name for p in (tmp_path / "sessions").iterdir()] == ["me.json"]


@only_2x
def test_the_overflow_example_is_refused_as_it_says(capsys: pytest.CaptureFixture) -> None:
    _run(_block("except ContextOverflowError as error:"), "never over the window")
    tokens, window = capsys.readouterr().out.splitlines()[0].split()
    assert int(tokens) > int(window) == 16384, "refused, with its figures"


def test_the_notebooks_table_names_the_notebooks() -> None:
    page = PAGES["docs/development.md"]
    table = page[page.index("## Notebooks") : page.index("## Running the benchmarks")]
    named = set(re.findall(r"`(notebooks/[\w/]+\.ipynb)`", table))
    on_disk = {
        p.relative_to(README.parent).as_posix() for p in README.parent.glob("notebooks/**/*.ipynb")
    }
    assert named == on_disk
