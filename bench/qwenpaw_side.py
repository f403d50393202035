"""QwenPaw's "Scroll" context manager as one more side of B8, run in a venv of its own.

QwenPaw (PyPI ``qwenpaw`` 2.2.2.post1) pins AgentScope 2.0.10, B8 runs on 2.0.11: this module is
two things. In the QwenPaw venv (``bench/qwenpaw_venv.sh`` makes it) it is a runner,
``python -m bench.qwenpaw_side IN.json OUT.json``, that replays B8's scripts through a real
``QwenPawAgent`` with Scroll; in B8's venv, :func:`run_side` writes IN.json, runs the runner with
the QwenPaw venv's python and reads OUT.json back. Only the standard library is imported at the
top, so either side can import it.

How Scroll is run: QwenPaw's own classes, wired as its ``AgentBuilder.build_agent`` wires them,
minus what needs the app (channels, skills, coding tools, memory manager, MCP, the generated
system prompt):

- ``AgentProfileConfig`` (``language="en"``, ``light_context_config.strategy="scroll"``, the
  default) with the trigger and reserve below;
- ``AgentBuilder._init_governor`` (QwenPaw's ``ResourceGovernor``; offline it finds no sandbox,
  so, as in the app, only the structured ``recall_history`` tool is registered, not the
  sandboxed ``recall_history_python`` REPL), ``AgentBuilder._build_offloader``,
  ``AgentBuilder._build_scroll_components`` (``build_scroll_components``: the SQLite
  ``history.db`` with FTS5, the ``ScrollContextManager``, the recall tools),
  ``AgentBuilder._append_scroll_recall_tools``, ``AgentBuilder._build_middlewares``
  (``ToolResultPruningMiddleware``, ``VisualCompressionMiddleware``) and
  ``AgentBuilder._build_context_config``;
- ``QwenPawAgent`` with all of them, and with the script's system prompt followed by Scroll's
  own system-prompt block (``build_scroll_system_prompt``, which the app's
  ``ScrollContextContributor`` appends whenever Scroll is on: it teaches the headlines, the
  ``[context compressed]`` map and ``recall_history``);
- the model is this package's ``ScriptedChatModel`` (it works on 2.0.10): agentscope's
  ``OpenAIChatFormatter``, so the recorded prompts are formatted as B8 records the other sides',
  and 2.0.10's bytes/4 ``count_tokens``, which is what Scroll measures its pressure with.

Settings mapping: ``window`` -> the model's ``context_size`` (Scroll reads
``agent.model.context_size``; in the app it comes from the provider's ``max_input_length``);
``trigger`` -> ``context_compact_config.compact_threshold_ratio`` (QwenPaw's default 0.8 too;
QwenPaw accepts 0.1 to 0.9); ``reserve`` (IN.json, optional, default B8's 0.3) ->
``reserve_threshold_ratio`` (QwenPaw's default is 0.1, its maximum 0.3; Scroll keeps at least
``min(10_000, 10% of the window)`` tokens of recent tail whatever it is set to). Everything else
is QwenPaw's default: tool results pruned at 50,000 bytes with the full output saved under
``tool_results/``, no dialog archive, history kept 30 days.

The scripted model answers as B8's does: each reasoning call gets the next recorded assistant
message of the current turn, then ``"ok"``; every tool returns its next recorded output. When
Scroll asks for its continuation summary (a plain call, no tools, whose system message starts
``You update a compact continuation summary``), the answer is this package's
``extractive_summary`` over what the prompt sends: the archived records (user and assistant
texts, tool calls, tool-result previews) parsed back into messages, and the previous summary
as ``previous``. Its sections are mapped onto Scroll's five Markdown sections: goal -> Active
Task (``Status: in_progress``), progress and critical context -> Current State, constraints ->
Constraints, key decisions -> Decisions, next steps -> Open Work. Scroll validates a summary
locally and asks once more with the issues listed; the answer to such a repair prompt is the
same summary without the items that carry an identifier the validator called unsupported, as a
compliant model would do.

A turn Scroll cannot fit (``ContextWindowUnfitError``: even after eviction and folding the
request exceeds the window less its output reserve) ends that turn, as the app reports it to
the user; the replay goes on with the next user message and the turn is listed in ``errors``.
With ``reject_over_window`` (IN.json, optional, off by default) the scripted model also rejects
a prompt over the window as a provider does, and QwenPaw's overflow recovery
(``recover_from_context_overflow``: one forced compaction, then one retry) gets its chance.
"""

