"""Every name the benchmarks import from this package exists: the benchmarks import lazily,
inside the function that needs it, so a renamed name fails only when that part runs (B8's
fidelity part runs only without ``--quick``)."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

from agentscope_context_ext import agentscope_major

BENCH = Path(__file__).resolve().parents[2] / "bench"
OTHER_ADAPTER = (
    "agentscope_context_ext.agentscope1"
    if agentscope_major() >= 2
    else ("agentscope_context_ext.agentscope2")
)


def imported_names() -> list[tuple[str, str, str]]:
    found = []
    for path in sorted(BENCH.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                "agentscope_context_ext"
            ):
                found += [(path.name, node.module, alias.name) for alias in node.names]
    return found


@pytest.mark.parametrize(("file", "module", "name"), imported_names())
def test_the_benchmarks_import_names_that_exist(file, module, name):
    if module.startswith(OTHER_ADAPTER):
        pytest.skip(f"{module} is the other AgentScope major's adapter")
    try:
        getattr(importlib.import_module(module), name)
    except AttributeError as exc:
        if "integration; the installed AgentScope is" in str(exc):  # a name of the other major
            pytest.skip(str(exc))
        raise AssertionError(f"{file}: {module}.{name}") from exc
