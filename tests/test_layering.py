"""The package's layers read one way (issue 12): the core imports nothing of AgentScope and
nothing above it; adapters sit on the core; replay, demo and the CLI on top. No package reaches
into another package's private modules, and no packages import each other in a circle."""

from __future__ import annotations

import ast
import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "agentscope_context_ext"
ROOT = "agentscope_context_ext"
LAYERS = {
    # a package may import the packages of lower layers (and its own)
    "core": 0,
    "agentscope1": 1,
    "agentscope2": 1,
    "adapter": 2,
    "testing": 3,
    "replay": 3,
    "agentfile": 3,
    "demo": 4,
    "cli": 5,
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


FACADE = {
    "ContextManager",
    "MODEL_APIS",
    "ManagedAgent",
    "ModelCall",
    "MsgCodec",
    "Reply",
    "SESSIONS_DIRNAME",
    "ScriptedChatModel",
    "TokenCounter",
    "as_tool",
    "build_agent",
    "build_model",
    "connect_studio",
    "consolidate",
    "enable_context_management",
    "get_token_counter",
    "make_dialog_tools",
    "make_memory_tools",
    "make_read_file_tool",
    "model_call",
    "named_model",
    "open_dialog",
    "output_text",
    "records_to_msgs",
    "replay_transcript",
    "reply",
    "to_view",
    "to_views",
    "tool_call",
}
"""What every adapter offers the layers above it."""


def _exported(package: str) -> set[str]:
    tree = ast.parse((PACKAGE / package / "__init__.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
        ):
            return {ast.literal_eval(item) for item in node.value.elts}
    return set()


def test_both_adapters_offer_the_same_facade() -> None:
    for package in ("agentscope1", "agentscope2"):
        assert _exported(package) >= FACADE, (package, sorted(FACADE - _exported(package)))


def test_nothing_outside_the_adapters_asks_which_major_is_installed() -> None:
    """The adapter is picked once (``adapter.py``, and the top level's explicit imports); no
    other module branches on the major or names a file for one."""
    allowed = {f"{ROOT}.compat", f"{ROOT}.adapter", ROOT}
    problems = []
    for name, path in _modules().items():
        if name in allowed or _package_of(name) in ("agentscope1", "agentscope2"):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
        names |= {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
        if "agentscope_major" in names:
            problems.append(f"{name} branches on the major")
        if any(_package_of(t) in ("agentscope1", "agentscope2") for t in _imports(name, path)):
            problems.append(f"{name} imports an adapter by name")
        if path.stem.rstrip("_").endswith(("1", "2")) or "agentscope" in path.stem:
            problems.append(f"{name}: a file named for a major")
    assert problems == []


def test_no_module_resolves_names_lazily() -> None:
    """Go-to-definition must land on the definition: a module ``__getattr__`` may only raise,
    but the top level's, which imports its public names on first use (``import
    agentscope_context_ext`` must not pay seconds for AgentScope, issue 45) and names every one
    of them in an explicit import under ``TYPE_CHECKING``, where editors and type checkers look."""
    problems = []
    for name, path in _modules().items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in tree.body:
            if isinstance(node, ast.FunctionDef) and node.name == "__getattr__":
                returns = [n for n in ast.walk(node) if isinstance(n, ast.Return)]
                if returns and name != ROOT:
                    problems.append(name)
    assert problems == []
    tree = ast.parse((PACKAGE / "__init__.py").read_text(encoding="utf-8"))
    named = set()
    for node in tree.body:
        block = (
            node.body
            if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING"
            else [node]
        )
        for statement in block:
            if isinstance(statement, ast.ImportFrom):
                named |= {alias.asname or alias.name for alias in statement.names}
            elif isinstance(statement, ast.Assign):
                named |= {t.id for t in statement.targets if isinstance(t, ast.Name)}
    assert sorted(set(_exported_root(tree)) - named) == []


def _exported_root(tree: ast.Module) -> list[str]:
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
        ):
            return [ast.literal_eval(item) for item in node.value.elts]
    raise AssertionError("the top level has no __all__")


def _design_sections() -> set[str]:
    """Section numbers of docs/design.md (``## 4.`` and ``### 4.3`` headings)."""
    design = PACKAGE.parent / "docs" / "design.md"
    found = set()
    for line in design.read_text(encoding="utf-8").splitlines():
        match = re.match(r"#{2,3} (\d+(?:\.\d+)?)\.? ", line)
        if match:
            found.add(match.group(1))
    return found


def test_every_design_reference_in_the_code_resolves() -> None:
    """The code cites docs/design.md as ``design §4.3`` (lists and ranges too: ``§3.2-3.4``,
    ``§4.1, 12.4``); every number is a section there, and nothing cites a text the repository
    does not hold."""
    sections = _design_sections()
    numbered = {number for number in sections if "." not in number}
    missing, foreign = [], []
    for path in PACKAGE.rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        if re.search(r"\bSPEC\b", text):
            foreign.append(str(path.relative_to(PACKAGE)))
        for match in re.finditer(r"design §([\d.,\s\-§]+(?:step \d+)?)", text):
            for number in re.findall(r"\d+(?:\.\d+)?", match.group(1).split("step")[0]):
                major = number.split(".")[0]
                # "12.4" is item 4 of section 12's list; "4.3" a subsection
                known = number in sections or (major == "12" and "12" in numbered)
                if not known:
                    missing.append(f"{path.relative_to(PACKAGE)}: design §{number}")
    assert not foreign, f"references to a specification users do not have: {foreign}"
    assert not missing, f"design sections the code cites and docs/design.md lacks: {missing}"