from __future__ import annotations

import argparse
import ast
import asyncio
import dataclasses
import json
import logging
import os
import re
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ._replayed import next_reply, replayed_tool

ENV_PYTHON = "ACE_QWENPAW_PYTHON"
"""The environment variable naming the QwenPaw venv's python."""
DEFAULT_PYTHON = Path("/work/venv-qwenpaw/bin/python")
"""Where ``bench/qwenpaw_venv.sh`` puts it by default."""
TRIGGER = 0.8
RESERVE = 0.3
"""B8's reserve ratio for 2.x's own compression, used for Scroll's ``reserve_threshold_ratio``."""
SUMMARY_SYSTEM = "You update a compact continuation summary"
"""How Scroll's summary request begins (its system message, English)."""
REPO = Path(__file__).resolve().parent.parent
_STDERR_TAIL = 4000


class QwenPawSideError(RuntimeError):
    """The QwenPaw runner failed; the message ends with the tail of its stderr."""


# --------------------------------------------------------------------------------------------
# B8's side (any venv): run the runner as a subprocess
# --------------------------------------------------------------------------------------------


def qwenpaw_python() -> str | None:
    """The QwenPaw venv's python: ``$ACE_QWENPAW_PYTHON`` or the default path, if it exists.

    Returns:
        `str | None`: Its path, or ``None`` when there is none (B8 then skips the side).
    """
    named = os.environ.get(ENV_PYTHON, "").strip()
    candidate = Path(named) if named else DEFAULT_PYTHON
    return str(candidate) if candidate.is_file() else None


def _script_dict(item: Any) -> dict[str, Any]:
    """One script as the IN.json shape, from a dict, a ``(name, _Script)`` pair or a
    ``_Script``-like dataclass with a ``name``."""
    name = None
    if isinstance(item, tuple) and len(item) == 2:
        name, item = item
    if dataclasses.is_dataclass(item) and not isinstance(item, type):
        item = dataclasses.asdict(item)
    if not isinstance(item, dict):
        raise TypeError(f"a script must be a dict or a (name, _Script) pair, not {type(item)}")
    script = {
        "name": str(name if name is not None else item.get("name", "")),
        "system": item.get("system", ""),
        "turns": [[text, list(replies)] for text, replies in item["turns"]],
        "outputs": {tool: list(values) for tool, values in item.get("outputs", {}).items()},
    }
    return script


