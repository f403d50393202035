"""Bad input is one clear error, on either AgentScope major: a workspace URL that cannot be
parsed or has a scheme no storage speaks (a ``WorkspaceError`` or a ``ConfigError`` naming
``workspace``; exit 2 from the CLI, one line), never a bare ``ValueError``, a traceback or a
local folder named ``unix:``."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from agentscope_context_ext import ConfigError, ContextConfig, WorkspaceError
from agentscope_context_ext.cli import main
from agentscope_context_ext.compat import agentscope_major
from agentscope_context_ext.core.workspace import open_storage, open_workspace
from agentscope_context_ext.testing import ScriptedChatModel

BAD_REDIS_URLS = (
    ("redis://[::1", "not a valid URL (Invalid IPv6 URL)"),
    ("redis://:s3cret@[::1", "not a valid URL (Invalid IPv6 URL)"),
    ("rediss://[zz]/0", "not a valid URL"),
    ("redis://127.0.0.1:99999/0", "the port is not a number from 1 to 65535"),
)
OTHER_SCHEMES = ("unix:///tmp/x", "http://127.0.0.1:6399/0", "file:///tmp/ws", "Valkey://h/0")


def _enable(config: dict) -> object:
    """Context management on a fresh agent of the installed AgentScope, as a user enables it."""
    from agentscope_context_ext import enable_context_management

    if agentscope_major() >= 2:
        from agentscope.agent import Agent

        agent = Agent(name="a", system_prompt="s", model=ScriptedChatModel(["ok"]))
    else:
        from agentscope.agent import ReActAgent
        from agentscope.formatter import DashScopeChatFormatter
        from agentscope.tool import Toolkit

        agent = ReActAgent(
            name="a",
            sys_prompt="s",
            model=ScriptedChatModel(["ok"]),
            formatter=DashScopeChatFormatter(),
            toolkit=Toolkit(),
        )
    return enable_context_management(agent, config)


def _constructors() -> list:
    """Every way a user hands the package a workspace: enabling on an agent, and on 2.x the
    middleware in the agent's constructor."""
    ways = [_enable]
    if agentscope_major() >= 2:
        from agentscope_context_ext import ContextMiddleware

        ways.append(ContextMiddleware)
    return ways


