"""Parsing a compaction model's answer and rendering the summary message (design §2.1, 4.2).

Pure core tests: no AgentScope."""

from __future__ import annotations

import pytest

from agentscope_context_ext.core.summary import CompactSummary, DialogRef, merge_refs, parse_summary

GOOD = """## Goal
- Migrate the billing service to Postgres 16
## Constraints
- Never drop the legacy table
## Progress
- Dumped schema to /srv/dump.sql
## Key Decisions
- Use logical replication
## Next Steps
- Run the cutover script
## Critical Context
- tool_result/0123456789abcdef0123456789abcdef.txt
"""


def test_parse_accepts_the_six_sections() -> None:
    summary = parse_summary(GOOD)
    assert summary is not None
    assert summary.goal == ["Migrate the billing service to Postgres 16"]
    assert summary.key_decisions == ["Use logical replication"]
    assert summary.source == "llm"


@pytest.mark.parametrize(
    "variant",
    [
        GOOD.replace("## ", "### "),
        GOOD.replace("## Goal", "**Goal**").replace("## Progress", "**Progress:**"),
        GOOD.replace("## Key Decisions", "## KEY DECISIONS").replace("- ", "1. "),
        GOOD.replace("## Goal", "## 1. Goal").replace("## Progress", "## 3. Progress"),
        "Sure, here it is:\n\n" + GOOD,
    ],
)
def test_parse_is_tolerant_of_heading_styles(variant: str) -> None:
    summary = parse_summary(variant)
    assert summary is not None and summary.goal and summary.progress


@pytest.mark.parametrize(
    "answer",
    [
        None,
        "",
        "   ",
        "Error: 429 Too Many Requests",
        "I'm sorry, I cannot help with that.",
        "## Goal\n- x\n",  # too few sections
        "## Progress\n- a\n## Next Steps\n- b\n## Constraints\n- c\n",  # no goal
        "{'garbage': true}",
    ],
)
def test_parse_rejects_unusable_answers(answer: str | None) -> None:
    assert parse_summary(answer) is None


def test_summary_message_has_sections_and_dialog_guide() -> None:
    summary = parse_summary(GOOD).model_copy(
        update={
            "dialog_refs": [DialogRef(file="dialog/2026-12-02.jsonl", first_line=1, last_line=340)]
        }
    )
    text = summary.render()
    for title in (
        "## Goal",
        "## Constraints",
        "## Progress",
        "## Key Decisions",
        "## Next Steps",
        "## Critical Context",
    ):
        assert title in text
    assert "dialog/2026-12-02.jsonl lines 1-340" in text
    assert "read_dialog" in text and "backwards" in text


def test_touching_dialog_ranges_are_one_line_of_the_guide() -> None:
    refs = [
        DialogRef(file="dialog/2026-12-02.jsonl", first_line=start, last_line=start + 9)
        for start in range(1, 591, 10)
    ]
    refs.append(DialogRef(file="dialog/2026-12-03.jsonl", first_line=1, last_line=4))
    merged = merge_refs(refs)
    assert [str(r) for r in merged] == [
        "dialog/2026-12-02.jsonl lines 1-590",
        "dialog/2026-12-03.jsonl lines 1-4",
    ]
    guide = CompactSummary(dialog_refs=refs).dialog_guide()
    assert guide.count("\n- dialog/") == 2
    # gaps stay separate
    gap = merge_refs([refs[0], DialogRef(file=refs[0].file, first_line=20, last_line=25)])
    assert len(gap) == 2
