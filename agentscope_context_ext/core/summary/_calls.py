"""Reading one tool call and one tool output, whatever the agent's tools are.

Calls are classified by the shape of their arguments, not by tool names: an ``old``/``new`` pair
is an edit, a path with content a write, a path alone a read (or a listing, for tools named like
``list``/``ls``/``glob``), a command string a command, a pattern a search. An output whose first
lines look like an error (``Error:``, ``Traceback``, ``exit code 1``, ...) is a failure, with its
first error line kept verbatim; any other tool's output is content, a failure only when the
framework says so or when it is a short report of one (:func:`call_failure`). Content is read for what it defines and, for an edit, for the
lines it changed.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping, Sequence
from typing import Any

from ..messages import ToolCall
from ._terms import code_terms

__all__ = [
    "COMMAND_KEYS",
    "CONTENT_KEYS",
    "EDIT_PAIRS",
    "PATH_KEYS",
    "PATTERN_KEYS",
    "arguments_text",
    "call_failure",
    "changed_lines",
    "classify",
    "definitions",
    "edit_pair",
    "error_line",
    "first_string",
    "gist",
    "todo_items",
]

PATH_KEYS = ("file_path", "path", "filepath", "filename", "file", "notebook_path", "target_file")
CONTENT_KEYS = ("content", "file_text", "new_source", "contents", "body")
EDIT_PAIRS = (
    ("old_string", "new_string"),
    ("old_str", "new_str"),
    ("old_text", "new_text"),
    ("search", "replace"),
    ("old", "new"),
)
COMMAND_KEYS = ("command", "cmd", "script", "shell", "bash", "code")
PATTERN_KEYS = ("pattern", "query", "regex", "glob", "search_term")
_LISTING_TOOL_RE = re.compile(r"(?i)(list|\bls\b|dir|tree|glob|find_files)")
_LINE_NUMBER_RE = re.compile(r"^\s*\d+\s*(?:→|\t|\|)\s?")
ERROR_LINE_RE = re.compile(
    r"(?i)^\s*(?:\*\*\s*\(\w*(?:error|exception)"  # ** (CompileError) (Elixir)
    # Error: / ValueError: / error[E0425] -- but not a file or folder named error*/exception*
    r"|\w*(?:error|exception)\b(?![/.\w-])"
    r"|(?:traceback|fatal|failed|failure|panic)\b(?![/.\w-])"
    r"|exit code [1-9]"
    r"|cannot\b|can't\b|could not\b|unable to\b|undefined\b)"
    r"|错误|失败|异常|报错"
    r"|.*(?:\*\*\*.*\bError\b|\bexit (?:code|status) [1-9]|returned non-zero|\bFAILED\b"
    r"|command not found|no such file or directory|permission denied)"
)
_ERROR_SCAN_LINES = 12
STATUS_LINE_RE = re.compile(
    r"(?i)^\s*(?:(?:error|exception|failed|failure|fatal|denied)\b\s*[:!\-–]"  # Error: ...
    r"|\w*(?:error|exception)\s*:"  # ValueError: ... (a tool that answered with its exception)
    r"|traceback \(most recent call last\)"
    r"|<tool_use_error>"
    r"|错误|失败|异常|报错"
    r"|.*(?:no such file or directory|permission denied|does not exist"
    r"|(?:file|path|directory|folder) not found|is not a (?:file|directory)))"
)
"""How a tool that returns content (a file, a listing, search hits, a page) reports its own
failure: one of these on its first line."""
_STATUS_LINES = 5
"""Such a report is short: an output of more lines is content, whatever its first line says."""
DEFINITION_RE = re.compile(
    r"^\s*(?:(?:export|pub(?:\([\w:]+\))?|public|private|protected|static|async|default|final|"
    r"abstract|override|inline)\s+)*"
    r"(?P<kind>def|defp|defmodule|defmacrop?|defstruct|defprotocol|defimpl|class|function|fn|"
    r"func|interface|struct|enum|trait|impl|type|module|macro|sub|procedure)\s+"
    r"(?P<name>[A-Za-z_][\w.!?:]*)"
    r"|^\s*(?:export\s+)?(?:const|let|var)\s+(?P<js>[A-Za-z_$][\w$]*)\s*=\s*(?:async\s*)?(?:\(|function)"
    r"|^\s*(?P<dsl>[a-z_]\w*\s+:[a-z_]\w*)\s+do\b"  # task :build do (Elixir/Ruby DSL blocks)
)
_IMPORT_RE = re.compile(
    r"^\s*(?:use|import|alias|require|include|using|from\s+[\w.]+\s+import)\s+[\w.{}, :*]+"
)
_ATTRIBUTE_RE = re.compile(r"^\s*@[a-z_]\w*\s+(?![\"'~]|::|true\b|false\b)\S")
"""``@name value``: not a docstring opener (``@doc \"\"\"``), not ``@impl true``."""
_TRIVIAL_LINE_RE = re.compile(r"^[\W_]*$|^(?:end|do|else|fi|done|pass|\}|\]|\))[\W]*$")
_MAX_CHANGES_PER_EDIT = 8


def classify(call: ToolCall) -> tuple[str, str | None]:
    """``(kind, path)`` of a tool call: kind is ``edit``, ``write``, ``read``, ``list``,
    ``search``, ``command`` or ``other``; path is the file or folder it is about, if any."""
    args = call.arguments
    path = first_string(args, PATH_KEYS)
    if path and edit_pair(args) != ("", ""):
        return "edit", path
    if path and first_string(args, CONTENT_KEYS) is not None:
        return "write", path
    if first_string(args, PATTERN_KEYS):
        return "search", path
    if first_string(args, COMMAND_KEYS):
        return "command", None
    if path:
        return ("list" if _LISTING_TOOL_RE.search(call.name) else "read"), path
    return "other", None


def call_failure(kind: str, text: str, failed: bool | None = None) -> str | None:
    """Why a tool call failed, or ``None`` when it did not: from the tool's own status, never
    from words inside what it returned (a successful ``read_file`` of a module whose docstring
    says "exit code 2" was summarised as "read; failed").

    Args:
        kind (`str`): The call's kind (:func:`classify`).
        text (`str`): Its output as the model saw it (the excerpt of a cut one).
        failed (`bool | None`): The framework's verdict when it records one (2.x's result
            state ``error``, ``denied``, ``interrupted``); ``None``: the output's shape decides.

    A command's output is its status (its first lines are scanned, :func:`error_line`); any
    other tool's output is content: only a short one whose first line is a failure report
    (:data:`STATUS_LINE_RE`: ``Error: ...``, ``ValueError: ...``, ``<tool_use_error>``, ...)
    is a failure.
    """
    if failed:
        return error_line(text) or clip(text.strip().split("\n", 1)[0], 240) or "failed"
    if kind == "command":
        return error_line(text)
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    if not lines or len(lines) > _STATUS_LINES or not STATUS_LINE_RE.match(lines[0]):
        return None
    return clip(lines[0], 240)


def error_line(text: str) -> str | None:
    """The first line of ``text`` that says something failed, if one of its first lines does."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    for line in lines[:_ERROR_SCAN_LINES]:
        if ERROR_LINE_RE.match(line):
            return clip(line, 240)
    return None


def gist(text: str) -> str | None:
    """The first line of an output worth repeating: not blank, not a line-number prefix alone,
    not a shebang, encoding line or file-header comment."""
    for raw in text.splitlines():
        line = _LINE_NUMBER_RE.sub("", raw).strip()
        if not line or _TRIVIAL_LINE_RE.match(line):
            continue
        if line.startswith(("#!", "# -*-", "# coding", '"""', "'''", "/*", "*", "//", "<!--")):
            continue
        return clip(line, 160)
    return None


def definitions(content: str, include_imports: bool = False) -> list[str]:
    """Lines of ``content`` that define something (``def``, ``class``, ``function``, ``defmodule``,
    ``task :name do``, ...), as ``kind name``; with ``include_imports``, also ``use``/
    ``import``/``alias`` lines and ``@attribute value`` lines, verbatim."""
    found: list[str] = []
    for raw in content.splitlines():
        line = _LINE_NUMBER_RE.sub("", raw)
        match = DEFINITION_RE.match(line)
        if match:
            if match["name"]:
                entry = f"{match['kind']} {match['name']}"
            else:
                entry = match["js"] or match["dsl"]
        elif include_imports and (_IMPORT_RE.match(line) or _ATTRIBUTE_RE.match(line)):
            entry = clip(line.strip(), 100)
        else:
            continue
        if entry not in found:
            found.append(entry)
    return found


def changed_lines(
    old: str, new: str, limit: int | None = _MAX_CHANGES_PER_EDIT
) -> list[tuple[int, str]]:
    """(priority, text) of what an edit changed, line by line: ``old`` -> ``new`` for a line
    replaced by one line, ``+line`` for an added line, ``-line`` for a removed one. Trivial lines
    (brackets, ``end``) are skipped; lines that define something get a higher priority.

    Args:
        limit (`int | None`): Keep the ``limit`` most important changes (definitions first);
            ``None`` keeps every change, in file order.
    """
    old_lines = [line.strip() for line in old.splitlines()]
    new_lines = [line.strip() for line in new.splitlines()]
    changes: list[tuple[int, str]] = []
    matcher = difflib.SequenceMatcher(a=old_lines, b=new_lines, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        removed = [line for line in old_lines[i1:i2] if _worth_showing(line)]
        added = [line for line in new_lines[j1:j2] if _worth_showing(line)]
        if len(removed) == 1 and len(added) == 1:
            changes.append(
                (
                    _line_priority(added[0]) + 1,
                    f"`{clip(removed[0], 100)}` → `{clip(added[0], 100)}`",
                )
            )
            continue
        changes.extend((_line_priority(line), f"+`{clip(line, 100)}`") for line in added)
        changes.extend((_line_priority(line) - 1, f"-`{clip(line, 100)}`") for line in removed)
    if limit is None:
        return changes
    return sorted(changes, key=lambda change: -change[0])[:limit]


def _line_priority(line: str) -> int:
    """3 for a definition, 2 for an import or attribute, 1 for a short line naming something in
    code, 0 for the rest."""
    if DEFINITION_RE.match(line):
        return 3
    if _IMPORT_RE.match(line) or _ATTRIBUTE_RE.match(line):
        return 2
    return 1 if len(line) <= 100 and code_terms(line, prose=False) else 0


def _worth_showing(line: str) -> bool:
    """Not a bracket or ``end`` alone, and not a short line that names nothing (``socket``,
    ``|> assign(``)."""
    if _TRIVIAL_LINE_RE.match(line):
        return False
    return len(line) >= 16 or bool(code_terms(line, prose=False))


def first_string(args: Mapping[str, Any], keys: Sequence[str]) -> str | None:
    for key in keys:
        value = args.get(key)
        if isinstance(value, str):
            return value
    return None


def edit_pair(args: Mapping[str, Any]) -> tuple[str, str]:
    for old_key, new_key in EDIT_PAIRS:
        old, new = args.get(old_key), args.get(new_key)
        if isinstance(old, str) and isinstance(new, str):
            return old, new
    return "", ""


def todo_items(args: Mapping[str, Any]) -> list[tuple[str, str]]:
    """A plan or todo list given to a tool: a list of items with a text and a status."""
    for value in args.values():
        if not isinstance(value, list) or not value:
            continue
        items = []
        for item in value:
            if not isinstance(item, Mapping):
                break
            text = next(
                (
                    item[k]
                    for k in ("content", "text", "title", "task", "description", "name")
                    if isinstance(item.get(k), str)
                ),
                None,
            )
            status = item.get("status") or item.get("state")
            if text is None or not isinstance(status, str):
                break
            items.append((status, clip(one_line(text), 200)))
        else:
            return items
    return []


def arguments_text(args: Mapping[str, Any]) -> str:
    parts = []
    for key, value in args.items():
        shown = value if isinstance(value, str) else repr(value)
        parts.append(f"{key}={clip(one_line(str(shown)), 80)}")
    return ", ".join(parts)


def one_line(text: str) -> str:
    """Whitespace runs (newlines too) collapsed to single spaces."""
    return " ".join(text.split())


def clip(text: str, limit: int) -> str:
    """``text`` stripped and cut to ``limit`` characters (with an ellipsis)."""
    text = text.strip()
    return text if len(text) <= limit else text[: limit - 1] + "…"