@pytest.mark.parametrize(("url", "fragment"), BAD_REDIS_URLS)
def test_a_bad_redis_url_is_a_workspace_error(
    url: str, fragment: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    for make in _constructors():
        with pytest.raises(WorkspaceError) as raised:
            make({"workspace": url})
        message = str(raised.value)
        assert fragment in message and "\n" not in message, message
        assert "s3cret" not in message, message
        assert "redis://[user:password@]host:port/db" in message or "port" in message, message
    assert list(tmp_path.iterdir()) == [], "no folder was made of the URL"


@pytest.mark.parametrize("url", OTHER_SCHEMES)
def test_a_url_of_another_scheme_is_refused_when_the_config_is_read(
    url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    scheme = url.partition("://")[0]
    for make in (ContextConfig.load, *_constructors()):
        with pytest.raises(ConfigError) as raised:
            make({"workspace": url})
        message = str(raised.value)
        assert message.startswith("config: workspace: "), message
        assert f"{scheme}:// is not a workspace" in message, message
        assert "a folder path, or a redis:// or rediss:// URL" in message, message
    for opener in (open_storage, open_workspace):  # given the string directly
        with pytest.raises(WorkspaceError, match=f"{scheme}:// is not a workspace"):
            opener(url)
    assert list(tmp_path.iterdir()) == [], "no folder named unix: (or http:) was made"


def test_a_password_in_a_url_of_another_scheme_never_shows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A config error repeats the value it refuses; with a password in it, the refusal comes
    when the workspace is opened, with the password hidden."""
    monkeypatch.chdir(tmp_path)
    url = "valkey://admin:s3cret@127.0.0.1:6399/0"
    for make in _constructors():
        with pytest.raises(WorkspaceError) as raised:
            make({"workspace": url})
        message = str(raised.value)
        assert "valkey:// is not a workspace" in message and "admin:***@" in message, message
        assert "s3cret" not in message, message
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "path", ["C:\\work\\ws", "C:/work/ws", "runs/a:b", "./runs/a://b", "x:y://z"]
)
def test_paths_with_a_colon_stay_folders(
    path: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Windows drive, a colon inside a folder name, "://" after a folder: all paths."""
    monkeypatch.chdir(tmp_path)
    assert ContextConfig.load({"workspace": path}).workspace == path
    folder, _ = open_workspace(path)
    assert folder.is_dir() and folder.resolve().is_relative_to(tmp_path.resolve())


@pytest.mark.parametrize(
    "args",
    [
        ["inspect", "redis://[::1"],
        ["cleanup", "redis://:s3cret@[::1"],
        ["consolidate", "rediss://[zz]/0"],
        ["inspect", "unix:///tmp/x"],
        ["cleanup", "http://u:s3cret@127.0.0.1/x"],
        ["demo", "--workspace", "unix:///tmp/x", "--out", "demo"],
        ["demo", "--workspace", "redis://[::1", "--out", "demo"],
        ["replay", "t.json", "--workspace", "unix:///tmp/x", "--out", "replay"],
    ],
)
def test_the_cli_says_what_is_wrong_with_a_workspace_url(
    args: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "t.json").write_text('[{"role": "user", "content": "hi"}]')
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "internal error" not in err and "Traceback" not in err, err
    assert "s3cret" not in err, err
    assert "not a valid URL" in err or "is not a workspace" in err or "port" in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.json"], "nothing was made"


@pytest.mark.parametrize(
    ("workspace", "fragment"),
    [
        ("redis://[::1", "not a valid URL (Invalid IPv6 URL)"),
        ("unix:///tmp/x", "context.workspace: unix:// is not a workspace"),
    ],
)
def test_chat_with_an_agent_file_and_a_bad_workspace_exits_2(
    workspace: str, fragment: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    monkeypatch.chdir(tmp_path)
    spec = {
        "model": {"provider": "openai-compatible", "model": "m", "base_url": "http://127.0.0.1:9"},
        "context": {"workspace": workspace},
    }
    (tmp_path / "agent.yaml").write_text(yaml.safe_dump(spec))
    monkeypatch.setattr("sys.stdin", __import__("io").StringIO("hello\n"))
    assert main(["chat", "--agent", "agent.yaml"]) == 2
    err = capsys.readouterr().err.strip()
    assert fragment in err and "\n" not in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["agent.yaml"]


BAD_STORAGE_URLS = (
    ("redis://[::1", "Invalid IPv6 URL"),
    ("redis://:s3cret@[::1/0", "Invalid IPv6 URL"),
    ("redis://127.0.0.1:99999/0", "Port out of range"),
    ("redis://127.0.0.1:port/0", "not a Redis URL"),
    ("redis://127.0.0.1:6379/one", "the database is not a number"),
    ("redis://127.0.0.1:6379/-1", "the database is not a number"),
    ("redis:///0", "no host"),
)


@pytest.mark.skipif(agentscope_major() < 2, reason="serve runs AgentScope 2.x's service")
@pytest.mark.parametrize(("url", "fragment"), BAD_STORAGE_URLS)
def test_serve_with_a_bad_storage_url_is_one_line_and_exit_2(
    url: str, fragment: str, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """``serve --storage 'redis://[::1'`` was "internal error: ValueError", exit 1."""
    from served_app import agent_file, service_missing

    if service_missing() is not None:
        pytest.skip(str(service_missing()))
    spec = agent_file(tmp_path)
    args = ["serve", "--agent", str(spec), "--workspaces", str(tmp_path / "ws")]
    assert main([*args, "--storage", url]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1, err
    assert err.startswith("agentscope-context serve: --storage") and fragment in err, err
    assert "s3cret" not in err and "internal error" not in err
