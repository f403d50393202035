"""Where the benchmarks find their real data: ``../shared/data/transcripts`` (or ACE_SHARED_DATA)."""

from __future__ import annotations

import os
from pathlib import Path

from agentscope.message import Msg

from agentscope_context_ext.replay import load_claude_code

REPO = Path(__file__).resolve().parent.parent


def transcripts_dir() -> Path:
    """The shared transcripts folder; a clear error if it is missing."""
    root = Path(os.environ.get("ACE_SHARED_DATA", REPO.parent / "shared" / "data")) / "transcripts"
    if not root.is_dir():
        raise SystemExit(
            f"benchmark data not found at {root}; set ACE_SHARED_DATA to the shared/data folder"
        )
    return root


def shared_files() -> list[Path]:
    """Every shared transcript file (B3's list), sorted by path."""
    return sorted(p for p in transcripts_dir().rglob("*") if p.is_file() and p.name != "LICENSE")


def claude_code_session(name: str = "4d5611e5-241a-462a-8d15-5122611a9569.jsonl") -> list[Msg]:
    """The messages of one shared Claude Code session."""
    return load_claude_code(transcripts_dir() / "claude-code" / name)
