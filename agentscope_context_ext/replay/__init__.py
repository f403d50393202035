"""Transcript replay: real agent sessions as AgentScope messages, replayed through the hooks."""

from importlib import import_module
from typing import Any

_WHERE = {
    "prompt_pair_violations": "._checks",
    "ClaudeCompaction": "._claude_code",
    "Record": "._records",
    "record_from_dict": "._records",
    "claude_code_compactions": "._claude_code",
    "claude_code_records": "._claude_code",
    "load_claude_code": "._claude_code",
    "FORMATS": "._importers",
    "Transcript": "._importers",
    "TranscriptError": "._errors",
    "detect_format": "._importers",
    "load_transcripts": "._importers",
    "recovery_problems": "._recovery",
    "ReplayResult": "._result",
    "StepRecord": "._result",
    "replay_config": "._result",
    "replay_transcript": None,  # the installed AgentScope's replayer
    "FidelityResult": "._fidelity",
    "latest_single_compaction": "._fidelity",
    "summary_fidelity": "._fidelity",
    "summary_identifiers": "._fidelity",
    "Curve": "._report",
    "aggregate": "._report",
    "write_report": "._report",
}
"""Resolved on first use. The importers, the records, the report and the checks need no
AgentScope; ``replay_transcript`` is the installed version's replayer; ``load_claude_code``, the
recovery check of 1.x and the fidelity measure (B7) drive AgentScope 1.x."""


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module = _WHERE[name]
    if module is None:
        from ..compat import agentscope_major

        module = "._replayer2" if agentscope_major() >= 2 else "._replayer"
    value = getattr(import_module(module, __name__), name)
    globals()[name] = value
    return value


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
    "recovery_problems",
    "replay_config",
    "replay_transcript",
    "summary_fidelity",
    "summary_identifiers",
    "write_report",
]
