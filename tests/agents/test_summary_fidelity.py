"""Summary fidelity against Claude Code's own summaries (benchmark B7, issue 11), on the installed
AgentScope: the conversations are transcript records (no AgentScope), replayed through the
installed adapter."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentscope_context_ext import ContextConfig
from agentscope_context_ext.adapter import installed
from agentscope_context_ext.core.transcripts import Record
from agentscope_context_ext.replay import (
    claude_code_compactions,
    claude_code_records,
    load_claude_code,
    summary_fidelity,
    summary_identifiers,
)

REFERENCE = """Summary:
1. The user asked to fix `parse_config/2` in `lib/app/config.ex`.
   - Ran `mix test test/config_test.exs` (2 failures).
   - Also touched lib/app/loader.ex and README.md.
```elixir
def parse_config(path, opts) do  # `not_an_identifier_in_code`
```
- Next: update `Config.load!/1`.
"""


def test_summary_identifiers_are_inline_code_and_paths_outside_code_blocks() -> None:
    assert summary_identifiers(REFERENCE) == [
        "parse_config/2",
        "lib/app/config.ex",
        "mix test test/config_test.exs",
        "Config.load!/1",
        "lib/app/loader.ex",
    ]


def _session(tmp_path: Path) -> Path:
    lines = [
        {"type": "user", "message": {"role": "user", "content": "Fix the config parser."}},
        {
            "type": "assistant",
            "message": {
                "id": "m1",
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "Reading it."},
                    {
                        "type": "tool_use",
                        "id": "t1",
                        "name": "Read",
                        "input": {"file_path": "a.ex"},
                    },
                ],
            },
        },
        {
            "type": "user",
            "message": {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}],
            },
        },
        {"type": "system", "subtype": "compact_boundary", "compactMetadata": {"preTokens": 9000}},
        {
            "type": "user",
            "isCompactSummary": True,
            "message": {"role": "user", "content": "The user wants `a.ex` fixed."},
        },
        {"type": "user", "message": {"role": "user", "content": "after the boundary"}},
    ]
    path = tmp_path / "s.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n", encoding="utf-8")
    return path


def test_claude_code_compaction_points_and_the_conversation_before_them(tmp_path: Path) -> None:
    path = _session(tmp_path)
    (point,) = claude_code_compactions(path)
    assert point.line == 3 and point.pre_tokens == 9000
    assert point.summary == "The user wants `a.ex` fixed."
    before = claude_code_records(path, until_line=point.line)
    assert [m.role for m in before] == ["user", "assistant", "system"]
    assert all("after the boundary" not in str(m.content) for m in before)
    assert len(claude_code_records(path)) == 5
    # as the installed AgentScope's messages: the same conversation, nothing after the boundary
    views = installed.to_views(load_claude_code(path, until_line=point.line))
    assert [v.text for v in views if v.role == "user"] == ["Fix the config parser."]
    assert [c.arguments for v in views for c in v.tool_calls] == [{"file_path": "a.ex"}]
    assert [r.text for v in views for r in v.tool_results] == ["ok"]
    assert all("after the boundary" not in v.raw_text() for v in views)
    later = installed.to_views(load_claude_code(path))
    assert "after the boundary" in [v.text for v in later if v.role == "user"]


async def test_fidelity_counts_only_identifiers_of_the_compacted_messages() -> None:
    msgs = [
        Record("user", f"step {i}: edit `module_{i}.py` and run `make check_{i}` " + "pad " * 40)
        for i in range(60)
    ]
    msgs += [Record("assistant", "done " + "x " * 50) for _ in range(3)]
    reference = " ".join(f"`module_{i}.py`" for i in range(60)) + " `never_said_anywhere`"
    result = await summary_fidelity("synthetic", msgs, reference, ContextConfig(), window=4096)
    assert result.compactions >= 1
    assert "never_said_anywhere" in result.not_in_compacted
    assert result.identifiers and all(i.startswith("module_") for i in result.identifiers)
    assert result.share(result.missing_from_search) == 1.0
    assert result.summary_chars == len(result.summary_text) > 0


@pytest.mark.slow
@pytest.mark.parametrize(
    "session",
    ["4d5611e5-241a-462a-8d15-5122611a9569.jsonl", "8463c716-a2ea-4c14-9efa-87158ebd9f20.jsonl"],
)
async def test_b7_targets_on_the_shared_claude_code_sessions(
    shared_data: Path, session: str
) -> None:
    """The B7 targets, as a regression test (the benchmark reports the same figures)."""
    path = shared_data / "transcripts" / "claude-code" / session
    (point,) = claude_code_compactions(path)
    result = await summary_fidelity(
        session, claude_code_records(path, until_line=point.line), point.summary, precision=0.03
    )
    assert result.compactions == 1
    assert len(result.identifiers) >= 40
    assert result.share(result.missing_from_summary) >= 0.85, result.missing_from_summary
    assert result.summary_chars <= result.reference_chars
    assert result.share(result.missing_from_input) >= 0.97, result.missing_from_input
    assert result.share(result.missing_from_search) == 1.0, result.missing_from_search