def run_side(
    scripts: Sequence[Any],
    window: int,
    summary_tokens: int,
    python: str | None = None,
    *,
    trigger: float = TRIGGER,
    reserve: float = RESERVE,
    reject_over_window: bool = False,
    timeout: float | None = None,
) -> list[dict] | None:
    """Replay ``scripts`` through QwenPaw's Scroll in the QwenPaw venv and return its results.

    Args:
        scripts (`Sequence[Any]`): IN.json script dicts (``name``, ``system``, ``turns``,
            ``outputs``), or ``(name, _Script)`` pairs as B8's loaders give them.
        window (`int`): The context window, Scroll's ``context_size``.
        summary_tokens (`int`): The extractive summary's budget (B8's, for both sides alike).
        python (`str | None`): The QwenPaw venv's python; default :func:`qwenpaw_python`.
        trigger (`float`): Scroll's ``compact_threshold_ratio``.
        reserve (`float`): Scroll's ``reserve_threshold_ratio`` (at most 0.3).
        reject_over_window (`bool`): The scripted model rejects a prompt over ``window`` (by
            the exact Qwen count) as a provider does, with a 400 "maximum context length",
            so that QwenPaw's overflow recovery runs; off: every prompt is answered, as B8's
            other sides are.
        timeout (`float | None`): Seconds the runner may take (``None``: no limit).

    Returns:
        `list[dict] | None`: One OUT.json entry per script, or ``None`` when there is no
        QwenPaw python (the side is skipped). An entry: ``name``; ``calls``, each
        ``{"summary", "rejected", "messages", "tools"}`` (the formatted OpenAI-style prompt and
        the tool schemas); ``corpus`` (every string the agent can still reach: the final
        context, Scroll's ``history.db`` rows, the workspace's files, the summary);
        ``reachable_by_tools`` (``["recall_history"]``); ``summary`` (the final continuation
        summary, ``""`` if none); ``errors`` (turns ended unfit: ``turn``, ``error``,
        ``dropped_replies``); ``compactions`` (what each compress that did anything did:
        ``call`` index, ``evicted``, ``pre_folded``, ``live_folded``, ``active_folded``,
        ``active_thinking_folded``, ``folded``); ``warnings`` (Scroll's log warnings).

    Raises:
        QwenPawSideError: When the runner fails or times out; with its stderr's tail.
    """
    python = python or qwenpaw_python()
    if python is None or not Path(python).is_file():
        return None
    payload = {
        "window": int(window),
        "trigger": float(trigger),
        "reserve": float(reserve),
        "reject_over_window": bool(reject_over_window),
        "summary_tokens": int(summary_tokens),
        "scripts": [_script_dict(item) for item in scripts],
    }
    with tempfile.TemporaryDirectory(prefix="qwenpaw-side-") as tmp:
        source, target = Path(tmp) / "in.json", Path(tmp) / "out.json"
        source.write_text(json.dumps(payload, ensure_ascii=False), encoding="utf-8")
        env = dict(os.environ)
        # QwenPaw's governor writes its policy under its working dir (~/.qwenpaw by default):
        # keep every run's files in the temporary folder.
        env["QWENPAW_WORKING_DIR"] = str(Path(tmp) / "qwenpaw-home")
        env.setdefault("QWENPAW_LOG_LEVEL", "warning")
        try:
            done = subprocess.run(
                [python, "-m", "bench.qwenpaw_side", str(source), str(target)],
                cwd=REPO,
                env=env,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=timeout,
            )
        except subprocess.TimeoutExpired as exc:
            tail = (exc.stderr or b"")[-_STDERR_TAIL:]
            if isinstance(tail, bytes):
                tail = tail.decode("utf-8", "replace")
            raise QwenPawSideError(
                f"the QwenPaw runner ({python}) took over {timeout} s; stderr ends:\n{tail}"
            ) from None
        if done.returncode != 0 or not target.is_file():
            raise QwenPawSideError(
                f"the QwenPaw runner ({python}) exited {done.returncode}; stderr ends:\n"
                f"{done.stderr[-_STDERR_TAIL:]}"
            )
        # The runner's progress lines are the caller's to see.
        if done.stderr:
            sys.stderr.write(done.stderr)
        return json.loads(target.read_text(encoding="utf-8"))["scripts"]


# --------------------------------------------------------------------------------------------
# The runner (the QwenPaw venv): Scroll's summary answered by the extractive summarizer
# --------------------------------------------------------------------------------------------

_SECTIONS = ("Active Task", "Current State", "Constraints", "Decisions", "Open Work")
_RECORD_RE = re.compile(r"^\[seq:(?P<span>[^\]]*)\] role=(?P<role>\S+)")
_FIELD_RE = re.compile(r"^  (?P<kind>text|headline|tool_call|tool_result|recovery)[ =]")
_CALL_RE = re.compile(r"^  tool_call name=(?P<name>.*?) id=(?P<id>.*?) input=(?P<input>.*)$")
_RESULT_RE = re.compile(
    r"^  tool_result name=(?P<name>.*?) id=(?P<id>.*?) state=.*? preview=(?P<preview>.*)$"
)
_UNSUPPORTED_RE = re.compile(r"identifiers not present in evidence: (?P<ids>[^\n]*)")


