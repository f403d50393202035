"""Transcript replay: real agent sessions replayed step by step through the installed
AgentScope's hooks (the importers and the measures are in ``core.transcripts``), the reports
and plots, and summary fidelity against a reference (benchmark B7)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..adapter import installed
from ..core.transcripts import (
    FORMATS,
    ClaudeCompaction,
    Record,
    ReplayResult,
    StepRecord,
    Transcript,
    TranscriptError,
    claude_code_compactions,
    claude_code_records,
    detect_format,
    load_transcripts,
    prompt_pair_violations,
    record_from_dict,
    replay_config,
)
from ._fidelity import (
    FidelityResult,
    latest_single_compaction,
    summary_fidelity,
    summary_identifiers,
)
from ._report import Curve, aggregate, write_report

replay_transcript = installed.replay_transcript
records_to_msgs = installed.records_to_msgs


def load_claude_code(path: str | Path, until_line: int | None = None) -> list[Any]:
    """A Claude Code session file as the installed AgentScope's messages (the context its
    agent would hold; see :func:`claude_code_records` for the arguments)."""
    return records_to_msgs(claude_code_records(path, until_line))


__all__ = [
    "FORMATS",
    "ClaudeCompaction",
    "Curve",
    "FidelityResult",
    "Record",
    "ReplayResult",
    "StepRecord",
    "Transcript",
    "TranscriptError",
    "aggregate",
    "claude_code_compactions",
    "claude_code_records",
    "detect_format",
    "latest_single_compaction",
    "load_claude_code",
    "load_transcripts",
    "prompt_pair_violations",
    "record_from_dict",
    "records_to_msgs",
    "replay_config",
    "replay_transcript",
    "summary_fidelity",
    "summary_identifiers",
    "write_report",
]
