"""The notebooks run offline, top to bottom, so they never rot; outputs are kept out of git."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOKS = sorted((Path(__file__).resolve().parent.parent / "notebooks").glob("*.ipynb"))


def test_there_are_the_three_notebooks() -> None:
    assert {p.stem for p in NOTEBOOKS} >= {"quickstart", "replay", "long_term_memory"}


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_outputs_are_cleared_in_git(path: Path) -> None:
    book = nbformat.read(path, as_version=4)
    assert all(
        not cell.get("outputs") and not cell.get("execution_count")
        for cell in book.cells
        if cell.cell_type == "code"
    )


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
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