def _literal(text: str) -> str:
    """A ``repr``'d string from Scroll's records, back to the string.

    Scroll fits long records by cutting out their middle, which can break the quoting; such a
    record is unquoted by hand (escapes left as they are)."""
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        value = text[1:] if text[:1] in "'\"" else text
        value = value[:-1] if value[-1:] in "'\"" else value
    return value if isinstance(value, str) else str(value)


def _between(text: str, start: str, end: str) -> str | None:
    """The part of ``text`` after ``start`` up to the last ``end`` (``None`` without
    ``start``)."""
    at = text.find(start)
    if at < 0:
        return None
    rest = text[at + len(start) :]
    stop = rest.rfind(end)
    return rest[:stop] if stop >= 0 else rest


def _record_views(archived: str) -> list[Any]:
    """Scroll's archived records (one header line per message entry, then one field line) as
    this package's message views, one per archived message."""
    from agentscope_context_ext.core.messages import Message, Text, ToolCall, ToolResult

    messages: list[Any] = []
    key: tuple[str, str] | None = None
    parts: list[Any] = []

    def flush() -> None:
        if key is not None and parts:
            messages.append(Message(id=f"seq:{key[0]}", role=key[1], parts=tuple(parts)))

    for line in archived.splitlines():
        header = _RECORD_RE.match(line)
        if header:
            found = (header["span"], header["role"])
            if found != key:
                flush()
                key, parts = found, []
            continue
        if not _FIELD_RE.match(line):
            continue
        if line.startswith("  text="):
            parts.append(Text(_literal(line[len("  text=") :])))
        elif line.startswith("  headline="):
            parts.append(Text(_literal(line[len("  headline=") :])))
        elif call := _CALL_RE.match(line):
            raw = _literal(call["input"])
            try:
                arguments = json.loads(raw)
            except json.JSONDecodeError:
                arguments = {"input": raw}
            if not isinstance(arguments, dict):
                arguments = {"input": arguments}
            parts.append(ToolCall(_literal(call["id"]), _literal(call["name"]), arguments))
        elif result := _RESULT_RE.match(line):
            parts.append(
                ToolResult(
                    _literal(result["id"]), _literal(result["name"]), _literal(result["preview"])
                )
            )
    flush()
    return messages


def _previous_summary(text: str | None) -> Any:
    """Scroll's previous summary (its five sections) as this package's ``CompactSummary``."""
    from agentscope_context_ext.core.summary import CompactSummary

    if not text or text.strip() == "(none)":
        return None
    sections: dict[str, list[str]] = {title: [] for title in _SECTIONS}
    current = None
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("## "):
            current = stripped[3:].strip()
            continue
        if current not in sections or not stripped or stripped == "(none)":
            continue
        if stripped.startswith("Status:"):
            continue
        sections[current].append(stripped[2:] if stripped.startswith("- ") else stripped)
    return CompactSummary(
        goal=sections["Active Task"],
        progress=sections["Current State"],
        constraints=sections["Constraints"],
        key_decisions=sections["Decisions"],
        next_steps=sections["Open Work"],
    )


