"""The generated parts of the docs, and the MkDocs hook of the site (docs/development.md,
"This documentation").

- After ``<!-- generated: configuration reference -->`` in a page comes the table of every key
  of ``ContextConfig`` (name, default, allowed values, docstring), walked from the pydantic
  model, up to ``<!-- end of generated part -->``;
- after ``<!-- generated: command line reference -->``, every ``agentscope-context`` command
  with its usage and arguments, walked from the argparse parsers;
- a relative link from a page to a file of the repository outside ``docs/`` (as GitHub shows
  it, ``../configs/default.yaml``) is kept working in the site by copying that file in;
- the home page is README.md, its links to ``docs/...`` made relative to the site.

The generated parts are committed, so the pages read whole in the repository too:
``python docs/hooks/reference.py`` writes them afresh from the installed package, the site's
build does the same, and ``tests/docs/test_docs_site.py`` fails when a committed page differs
from what the package says (a key, an option or a help text changed).
"""

from __future__ import annotations

import argparse
import posixpath
import re
import types
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel
from pydantic.fields import FieldInfo

CONFIG_MARKER = "<!-- generated: configuration reference -->"
CLI_MARKER = "<!-- generated: command line reference -->"
END_MARKER = "<!-- end of generated part -->"
REGENERATE = "python docs/hooks/reference.py"
"""What writes the generated parts of the pages afresh."""
REPOSITORY_FILES = "repository"
"""Where the repository's files that pages link to are copied in the site."""
_OUTSIDE_LINK = re.compile(r"(\]\()(\.\./[^)\s#]+)(#[^)\s]*)?(\))")
_RELATIVE_LINK = re.compile(r"(\]\()([^)\s#:]+)(#[^)\s]*)?(\))")


# -- the configuration reference ------------------------------------------------------------


def _code(text: str) -> str:
    """A docstring's or help's text as Markdown: its reStructuredText literals (````x````) as
    Markdown ones (```x```), and outside them the characters Markdown would take for markup
    (``2**(n-1)``, ``prefix*``, ``<workspace>``, ``[hint]``) escaped."""
    pieces = text.replace("``", "`").split("`")
    for index in range(0, len(pieces), 2):  # the even pieces are outside code spans
        pieces[index] = re.sub(r"([\\*_<>\[\]])", r"\\\1", pieces[index])
    return "`".join(pieces)


def _cell(text: str) -> str:
    """``text`` on one line, safe inside a Markdown table cell."""
    return " ".join(text.split()).replace("|", "\\|")


def _default(field: FieldInfo) -> str:
    value = field.get_default(call_default_factory=True)
    rendered = yaml.safe_dump(value, default_flow_style=True, allow_unicode=True)
    return rendered.strip().removesuffix("...").strip()


def _type(annotation: Any) -> str:
    """What values a field takes, in the words of a YAML file."""
    origin = typing.get_origin(annotation)
    if origin is typing.Literal:
        return " | ".join(f"`{value}`" for value in typing.get_args(annotation))
    if origin in (typing.Union, types.UnionType):
        parts = [_type(arg) for arg in typing.get_args(annotation) if arg is not type(None)]
        nullable = type(None) in typing.get_args(annotation)
        return " or ".join(parts) + (" or `null`" if nullable else "")
    if origin is list:
        (item,) = typing.get_args(annotation) or (Any,)
        return f"list of {_type(item)}"
    names = {bool: "boolean", int: "integer", float: "number", str: "string"}
    return names.get(annotation, getattr(annotation, "__name__", str(annotation)))


def _bounds(field: FieldInfo) -> str:
    """The field's numeric bounds (``Field(ge=..., lt=...)``) as ``>= 0``, ``< 1``."""
    words = {"ge": ">=", "gt": ">", "le": "<=", "lt": "<"}
    found = []
    for item in field.metadata:
        for name, symbol in words.items():
            value = getattr(item, name, None)
            if value is not None:
                found.append(
                    f"{symbol} {value:,}" if isinstance(value, int) else f"{symbol} {value}"
                )
    return ", ".join(found)


