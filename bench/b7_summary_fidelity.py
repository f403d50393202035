"""B7 - summary fidelity: our summary at Claude Code's own compaction point, against Claude
Code's summary.

For every shared Claude Code session with a ``compact_boundary``: the conversation before the
boundary is replayed through the installed AgentScope's agent (default configuration,
extractive summaries) at the largest window that compacts it at all (one compaction, as late as
possible). Of the identifiers of Claude Code's summary (inline code and file paths, ``summary_identifiers``) that occur in the
messages we compacted, we report the share our summary keeps, the share the compaction model's
input keeps, and the share ``search_dialog`` finds; and both summaries' lengths.

Targets: summary >= 85% (goal 90%) at <= Claude Code's length in characters; model input
>= 97%; search 100%.

``python -m bench.b7_summary_fidelity --base-url URL --model NAME [--api-key KEY] [--quick]``
(or ``--agent FILE``: the model of an agent file, its ``model.compat``, options and key, and its
``compaction.summary_timeout_seconds`` and ``summary_output_tokens``) scores a *model-written*
summary instead: the scored replay's compaction asks that model on any
OpenAI-compatible server (vLLM, llama.cpp, Ollama's ``/v1``) with the package's own summary
prompt, while the conversation is still played from the recording. The window is found with the
extractive summary first (when compaction triggers does not depend on the summary's text), so
the model is called for the one scored compaction per session only. A summary the package wrote
by extraction because the model's answers failed is marked so, and is not a model-written score.
Without the flags the module runs the extractive B7, as ``python -m bench --only B7`` does. Exit
status: 0 target met, 1 not met, 2 an error (one ``error:`` line: the server cannot be reached,
answers an HTTP error, or answers with no summary the package can parse).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from collections.abc import Callable
from typing import Any

from agentscope_context_ext import ContextConfig
from agentscope_context_ext.adapter import installed
from agentscope_context_ext.agentfile import build_model
from agentscope_context_ext.core.agent_file import ModelSettings, load_agent_file
from agentscope_context_ext.core.errors import ConfigError
from agentscope_context_ext.core.messages import Message, Text
from agentscope_context_ext.core.model_servers import server_mismatch
from agentscope_context_ext.core.pipeline import SummaryWriter
from agentscope_context_ext.core.tokens import get_token_counter
from agentscope_context_ext.replay import (
    claude_code_compactions,
    claude_code_records,
    latest_single_compaction,
    summary_fidelity,
)

from . import b7_other_transcripts
from ._data import transcripts_dir

TITLE = "summary fidelity at Claude Code's own compaction point"

API_KEY_ENV = "ACE_B7_API_KEY"
"""Where ``--api-key`` is put: the package's model builder reads keys from the environment
only (an agent file never holds one)."""

_ANSWER_FAILURES = ("unusable answer", "empty answer", "the answer repeats the input")
"""``SummaryWriter``'s reasons for an answer it cannot use (any other reason is an error)."""


class ModelFailed(Exception):
    """The compaction model cannot be used: one line saying why."""


def model_settings(base_url: str, model: str, api_key: str | None = None) -> ModelSettings:
    """The OpenAI-compatible model the model-written B7 asks, as an agent file would name it.

    Args:
        base_url (`str`): The server's OpenAI-compatible base URL (``http://host:port/v1``).
        model (`str`): The model name, as the server spells it.
        api_key (`str | None`): The server's key (local servers need none); put in
            :data:`API_KEY_ENV` of this process.

    Raises:
        `ModelFailed`: ``base_url`` is not an http(s) URL, or the model name is empty.
    """
    if api_key:
        os.environ[API_KEY_ENV] = api_key
    try:
        return ModelSettings(
            provider="openai-compatible",
            model=model,
            base_url=base_url,
            api_key_env=API_KEY_ENV if api_key else None,
        )
    except ValueError as exc:  # pydantic's: the first problem, on one line
        raise ModelFailed(" ".join(str(exc).split())[:300]) from None