def scroll_summary(prompt: str, budget_tokens: int) -> str:
    """The answer to one Scroll summary request: the extractive summary in its five sections.

    Args:
        prompt (`str`): The request's user message (Scroll's ``build_update_prompt``).
        budget_tokens (`int`): The extractive summary's token budget.

    Returns:
        `str`: Markdown with Scroll's headings, ``Status: in_progress`` and bullet items.
    """
    from agentscope_context_ext.core.summary import extractive_summary

    archived = _between(prompt, "Newly archived context", "\n---") or ""
    archived = archived.split("---\n", 1)[-1]
    previous = _between(prompt, "Previous continuation summary:\n---\n", "\n---\n\nNewly")
    summary = extractive_summary(
        _record_views(archived), _previous_summary(previous), budget_tokens=budget_tokens
    )
    # A repair request lists the identifiers Scroll's validator found nowhere in the evidence
    # (Scroll escapes its records, so an identifier after a newline can read differently there):
    # a compliant model drops the claims that carry them.
    unsupported = [
        name.strip()
        for match in _UNSUPPORTED_RE.finditer(prompt)
        for name in match["ids"].split(",")
        if name.strip()
    ]
    seen: set[str] = set()

    def items(*keys: str) -> list[str]:
        kept = []
        for key in keys:
            for item in getattr(summary, key):
                line = " ".join(str(item).split())
                # Scroll rejects a summary with two equal items (case and spacing folded).
                folded = line.casefold()
                if not line or folded in seen or any(name in line for name in unsupported):
                    continue
                seen.add(folded)
                kept.append(line)
        return kept

    goal = " ".join(" ".join(str(item).split()) for item in summary.goal)
    for name in unsupported:
        goal = goal.replace(name, "")
    goal = goal.strip() or "Continue the archived conversation"
    lines = ["## Active Task", goal, "Status: in_progress"]
    for title, keys in (
        ("Current State", ("progress", "critical_context")),
        ("Constraints", ("constraints",)),
        ("Decisions", ("key_decisions",)),
        ("Open Work", ("next_steps",)),
    ):
        found = items(*keys)
        lines += ["", f"## {title}", *([f"- {item}" for item in found] or ["(none)"])]
    return "\n".join(lines)


def _message_text(msg: Any) -> str:
    content = msg.content
    if isinstance(content, str):
        return content
    return "\n".join(getattr(block, "text", "") or "" for block in content)


def _strings(value: Any, into: list[str]) -> None:
    """Every string in ``value`` (dicts, lists), except block types and ids."""
    if isinstance(value, str):
        if value:
            into.append(value)
    elif isinstance(value, dict):
        for key, item in value.items():
            if key not in ("type", "id", "media_type"):
                _strings(item, into)
    elif isinstance(value, list | tuple):
        for item in value:
            _strings(item, into)


def _history_strings(db: Path) -> list[str]:
    """Every string of Scroll's ``conversation_history`` rows (text, tool inputs, headlines,
    the serialized blocks)."""
    found: list[str] = []
    if not db.is_file():
        return found
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        rows = conn.execute(
            "SELECT content, tool_input, headline, blocks FROM conversation_history ORDER BY seq"
        ).fetchall()
    for content, tool_input, headline, blocks in rows:
        _strings([content, tool_input, headline], found)
        if blocks:
            try:
                _strings(json.loads(blocks), found)
            except json.JSONDecodeError:
                found.append(blocks)
    return found


def _file_strings(workspace: Path) -> list[str]:
    """The text files Scroll and QwenPaw left in the workspace (saved tool outputs, dialog),
    ``history.db`` apart (read by rows)."""
    found = []
    for path in sorted(workspace.rglob("*")):
        if not path.is_file() or path.name.startswith("history.db"):
            continue
        found.append(path.read_text(encoding="utf-8", errors="replace"))
    return found


