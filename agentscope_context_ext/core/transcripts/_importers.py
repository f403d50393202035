"""Transcript importers: each format becomes :class:`Record`\\ s (AgentScope 1.x's message shape,
without AgentScope), tool calls and results paired by id (design §10). Formats:

- ``agentscope``: JSONL of saved messages (this package's ``dialog/`` files, of either
  AgentScope version);
- ``openai``: OpenAI-style message lists; a file may hold many trajectories (tau-bench: a list of
  ``{"traj": [...]}``), each replayed on its own, and so may OpenAI-format JSONL: one
  ``{"messages": [...]}`` object a line (fine-tuning data), each line a conversation of its own,
  or one message a line, together one conversation;
- ``claude-code``: Claude Code session JSONL;
- ``swe-agent``: SWE-agent ``.traj`` files (``history`` of OpenAI-style messages).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ._claude_code import claude_code_records
from ._errors import TranscriptError
from ._json import load_json
from ._records import Record, record_from_dict

FORMATS = ("agentscope", "openai", "claude-code", "swe-agent")
_LITERAL_CHARS = 1_000_000
"""Longest Python-literal tool-call list read (``ast`` parses it whole, recursively)."""
_FIRST_LINE_BYTES = 64 << 20
"""Most of a first line read to guess the format (a JSONL line may be a whole conversation)."""


@dataclass
class Transcript:
    """One conversation to replay."""

    name: str
    """Where it came from (file, and index inside the file when there are several)."""
    messages: list[Any]
    """The conversation, oldest first (the system prompt excluded): :class:`Record`\\ s, or
    AgentScope 1.x ``Msg``\\ s when a caller builds the transcript from its own messages."""
    system_prompt: str = ""
    """The system prompt, when the format carries one."""
    meta: dict[str, Any] = field(default_factory=dict)
    """Anything else worth reporting (e.g. the task id)."""


def load_transcripts(path: str | Path, fmt: str = "auto") -> list[Transcript]:
    """Read every conversation in ``path``.

    Args:
        path (`str | Path`): The transcript file.
        fmt (`str`): One of :data:`FORMATS` or ``auto``.

    Raises:
        `TranscriptError`: Missing, empty, unreadable or not of the format.
    """
    path = Path(path)
    if not path.is_file():
        raise TranscriptError(f"{path}: no such file")
    if path.stat().st_size == 0:
        raise TranscriptError(f"{path}: the file is empty")
    if fmt == "auto":
        fmt = detect_format(path)
    if fmt not in FORMATS:
        raise TranscriptError(f"unknown format {fmt!r}; choose one of auto, {', '.join(FORMATS)}")
    try:
        if fmt == "claude-code":
            transcripts = [Transcript(path.name, claude_code_records(path))]
        elif fmt == "agentscope":
            transcripts = [Transcript(path.name, _load_agentscope(path))]
        else:
            data = _read_json(path, fmt)
            transcripts = (
                _load_openai(path.name, data)
                if fmt == "openai"
                else _load_swe_agent(path.name, data)
            )
    except TranscriptError:
        raise
    except (ValueError, KeyError, TypeError, AttributeError, UnicodeDecodeError) as exc:
        raise TranscriptError(f"{path}: {_not_a(fmt)} ({_one_line(exc)})") from None
    transcripts = [t for t in transcripts if t.messages]
    if not transcripts:
        raise TranscriptError(f"{path}: no conversation found in this {fmt} transcript")
    return transcripts


def detect_format(path: Path) -> str:
    """Guess the format from the extension and the first record."""
    if path.suffix == ".traj":
        return "swe-agent"
    with open(path, "rb") as handle:
        head = handle.read(65536).decode("utf-8", errors="replace").lstrip()
    if not head:
        raise TranscriptError(f"{path}: the file is empty")
    if head.startswith("["):
        return "openai"
    if head.startswith("{"):
        try:
            record = load_json(_first_line(path))
        except ValueError:
            record = None
        if isinstance(record, dict):
            if "sessionId" in record or record.get("type") in (
                "user",
                "assistant",
                "progress",
                "summary",
                "file-history-snapshot",
                "system",
            ):
                return "claude-code"
            if {"role", "content", "name"} <= set(record):
                return "agentscope"
            if {"role", "content"} <= set(record):  # OpenAI-format JSONL, a message a line
                return "openai"
            if "history" in record or "messages" in record:
                return "swe-agent" if "history" in record else "openai"
        try:
            whole = load_json(head if len(head) < 65536 else path.read_text(encoding="utf-8"))
        except ValueError:
            whole = None
        if isinstance(whole, dict) and "history" in whole:
            return "swe-agent"
        if isinstance(whole, dict) and ("messages" in whole or "traj" in whole):
            return "openai"
    raise TranscriptError(
        f"{path}: not a recognised transcript (expected AgentScope dialog JSONL, OpenAI message "
        "lists, Claude Code JSONL or a SWE-agent .traj); pass --format to force one"
    )


def _first_line(path: Path) -> str:
    """The file's first line that is not blank (up to :data:`_FIRST_LINE_BYTES`)."""
    with open(path, "rb") as handle:
        for line in iter(lambda: handle.readline(_FIRST_LINE_BYTES), b""):
            if line.strip():
                return line.decode("utf-8", errors="replace")
    return ""


