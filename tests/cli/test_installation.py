"""What a developer install brings and what the messages tell a user to install (issue 43):
``[dev]`` lacked ``[serve]`` (11 tests skipped on ``pip install -e ".[dev]"``), and serve's
message named ``pip install 'agentscope-context-ext[serve]'`` to a developer whose README says
``pip install -e ".[serve]"``."""

from __future__ import annotations

import re
import sys
import tomllib
from importlib import metadata
from pathlib import Path

import pytest

from agentscope_context_ext.compat import agentscope_major
from agentscope_context_ext.core.installation import client_install_command, install_command

ROOT = Path(__file__).resolve().parents[2]


def _name(requirement: str) -> str:
    return re.split(r"[\s\[<>=!~;]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def extras() -> dict[str, list[str]]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]


@pytest.mark.skipif(agentscope_major() < 2, reason="AgentScope 2.x's extras are read from it")
def test_dev_brings_what_serve_brings() -> None:
    """Package by package: [serve] is agentscope[service,storage-sql], which pins 2.x, so [dev]
    (also used with [agentscope1]) cannot name it."""
    dev = {_name(r) for r in extras()["dev"]}
    wanted = {_name(r) for r in extras()["serve"] if _name(r) != "agentscope"}
    for requirement in metadata.requires("agentscope") or []:
        if re.search(r"""extra\s*==\s*["'](service|storage-sql)["']""", requirement):
            wanted.add(_name(requirement))
    assert wanted and wanted <= dev, sorted(wanted - dev)
    assert "agentscope" not in dev, "[dev] must not pin an AgentScope major"


def test_an_editable_checkout_is_told_the_editable_command() -> None:
    # the test venvs install this checkout with pip install -e
    assert install_command("serve") == f'pip install -e "{ROOT}[serve]"'


def test_an_installed_copy_is_told_the_package_s_name(tmp_path: Path) -> None:
    """A copy of the package outside a checkout (what a wheel leaves in site-packages)."""
    import shutil
    import subprocess

    site = tmp_path / "site-packages"
    shutil.copytree(ROOT / "agentscope_context_ext", site / "agentscope_context_ext")
    probe = (
        "from agentscope_context_ext.core.installation import install_command; "
        "print(install_command('serve'))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin"},
        check=True,
    )
    assert done.stdout.strip() == "pip install 'agentscope-context-ext[serve]'"


@pytest.mark.skipif(agentscope_major() < 2, reason="serve runs AgentScope 2.x's service")
def test_serve_without_its_service_names_the_matching_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    from served_app import agent_file

    from agentscope_context_ext.cli import main

    monkeypatch.setitem(sys.modules, "aiosqlite", None)  # as if [serve] were not installed
    assert main(["serve", "--agent", str(agent_file(tmp_path))]) == 2
    err = capsys.readouterr().err.strip()
    assert err.endswith(f'pip install -e "{ROOT}[serve]"') and "\n" not in err, err


def test_a_provider_s_client_is_named_by_an_extra_that_exists() -> None:
    """The provider messages named extras this package does not have (``[openai]``,
    ``[anthropic]``): an extra only where there is one, else the missing package itself."""
    assert client_install_command("ollama", "ollama") == install_command("ollama")
    assert client_install_command("anthropic", "anthropic") == "pip install anthropic"
    assert client_install_command("openai", "openai.types") == "pip install openai"
    declared = set(extras())
    for provider in ("openai", "anthropic", "gemini", "dashscope"):
        command = client_install_command(provider, provider)
        assert not any(f"[{name}]" in command for name in {provider} - declared), command
