"""Where the benchmarks find their real data: ``../shared/data/transcripts`` (or ACE_SHARED_DATA)."""

from __future__ import annotations

import os
from pathlib import Path

from agentscope_context_ext.replay import Record, claude_code_records

REPO = Path(__file__).resolve().parent.parent
SESSION = "4d5611e5-241a-462a-8d15-5122611a9569.jsonl"
"""The Claude Code session B1 and B9 build their contexts from."""


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


def claude_code_session(name: str = SESSION) -> list[Record]:
    """The messages of one shared Claude Code session, as version-free records (each
    benchmark makes the installed AgentScope's messages from them: ``_agents.native_messages``)."""
    return claude_code_records(transcripts_dir() / "claude-code" / name)


def chinese_conversation() -> list[Record]:
    """A tool-using conversation whose content is the Chinese design text, paragraph by paragraph."""
    seed = transcripts_dir().parent.parent / "seed" / "copaw-context-management-v2.zh.md"
    paragraphs = [
        p.strip() for p in Path(seed).read_text(encoding="utf-8").split("\n\n") if p.strip()
    ]
    records = [Record("user", "请阅读设计文档并总结上下文管理的要点。")]
    for i in range(0, len(paragraphs), 4):
        call_id = f"zh-{i}"
        records.append(
            Record(
                "assistant",
                [
                    {"type": "text", "text": f"继续阅读第 {i // 4 + 1} 部分。"},
                    {
                        "type": "tool_use",
                        "id": call_id,
                        "name": "read_file",
                        "input": {"file_path": "design.zh.md", "start_line": i + 1},
                    },
                ],
            )
        )
        records.append(
            Record(
                "system",
                [
                    {
                        "type": "tool_result",
                        "id": call_id,
                        "name": "read_file",
                        "output": "\n\n".join(paragraphs[i : i + 4]),
                    }
                ],
            )
        )
    records.append(Record("assistant", "总结：两阶段截断、压缩摘要、对话落盘、长期记忆。"))
    return records
