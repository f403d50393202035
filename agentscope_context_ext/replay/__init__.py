"""Transcript replay: real agent sessions as AgentScope messages, replayed through the hooks."""

from ._checks import prompt_pair_violations
from ._claude_code import load_claude_code
from ._importers import FORMATS, Transcript, TranscriptError, detect_format, load_transcripts
from ._replayer import ReplayResult, StepRecord, recovery_problems, replay_transcript

__all__ = [
    "FORMATS",
    "ReplayResult",
    "StepRecord",
    "Transcript",
    "TranscriptError",
    "detect_format",
    "load_claude_code",
    "load_transcripts",
    "prompt_pair_violations",
    "recovery_problems",
    "replay_transcript",
]
