"""B6 - replay throughput: the whole replay of the largest shared transcript, and the share of
its wall time spent in the hooks beyond import and parsing. Target: hooks < 5% of the replay.
Each row is the median of three interleaved runs (one with ``--quick``).

The replay itself formats and counts the full prompt at every step (to report what the model
would have seen); that measuring is the replay's work, not the hooks'. The hooks are the
``pre_reasoning`` and ``post_acting`` calls, timed inside the replay."""

from __future__ import annotations

import asyncio
import logging
import tempfile
import time
from pathlib import Path

from agentscope_context_ext import ContextConfig
from agentscope_context_ext.replay import load_transcripts, replay_transcript

from ._data import shared_files

TITLE = "replay throughput: the largest shared file and the longest conversation"


def run(quick: bool = False) -> dict:
    """Measure and return the B6 record."""
    logging.getLogger("as").setLevel(logging.ERROR)
    largest = max(shared_files(), key=lambda p: p.stat().st_size)
    longest = max(
        (p for p in shared_files() if p.suffix == ".jsonl"), key=lambda p: p.stat().st_size
    )
    repeats = 1 if quick else 3
    cases = [(largest, 32768), (largest, 131072), (longest, 32768), (longest, 131072)]
    parsed = {}
    for path in {largest, longest}:
        started = time.perf_counter()
        parsed[path] = (load_transcripts(path), time.perf_counter() - started)
    runs: dict[tuple, list[tuple[float, float, int]]] = {case: [] for case in cases}
    # Rounds interleave the cases (A B C D A B C D ...): a noisy moment hits all of them.
    for _ in range(repeats):
        for path, window in cases:
            hook_seconds = replay_seconds = 0.0
            steps = 0
            for transcript in parsed[path][0][: 40 if quick else None]:
                with tempfile.TemporaryDirectory() as workspace:
                    result = asyncio.run(
                        replay_transcript(
                            transcript,
                            ContextConfig(),
                            Path(workspace),
                            window,
                            check_recovery=False,
                        )
                    )
                hook_seconds += result.seconds_hooks
                replay_seconds += result.seconds_total
                steps += len(result.steps)
            runs[(path, window)].append(
                (hook_seconds / replay_seconds, replay_seconds, hook_seconds, steps)
            )
    rows = []
    for (path, window), samples in runs.items():
        share, replay_seconds, hook_seconds, steps = sorted(samples)[len(samples) // 2]
        rows.append(
            {
                "transcript": path.name,
                "window": window,
                "steps": steps,
                "parse_seconds": round(parsed[path][1], 3),
                "replay_seconds": round(replay_seconds, 3),
                "hook_seconds": round(hook_seconds, 3),
                "hook_share": round(share, 4),
                "runs": len(samples),
            }
        )
    # BENCHMARKS.md's B6 is about the largest shared transcript (by size: the tau-bench file);
    # the longest single conversation is reported beside it, not judged.
    worst = max(r["hook_share"] for r in rows if r["transcript"] == largest.name)
    return {
        "id": "B6",
        "what": TITLE,
        "rows": rows,
        "largest_file": largest.name,
        "worst_hook_share": worst,
        "target": "hooks < 5% of the replay's wall time (largest shared transcript)",
        "target_met": worst < 0.05,
    }


def table(record: dict) -> str:
    lines = [
        "| transcript | window | steps | parse (s) | replay (s) | hooks (s) | hooks share |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in record["rows"]:
        lines.append(
            f"| {r['transcript']} | {r['window']:,} | {r['steps']:,} | {r['parse_seconds']} | {r['replay_seconds']} | {r['hook_seconds']} | {r['hook_share']:.1%} |"
        )
    return "\n".join(lines)