def agent_file_settings(path: str) -> tuple[ModelSettings, ContextConfig]:
    """The model of the agent file at ``path`` and the configuration B7 replays with: the
    default one, with the agent file's limits of the summary call.

    Raises:
        `ModelFailed`: The file cannot be read or is not a valid agent file (one line).
    """
    try:
        spec = load_agent_file(path)
    except ConfigError as exc:
        raise ModelFailed(str(exc)) from None
    limits = {
        key: getattr(spec.context.compaction, key)
        for key in ("summary_timeout_seconds", "summary_output_tokens")
    }
    return spec.model, ContextConfig.model_validate({"compaction": limits})


def run(
    quick: bool = False,
    *,
    model: ModelSettings | None = None,
    config: ContextConfig | None = None,
    progress: Callable[[str], None] | None = None,
) -> dict:
    """Measure and return the B7 record.

    Args:
        quick (`bool`): Bisect the window to 3% instead of 1%.
        model (`ModelSettings | None`): The model that writes the scored summaries (see
            :func:`model_settings`, :func:`agent_file_settings`); ``None``: the extractive
            summary (B7 as ``python -m bench`` runs it).
        config (`ContextConfig | None`): The configuration of the model-written replays
            (default: the default one).
        progress (`Callable[[str], None] | None`): Receives a line per step (which session,
            the model call happening).

    Raises:
        `ModelFailed`: ``model`` cannot be used (unreachable, an HTTP error, answers that are
            not a summary), or it wrote none of the summaries.
    """
    if model is not None:
        return _run_with_model(
            quick, model, config or ContextConfig(), progress or (lambda line: None)
        )
    logging.getLogger("as").setLevel(logging.ERROR)
    # the bisection probes windows far too small on purpose: their refusals are expected
    logging.getLogger("agentscope_context_ext").setLevel(logging.CRITICAL)
    rows = []
    for path in sorted((transcripts_dir() / "claude-code").glob("*.jsonl")):
        for index, point in enumerate(claude_code_compactions(path)):
            if progress is not None:
                progress(
                    f"B7 {path.name[:8]}#{index + 1}: finding the window, replaying (extractive)"
                )
            messages = claude_code_records(path, until_line=point.line)
            result = asyncio.run(
                summary_fidelity(
                    f"{path.name[:8]}#{index + 1}",
                    messages,
                    point.summary,
                    ContextConfig(),
                    precision=0.03 if quick else 0.01,
                )
            )
            rows.append(result.as_dict())
    met = bool(rows) and all(
        r["summary_share"] >= 0.85
        and r["summary_chars"] <= r["reference_chars"]
        and r["input_share"] >= 0.97
        and r["search_share"] == 1.0
        for r in rows
    )
    # Without a reference summary: the names the rest of each conversation uses again (Claude
    # Code, SWE-agent, tau-bench), so a change that raises the two sessions above is seen to
    # generalise or not. Reported beside the target, not part of it.
    if progress is not None:
        progress("B7 other transcripts: names used again after the compaction")
    others = b7_other_transcripts.run(quick=quick)
    return {
        "id": "B7",
        "what": TITLE,
        "rows": rows,
        "worst_summary_share": min((r["summary_share"] for r in rows), default=0.0),
        "worst_input_share": min((r["input_share"] for r in rows), default=0.0),
        "worst_search_share": min((r["search_share"] for r in rows), default=0.0),
        "other_transcripts": others,
        "target": "summary >= 85% at <= Claude Code's length; model input >= 97%; search 100%",
        "target_met": met,
    }


def table(record: dict) -> str:
    """The record as Markdown; a model-written run has a *summary by* column."""
    by_model = "model" in record
    lines = [
        "| session | window | compacted | identifiers | in summary | in model input | found by search "
        "| summary chars (ours / CC) | summary tokens (ours / CC) |"
        + (" summary by |" if by_model else ""),
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|" + ("---|" if by_model else ""),
    ]
    if by_model:
        lines.insert(0, f"Summaries written by `{record['model']}` at {record['base_url']}.\n")
    for r in record["rows"]:
        lines.append(
            f"| {r['transcript']} | {r['window']:,} | {r['compacted_messages']} of {r['total_messages']} "
            f"| {r['identifiers']} | {r['summary_share']:.1%} | {r['input_share']:.1%} | {r['search_share']:.1%} "
            f"| {r['summary_chars']:,} / {r['reference_chars']:,} | {r['summary_tokens']:,} / {r['reference_tokens']:,} |"
            + (f" {_summary_by(r)} |" if by_model else "")
        )
    missing = [
        f"- {r['transcript']}: {', '.join(f'`{m}`' for m in r['missing_from_summary'])}"
        for r in record["rows"]
        if r["missing_from_summary"]
    ]
    if missing:
        lines += ["", "Not in our summary (still in the saved dialog):", *missing]
    if record.get("other_transcripts"):
        lines += [
            "",
            f"{b7_other_transcripts.TITLE} (no target):",
            "",
            b7_other_transcripts.table(record["other_transcripts"]),
        ]
    return "\n".join(lines)


