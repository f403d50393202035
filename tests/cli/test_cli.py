"""The command line (design §10): the demo does real work, bad input exits 2 with one line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from agentscope_context_ext.cli import main


def test_demo_runs_a_real_agent_and_reports(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    out = tmp_path / "demo"
    assert main(["demo", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "step   1 | prompt" in printed and "compaction:" in printed
    report = json.loads((out / "report.json").read_text())
    assert report["compactions"] >= 1
    assert report["truncations"] >= 1 and report["retruncations"] >= 1
    assert report["pair_violations"] == 0 and report["offloaded_files_missing"] == 0
    assert report["peak_prompt_tokens"] <= report["max_input_tokens"]
    assert report["steps"] == len(report["per_step_tokens"])
    for key in (
        "steps",
        "peak_prompt_tokens",
        "max_input_tokens",
        "compactions",
        "truncations",
        "retruncations",
        "bytes_offloaded",
        "pair_violations",
        "hook_seconds",
    ):
        assert key in report
    assert (out / "report.md").read_text().startswith("# agentscope-context demo")
    assert (out / "tokens.png").read_bytes().startswith(b"\x89PNG")
    assert list((out / "workspace" / "dialog").glob("*.jsonl"))
    # The summary reads as a handover: no line that only says a tool ran or a file was read.
    summary = (out / "workspace" / "summary.md").read_text()
    progress = summary.split("## Progress")[1].split("## Key Decisions")[0]
    lines = [line for line in progress.splitlines() if line.startswith("- ")]
    assert lines
    for line in lines:
        assert "-> ok" not in line and "read_file(" not in line, line
        assert not line.rstrip().endswith(("— read", "→ ok")), line


def test_demo_on_another_folder_with_a_config(tmp_path: Path) -> None:
    root = tmp_path / "project"
    (root / "pkg").mkdir(parents=True)
    for i in range(12):
        (root / "pkg" / f"mod{i}.py").write_text(
            "".join(
                f"class Thing{i}_{n}:\n    def run(self):\n        return {n}\n" for n in range(300)
            )
        )
    config = tmp_path / "c.yaml"
    config.write_text(
        "max_input_tokens: 8192\ntruncation:\n  first_max_bytes: 4096\n  second_max_bytes: 512\n"
    )
    out = tmp_path / "demo"
    assert main(["demo", "--out", str(out), "--root", str(root), "--config", str(config)]) == 0
    report = json.loads((out / "report.json").read_text())
    assert report["explored_root"] == str(root.resolve())
    assert report["max_input_tokens"] == 8192
    assert report["peak_prompt_tokens"] <= 8192 and report["pair_violations"] == 0


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["demo", "--config", "missing.yaml"], "config file not found"),
        (["demo", "--root", "missing-folder"], "not a directory"),
        (["replay", "missing.jsonl"], "no such file"),
        (["cleanup", "no-such-workspace"], "not a workspace"),
        (["cleanup", ".", "--ttl-days", "0"], "must be positive"),
    ],
)
def test_bad_input_exits_2_with_one_line(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture,
    args: list,
    fragment: str,
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(args) == 2
    err = capsys.readouterr().err
    assert fragment in err
    assert len(err.strip().splitlines()) == 1
    assert "Traceback" not in err


def test_bad_config_key_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    config = tmp_path / "c.yaml"
    config.write_text("truncation:\n  recent: 3\n")
    assert main(["demo", "--config", str(config), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "truncation.recent" in err and str(config) in err


def test_cleanup_removes_expired_results(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    folder = tmp_path / "ws" / "tool_result"
    folder.mkdir(parents=True)
    old = folder / ("c" * 32 + ".txt")
    old.write_text("x")
    os.utime(old, (1, 1))
    named = folder / ("d" * 32 + ".txt")  # the latest summary still points at this one
    named.write_text("y")
    os.utime(named, (1, 1))
    (tmp_path / "ws" / "summary.md").write_text(f"- read tool_result/{named.name} for the log\n")
    assert main(["cleanup", str(tmp_path / "ws"), "--ttl-days", "1"]) == 0
    assert not old.exists() and named.exists()
    assert "removed 1" in capsys.readouterr().out


def test_console_script_help_and_no_command() -> None:
    exe = Path(sys.executable).with_name("agentscope-context")
    result = subprocess.run([str(exe), "--help"], capture_output=True, text=True, check=False)
    assert result.returncode == 0
    assert "demo" in result.stdout and "cleanup" in result.stdout
    result = subprocess.run([str(exe)], capture_output=True, text=True, check=False)
    assert result.returncode == 2


def test_inspect_describes_a_workspace(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    out = tmp_path / "demo"
    assert main(["demo", "--out", str(out)]) == 0
    capsys.readouterr()
    from agentscope_context_ext.core.longterm import LongTermMemory

    LongTermMemory(out / "workspace").append("User prefers metric units", "Personal")
    assert main(["inspect", str(out / "workspace")]) == 0
    printed = capsys.readouterr().out
    times = json.loads((out / "report.json").read_text())["compactions"]
    assert f"summary: summary.md - Earlier conversation was compacted ({times} time(s)" in printed
    assert "dialog/2026-" in printed and " lines " in printed
    assert "tool_result/:" in printed and "ttl 7 days" in printed
    assert "Memory.md:" in printed and "Personal 1" in printed
    assert "summarizer jobs: 0 pending, 0 failed" in printed


def test_chat_without_a_key_exits_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    monkeypatch.delenv("DASHSCOPE_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    assert main(["chat"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.endswith("set DASHSCOPE_API_KEY or OPENAI_API_KEY") and "\n" not in err


@pytest.mark.parametrize("command", ["demo", "replay", "inspect", "cleanup", "consolidate", "chat"])
def test_every_command_has_help(command: str, capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit) as done:
        main([command, "--help"])
    assert done.value.code == 0
    assert "usage: agentscope-context " + command in capsys.readouterr().out


def test_chat_continues_its_session(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    """Each turn is saved atomically to <workspace>/sessions/; the next chat continues it."""
    from agentscope_context_ext.cli import _chat
    from agentscope_context_ext.compat import agentscope_major
    from agentscope_context_ext.testing import ScriptedChatModel

    monkeypatch.chdir(tmp_path)
    models = []

    def scripted(model_name=None):
        models.append(ScriptedChatModel(["Noted.", "It is ed-4711."]))
        if agentscope_major() >= 2:
            return models[-1], models[-1].formatter
        from agentscope.formatter import DashScopeChatFormatter

        return models[-1], DashScopeChatFormatter()

    monkeypatch.setattr(_chat, "model_from_environment", scripted)
    import io

    stdin = iter([io.StringIO("my editor is ed-4711\nexit\n"), io.StringIO("which editor?\n")])
    monkeypatch.setattr("sys.stdin", next(stdin))
    assert main(["chat"]) == 0
    assert (tmp_path / ".agentscope-context" / "sessions" / "chat.json").is_file()
    monkeypatch.setattr("sys.stdin", next(stdin))
    assert main(["chat"]) == 0
    assert "ed-4711" in str(models[1].calls[0].messages), "the second chat saw the first"
    assert main(["chat", "--session", "../escape"]) == 2
    assert "--session" in capsys.readouterr().err


@pytest.mark.parametrize(
    "days", ["nan", "NaN", "inf", "-inf", "1e999", "1e12", "36501", "-1", "0", "abc", ""]
)
def test_cleanup_refuses_a_bad_number_of_days_in_one_line(
    days: str, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """``--ttl-days nan`` compared false with every age and deleted every saved result."""
    folder = tmp_path / "ws" / "tool_result"
    folder.mkdir(parents=True)
    saved = folder / ("e" * 32 + ".txt")
    saved.write_text("still needed")
    assert main(["cleanup", str(tmp_path / "ws"), "--ttl-days", days]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "--ttl-days" in err, err
    assert "Traceback" not in err and saved.exists()


def test_the_ttl_must_be_a_finite_positive_number_everywhere(tmp_path: Path) -> None:
    from agentscope_context_ext import ConfigError, ContextConfig
    from agentscope_context_ext.core.workspace import ToolResultStore

    for days in (float("nan"), float("inf"), 1e12, 0.0, -1.0):
        with pytest.raises(ValueError, match="ttl_days"):
            ToolResultStore(tmp_path / "ws", ttl_days=days)
        with pytest.raises(ValueError, match="ttl_days"):
            ToolResultStore(tmp_path / "ws").cleanup(ttl_days=days)
    assert ToolResultStore(tmp_path / "ws", ttl_days=36500).ttl_days == 36500
    for days in ("nan", "inf", ".inf", "1e12"):
        config = tmp_path / "c.yaml"
        config.write_text(f"truncation:\n  ttl_days: {days}\n")
        with pytest.raises(ConfigError, match="ttl_days"):
            ContextConfig.from_file(config)


async def test_cleanup_keeps_what_a_saved_session_or_a_young_dialog_line_names(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """A chat continues its session with the notices it had: the CLI cleanup kept only what
    ``summary.md`` names and deleted a result the saved session still pointed at."""
    from agentscope_context_ext import ContextConfig
    from agentscope_context_ext.adapter import installed
    from agentscope_context_ext.testing import ScriptedChatModel, reply, tool_call

    async def fetch(seed: int) -> str:
        """Fetch a long document.

        Args:
            seed (int): Which document.
        """
        return "".join(f"line {i} of document {seed}\n" for i in range(4000))

    workspace = tmp_path / "ws"
    config = ContextConfig.model_validate(
        {"workspace": str(workspace), "max_input_tokens": 32768, "notices": False}
    )
    model = ScriptedChatModel([reply("fetching", tool_call("fetch", "c1", seed=1)), "done"])
    managed = installed.ManagedAgent.create(model, config, tools=[fetch])
    assert await managed.ask("fetch document 1") == "done"
    await managed.save_session("chat")
    saved = sorted((workspace / "tool_result").glob("*.txt"))
    assert len(saved) == 1, "the long output was cut and saved"
    # A result only a dialog line names: expires by age, like the design says, not before.
    young = workspace / "tool_result" / ("a" * 32 + ".txt")
    young.write_text("named by a dialog line")
    (workspace / "dialog").mkdir(exist_ok=True)
    (workspace / "dialog" / "2026-01-01.jsonl").write_text(
        json.dumps({"id": "m", "content": f"see tool_result/{young.name}"}) + "\n"
    )
    os.utime(saved[0], (1, 1))  # older than any TTL
    assert main(["cleanup", str(workspace), "--ttl-days", "1"]) == 0
    assert saved[0].exists(), "the saved session still names it"
    assert young.exists()
    assert "removed 0" in capsys.readouterr().out
    os.utime(young, (1, 1))
    assert main(["cleanup", str(workspace), "--ttl-days", "1"]) == 0
    assert saved[0].exists() and not young.exists()


async def test_the_saved_sessions_of_a_redis_workspace_are_read(redis_url: str) -> None:
    """What ``cleanup`` keeps on a Redis workspace: the sessions saved there (2.x: keys of the
    workspace's storage; 1.x: AgentScope's ``RedisSession`` keys)."""
    from agentscope_context_ext import ContextConfig
    from agentscope_context_ext.adapter import installed
    from agentscope_context_ext.core.workspace import saved_paths
    from agentscope_context_ext.testing import ScriptedChatModel, reply, tool_call

    async def fetch(seed: int) -> str:
        """Fetch a long document.

        Args:
            seed (int): Which document.
        """
        return "".join(f"line {i} of document {seed}\n" for i in range(4000))

    config = ContextConfig.model_validate(
        {"workspace": redis_url, "max_input_tokens": 32768, "notices": False}
    )
    assert installed.saved_session_texts(redis_url) == []
    model = ScriptedChatModel([reply("fetching", tool_call("fetch", "c1", seed=2)), "done"])
    managed = installed.ManagedAgent.create(model, config, tools=[fetch])
    await managed.ask("fetch document 2")
    await managed.save_session("s1")
    named = set().union(*map(saved_paths, installed.saved_session_texts(redis_url)))
    assert len(named) == 1 and next(iter(named)).startswith("tool_result/")


@pytest.fixture(scope="module")
def explored(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder of Python files, a transcript of reading them, and the workspace its replay
    leaves (saved outputs to search)."""
    folder = tmp_path_factory.mktemp("closed-output")
    root = folder / "src"
    root.mkdir()
    for index in range(2):
        (root / f"m{index}.py").write_text("".join(f"def f{i}(): pass\n" for i in range(300)))
    messages = [{"role": "user", "content": "read them all"}]
    for index in range(12):
        call = {"id": f"c{index}", "function": {"name": "cat", "arguments": '{"i": 1}'}}
        output = "".join(f"def g{index}_{i}(): pass\n" for i in range(6000))
        messages += [
            {"role": "assistant", "content": "", "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"c{index}", "content": output},
        ]
    (folder / "transcript.json").write_text(json.dumps(messages))
    assert main(["replay", str(folder / "transcript.json"), "--out", str(folder / "seed")]) == 0
    assert list((folder / "seed" / "workspace" / "tool_result").glob("*.txt"))
    return folder


@pytest.mark.parametrize(
    "command",
    [
        ["search", "{ws}", "def", "--limit", "300"],
        ["search", "{ws}", "def", "--limit", "1"],  # the output fits the buffer
        ["search", "{ws}", "def", "--json"],
        ["inspect", "{ws}"],
        ["replay", "{folder}/transcript.json", "--out", "{folder}/replay"],
        ["demo", "--root", "{folder}/src", "--out", "{folder}/again"],
    ],
    ids=["search", "search-short", "search-json", "inspect", "replay", "demo"],
)
def test_a_closed_output_ends_the_command_quietly(explored: Path, command: list[str]) -> None:
    """``search WS def --limit 300 | head -1`` exited 1 with BrokenPipeError (2 runs of 5):
    now every command that prints ends with 141 (128 + SIGPIPE) and nothing on stderr. The
    reader is gone before the first write, so every run takes the same path."""
    places = {"ws": explored / "seed" / "workspace", "folder": explored}
    args = [part.format(**places) for part in command]
    exe = Path(sys.executable).with_name("agentscope-context")
    read, write = os.pipe()
    os.close(read)
    try:
        done = subprocess.run(
            [str(exe), *args], stdout=write, stderr=subprocess.PIPE, cwd=explored, check=False
        )
    finally:
        os.close(write)
    assert done.returncode == 141, done.stderr.decode()
    assert done.stderr == b""