def config_reference(model: type[BaseModel] | None = None) -> str:
    """Every key of ``ContextConfig`` as Markdown: one table per section, in the model's order.

    Args:
        model (`type[BaseModel] | None`): The model to walk; ``None``: ``ContextConfig``.
    """
    if model is None:
        from agentscope_context_ext.core.config import ContextConfig

        model = ContextConfig
    tables: list[tuple[str, str, list[str]]] = []

    def walk(section: type[BaseModel], prefix: str, title: str, about: str) -> None:
        rows: list[str] = []
        tables.append((title, about, rows))
        for name, field in section.model_fields.items():
            annotation = field.annotation
            if isinstance(annotation, type) and issubclass(annotation, BaseModel):
                walk(annotation, f"{prefix}{name}.", f"`{name}`", field.description or "")
                continue
            allowed = _type(annotation)
            bounds = _bounds(field)
            if bounds:
                allowed += f", {bounds}"
            rows.append(
                f"| `{prefix}{name}` | `{_cell(_default(field))}` | {_cell(allowed)} "
                f"| {_cell(_code(field.description or ''))} |"
            )

    walk(model, "", "Top level", model.__doc__ or "")
    parts = []
    for title, about, rows in tables:
        if not rows:  # a level of sections only
            continue
        parts.append(f"### {title}\n\n{_cell(_code(about))}\n" if about else f"### {title}\n")
        parts.append("| key | default | values | meaning |\n|---|---|---|---|")
        parts.append("\n".join(rows) + "\n")
    return "\n".join(parts)


# -- the command line reference -------------------------------------------------------------


def cli_parser() -> argparse.ArgumentParser:
    """The ``agentscope-context`` parser, with every command's, whichever AgentScope is
    installed (its help names the agent of both majors)."""
    from agentscope_context_ext.cli import build_parser

    return build_parser(agent="Agent (on AgentScope 1.x a ReActAgent)")


def _commands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _helps(parser: argparse.ArgumentParser) -> dict[str, str]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return {choice.dest: choice.help or "" for choice in action._choices_actions}
    return {}


def _argument_row(action: argparse.Action) -> str:
    if action.option_strings:
        name = ", ".join(f"`{option}`" for option in action.option_strings)
        if action.nargs != 0:
            name += f" `{action.metavar or action.dest.upper()}`"
    else:
        name = f"`{action.metavar or action.dest.upper()}`"
    notes = []
    if action.choices is not None:
        notes.append("one of " + ", ".join(f"`{choice}`" for choice in action.choices))
    if action.required and action.option_strings:
        notes.append("required")
    default = action.default
    said = "default" in (action.help or "")  # the help names its default itself
    if default not in (None, False, argparse.SUPPRESS) and action.nargs != 0 and not said:
        notes.append(f"default `{default}`")
    text = _code(action.help or "")
    if notes:
        text = f"{text} ({'; '.join(notes)})" if text else "; ".join(notes)
    return f"| {name} | {_cell(text)} |"


def _usage(parser: argparse.ArgumentParser) -> str:
    """``parser``'s usage line, wrapped at 100 columns whatever the terminal's width."""
    formatter = argparse.HelpFormatter(prog=parser.prog, width=100)
    formatter.add_usage(parser.usage, parser._actions, parser._mutually_exclusive_groups)
    return formatter.format_help().strip()


def _sentence(text: str) -> str:
    """A parser's one-line help as a sentence."""
    text = _code(text).strip()
    return f"{text[:1].upper()}{text[1:]}{'' if text.endswith('.') else '.'}" if text else ""


