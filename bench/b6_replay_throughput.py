"""B6 - hook cost per step (restated 2026-12-06), on either AgentScope major.

The largest shared transcripts are replayed through the installed major's replayer
(``replay_transcript``: on 1.x the hooks on a ``ReActAgent``, on 2.x a real ``Agent`` with
``ContextMiddleware``) at 32k and 128k windows: the largest file (tau-bench, 200 trajectories)
and the longest single conversation (the largest Claude Code session). Each replayed step
carries the hook seconds spent for it (``StepRecord.hook_seconds``): on 1.x ``pre_reasoning``
(the step's ``post_acting``, stage one of its tool results, is only in the replay's total); on
2.x everything the middleware timed since the previous model call (``on_acting``'s stage one of
the step's results and ``on_compress_context``'s pipeline). A step *with a compaction* is one
whose compaction count went up (the compaction ran in its hooks).

Reported per transcript and window: hook milliseconds per step, median and p99, for steps
without a compaction and steps with one; and the old figure, the hooks' share of the replay's
wall time (the replay against a zero-latency scripted model: what it measured was mostly how
cheap the rest of the replay is, hence the restatement). Each figure is the median over the
runs (three, one with ``--quick``, which also replays only the first 40 trajectories).

Target: steps without a compaction, p99 < 10 ms at 128k (1% of a 1 s model call), on both
majors: judged on every transcript at 128k on the installed major.
"""

from __future__ import annotations

import asyncio
import logging
import statistics
import tempfile
import time
from pathlib import Path

from agentscope_context_ext import ContextConfig
from agentscope_context_ext.replay import load_transcripts, replay_transcript

from ._data import shared_files
from ._major import agentscope_version

TITLE = "hook cost per step: the largest shared transcripts, median and p99 (32k / 128k)"
WINDOWS = (32768, 131072)
TARGET_MS = 10.0
TARGET = f"steps without a compaction: hook p99 < {TARGET_MS:g} ms at 128k"


def percentile(values: list[float], share: float) -> float:
    """The ``share`` quantile of ``values`` (nearest rank: a value that occurred)."""
    ordered = sorted(values)
    rank = max(1, -(-len(ordered) * share // 1))  # ceil(n * share), at least the first
    return ordered[int(rank) - 1]


def _split(steps: list) -> tuple[list[float], list[float]]:
    """Hook seconds of the steps without and with a compaction (refused calls left out)."""
    plain: list[float] = []
    compacting: list[float] = []
    before = 0
    for step in steps:
        if not step.refused:
            (compacting if step.compactions > before else plain).append(step.hook_seconds)
        before = step.compactions
    return plain, compacting


def _stats(values: list[float]) -> dict:
    if not values:
        return {"steps": 0, "median_ms": None, "p99_ms": None, "max_ms": None}
    return {
        "steps": len(values),
        "median_ms": round(statistics.median(values) * 1000, 3),
        "p99_ms": round(percentile(values, 0.99) * 1000, 3),
        "max_ms": round(max(values) * 1000, 3),
    }


def _one_run(transcripts: list, window: int) -> dict:
    plain: list[float] = []
    compacting: list[float] = []
    hook_seconds = replay_seconds = 0.0
    for transcript in transcripts:
        with tempfile.TemporaryDirectory() as workspace:
            result = asyncio.run(
                replay_transcript(
                    transcript, ContextConfig(), Path(workspace), window, check_recovery=False
                )
            )
        without, with_ = _split(result.steps)
        plain += without
        compacting += with_
        hook_seconds += result.seconds_hooks
        replay_seconds += result.seconds_total
    return {
        "without": _stats(plain),
        "with": _stats(compacting),
        "hook_seconds": hook_seconds,
        "replay_seconds": replay_seconds,
        "hook_share": hook_seconds / replay_seconds if replay_seconds else 0.0,
    }


def _median_of(runs: list[dict], *keys: str) -> float | None:
    values = []
    for run in runs:
        value = run
        for key in keys:
            value = value[key]
        if value is not None:
            values.append(value)
    return round(statistics.median(values), 4) if values else None


def run(quick: bool = False) -> dict:
    """Measure and return the B6 record."""
    logging.getLogger("as").setLevel(logging.ERROR)
    files = shared_files()
    largest = max(files, key=lambda p: p.stat().st_size)
    longest = max((p for p in files if p.suffix == ".jsonl"), key=lambda p: p.stat().st_size)
    repeats = 1 if quick else 3
    parsed = {}
    for path in (largest, longest):
        started = time.perf_counter()
        transcripts = load_transcripts(path)[: 40 if quick else None]
        parsed[path] = (transcripts, time.perf_counter() - started)
    cases = [(path, window) for path in (largest, longest) for window in WINDOWS]
    runs: dict[tuple, list[dict]] = {case: [] for case in cases}
    # Rounds interleave the cases (A B C D A B C D ...): a noisy moment hits all of them.
    for _ in range(repeats):
        for path, window in cases:
            runs[(path, window)].append(_one_run(parsed[path][0], window))
    rows = []
    for (path, window), samples in runs.items():
        row = {
            "transcript": path.name,
            "conversations": len(parsed[path][0]),
            "window": window,
            "runs": len(samples),
            "parse_seconds": round(parsed[path][1], 3),
            "replay_seconds": _median_of(samples, "replay_seconds"),
            "hook_seconds": _median_of(samples, "hook_seconds"),
            "hook_share": _median_of(samples, "hook_share"),
        }
        for kind in ("without", "with"):
            row[f"{kind}_compaction"] = {
                "steps": samples[0][kind]["steps"],
                **{
                    key: _median_of(samples, kind, key) for key in ("median_ms", "p99_ms", "max_ms")
                },
            }
        rows.append(row)
    judged = [r["without_compaction"]["p99_ms"] for r in rows if r["window"] == max(WINDOWS)]
    worst = max(value for value in judged if value is not None)
    return {
        "id": "B6",
        "what": TITLE,
        "agentscope_version": agentscope_version(),
        "rows": rows,
        "worst_p99_ms_without_compaction_128k": worst,
        "target": TARGET,
        "target_met": worst < TARGET_MS,
    }


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def table(record: dict) -> str:
    lines = [
        f"AgentScope {record.get('agentscope_version', '?')}",
        "",
        "| transcript | window | steps without / with a compaction | without: median (ms) "
        "| without: p99 (ms) | with: median (ms) | with: p99 (ms) | replay (s) | hooks (s) "
        "| hooks share |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in record["rows"]:
        plain, compacting = r["without_compaction"], r["with_compaction"]
        lines.append(
            f"| {r['transcript']} | {r['window']:,} | {plain['steps']:,} / {compacting['steps']} "
            f"| {_ms(plain['median_ms'])} | {_ms(plain['p99_ms'])} "
            f"| {_ms(compacting['median_ms'])} | {_ms(compacting['p99_ms'])} "
            f"| {r['replay_seconds']:.2f} | {r['hook_seconds']:.3f} | {r['hook_share']:.1%} |"
        )
    return "\n".join(lines)
