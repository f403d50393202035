"""The notebooks run offline, top to bottom, so they never rot; outputs are kept out of git."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from agentscope_context_ext.compat import agentscope_major

FOLDER = Path(__file__).resolve().parents[2] / "notebooks"
ALL_NOTEBOOKS = sorted(FOLDER.rglob("*.ipynb"))
NOTEBOOKS = [
    p
    for p in ALL_NOTEBOOKS
    if agentscope_major() in nbformat.read(p, as_version=4).metadata.get("agentscope_major", [])
]
"""The notebooks for the installed AgentScope (each says which major versions it runs on)."""


def name(path: Path) -> str:
    return path.relative_to(FOLDER).as_posix()


def majors(path: Path) -> list[int]:
    return nbformat.read(path, as_version=4).metadata.get("agentscope_major", [])


def test_there_are_the_three_notebooks_on_each_version() -> None:
    # AgentScope 2.x (the default install) at the top, the 1.x ones in agentscope1/; replay is
    # one notebook for both
    assert {name(p): majors(p) for p in ALL_NOTEBOOKS} == {
        "quickstart.ipynb": [2],
        "long_term_memory.ipynb": [2],
        "replay.ipynb": [1, 2],
        "agentscope1/quickstart.ipynb": [1],
        "agentscope1/long_term_memory.ipynb": [1],
    }
    for major in (1, 2):
        runs = {p.stem for p in ALL_NOTEBOOKS if major in majors(p)}
        assert runs == {"quickstart", "replay", "long_term_memory"}, (major, runs)


@pytest.mark.parametrize("path", ALL_NOTEBOOKS, ids=lambda p: name(p))
def test_notebook_outputs_are_cleared_in_git(path: Path) -> None:
    book = nbformat.read(path, as_version=4)
    assert all(
        not cell.get("outputs") and not cell.get("execution_count")
        for cell in book.cells
        if cell.cell_type == "code"
    )


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: name(p))
def test_notebook_executes(path: Path, tmp_path: Path) -> None:
    book = nbformat.read(path, as_version=4)
    client = NotebookClient(
        book, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}
    )
    client.execute()
    errors = [
        o for c in book.cells for o in c.get("outputs", []) if o.get("output_type") == "error"
    ]
    assert not errors
    # a plot is shown below its cell (the replay notebook saved it to a temporary folder and
    # showed nothing)
    for cell in book.cells:
        if cell.cell_type == "code" and "plt." in cell.source:
            images = [o for o in cell.get("outputs", []) if "image/png" in o.get("data", {})]
            assert images, f"{name(path)}: the plot is not shown inline"


ROOT = FOLDER.parent
DEVELOPMENT = (ROOT / "docs" / "development.md").read_text(encoding="utf-8")


def _nbconvert_command() -> list[str]:
    """The command docs/development.md gives for running a notebook."""
    (line,) = [line for line in DEVELOPMENT.splitlines() if line.startswith("jupyter nbconvert")]
    return line.split()


def test_the_documented_notebook_command_is_in_dev() -> None:
    """`jupyter nbconvert` was in no extra: the documented way to run a notebook failed
    after `pip install -e ".[dev]"`."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    for extra in ("dev", "notebook"):
        names = {
            re.split(r"[<>=!~\[ ;]", requirement, maxsplit=1)[0]
            for requirement in project["optional-dependencies"][extra]
        }
        assert {"nbconvert", "ipykernel"} <= names, extra
    assert _nbconvert_command()[:2] == ["jupyter", "nbconvert"]


@pytest.mark.slow
def test_the_documented_notebook_command_runs(tmp_path: Path) -> None:
    """The command as written (the replay notebook: it runs on both majors), with its output
    folder moved into the test's."""
    command = _nbconvert_command()
    command[command.index("--output-dir") + 1] = str(tmp_path)
    command[command.index("notebooks/quickstart.ipynb")] = "notebooks/replay.ipynb"
    jupyter = Path(sys.executable).with_name("jupyter")
    assert jupyter.is_file(), f"no jupyter in {jupyter.parent}: pip install -e '.[dev]'"
    done = subprocess.run(
        [str(jupyter), *command[1:]], cwd=ROOT, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-2000:]
    ran = nbformat.read(tmp_path / "replay.ipynb", as_version=4)
    assert any(cell.get("outputs") for cell in ran.cells if cell.cell_type == "code")
    assert not list((ROOT / "notebooks").glob("*.nbconvert.ipynb")), "nothing written in git"
