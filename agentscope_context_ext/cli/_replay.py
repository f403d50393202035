"""``agentscope-context replay TRANSCRIPT``: what the model would have seen, step by step."""

from __future__ import annotations

import asyncio
import logging
import sys
from pathlib import Path
from typing import TextIO
from urllib.parse import parse_qsl, urlencode

from ..core.config import ContextConfig
from ..core.workspace import is_storage_url
from ..replay import Curve, aggregate, load_transcripts, replay_transcript, write_report


def run_replay(
    transcript_path: Path,
    fmt: str,
    config: ContextConfig,
    max_input_tokens: int | None,
    out: Path,
    stream: TextIO | None = None,
    show: bool = False,
    workspace: str | None = None,
) -> dict:
    """Replay every conversation in the file, print progress, write the report; return the
    summary. With ``show`` (attached to AgentScope Studio), each replayed message is printed
    by the replay agent as the model saw it, with the compaction notices, so the replay is a
    run in Studio; AgentScope's warnings then stay visible."""
    stream = stream or sys.stdout
    # AgentScope's formatters log every thinking block of Claude Code transcripts they skip.
    logging.getLogger("as").setLevel(logging.WARNING if show else logging.ERROR)
    transcripts = load_transcripts(transcript_path, fmt)
    print(
        f"replaying {transcript_path.name}: {len(transcripts)} conversation(s), "
        f"window {max_input_tokens or config.max_input_tokens or 'from the model table'}",
        file=stream,
        flush=True,
    )
    results = []
    for index, transcript in enumerate(transcripts, start=1):
        part = f"{index:04d}" if len(transcripts) > 1 else ""
        target = _conversation_workspace(workspace or str(out / "workspace"), part)
        result = asyncio.run(
            replay_transcript(transcript, config, target, max_input_tokens, show=show)
        )
        results.append(result)
        summary = result.summary()
        if len(transcripts) == 1 or index % 20 == 0 or index == len(transcripts):
            print(
                f"  [{index}/{len(transcripts)}] {transcript.name}: {summary['steps']} steps, peak "
                f"{summary['peak_prompt_tokens']:,} tokens, {summary['compactions']} compaction(s), "
                f"{summary['pair_violations']} pair violation(s)",
                file=stream,
                flush=True,
            )
    rows = [r.summary() for r in results]
    total = aggregate(rows)
    curves = [
        Curve(r.name, [s.prompt_tokens for s in r.steps], _compaction_steps(r.steps))
        for r in results
    ]
    window, trigger = results[0].max_input_tokens, results[0].trigger_tokens
    paths = write_report(
        out,
        f"replay of {transcript_path.name}",
        total,
        curves,
        window,
        trigger,
        rows=rows if len(rows) > 1 else (),
        details={
            "per_step_tokens": [c.tokens for c in curves] if len(curves) > 1 else curves[0].tokens
        },
    )
    _print_summary(total, stream)
    print("report: " + ", ".join(str(p) for p in paths.values()), file=stream, flush=True)
    return total


def _conversation_workspace(workspace: str, part: str) -> Path | str:
    """One conversation's workspace: a sub-folder, or (Redis) a key prefix of its own."""
    if not is_storage_url(workspace):
        return Path(workspace) / part
    if not part:
        return workspace
    base, _, query = workspace.partition("?")
    options = dict(parse_qsl(query))
    options["prefix"] = f"{options.get('prefix', 'ace')}-{part}"
    return f"{base}?{urlencode(options)}"


def _compaction_steps(steps) -> list[int]:
    marks, previous = [], 0
    for record in steps:
        if record.compactions > previous:
            marks.append(record.step)
        previous = record.compactions
    return marks


def _print_summary(total: dict, stream: TextIO) -> None:
    keys = (
        "steps",
        "peak_prompt_tokens",
        "mean_prompt_tokens",
        "max_input_tokens",
        "over_window",
        "compactions",
        "truncations",
        "retruncations",
        "bytes_offloaded",
        "pair_violations",
        "prefix_stability",
        "recoverable",
        "hook_seconds",
    )
    print("", file=stream)
    print("| figure | value |\n|---|---:|", file=stream)
    for key in keys:
        print(f"| {key} | {total.get(key)} |", file=stream)
