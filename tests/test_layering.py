"""The package's layers read one way (issue 12): the core imports nothing of AgentScope and
nothing above it; adapters sit on the core; replay, demo and the CLI on top. No package reaches
into another package's private modules, and no packages import each other in a circle."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "agentscope_context_ext"
ROOT = "agentscope_context_ext"
LAYERS = {
    # a package may import the packages of lower layers (and its own)
    "core": 0,
    "agentscope1": 1,
    "testing": 1,
    "replay": 2,
    "demo": 3,
    "cli": 4,
}


def _modules() -> dict[str, Path]:
    modules = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        modules[name] = path
    return modules


def _imports(name: str, path: Path) -> list[str]:
    """Absolute names of the modules ``name`` imports (relative imports resolved)."""
    is_package = path.name == "__init__.py"
    base = name.split(".") if is_package else name.split(".")[:-1]
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                anchor = base[: len(base) - node.level + 1]
                target = ".".join(anchor + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            found.append(target)
            # "from . import _x" imports a module too
            found.extend(f"{target}.{alias.name}" for alias in node.names)
    return found


def _package_of(module: str) -> str | None:
    parts = module.split(".")
    if parts[0] != ROOT or len(parts) < 2:
        return None
    return parts[1] if parts[1] in LAYERS else None


def test_core_imports_nothing_of_agentscope_or_above_it() -> None:
    problems = []
    for name, path in _modules().items():
        if _package_of(name) != "core":
            continue
        for target in _imports(name, path):
            if (
                target == "agentscope"
                or target.startswith("agentscope.")
                or (target.startswith(ROOT + ".") and not target.startswith(f"{ROOT}.core"))
            ):
                problems.append(f"{name} imports {target}")
    assert problems == []


def test_layers_only_import_downwards() -> None:
    problems = []
    for name, path in _modules().items():
        own = _package_of(name)
        if own is None:
            continue
        for target in _imports(name, path):
            other = _package_of(target)
            if other is not None and other != own and LAYERS[other] >= LAYERS[own]:
                problems.append(f"{name} ({own}) imports {target} ({other})")
    assert problems == []


def test_no_package_reaches_into_another_packages_private_modules() -> None:
    modules = _modules()
    problems = []
    for name, path in modules.items():
        own_package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for target in _imports(name, path):
            if target not in modules:
                continue  # a name imported from a module, not a module
            leaf = target.rpartition(".")[2]
            if leaf.startswith("_") and target.rpartition(".")[0] != own_package:
                problems.append(f"{name} imports {target}")
    assert problems == []


def test_no_circle_between_packages() -> None:
    modules = _modules()
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        own = ".".join(name.split(".")[:3]) if name.startswith(f"{ROOT}.core.") else name
        own = own if path.name == "__init__.py" or own != name else name.rpartition(".")[0]
        for target in _imports(name, path):
            if target in modules and target.startswith(ROOT):
                other = (
                    target if modules[target].name == "__init__.py" else target.rpartition(".")[0]
                )
                if other.startswith(f"{ROOT}.core."):
                    other = ".".join(other.split(".")[:3])
                if (
                    other != own
                    and not own.startswith(other + ".")
                    and not other.startswith(own + ".")
                ):
                    graph.setdefault(own, set()).add(other)

    def visit(node: str, trail: list[str]) -> None:
        if node in trail:
            cycle = [*trail[trail.index(node) :], node]
            raise AssertionError("circle: " + " -> ".join(cycle))
        for nxt in sorted(graph.get(node, ())):
            visit(nxt, [*trail, node])

    for start in sorted(graph):
        visit(start, [])


def test_importing_the_package_and_its_core_does_not_import_agentscope() -> None:
    script = (
        "import sys\n"
        "import agentscope_context_ext\n"
        "import agentscope_context_ext.core.pipeline, agentscope_context_ext.core.summary\n"
        "import agentscope_context_ext.core.longterm, agentscope_context_ext.core.tools\n"
        "from agentscope_context_ext import ContextConfig, truncate_text_output\n"
        "loaded = sorted(m for m in sys.modules if m == 'agentscope' or m.startswith('agentscope.'))\n"
        "print(loaded)\n"
        "assert not loaded\n"
        "from agentscope_context_ext import enable_context_management\n"
        "assert 'agentscope' in sys.modules  # the adapter loads it when asked for\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
