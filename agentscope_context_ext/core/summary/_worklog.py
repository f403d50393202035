"""What was done in a stretch of conversation: the work log an extractive summary is made of.

Tool calls are classified by the shape of their arguments, not by tool names, so that any
agent's tools are understood: an ``old``/``new`` pair is an edit, a path with content a write,
a path alone a read (or a listing, for tools named like ``list``/``ls``/``glob``), a command
string a command, a pattern a search. Everything else is a generic call. Outcomes come from the
results: a result whose first lines look like an error (``Error:``, ``Traceback``, ``exit code
1``, ...) is a failure, with its first error line kept verbatim.

Pure: no I/O, no AgentScope, deterministic.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..messages import Message, ToolCall, ToolResult
from ..truncation import split_notice
from ._terms import code_terms

__all__ = [
    "CommandWork",
    "FileWork",
    "OtherCall",
    "WorkLog",
    "build_worklog",
    "definitions",
    "error_line",
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
DEFINITION_RE = re.compile(
    r"^\s*(?:(?:export|pub(?:\([\w:]+\))?|public|private|protected|static|async|default|final|"
    r"abstract|override|inline)\s+)*"
    r"(?P<kind>def|defp|defmodule|defmacrop?|defstruct|defprotocol|defimpl|class|function|fn|"
    r"func|interface|struct|enum|trait|impl|type|module|macro|sub|procedure)\s+"
    r"(?P<name>[A-Za-z_][\w.!?:]*)"
    r"|^\s*(?:export\s+)?(?:const|let|var)\s+(?P<js>[A-Za-z_$][\w$]*)\s*=\s*(?:async\s*)?(?:\(|function)"
    r"|^\s*(?P<dsl>[a-z_]\w*\s+:[a-z_]\w*)\s+do\b"  # computer :transcript_view do (Elixir/Ruby)
)
_IMPORT_RE = re.compile(
    r"^\s*(?:use|import|alias|require|include|using|from\s+[\w.]+\s+import)\s+[\w.{}, :*]+"
)
_ATTRIBUTE_RE = re.compile(r"^\s*@[a-z_]\w*\s+(?![\"'~]|::|true\b|false\b)\S")
"""``@name value``: not a docstring opener (``@doc \"\"\"``), not ``@impl true``."""
_TRIVIAL_LINE_RE = re.compile(r"^[\W_]*$|^(?:end|do|else|fi|done|pass|\}|\]|\))[\W]*$")
_MAX_CHANGES_PER_EDIT = 8
_MAX_DEFINITIONS = 12


@dataclass
class FileWork:
    """Everything done to one file."""

    path: str
    first: int
    """Index of the message where the file first appears."""
    reads: int = 0
    listings: int = 0
    searches: int = 0
    writes: int = 0
    edits: int = 0
    errors: list[str] = field(default_factory=list)
    """First error lines of failed operations on the file."""
    changes: list[tuple[int, str]] = field(default_factory=list)
    """(priority, text) of changed lines: ``old`` -> ``new``, ``+added``, ``-removed``."""
    defines: list[str] = field(default_factory=list)
    """Definitions in content the agent wrote (or, for files only read, that it read)."""
    read_defines: list[str] = field(default_factory=list)
    """Definitions seen in the file's content when it was read."""
    lines: int | None = None
    """Line count, when a read showed the whole file or its notice said it."""
    saved_output: str | None = None
    """Where the full output of a truncated read is (``tool_result/...``)."""

    @property
    def modified(self) -> bool:
        """The agent wrote or edited it."""
        return bool(self.writes or self.edits)


@dataclass
class CommandWork:
    """One distinct command (or piece of code) run, with every outcome."""

    command: str
    first: int
    last: int
    outcomes: list[bool] = field(default_factory=list)
    """``True`` for success, in order."""
    error: str | None = None
    """The first error line of the latest failure."""
    gist: str | None = None
    """The first meaningful line of the latest successful output."""
    saved_output: str | None = None


@dataclass
class OtherCall:
    """A call of any other tool, merged with identical calls."""

    tool: str
    arguments: str
    first: int
    last: int
    outcomes: list[bool] = field(default_factory=list)
    error: str | None = None
    gist: str | None = None
    saved_output: str | None = None


@dataclass
class WorkLog:
    """The work of a stretch of conversation, in order of first appearance."""

    requests: list[tuple[int, str]] = field(default_factory=list)
    """(index, text) of every user message."""
    statements: list[tuple[int, str]] = field(default_factory=list)
    """(index, text) of the agent's visible prose."""
    files: dict[str, FileWork] = field(default_factory=dict)
    commands: dict[str, CommandWork] = field(default_factory=dict)
    calls: dict[tuple[str, str], OtherCall] = field(default_factory=dict)
    todos: list[tuple[str, str]] = field(default_factory=list)
    """(status, item) of the latest plan or todo list a tool was given."""
    saved_outputs: list[str] = field(default_factory=list)
    """Every ``tool_result/`` file named by a truncation notice, in order."""
    last_error: tuple[int, str] | None = None
    """The latest failure (index, first error line), if nothing succeeded after it."""


def build_worklog(msgs: Sequence[Message]) -> WorkLog:
    """Read the work log out of ``msgs`` (oldest first)."""
    log = WorkLog()
    pending: dict[str, ToolCall] = {}
    for index, msg in enumerate(msgs):
        if msg.role == "user" and msg.text.strip():
            log.requests.append((index, msg.text))
        elif msg.role == "assistant" and msg.text.strip():
            log.statements.append((index, msg.text))
        for call in msg.tool_calls:
            pending[call.id] = call
            _record_call(log, index, call)
        for result in msg.tool_results:
            call = pending.pop(result.id, ToolCall(result.id, result.name))
            _record_result(log, index, call, result)
    return log


# ----------------------------------------------------------------------- calls


def _record_call(log: WorkLog, index: int, call: ToolCall) -> None:
    args = call.arguments
    todos = _todo_items(args)
    if todos:
        log.todos = todos
    kind, path = classify(call)
    if kind == "edit":
        work = _file(log, path, index)
        work.edits += 1
        old, new = _edit_pair(args)
        work.changes.extend(changed_lines(old, new))
    elif kind == "write":
        work = _file(log, path, index)
        work.writes += 1
        content = _first_string(args, CONTENT_KEYS) or ""
        for line in definitions(content, include_imports=True):
            if line not in work.defines:
                work.defines.append(line)
    elif kind in ("read", "list", "search") and path:
        work = _file(log, path, index)
        if kind == "read":
            work.reads += 1
        elif kind == "list":
            work.listings += 1
        else:
            work.searches += 1
    elif kind == "command":
        command = _one_line(_first_string(args, COMMAND_KEYS) or "")
        work = log.commands.get(command)
        if work is None:
            log.commands[command] = CommandWork(command, index, index)
        else:
            work.last = index
    else:
        key = (call.name, _arguments_text(args))
        other = log.calls.get(key)
        if other is None:
            log.calls[key] = OtherCall(call.name, key[1], index, index)
        else:
            other.last = index


def classify(call: ToolCall) -> tuple[str, str | None]:
    """``(kind, path)`` of a tool call: kind is ``edit``, ``write``, ``read``, ``list``,
    ``search``, ``command`` or ``other``; path is the file or folder it is about, if any."""
    args = call.arguments
    path = _first_string(args, PATH_KEYS)
    if path and _edit_pair(args) != ("", ""):
        return "edit", path
    if path and _first_string(args, CONTENT_KEYS) is not None:
        return "write", path
    if _first_string(args, PATTERN_KEYS):
        return "search", path
    if _first_string(args, COMMAND_KEYS):
        return "command", None
    if path:
        return ("list" if _LISTING_TOOL_RE.search(call.name) else "read"), path
    return "other", None


# --------------------------------------------------------------------- results


def _record_result(log: WorkLog, index: int, call: ToolCall, result: ToolResult) -> None:
    text = result.text
    notice = split_notice(text)
    excerpt = notice[0] if notice else text
    saved = None
    if notice is not None and notice[1].file_path.startswith("tool_result/"):
        saved = notice[1].file_path
        if saved not in log.saved_outputs:
            log.saved_outputs.append(saved)
    whole = result.full_text if result.full_text is not None else excerpt
    failure = error_line(excerpt)
    ok = failure is None
    if ok:
        log.last_error = None
    else:
        log.last_error = (index, failure)
    kind, path = classify(call)
    if kind in ("edit", "write", "read", "list", "search") and path:
        work = _file(log, path, index)
        if not ok:
            work.errors.append(failure)
        if kind == "read" and ok:
            work.lines = notice[1].total_lines if notice else _count_lines(excerpt)
            work.saved_output = saved or work.saved_output
            for line in definitions(whole)[:_MAX_DEFINITIONS]:
                if line not in work.read_defines:
                    work.read_defines.append(line)
        return
    if kind == "command":
        work = log.commands.get(_one_line(_first_string(call.arguments, COMMAND_KEYS) or ""))
    else:
        work = log.calls.get((call.name, _arguments_text(call.arguments)))
    if work is None:
        return
    work.outcomes.append(ok)
    work.saved_output = saved or work.saved_output
    if ok:
        work.gist = gist(whole)
    else:
        work.error = failure


def error_line(text: str) -> str | None:
    """The first line of ``text`` that says something failed, if one of its first lines does."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    for line in lines[:_ERROR_SCAN_LINES]:
        if ERROR_LINE_RE.match(line):
            return _clip(line, 240)
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
        return _clip(line, 160)
    return None


# ----------------------------------------------------------------- content


def definitions(content: str, include_imports: bool = False) -> list[str]:
    """Lines of ``content`` that define something (``def``, ``class``, ``function``, ``defmodule``,
    ``computer :name do``, ...), as ``kind name``; with ``include_imports``, also ``use``/
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
            entry = _clip(line.strip(), 100)
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
                    f"`{_clip(removed[0], 100)}` → `{_clip(added[0], 100)}`",
                )
            )
            continue
        changes.extend((_line_priority(line), f"+`{_clip(line, 100)}`") for line in added)
        changes.extend((_line_priority(line) - 1, f"-`{_clip(line, 100)}`") for line in removed)
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