class _Warnings(logging.Handler):
    """Collects Scroll's warnings (a failed summary, an overflow) for OUT.json."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        # Every fresh workspace gets Scroll's first-run notice: not a finding.
        if not message.startswith("scroll is now the DEFAULT"):
            self.messages.append(message.splitlines()[0][:300])


async def _replay(
    script: dict,
    window: int,
    trigger: float,
    reserve: float,
    summary_tokens: int,
    tmp: Path,
    reject_over_window: bool = False,
) -> dict:
    """One script through a ``QwenPawAgent`` with Scroll (see the module docstring)."""
    from types import SimpleNamespace

    from agentscope.agent import ReActConfig
    from agentscope.message import UserMsg
    from agentscope.tool import Toolkit
    from qwenpaw.agents.context.scroll.prompt import build_scroll_system_prompt
    from qwenpaw.agents.context.types import ContextWindowUnfitError
    from qwenpaw.agents.react_agent import QwenPawAgent
    from qwenpaw.config.config import AgentProfileConfig
    from qwenpaw.runtime.builder import AgentBuilder

    from agentscope_context_ext.testing import ScriptedChatModel

    outputs = {name: list(values) for name, values in script["outputs"].items()}
    replies = [[list(blocks) for blocks in turn[1]] for turn in script["turns"]]
    turn = [0]

    def is_summary(call: Any) -> bool:
        return (
            not call.tools
            and bool(call.msgs)
            and _message_text(call.msgs[0]).startswith(SUMMARY_SYSTEM)
        )

    rejected: set[int] = set()

    def respond(call: Any) -> Any:
        if reject_over_window and model.counter.count_formatted(call.messages, call.tools) > window:
            # What a provider answers a prompt over its window with (QwenPaw's overflow test
            # looks for the status and one of these phrases), so Scroll's recovery runs.
            rejected.add(call.index)
            return RuntimeError("Error code: 400 - maximum context length exceeded")
        if is_summary(call):
            return scroll_summary(_message_text(call.msgs[-1]), summary_tokens)
        return next_reply(replies[turn[0]])

    workspace = tmp / "workspace"
    workspace.mkdir(parents=True)
    config = AgentProfileConfig.model_validate(
        {
            "id": "b8",
            "name": "b8",
            "language": "en",
            "running": {
                "light_context_config": {
                    "strategy": "scroll",
                    "context_compact_config": {
                        "compact_threshold_ratio": trigger,
                        "reserve_threshold_ratio": reserve,
                    },
                }
            },
        }
    )
    model = ScriptedChatModel(respond, context_size=window)
    # The builder reads the workspace folder and the session from its request context.
    ctx = SimpleNamespace(
        workspace=SimpleNamespace(workspace_dir=workspace), session_id=script["name"] or "b8"
    )
    governor = AgentBuilder._init_governor(workspace)
    offloader = AgentBuilder._build_offloader(ctx, config)
    scroll = await AgentBuilder._build_scroll_components(ctx, config, model, offloader=offloader)
    if scroll is None:
        raise RuntimeError("QwenPaw did not wire Scroll (see its warnings above)")
    recall_tools: list[Any] = []
    AgentBuilder()._append_scroll_recall_tools(recall_tools, scroll, config, "b8", {}, governor)
    clash = {tool.name for tool in recall_tools} & set(outputs)
    if clash:
        raise ValueError(f"the transcript has tools named like Scroll's: {sorted(clash)}")
    manager = scroll.context_manager
    compactions: list[dict] = []
    compress = manager.compress

    async def recorded_compress(*args: Any, **kwargs: Any) -> None:
        # What each compress did (evicted messages, folded results), for the report.
        try:
            await compress(*args, **kwargs)
        finally:
            if any(manager.last_compress.values()):
                compactions.append({"call": len(model.calls), **manager.last_compress})

    manager.compress = recorded_compress
    agent = QwenPawAgent(
        name="b8",
        model=model,
        system_prompt=(script["system"] + "\n\n" + build_scroll_system_prompt("en")).strip(),
        toolkit=Toolkit(tools=[replayed_tool(name, outputs) for name in outputs] + recall_tools),
        react_config=ReActConfig(max_iters=1000),
        middlewares=AgentBuilder._build_middlewares(ctx, config),
        agent_config=config,
        workspace_dir=workspace,
        offloader=offloader,
        context_config=AgentBuilder._build_context_config(config),
        context_manager=manager,
        governor=governor,
    )
    errors: list[dict] = []
    for index, (text, _) in enumerate(script["turns"]):
        turn[0] = index
        try:
            await agent.reply(UserMsg("user", text))
        except ContextWindowUnfitError as exc:
            # The app shows this to the user and the turn ends: its remaining recorded
            # replies are never asked for.
            dropped = sum(1 for blocks in replies[index] if blocks)
            errors.append({"turn": index, "error": str(exc), "dropped_replies": dropped})
        except Exception as exc:
            # A rejection that Scroll's recovery could not undo ends the turn the same way.
            if not rejected or "Error code: 400" not in str(exc):
                raise
            dropped = sum(1 for blocks in replies[index] if blocks)
            errors.append({"turn": index, "error": str(exc), "dropped_replies": dropped})
    summary = manager.describe_summary()
    corpus: list[str] = []
    for msg in agent.state.context:
        _strings(msg.model_dump(mode="json").get("content"), corpus)
    await agent.close()  # closes history.db (and stops the governor)
    corpus += _history_strings(workspace / "history.db")
    corpus += _file_strings(workspace)
    if summary:
        corpus.append(summary)
    return {
        "name": script["name"],
        "calls": [
            {
                "summary": is_summary(call),
                "rejected": call.index in rejected,
                "messages": call.messages,
                "tools": call.tools or [],
            }
            for call in model.calls
        ],
        "corpus": corpus,
        "reachable_by_tools": [tool.name for tool in recall_tools],
        "summary": summary,
        "errors": errors,
        "compactions": compactions,
    }


def _quiet_qwenpaw(collector: _Warnings) -> None:
    """QwenPaw logs every compaction at INFO to stderr: keep stderr to the progress lines and
    collect Scroll's warnings instead."""
    root = logging.getLogger("qwenpaw")
    for handler in root.handlers:
        handler.setLevel(logging.ERROR)
    logging.getLogger("qwenpaw.agents.context").addHandler(collector)


