"""The docs site and the README around it: the README stays short and its links and command
synopses true, the generated references (docs/hooks/reference.py) name every config key and
every command-line option, and every page is in the site's navigation.

The examples of the pages run in tests/docs/test_readme.py; `mkdocs build --strict` runs in .ci/run."""

from __future__ import annotations

import argparse
import importlib.util
import re
import tomllib
from pathlib import Path
from types import ModuleType

import pytest
import yaml
from pydantic import BaseModel, ConfigDict

from agentscope_context_ext.core.config import ContextConfig

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")
PAGES = sorted((ROOT / "docs").glob("*.md"))


def _hook() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "docs_reference", ROOT / "docs/hooks/reference.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


REFERENCE = _hook()


def _keys(model: type[BaseModel], prefix: str = "") -> dict[str, object]:
    """Every leaf key of ``model`` (dotted) and its default."""
    keys: dict[str, object] = {}
    for name, field in model.model_fields.items():
        annotation = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            keys.update(_keys(annotation, f"{prefix}{name}."))
        else:
            keys[f"{prefix}{name}"] = field.get_default(call_default_factory=True)
    return keys


def _commands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    raise AssertionError("the parser has no commands")


def _options(parser: argparse.ArgumentParser) -> set[str]:
    return {
        option
        for action in parser._actions
        if not isinstance(action, argparse._HelpAction)
        for option in action.option_strings
        if option.startswith("--")
    }


def test_the_readme_is_at_most_300_lines() -> None:
    assert len(README.splitlines()) <= 300


@pytest.mark.parametrize(
    "page", [ROOT / "README.md", *PAGES], ids=lambda page: page.relative_to(ROOT).as_posix()
)
def test_relative_links_lead_to_files(page: Path) -> None:
    """A link of the README or of a page to a file of the repository names a file that exists
    (mkdocs checks the links between pages; this also covers the README and ../ links)."""
    text = page.read_text(encoding="utf-8")
    text = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)  # not inside examples
    for target in re.findall(r"\]\(([^)\s#:]+)(?:#[^)\s]*)?\)", text):
        assert (page.parent / target).exists(), f"{page.name}: {target}"


def test_the_readme_links_every_page() -> None:
    linked = set(re.findall(r"\]\(docs/([\w-]+\.md)\)", README))
    assert linked == {page.name for page in PAGES}


def _synopses() -> dict[str, str]:
    """The README's synopsis of each command (its lines joined)."""
    section = README[README.index("## Command line") :]
    start = section.index("```\n") + 4
    block = section[start : section.index("\n```", start)]
    synopses: dict[str, str] = {}
    command = ""
    for line in block.splitlines():
        if line.startswith("agentscope-context "):
            command = line.split()[1]
            synopses[command] = line
        else:
            synopses[command] += " " + line.strip()
    return synopses


def _check_synopses(synopses: dict[str, str]) -> list[str]:
    """What the synopses say wrong or leave out, against the package's parsers."""
    parser = REFERENCE.cli_parser()
    problems = []
    commands = _commands(parser)
    if set(synopses) - {"[-v]"} != set(commands):
        problems.append(f"commands: {sorted(synopses)} vs {sorted(commands)}")
    for name, command in commands.items():
        shown = set(re.findall(r"(--[a-z][a-z-]*)", synopses.get(name, "")))
        if shown != _options(command):
            problems.append(f"{name}: shows {sorted(shown)}, has {sorted(_options(command))}")
        for action in command._actions:
            positional = not action.option_strings and action.dest != "help"
            if positional and action.dest.upper() not in synopses.get(name, ""):
                problems.append(f"{name}: no {action.dest.upper()}")
    top = synopses.get("[-v]", "")
    if not {"-v", "--version"} <= set(re.findall(r"(--?[a-z]+)", top)):
        problems.append("no synopsis of agentscope-context [-v] [--version] COMMAND")
    return problems


def test_the_readme_synopses_are_the_parsers() -> None:
    """Every command of the README's synopsis shows every option it takes and no other (the
    synopsis once left out chat's --agent, --model, --base-url and search's --rebuild)."""
    assert _check_synopses(_synopses()) == []


def test_the_synopsis_check_finds_what_was_left_out() -> None:
    synopses = _synopses()
    synopses["chat"] = "agentscope-context chat [--config FILE] [--session ID] [--studio-url URL"
    synopses["chat"] += " [--project P]]"
    problems = _check_synopses(synopses)
    assert len(problems) == 1 and all(o in problems[0] for o in ("--agent", "--base-url"))


