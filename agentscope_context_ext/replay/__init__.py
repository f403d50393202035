"""Transcript replay: real agent sessions as AgentScope messages, replayed through the hooks."""

from importlib import import_module
from typing import Any

_WHERE = {
    "prompt_pair_violations": "._checks",
    "ClaudeCompaction": "._claude_code",
    "claude_code_compactions": "._claude_code",
    "load_claude_code": "._claude_code",
    "FORMATS": "._importers",
    "Transcript": "._importers",
    "TranscriptError": "._errors",
    "detect_format": "._importers",
    "load_transcripts": "._importers",
    "recovery_problems": "._recovery",
    "ReplayResult": "._replayer",
    "StepRecord": "._replayer",
    "replay_transcript": "._replayer",
    "FidelityResult": "._fidelity",
    "latest_single_compaction": "._fidelity",
    "summary_fidelity": "._fidelity",
    "summary_identifiers": "._fidelity",
    "Curve": "._report",
    "aggregate": "._report",
    "write_report": "._report",
}
"""Resolved on first use: the report and the checks work on either AgentScope; the replayer,
the importers and the fidelity measure drive AgentScope 1.x agents."""


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(module, __name__), name)
    globals()[name] = value
    return value


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