def main(argv: Sequence[str] | None = None) -> int:
    """The runner: ``python -m bench.qwenpaw_side IN.json OUT.json`` in the QwenPaw venv.

    Args:
        argv (`Sequence[str] | None`): The arguments (default: the command line's).

    Returns:
        `int`: 0 once OUT.json is written.
    """
    parser = argparse.ArgumentParser(prog="python -m bench.qwenpaw_side", description=__doc__)
    parser.add_argument("source", type=Path, help="IN.json")
    parser.add_argument("target", type=Path, help="OUT.json")
    args = parser.parse_args(argv)
    payload = json.loads(args.source.read_text(encoding="utf-8"))
    window, trigger = int(payload["window"]), float(payload.get("trigger", TRIGGER))
    reserve = float(payload.get("reserve", RESERVE))
    summary_tokens = int(payload["summary_tokens"])
    reject = bool(payload.get("reject_over_window", False))
    with tempfile.TemporaryDirectory(prefix="qwenpaw-run-") as tmp:
        # Before QwenPaw is imported: its working dir (the governor's policy files) and log level.
        os.environ.setdefault("QWENPAW_WORKING_DIR", str(Path(tmp) / "qwenpaw-home"))
        os.environ.setdefault("QWENPAW_LOG_LEVEL", "warning")
        import qwenpaw  # noqa: F401  (sets up its logger)

        results = []
        for number, script in enumerate(payload["scripts"]):
            collector = _Warnings()
            _quiet_qwenpaw(collector)
            started = time.monotonic()
            run_dir = Path(tmp) / f"script-{number}"
            result = asyncio.run(
                _replay(script, window, trigger, reserve, summary_tokens, run_dir, reject)
            )
            logging.getLogger("qwenpaw.agents.context").removeHandler(collector)
            result["warnings"] = collector.messages
            results.append(result)
            summaries = sum(call["summary"] for call in result["calls"])
            print(
                f"  qwenpaw {number + 1}/{len(payload['scripts'])} {script['name']}: "
                f"{len(result['calls'])} calls, {summaries} summary calls, "
                f"{len(result['compactions'])} compactions, {len(result['errors'])} unfit turns, "
                f"{time.monotonic() - started:.1f} s",
                file=sys.stderr,
                flush=True,
            )
    args.target.write_text(json.dumps({"scripts": results}, ensure_ascii=False), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
