"""What was done in a stretch of conversation: the work log an extractive summary is made of.

Each tool call and output is read as ``_calls`` classifies it (by the shape of the arguments):
files with what was done to them, distinct commands with their outcomes, other calls, the last
plan, the offloaded outputs, and an error nothing succeeded after. A line taken from an output
(an error line, a first line) is kept with the tool that printed it (:class:`ToolSaid`): the
summary quotes it as that tool's words, never as its own.

Pure: no I/O, no AgentScope, deterministic.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from ..messages import Message, ToolCall, ToolResult
from ..truncation import split_notice
from ._calls import (
    COMMAND_KEYS,
    CONTENT_KEYS,
    arguments_text,
    call_failure,
    changed_lines,
    classify,
    definitions,
    edit_pair,
    first_string,
    gist,
    one_line,
    todo_items,
)

__all__ = ["CommandWork", "FileWork", "OtherCall", "ToolSaid", "WorkLog", "build_worklog"]

_MAX_DEFINITIONS = 12


@dataclass(frozen=True)
class ToolSaid:
    """A line of a tool's output, verbatim, and the tool that printed it."""

    tool: str
    text: str


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
    errors: list[ToolSaid] = field(default_factory=list)
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


@dataclass(kw_only=True)
class CallWork:
    """The calls of one kind merged together: where they were and how they turned out."""

    first: int
    last: int
    outcomes: list[bool] = field(default_factory=list)
    """``True`` for success, in order."""
    error: ToolSaid | None = None
    """The first error line of the latest failure."""
    gist: ToolSaid | None = None
    """The first meaningful line of the latest successful output."""
    saved_output: str | None = None


@dataclass(kw_only=True)
class CommandWork(CallWork):
    """One distinct command (or piece of code) run, with every outcome."""

    command: str


@dataclass(kw_only=True)
class OtherCall(CallWork):
    """A call of any other tool, merged with identical calls."""

    tool: str
    arguments: str


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
    last_error: tuple[int, ToolSaid] | None = None
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
    todos = todo_items(args)
    if todos:
        log.todos = todos
    kind, path = classify(call)
    if kind == "edit":
        work = _file(log, path, index)
        work.edits += 1
        old, new = edit_pair(args)
        work.changes.extend(changed_lines(old, new))
    elif kind == "write":
        work = _file(log, path, index)
        work.writes += 1
        content = first_string(args, CONTENT_KEYS) or ""
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
        command = one_line(first_string(args, COMMAND_KEYS) or "")
        work = log.commands.get(command)
        if work is None:
            log.commands[command] = CommandWork(command=command, first=index, last=index)
        else:
            work.last = index
    else:
        key = (call.name, arguments_text(args))
        other = log.calls.get(key)
        if other is None:
            log.calls[key] = OtherCall(tool=call.name, arguments=key[1], first=index, last=index)
        else:
            other.last = index


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
    kind, path = classify(call)
    # From the tool's status (the framework's, or the shape of a failure report), never from
    # words inside the content it returned (a docstring that mentions "exit code 2").
    failed = call_failure(kind, excerpt, result.failed)
    failure = None if failed is None else ToolSaid(result.name or call.name, failed)
    ok = failure is None
    if ok:
        log.last_error = None
    else:
        log.last_error = (index, failure)
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
        work = log.commands.get(one_line(first_string(call.arguments, COMMAND_KEYS) or ""))
    else:
        work = log.calls.get((call.name, arguments_text(call.arguments)))
    if work is None:
        return
    work.outcomes.append(ok)
    work.saved_output = saved or work.saved_output
    if ok:
        line = gist(whole)
        work.gist = None if line is None else ToolSaid(result.name or call.name, line)
    else:
        work.error = failure


def _file(log: WorkLog, path: str, index: int) -> FileWork:
    work = log.files.get(path)
    if work is None:
        work = log.files[path] = FileWork(path, index)
    return work


def _count_lines(text: str) -> int:
    return text.count("\n") + (0 if text.endswith("\n") or not text else 1)
