"""B3 - replay invariants: every shared transcript replayed at 32k and 128k windows.

Targets: 0 calls over the window (or each explained by a ``context_overflow`` event), 0 orphan
tool_use/tool_result, 100% of the original content recoverable byte for byte from memory +
``dialog/`` + ``tool_result/``. Reported: compactions, peak/mean prompt tokens, tokens saved.
"""

from __future__ import annotations

import asyncio
import logging
import tempfile
from pathlib import Path

from agentscope_context_ext import ContextConfig
from agentscope_context_ext.replay import aggregate, load_transcripts, replay_transcript

from ._data import shared_files

TITLE = "replay invariants on every shared transcript (32k / 128k)"
WINDOWS = (32768, 131072)


def replay_file(
    path: Path, window: int, config: ContextConfig | None = None, limit: int | None = None
) -> dict:
    """Aggregate summary of replaying every conversation in ``path``."""
    logging.getLogger("as").setLevel(logging.ERROR)
    transcripts = load_transcripts(path)[:limit]
    summaries = []
    for transcript in transcripts:
        with tempfile.TemporaryDirectory() as workspace:
            result = asyncio.run(
                replay_transcript(transcript, config or ContextConfig(), Path(workspace), window)
            )
            summaries.append(result.summary())
    return aggregate(summaries)


def run(quick: bool = False) -> dict:
    """Measure and return the B3 record."""
    rows = []
    for path in shared_files():
        for window in WINDOWS:
            summary = replay_file(path, window, limit=40 if quick else None)
            rows.append(
                {
                    "transcript": path.name,
                    "window": window,
                    **{
                        k: summary[k]
                        for k in (
                            "steps",
                            "peak_prompt_tokens",
                            "mean_prompt_tokens",
                            "over_window",
                            "unexplained_over_window",
                            "compactions",
                            "truncations",
                            "retruncations",
                            "pair_violations",
                            "recoverable",
                            "original_tokens",
                            "tokens_saved",
                        )
                    },
                }
            )
    met = all(
        r["pair_violations"] == 0 and r["unexplained_over_window"] == 0 and r["recoverable"]
        for r in rows
    )
    return {
        "id": "B3",
        "what": TITLE,
        "rows": rows,
        "pair_violations": sum(r["pair_violations"] for r in rows),
        "unexplained_over_window": sum(r["unexplained_over_window"] for r in rows),
        "all_recoverable": all(r["recoverable"] for r in rows),
        "quick_limit_per_file": 40 if quick else None,
        "target": "0 calls over the window unexplained, 0 orphans, 100% recoverable",
        "target_met": met,
    }


def table(record: dict) -> str:
    lines = [
        "| transcript | window | steps | peak | mean | over window | compactions | truncations | retruncations | orphans | recoverable | tokens saved |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|",
    ]
    for r in record["rows"]:
        lines.append(
            f"| {r['transcript']} | {r['window']:,} | {r['steps']:,} | {r['peak_prompt_tokens']:,} | {r['mean_prompt_tokens']:,} | "
            f"{r['over_window']} | {r['compactions']} | {r['truncations']} | {r['retruncations']} | {r['pair_violations']} | "
            f"{'yes' if r['recoverable'] else 'NO'} | {r['tokens_saved']:,} |"
        )
    return "\n".join(lines)