def test_the_config_reference_names_every_key_with_its_default() -> None:
    reference = REFERENCE.config_reference()
    rows = {
        row.split("|")[1].strip().strip("`"): row.split("|")[2].strip().strip("`")
        for row in reference.splitlines()
        if row.startswith("| `")
    }
    keys = _keys(ContextConfig)
    assert set(rows) == set(keys)
    for key, default in keys.items():
        expected = yaml.safe_dump(default, default_flow_style=True).strip().removesuffix("...")
        assert rows[key] == expected.strip(), key
    # a docstring reaches the reference, literals as Markdown code
    assert "`null`: the agent's own model" in reference
    # bounds and choices come from the model
    assert "| number, > 0.0, <= 1.0 |" in reference
    assert "`batched`" in reference.split("truncation.retruncate`")[1].splitlines()[0]


def test_the_config_reference_follows_a_new_key() -> None:
    """A key added to the model is in the reference with nothing else to do."""

    class Extra(BaseModel):
        model_config = ConfigDict(use_attribute_docstrings=True)

        ahead_ratio: float = 0.6
        """Start the summary at this share of the window."""

    class Config(BaseModel):
        model_config = ConfigDict(use_attribute_docstrings=True)

        compaction: Extra = Extra()
        """When to compact."""

    reference = REFERENCE.config_reference(Config)
    assert "| `compaction.ahead_ratio` | `0.6` | number | Start the summary at this share" in (
        reference
    )


def test_the_cli_reference_names_every_command_and_option() -> None:
    reference = REFERENCE.cli_reference()
    parser = REFERENCE.cli_parser()
    for name, command in _commands(parser).items():
        section = reference.split(f"### `{name}`\n", 1)[1].split("\n### ", 1)[0]
        assert f"usage: agentscope-context {name}" in section
        for option in _options(command):
            assert f"| `{option}`" in section, f"{name} {option}"


GENERATED_PAGES = {
    "docs/cli.md": REFERENCE.CLI_MARKER,
    "docs/configuration.md": REFERENCE.CONFIG_MARKER,
}
"""The pages with a generated part, and its marker."""


@pytest.mark.parametrize("name", sorted(GENERATED_PAGES))
def test_the_committed_generated_parts_are_what_the_package_says(name: str) -> None:
    """The references are committed, so GitHub shows them (docs/cli.md was a heading over an
    empty marker): each is what the parsers and the config model say now."""
    text = (ROOT / name).read_text(encoding="utf-8")
    assert GENERATED_PAGES[name] in text and REFERENCE.END_MARKER in text
    assert REFERENCE.fill(text) == text, (
        f"{name}: its generated part is not what the package says; run {REFERENCE.REGENERATE}"
    )


def test_a_stale_generated_part_is_found_and_written_afresh() -> None:
    text = (ROOT / "docs/cli.md").read_text(encoding="utf-8")
    stale = text.replace("### `consolidate`", "### `consolidate-old`")
    assert stale != text and REFERENCE.fill(stale) == text
    with pytest.raises(ValueError, match="end of generated part"):
        REFERENCE.fill(text.replace(REFERENCE.END_MARKER, ""))


def test_the_cli_page_has_every_command() -> None:
    """In its reference, and each in a sentence of its own above it (demo and consolidate had
    none)."""
    text = (ROOT / "docs/cli.md").read_text(encoding="utf-8")
    prose, reference = text.split(REFERENCE.CLI_MARKER)
    for name in _commands(REFERENCE.cli_parser()):
        assert f"### `{name}`\n" in reference, name
        assert f"\n- `{name}` " in prose, name


def test_help_text_is_escaped_for_markdown() -> None:
    assert REFERENCE._code("2**(n-1) of ``a_b`` in <ws> [hint]") == (
        "2\\*\\*(n-1) of `a_b` in \\<ws\\> \\[hint\\]"
    )


def test_the_home_page_is_the_readme_with_site_links() -> None:
    home, copies = REFERENCE.home_page(README)
    assert "](docs/" not in home and "](agent.md)" in home
    assert "](images/demo-tokens.png)" in home
    assert copies == {
        "repository/configs/agents/llama-cpp.yaml": "configs/agents/llama-cpp.yaml",
    }


def test_every_page_is_in_the_navigation() -> None:
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    assert config["docs_dir"] == "docs" and config["theme"]["name"] == "material"

    def files(nav: object) -> list[str]:
        if isinstance(nav, str):
            return [nav]
        if isinstance(nav, list):
            return [name for item in nav for name in files(item)]
        assert isinstance(nav, dict)
        return [name for item in nav.values() for name in files(item)]

    listed = files(config["nav"])
    assert len(listed) == len(set(listed))
    assert set(listed) == {page.name for page in PAGES} | {"index.md"}


def test_the_docs_extra_names_mkdocs_and_material() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    docs = project["optional-dependencies"]["docs"]
    names = {re.split(r"[<>=!~\[ ]", requirement, maxsplit=1)[0] for requirement in docs}
    assert {"mkdocs", "mkdocs-material"} <= names
