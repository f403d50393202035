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
"""

from __future__ import annotations

import asyncio
import logging

from agentscope_context_ext import ContextConfig
from agentscope_context_ext.replay import (
    claude_code_compactions,
    claude_code_records,
    summary_fidelity,
)

from ._data import transcripts_dir

TITLE = "summary fidelity at Claude Code's own compaction point"


def run(quick: bool = False) -> dict:
    """Measure and return the B7 record."""
    logging.getLogger("as").setLevel(logging.ERROR)
    # the bisection probes windows far too small on purpose: their refusals are expected
    logging.getLogger("agentscope_context_ext").setLevel(logging.CRITICAL)
    rows = []
    for path in sorted((transcripts_dir() / "claude-code").glob("*.jsonl")):
        for index, point in enumerate(claude_code_compactions(path)):
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
    return {
        "id": "B7",
        "what": TITLE,
        "rows": rows,
        "worst_summary_share": min((r["summary_share"] for r in rows), default=0.0),
        "worst_input_share": min((r["input_share"] for r in rows), default=0.0),
        "worst_search_share": min((r["search_share"] for r in rows), default=0.0),
        "target": "summary >= 85% at <= Claude Code's length; model input >= 97%; search 100%",
        "target_met": met,
    }


def table(record: dict) -> str:
    lines = [
        "| session | window | compacted | identifiers | in summary | in model input | found by search "
        "| summary chars (ours / CC) | summary tokens (ours / CC) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in record["rows"]:
        lines.append(
            f"| {r['transcript']} | {r['window']:,} | {r['compacted_messages']} of {r['total_messages']} "
            f"| {r['identifiers']} | {r['summary_share']:.1%} | {r['input_share']:.1%} | {r['search_share']:.1%} "
            f"| {r['summary_chars']:,} / {r['reference_chars']:,} | {r['summary_tokens']:,} / {r['reference_tokens']:,} |"
        )
    missing = [
        f"- {r['transcript']}: {', '.join(f'`{m}`' for m in r['missing_from_summary'])}"
        for r in record["rows"]
        if r["missing_from_summary"]
    ]
    if missing:
        lines += ["", "Not in our summary (still in the saved dialog):", *missing]
    return "\n".join(lines)