def _summary_by(row: dict) -> str:
    if row["summary_by"] == "model":
        return f"the model ({row['model_attempts']} call(s))"
    if row["summary_by"] == "extractive":
        return (
            f"**extraction**: {row['model_failures']} of {row['model_attempts']} model "
            "call(s) failed (not a model score)"
        )
    return "**nothing compacted** (not a model score)"


def _run_with_model(
    quick: bool, settings: ModelSettings, config: ContextConfig, progress: Callable[[str], None]
) -> dict:
    logging.getLogger("as").setLevel(logging.ERROR)
    logging.getLogger("agentscope_context_ext").setLevel(logging.CRITICAL)
    # The openai client's retries log each failed attempt; the one error line says why.
    logging.getLogger("openai").setLevel(logging.CRITICAL)
    logging.getLogger("httpx").setLevel(logging.WARNING)
    # One event loop for every call: the model's HTTP client belongs to the loop it first ran in.
    rows = asyncio.run(_model_rows(quick, settings, config, progress))
    written = [r for r in rows if r["summary_by"] == "model"]
    if rows and not written:
        calls = sum(r["model_attempts"] for r in rows)
        raise ModelFailed(
            f"the model {settings.model} at {settings.base_url} wrote none of the {len(rows)} "
            f"summaries in {calls} call(s) (the package fell back to the extractive summary)"
        )
    met = (
        bool(rows)
        and len(written) == len(rows)
        and all(
            r["summary_share"] >= 0.85
            and r["summary_chars"] <= r["reference_chars"]
            and r["input_share"] >= 0.97
            and r["search_share"] == 1.0
            for r in rows
        )
    )
    return {
        "id": "B7",
        "what": f"{TITLE}, the summary written by {settings.model}",
        "model": settings.model,
        "base_url": settings.base_url,
        "rows": rows,
        "model_written": len(written),
        # only the model's own summaries count: a fallback row measures the extractive summary
        "worst_summary_share": min((r["summary_share"] for r in written), default=0.0),
        "worst_input_share": min((r["input_share"] for r in rows), default=0.0),
        "worst_search_share": min((r["search_share"] for r in rows), default=0.0),
        "target": "summary >= 85% at <= Claude Code's length; model input >= 97%; search 100%; "
        "every summary written by the model",
        "target_met": met,
    }


async def _model_rows(
    quick: bool, settings: ModelSettings, config: ContextConfig, progress: Callable[[str], None]
) -> list[dict]:
    try:
        model, formatter = build_model(settings)
    except ConfigError as exc:
        raise ModelFailed(str(exc)) from None
    # Before the data and the long replays: a server that cannot do it fails in seconds.
    progress(f"B7: asking {settings.model} at {settings.base_url} for a test summary")
    await check_model(model, formatter, settings, config)
    points = [
        (f"{path.name[:8]}#{index + 1}", path, point)
        for path in sorted((transcripts_dir() / "claude-code").glob("*.jsonl"))
        for index, point in enumerate(claude_code_compactions(path))
    ]
    rows = []
    for name, path, point in points:
        messages = claude_code_records(path, until_line=point.line)
        progress(f"B7 {name}: finding the window with the extractive summary")
        window = await latest_single_compaction(messages, config, precision=0.03 if quick else 0.01)
        progress(f"B7 {name}: window {window:,}; replaying, {settings.model} writes the summary")
        result = await summary_fidelity(
            name,
            messages,
            point.summary,
            config,
            window=window,
            compaction_model=model,
            compaction_formatter=formatter,
        )
        by = "model" if result.model_written else (result.summary_source or "nothing")
        progress(
            f"B7 {name}: summary by {'the model' if by == 'model' else by} "
            f"({result.model_attempts} call(s), {result.model_failures} failed)"
        )
        rows.append(
            {
                **result.as_dict(),
                "summary_by": by,
                "model_attempts": result.model_attempts,
                "model_failures": result.model_failures,
            }
        )
    return rows


