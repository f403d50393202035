"""Agent transcripts without AgentScope: the importers (AgentScope dialog JSONL, OpenAI-style
message lists such as tau-bench, Claude Code sessions, SWE-agent trajectories) read into
:class:`Record`\\ s, and what a replay measures (:class:`ReplayResult`). Each adapter replays
them through its own AgentScope (design §10)."""

from ._checks import prompt_pair_violations
from ._claude_code import ClaudeCompaction, claude_code_compactions, claude_code_records
from ._errors import TranscriptError
from ._importers import FORMATS, Transcript, detect_format, load_transcripts
from ._records import Record, record_from_dict
from ._result import ReplayResult, StepRecord, replay_config

__all__ = [
    "FORMATS",
    "ClaudeCompaction",
    "Record",
    "ReplayResult",
    "StepRecord",
    "Transcript",
    "TranscriptError",
    "claude_code_compactions",
    "claude_code_records",
    "detect_format",
    "load_transcripts",
    "prompt_pair_violations",
    "record_from_dict",
    "replay_config",
]
