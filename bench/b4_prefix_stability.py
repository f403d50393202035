"""B4 - prompt-prefix stability: the share of steps whose prompt is a byte-identical extension of
the previous prompt (what provider prompt caching rewards), with ``retruncate: eager`` against
``batched``, replaying the shared transcripts at a 32k window (where stage two and compaction are
busy). Target: ``batched`` >= 80% of steps stable."""

from __future__ import annotations

from agentscope_context_ext import ContextConfig

from ._data import shared_files
from .b3_replay_invariants import replay_file

TITLE = "prompt-prefix stability, eager vs batched (32k window)"


def run(quick: bool = False) -> dict:
    """Measure and return the B4 record."""
    rows = []
    totals = {"eager": [0.0, 0], "batched": [0.0, 0]}
    for path in shared_files():
        row = {"transcript": path.name}
        for policy in ("eager", "batched"):
            config = ContextConfig.model_validate({"truncation": {"retruncate": policy}})
            summary = replay_file(path, 32768, config, limit=40 if quick else None)
            row[policy] = summary["prefix_stability"]
            row[f"{policy}_mean_tokens"] = summary["mean_prompt_tokens"]
            row[f"{policy}_compactions"] = summary["compactions"]
            weight = max(summary["steps"] - summary.get("trajectories", 1), 0)
            totals[policy][0] += summary["prefix_stability"] * weight
            totals[policy][1] += weight
        rows.append(row)
    overall = {p: round(t[0] / t[1], 4) if t[1] else 1.0 for p, t in totals.items()}
    return {
        "id": "B4",
        "what": TITLE,
        "rows": rows,
        "eager": overall["eager"],
        "batched": overall["batched"],
        "target": "batched >= 80% of steps stable",
        "target_met": overall["batched"] >= 0.8,
    }


def table(record: dict) -> str:
    lines = [
        "| transcript | eager stable | batched stable | eager mean tokens | batched mean tokens | eager compactions | batched compactions |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in record["rows"]:
        lines.append(
            f"| {r['transcript']} | {r['eager']:.1%} | {r['batched']:.1%} | {r['eager_mean_tokens']:,} | "
            f"{r['batched_mean_tokens']:,} | {r['eager_compactions']} | {r['batched_compactions']} |"
        )
    lines.append(
        f"| **all steps** | **{record['eager']:.1%}** | **{record['batched']:.1%}** | | | | |"
    )
    return "\n".join(lines)