def _not_a(fmt: str) -> str:
    """``not an openai transcript``, ``not a swe-agent transcript``."""
    return f"not {'an' if fmt[:1] in 'aeiou' else 'a'} {fmt} transcript"


# ------------------------------------------------------------------- formats


def _load_agentscope(path: Path) -> list[Record]:
    msgs = []
    with open(path, encoding="utf-8") as handle:
        for line_no, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                data = load_json(line)
                if not isinstance(data, dict):
                    raise ValueError("not an object")
                msgs.append(record_from_dict(data))
            except (ValueError, KeyError, TypeError, AssertionError) as exc:
                raise TranscriptError(
                    f"{path}: line {line_no} is not a Msg ({_one_line(exc)})"
                ) from None
    return msgs


def _read_json(path: Path, fmt: str) -> Any:
    """The file's JSON; for ``openai``, a JSON Lines file as the list of its lines' values."""
    text = path.read_text(encoding="utf-8")
    try:
        return load_json(text)
    except json.JSONDecodeError as exc:
        if fmt == "openai" and exc.msg == "Extra data":  # more than one value: JSON Lines
            return _json_lines(path, text, fmt)
        raise TranscriptError(
            f"{path}: {_not_a(fmt)} (not JSON: {exc.msg} at line {exc.lineno})"
        ) from None
    except ValueError as exc:
        raise TranscriptError(f"{path}: {_not_a(fmt)} ({exc})") from None


def _json_lines(path: Path, text: str, fmt: str) -> list[Any]:
    """Each non-blank line of a JSON Lines file, parsed."""
    values = []
    for line_no, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            values.append(load_json(line))
        except json.JSONDecodeError as exc:
            raise TranscriptError(
                f"{path}: {_not_a(fmt)} (line {line_no} is not JSON: {exc.msg})"
            ) from None
        except ValueError as exc:
            raise TranscriptError(f"{path}: {_not_a(fmt)} (line {line_no}: {exc})") from None
    return values


def _load_openai(name: str, data: Any) -> list[Transcript]:
    if isinstance(data, dict):
        data = [data]
    if not isinstance(data, list) or not data:
        raise TranscriptError(f"{name}: expected a list of messages or of trajectories")
    if all(isinstance(item, dict) and "role" in item for item in data):
        return [_from_openai_messages(name, data)]
    transcripts = []
    for index, item in enumerate(data):
        if not isinstance(item, dict):
            continue
        messages = item.get("traj") or item.get("messages") or item.get("history")
        if isinstance(messages, list):
            meta = {k: item[k] for k in ("task_id", "reward", "trial") if k in item}
            transcripts.append(_from_openai_messages(f"{name}#{index}", messages, meta))
    return transcripts


def _load_swe_agent(name: str, data: Any) -> list[Transcript]:
    if not isinstance(data, dict) or not isinstance(data.get("history"), list):
        raise TranscriptError(f"{name}: a .traj file needs a 'history' list")
    return [_from_openai_messages(name, data["history"])]


def _from_openai_messages(name: str, messages: list, meta: dict | None = None) -> Transcript:
    system = []
    msgs: list[Record] = []
    tool_names: dict[str, str] = {}
    for raw in messages:
        if not isinstance(raw, dict):
            continue
        role = raw.get("role")
        content = _text(raw.get("content"))
        if role == "system":
            system.append(content)
        elif role == "user":
            if content.strip():
                msgs.append(Record("user", content))
        elif role == "assistant":
            blocks: list[dict] = [{"type": "text", "text": content}] if content.strip() else []
            calls = raw.get("tool_calls") or []
            if isinstance(calls, str):
                calls = _parse_calls(calls)
            for call in calls:
                function = call.get("function") or {}
                call_id = str(call.get("id"))
                tool_names[call_id] = str(function.get("name"))
                blocks.append(
                    {
                        "type": "tool_use",
                        "id": call_id,
                        "name": str(function.get("name")),
                        "input": _arguments(function.get("arguments")),
                    }
                )
            if blocks:
                msgs.append(Record("assistant", blocks))
        elif role == "tool":
            ids = raw.get("tool_call_ids") or [raw.get("tool_call_id")]
            for call_id in ids:
                call_id = str(call_id)
                result = {
                    "type": "tool_result",
                    "id": call_id,
                    "name": raw.get("name") or tool_names.get(call_id, "tool"),
                    "output": content,
                }
                msgs.append(Record("system", [result]))
    return Transcript(name, msgs, "\n\n".join(s for s in system if s), meta or {})


def _text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            str(part.get("text", "")) if isinstance(part, dict) else str(part) for part in content
        )
    return json.dumps(content, ensure_ascii=False)


def _arguments(raw: Any) -> dict:
    if isinstance(raw, dict):
        return raw
    try:
        parsed = load_json(raw) if isinstance(raw, str) and raw.strip() else {}
    except ValueError:
        return {"raw_arguments": raw}
    return parsed if isinstance(parsed, dict) else {"value": parsed}


def _parse_calls(text: str) -> list[dict]:
    try:
        parsed = load_json(text)
    except ValueError:
        import ast

        # Python's repr of a list of dicts (some logs write that); its parser recurses too
        if len(text) > _LITERAL_CHARS:
            return []
        try:
            parsed = ast.literal_eval(text)
        except (ValueError, SyntaxError, RecursionError, MemoryError):
            return []
    return [c for c in parsed if isinstance(c, dict)] if isinstance(parsed, list) else []


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:200] or type(exc).__name__
