"""Running one B12 scenario: an agent file made from ``configs/agents/llama-cpp.yaml``, one
``agentscope-context chat`` process fed the scenario's lines, and its row: what ``chat`` printed
and exited with, and what the recording proxy saw (``_exchanges.py``)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from ._exchanges import ENTITY_RE, count_rows, count_summary, tally

SHIPPED = Path(__file__).resolve().parent.parent / "configs" / "agents" / "llama-cpp.yaml"
"""The agent file the README's "Local models" runs: every scenario starts from it."""


@dataclass(frozen=True)
class Scenario:
    """One ``chat`` process: its agent file's model settings and the lines it is fed."""

    name: str
    what: str
    stream: bool
    compat: dict | str | None
    """The agent file's ``model.compat``: ``shipped`` (as ``configs/agents/llama-cpp.yaml``
    has it), ``None`` (no such section: the defaults) or a mapping."""
    inputs: tuple[str, ...]
    command: str = "chat"
    """Which runner drives it (:data:`RUNNERS`)."""
    summary_timeout: float | None = None
    """``compaction.summary_timeout_seconds`` (``None``: the shipped file's)."""
    in_target: bool = True
    """``False``: a scenario whose failure is expected (reported, not in the target)."""


@dataclass
class Setup:
    """What the scenarios run against."""

    url: str
    model: str
    n_ctx: int
    project: Path
    max_iters: int
    memory: bool
    """Long-term memory on (its Summarizer queues on the single-slot server: the full run)."""
    summary_can: tuple[bool, str] = (True, "")


def agent_file(setup: Setup, scenario: Scenario, workspace: Path) -> dict:
    """The shipped agent file (``configs/agents/llama-cpp.yaml``) pointed at the proxy, the
    project and a workspace of the scenario's own; its model settings as the scenario says."""
    spec = yaml.safe_load(SHIPPED.read_text(encoding="utf-8"))
    model = spec["model"]
    model.update(model=setup.model, base_url=setup.url, stream=scenario.stream)
    model["options"] = {**model.get("options", {}), "temperature": 0.0}
    if scenario.compat is None:
        model.pop("compat", None)
    elif scenario.compat != "shipped":
        model["compat"] = scenario.compat
    spec["tools"] = {"explorer": {"roots": [str(setup.project)]}}
    spec["max_iters"] = setup.max_iters
    spec["context"] = {
        **spec.get("context", {}),
        "workspace": str(workspace),
        # the server fits the prompt and the answer cap in --n_ctx (as the shipped file)
        "max_input_tokens": setup.n_ctx - int(model["options"].get("max_tokens") or 0),
        "long_term_memory": {"enabled": setup.memory},
    }
    if scenario.summary_timeout is not None:
        compaction = spec["context"].setdefault("compaction", {})
        compaction["summary_timeout_seconds"] = scenario.summary_timeout
    return spec


def _chat_command() -> list[str]:
    script = Path(sys.executable).with_name("agentscope-context")
    if script.is_file():
        return [str(script)]
    return [
        sys.executable,
        "-c",
        "import sys; from agentscope_context_ext.cli import main; sys.exit(main())",
    ]


_NOTICE_RE = re.compile(r"summary by (the model|extraction)(?: \(the model: (.*)\))?\.")
_ERROR_RE = re.compile(r"token count error ([+-][\d.]+)%")


def _answers(out: str) -> list[str]:
    """The agent's answers as ``chat`` printed them (``assistant: ...`` up to the next line
    ``chat`` prints itself)."""
    answers: list[str] = []
    current: list[str] | None = None
    for line in out.splitlines():
        if line.startswith("assistant:"):
            if current is not None:
                answers.append("\n".join(current))
            current = [line[len("assistant:") :].strip()]
        elif line.startswith(("[context]", "context stats:", "chatting with")):
            if current is not None:
                answers.append("\n".join(current))
            current = None
        elif current is not None:
            current.append(line)
    if current is not None:
        answers.append("\n".join(current))
    return answers