async def check_model(
    model: Any, formatter: Any, settings: ModelSettings, config: ContextConfig | None = None
) -> None:
    """Ask the model for the summary of a two-message conversation, through the package's own
    ``SummaryWriter`` (its prompt, its parser): fails fast, before the long replays, when the
    server cannot be reached, answers an HTTP error, or answers with no usable summary.

    Args:
        model: The installed AgentScope's chat model (``build_model(settings)[0]``).
        formatter: Its formatter (``build_model(settings)[1]``).
        settings (`ModelSettings`): What it was built from (for the messages).
        config (`ContextConfig | None`): The summary call's limits (default: the defaults).

    Raises:
        `ModelFailed`: Why the model cannot write the summaries, in one line.
    """
    limits = (config or ContextConfig()).compaction
    writer = SummaryWriter(
        installed.model_call(model, formatter, max_tokens=limits.summary_output_cap(8192)),
        get_token_counter("qwen"),
        max_input_tokens=8192,
        budget_tokens=1024,
        timeout=limits.summary_timeout_seconds,
    )
    conversation = [
        Message("b7-check-1", "user", parts=(Text("Rename `parse_config` in lib/config.py."),)),
        Message(
            "b7-check-2",
            "assistant",
            parts=(Text("Renamed it to `load_config` in lib/config.py; `pytest -q` passes."),),
        ),
    ]
    result = await writer.summarize(conversation, None)
    if result.summary.source == "llm":
        return
    where = f"the model {settings.model} at {settings.base_url}"
    failure = " ".join((result.failures or ["no answer"])[-1].split())
    if failure in _ANSWER_FAILURES:
        raise ModelFailed(
            f"{where} answered with no summary the package can parse ({failure}, "
            f"{result.attempts} attempt(s)); it needs a Goal section and two more of its sections"
        )
    # An error: a server that speaks another API says more than the client's exception.
    mismatch = await asyncio.to_thread(
        server_mismatch, settings, installed.MODEL_APIS[settings.provider]
    )
    raise ModelFailed(mismatch or f"{where} failed: {failure}")


def main(argv: list[str] | None = None) -> int:
    """``python -m bench.b7_summary_fidelity``: print the B7 table; 0 met, 1 not met, 2 error."""
    parser = argparse.ArgumentParser(
        prog="python -m bench.b7_summary_fidelity",
        description=f"B7 - {TITLE}: the extractive summary, or with --base-url and --model the "
        "summary an OpenAI-compatible server's model writes (vLLM, llama.cpp, Ollama's /v1).",
    )
    parser.add_argument("--quick", action="store_true", help="bisect the window to 3%%, not 1%%")
    parser.add_argument("--base-url", help="the server's OpenAI-compatible URL, e.g. .../v1")
    parser.add_argument("--model", help="the model name, as the server spells it")
    parser.add_argument("--api-key", help="the server's key (local servers need none)")
    parser.add_argument(
        "--agent",
        help="an agent file: its model (compat, options, key) and its summary call's limits",
    )
    args = parser.parse_args(argv)
    if args.agent and (args.base_url or args.model or args.api_key):
        parser.error("--agent says the model: not with --base-url, --model or --api-key")
    if bool(args.base_url) != bool(args.model):
        parser.error("--base-url and --model go together")
    if args.api_key and not args.base_url:
        parser.error("--api-key needs --base-url and --model")

    def progress(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    try:
        config = None
        if args.agent:
            settings, config = agent_file_settings(args.agent)
        elif args.base_url:
            settings = model_settings(args.base_url, args.model, args.api_key)
        else:
            settings = None
        record = run(args.quick, model=settings, config=config, progress=progress)
    except ModelFailed as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except SystemExit as exc:  # transcripts_dir(): the shared data is missing
        if isinstance(exc.code, str):
            print(f"error: {exc.code}", file=sys.stderr)
            return 2
        raise
    print(table(record))
    outcome = "met" if record["target_met"] else "NOT met"
    print(f"\ntarget: {record['target']} -> {outcome}")
    return 0 if record["target_met"] else 1


if __name__ == "__main__":
    sys.exit(main())