# --------------------------------------------------------------------- helpers


def _file(log: WorkLog, path: str, index: int) -> FileWork:
    work = log.files.get(path)
    if work is None:
        work = log.files[path] = FileWork(path, index)
    return work


def _first_string(args: Mapping[str, Any], keys: Sequence[str]) -> str | None:
    for key in keys:
        value = args.get(key)
        if isinstance(value, str):
            return value
    return None


def _edit_pair(args: Mapping[str, Any]) -> tuple[str, str]:
    for old_key, new_key in EDIT_PAIRS:
        old, new = args.get(old_key), args.get(new_key)
        if isinstance(old, str) and isinstance(new, str):
            return old, new
    return "", ""


def _todo_items(args: Mapping[str, Any]) -> list[tuple[str, str]]:
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
            items.append((status, _clip(_one_line(text), 200)))
        else:
            return items
    return []


def _arguments_text(args: Mapping[str, Any]) -> str:
    parts = []
    for key, value in args.items():
        shown = value if isinstance(value, str) else repr(value)
        parts.append(f"{key}={_clip(_one_line(str(shown)), 80)}")
    return ", ".join(parts)


def _count_lines(text: str) -> int:
    return text.count("\n") + (0 if text.endswith("\n") or not text else 1)


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _clip(text: str, limit: int) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[: limit - 1] + "…"