def run_chat_scenario(
    setup: Setup, scenario: Scenario, folder: Path, proxy: Any, timeout: float
) -> dict:
    """One ``chat`` process fed the scenario's lines; its row (:func:`scenario_row`)."""
    workspace = folder / scenario.name / "workspace"
    workspace.mkdir(parents=True)
    agent_path = folder / scenario.name / "agent.yaml"
    agent_path.write_text(yaml.safe_dump(agent_file(setup, scenario, workspace), sort_keys=False))
    first = proxy.count()
    started = time.perf_counter()
    try:
        done = subprocess.run(
            [*_chat_command(), "chat", "--agent", str(agent_path), "--session", scenario.name],
            input="\n".join(scenario.inputs) + "\n",
            capture_output=True,
            text=True,
            timeout=timeout,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
            cwd=folder,
        )
        code, out, err = done.returncode, done.stdout, done.stderr
    except subprocess.TimeoutExpired as exc:
        code = -1
        out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else exc.stdout or ""
        err = f"chat did not finish in {timeout:g}s"
    seconds = time.perf_counter() - started
    (folder / scenario.name / "chat.out").write_text(out + "\n--- stderr ---\n" + err)
    error = _ERROR_RE.search(out)
    return scenario_row(
        setup,
        scenario,
        proxy.since(first),
        Ran(
            exit=code,
            seconds=seconds,
            answers=_answers(out),
            notices=out,
            reported_empty=sum(
                1
                for line in err.splitlines()
                if line.startswith("[error]") and "answered nothing" in line
            ),
            last_error=next((line for line in reversed(err.splitlines()) if line.strip()), ""),
            traceback="Traceback" in err,
            count_error=float(error.group(1)) / 100 if error else None,
        ),
        [workspace],
    )


@dataclass
class Ran:
    """What one scenario's process did, as its runner read it."""

    exit: int
    """Its exit code (-1: it did not finish in time)."""
    seconds: float
    answers: list[str]
    """The agent's answers, one a turn."""
    notices: str
    """The text holding the package's notices (``summary by ...``)."""
    reported_empty: int
    """Empty answers reported as errors."""
    last_error: str
    traceback: bool
    count_error: float | None = None
    """The token count error ``chat`` reported at its end."""


def scenario_row(
    setup: Setup, scenario: Scenario, exchanges: list[Any], ran: Ran, folders: list[Path]
) -> dict:
    """A scenario's row: what its process did (``ran``) and what the proxy saw
    (``exchanges``); ``folders`` are searched for the summary.md and Memory.md it wrote."""
    from agentscope_context_ext import get_token_counter

    found = tally(exchanges)
    silent = sum(1 for a in ran.answers if not a.strip()) if ran.exit == 0 else 0
    notices = [m.groups() for m in _NOTICE_RE.finditer(ran.notices)]
    compactions = [
        {"by": "model" if by == "the model" else "extraction", "why": why or ""}
        for by, why in notices
    ]
    files = [
        path
        for folder in folders
        for name in ("summary.md", "Memory.md")
        for path in sorted(folder.rglob(name))
    ]
    entity_files = sorted(
        {f.name for f in files if ENTITY_RE.search(f.read_text(errors="replace"))}
    )
    counter = get_token_counter("auto", model_name=setup.model)
    rows = count_rows(exchanges, counter)
    record = {
        "scenario": scenario.name,
        "what": scenario.what,
        "command": scenario.command,
        "in_target": scenario.in_target,
        "exit": ran.exit,
        "seconds": round(ran.seconds, 1),
        "turns": len(scenario.inputs),
        "answers": len(ran.answers),
        "silent_empty_answers": silent,
        "empty_answers_reported": ran.reported_empty,
        "compactions": compactions,
        "entities_in_files": entity_files,
        "chat_token_count_error": ran.count_error,
        "count": count_summary(rows),
        "count_by_kind": {
            what: count_summary([r for r in rows if r["kind"] == what])
            for what in sorted({r["kind"] for r in rows})
        },
        "summary_timeout_seconds": agent_file(setup, scenario, folders[0])["context"]
        .get("compaction", {})
        .get("summary_timeout_seconds", 120.0),
        "last_error_line": ran.last_error[:300] if ran.exit != 0 else "",
        "traceback": ran.traceback,
        **found,
    }
    record["met"] = _met(record, scenario, setup)
    return record


def _met(record: dict, scenario: Scenario, setup: Setup) -> bool | None:
    """The scenario's part of the target (``None``: not in it)."""
    if not scenario.in_target:
        return None
    can_summarise, _ = setup.summary_can
    model_failures = ("unusable answer", "empty answer", "the answer repeats the input")
    summaries_ok = all(
        c["by"] == "model"
        or c["why"].startswith("TimeoutError")
        or (not can_summarise and c["why"] in model_failures)
        for c in record["compactions"]
    )
    ended_well = record["exit"] == 0 or (record["exit"] == 1 and record["empty_answers_reported"])
    return (
        not record["http_errors"]
        and record["silent_empty_answers"] == 0
        and summaries_ok
        and ended_well
        and not record["traceback"]
    )
