"""The README's Python examples run as written (offline), so the docs cannot rot."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parent.parent / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.S)


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_readme_example_runs(index: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    exec(
        compile(BLOCKS[index], f"README.md example {index + 1}", "exec"), {"__name__": "__readme__"}
    )


def test_readme_starts_with_the_two_commands() -> None:
    text = README.read_text(encoding="utf-8")
    setup = text[text.index("## Set up") : text.index("## What it does")]
    assert 'pip install -e ".[dev]" && agentscope-context demo' in setup
    assert "python -m pytest" in setup
