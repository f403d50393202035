"""The command line (SPEC 10): the demo does real work, bad input exits 2 with one line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from agentscope_context_ext.cli import main


def test_demo_truncates_reads_back_and_reports(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    out = tmp_path / "demo"
    assert main(["demo", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "byte-identical" in printed
    report = json.loads((out / "report.json").read_text())
    assert report["read_back_identical"] is True
    assert report["stage_one_bytes"] < report["source_bytes"]
    assert report["stage_two_bytes"] < report["stage_one_bytes"]
    saved = out / "workspace" / report["saved_path"]
    assert saved.read_bytes() == Path(report["source_file"]).read_bytes()


def test_demo_on_a_given_file_with_a_config(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    source = tmp_path / "log.txt"
    source.write_text("".join(f"{i} 中文 entry\n" for i in range(5000)))
    config = tmp_path / "c.yaml"
    config.write_text("truncation:\n  first_max_bytes: 4096\n  second_max_bytes: 512\n")
    out = tmp_path / "demo"
    assert (
        main(["-v", "demo", "--out", str(out), "--file", str(source), "--config", str(config)]) == 0
    )
    report = json.loads((out / "report.json").read_text())
    assert report["stage_one_limit"] == 4096
    assert report["read_back_calls"] > 1


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["demo", "--config", "missing.yaml"], "config file not found"),
        (["demo", "--file", "missing.txt"], "not a readable file"),
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
    assert main(["cleanup", str(tmp_path / "ws"), "--ttl-days", "1"]) == 0
    assert not old.exists()
    assert "removed 1" in capsys.readouterr().out


def test_console_script_help_and_no_command() -> None:
    exe = Path(sys.executable).with_name("agentscope-context")
    result = subprocess.run([str(exe), "--help"], capture_output=True, text=True, check=False)
    assert result.returncode == 0
    assert "demo" in result.stdout and "cleanup" in result.stdout
    result = subprocess.run([str(exe)], capture_output=True, text=True, check=False)
    assert result.returncode == 2