def _arguments(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    return [
        action
        for action in parser._actions
        if not isinstance(action, argparse._HelpAction | argparse._SubParsersAction)
    ]


def cli_reference(parser: argparse.ArgumentParser | None = None) -> str:
    """Every command of ``agentscope-context`` as Markdown: usage, description, arguments.

    Args:
        parser (`argparse.ArgumentParser | None`): The top parser; ``None``: the package's.
    """
    parser = parser if parser is not None else cli_parser()
    helps = _helps(parser)
    parts = [
        f"```\n{_usage(parser)}\n```\n",
        _code(parser.description or "") + "\n",
        "| argument | meaning |\n|---|---|",
        "\n".join(_argument_row(action) for action in _arguments(parser)) + "\n",
    ]
    for name, command in _commands(parser).items():
        parts.append(f"### `{name}`\n")
        parts.append(f"{_sentence(helps.get(name, ''))}\n")
        parts.append(f"```\n{_usage(command)}\n```\n")
        if command.description:
            parts.append(_code(command.description) + "\n")
        rows = [_argument_row(action) for action in _arguments(command)]
        if rows:
            parts.append("| argument | meaning |\n|---|---|")
            parts.append("\n".join(rows) + "\n")
    return "\n".join(part for part in parts if part)


# -- the generated parts of the pages --------------------------------------------------------


def _generators() -> dict[str, Callable[[], str]]:
    return {CONFIG_MARKER: config_reference, CLI_MARKER: cli_reference}


def fill(markdown: str) -> str:
    """``markdown`` with each generated part, from its marker to :data:`END_MARKER`, written
    afresh (a page without a marker as it is).

    Raises:
        `ValueError`: A marker has no end marker after it.
    """
    for marker, generate in _generators().items():
        start = markdown.find(marker)
        if start < 0:
            continue
        start += len(marker)
        end = markdown.find(END_MARKER, start)
        if end < 0:
            raise ValueError(f"{marker} has no {END_MARKER} after it")
        markdown = f"{markdown[:start]}\n\n{generate().strip()}\n\n{markdown[end:]}"
    return markdown


def write_pages(docs: Path) -> list[Path]:
    """Write the generated parts of the pages in ``docs`` afresh; the pages that changed."""
    changed = []
    for page in sorted(docs.glob("*.md")):
        text = page.read_text(encoding="utf-8")
        filled = fill(text)
        if filled != text:
            page.write_text(filled, encoding="utf-8")
            changed.append(page)
    return changed


# -- MkDocs hooks ---------------------------------------------------------------------------


def _repository(config: Any) -> Path:
    return Path(config["docs_dir"]).resolve().parent


def _outside_links(src_uri: str, markdown: str, config: Any) -> list[tuple[str, Path]]:
    """The links of a page to files of the repository outside ``docs/``: (as written, file)."""
    docs = Path(config["docs_dir"]).resolve()
    repository = _repository(config)
    found = []
    for match in _OUTSIDE_LINK.finditer(markdown):
        target = (docs / posixpath.dirname(src_uri) / match.group(2)).resolve()
        if (
            target.is_file()
            and target.is_relative_to(repository)
            and not target.is_relative_to(docs)
        ):
            found.append((match.group(2), target))
    return found


def home_page(readme: str) -> tuple[str, dict[str, str]]:
    """README.md as the site's home page: its links to ``docs/X`` become ``X``, its links to
    other files of the repository point at their copies; and those copies (site path: path in
    the repository).

    Args:
        readme (`str`): The text of README.md.
    """
    copies: dict[str, str] = {}

    def rewrite(match: re.Match[str]) -> str:
        target = match.group(2)
        if target.startswith("docs/"):
            target = target.removeprefix("docs/")
        else:
            copies[f"{REPOSITORY_FILES}/{target}"] = target
            target = f"{REPOSITORY_FILES}/{target}"
        return f"{match.group(1)}{target}{match.group(3) or ''}{match.group(4)}"

    return _RELATIVE_LINK.sub(rewrite, readme), copies


def on_files(files: Any, config: Any) -> Any:
    """Make the home page from README.md, and copy into the site the repository's files that
    pages link to."""
    from mkdocs.structure.files import File

    repository = _repository(config)
    wanted: dict[str, Path] = {}
    if files.get_file_from_path("index.md") is None:
        home, copies = home_page((repository / "README.md").read_text(encoding="utf-8"))
        files.append(File.generated(config, "index.md", content=home))
        wanted.update({uri: repository / path for uri, path in copies.items()})
    for page in files.documentation_pages():
        markdown = page.content_string
        for _, target in _outside_links(page.src_uri, markdown, config):
            wanted[f"{REPOSITORY_FILES}/{target.relative_to(repository).as_posix()}"] = target
    for uri, target in sorted(wanted.items()):
        if files.get_file_from_path(uri) is None:
            files.append(File.generated(config, uri, abs_src_path=str(target)))
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """Fill in the generated references (as the installed package says them, whatever was
    committed) and point outside links at the copied files."""
    markdown = fill(markdown)
    src_uri = page.file.src_uri
    repository = _repository(config)
    rewritten = {
        written: posixpath.relpath(
            f"{REPOSITORY_FILES}/{target.relative_to(repository).as_posix()}",
            posixpath.dirname(src_uri) or ".",
        )
        for written, target in _outside_links(src_uri, markdown, config)
    }

    def rewrite(match: re.Match[str]) -> str:
        link = rewritten.get(match.group(2))
        if link is None:
            return match.group(0)
        return f"{match.group(1)}{link}{match.group(3) or ''}{match.group(4)}"

    return _OUTSIDE_LINK.sub(rewrite, markdown)


if __name__ == "__main__":
    written = write_pages(Path(__file__).resolve().parents[1])
    for path in written:
        print(f"wrote {path}")
    if not written:
        print("the generated parts of the docs are up to date")
