"""A command line that starts fast (issue 45): importing the package, building the parser,
``--help`` of every command and the commands that never run an agent do not import AgentScope
(2.6 s of the 3.3 s the package's import took). What is imported is checked, not how long it
takes (``python -m bench --only startup`` measures the time)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from agentscope_context_ext.cli import build_parser

COMMANDS = sorted(
    name for action in build_parser()._subparsers._group_actions for name in action.choices
)

REPORT = (
    "import json, sys\n"
    "print(json.dumps(sorted(m for m in sys.modules "
    "if m == 'agentscope' or m.startswith('agentscope.'))))\n"
)


def _agentscope_modules(code: str, cwd: Path | None = None) -> list[str]:
    """The AgentScope modules a fresh interpreter has imported after ``code``."""
    done = subprocess.run(
        [sys.executable, "-c", code + "\n" + REPORT],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def _cli(argv: list[str]) -> str:
    """Code running ``agentscope-context ARGV`` as the console script does, output dropped."""
    return (
        "import contextlib, io\n"
        "from agentscope_context_ext.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):\n"
        "    try:\n"
        f"        main({argv!r})\n"
        "    except SystemExit:\n"
        "        pass\n"
    )


def test_every_command_is_checked() -> None:
    assert {"demo", "chat", "serve", "inspect", "search", "cleanup", "replay"} <= set(COMMANDS)


def test_importing_the_package_does_not_import_agentscope() -> None:
    assert _agentscope_modules("import agentscope_context_ext") == []


def test_building_the_parser_does_not_import_agentscope() -> None:
    code = "from agentscope_context_ext.cli import build_parser\nbuild_parser()"
    assert _agentscope_modules(code) == []


@pytest.mark.parametrize("argv", [["--help"], ["--version"], *([c, "--help"] for c in COMMANDS)])
def test_help_does_not_import_agentscope(argv: list[str]) -> None:
    assert _agentscope_modules(_cli(argv)) == []


def test_a_usage_error_does_not_import_agentscope() -> None:
    assert _agentscope_modules(_cli(["search", "--limit", "many", "ws", "q"])) == []


def test_inspect_and_search_never_import_agentscope(tmp_path: Path) -> None:
    """A workspace's description and its history search read files: no agent runs."""
    workspace = tmp_path / "ws"
    (workspace / "dialog").mkdir(parents=True)
    (workspace / "tool_result").mkdir()
    (workspace / "tool_result" / "a.txt").write_text("saved output\n", encoding="utf-8")
    assert _agentscope_modules(_cli(["inspect", str(workspace)])) == []
    assert _agentscope_modules(_cli(["search", str(workspace), "saved"])) == []


def test_the_public_names_still_import_from_the_top_level() -> None:
    """The names resolve on first use, to the same objects the modules define."""
    import agentscope_context_ext as package
    from agentscope_context_ext import ContextConfig, ContextManager, enable_context_management
    from agentscope_context_ext.adapter import installed
    from agentscope_context_ext.core.config import ContextConfig as Defined

    assert ContextConfig is Defined
    assert enable_context_management is installed.enable_context_management
    assert ContextManager is installed.ContextManager
    for name in package.__all__:
        try:
            getattr(package, name)
        except AttributeError as exc:  # a name of the other major says which major has it
            assert "integration; the installed AgentScope is" in str(exc), name
    with pytest.raises(AttributeError, match="has no attribute 'nothing_of_that_name'"):
        package.nothing_of_that_name  # noqa: B018
