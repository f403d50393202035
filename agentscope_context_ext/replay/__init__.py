"""Transcript replay: real agent sessions as AgentScope messages, replayed through the hooks."""

from ._checks import prompt_pair_violations
from ._claude_code import ClaudeCompaction, claude_code_compactions, load_claude_code
from ._fidelity import (
    FidelityResult,
    latest_single_compaction,
    summary_fidelity,
    summary_identifiers,
)
from ._importers import FORMATS, Transcript, TranscriptError, detect_format, load_transcripts
from ._recovery import recovery_problems
from ._replayer import ReplayResult, StepRecord, replay_transcript
from ._report import Curve, aggregate, write_report

__all__ = [
    "FORMATS",
    "ClaudeCompaction",
    "Curve",
    "FidelityResult",
    "ReplayResult",
    "StepRecord",
    "Transcript",
    "TranscriptError",
    "aggregate",
    "claude_code_compactions",
    "detect_format",
    "latest_single_compaction",
    "load_claude_code",
    "load_transcripts",
    "prompt_pair_violations",
    "recovery_problems",
    "replay_transcript",
    "summary_fidelity",
    "summary_identifiers",
    "write_report",
]
