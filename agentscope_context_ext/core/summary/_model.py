"""``CompactSummary``: the structured memo that replaces compacted messages (design §2.1, 4.2).

It is rendered as ONE user-role message at the head of the context: the five dimensions of the
design plus critical context, followed by the dialog path guide, the real relative paths and
line ranges of the raw messages it replaces, so the agent can read any detail back. What it
renders and dumps is valid UTF-8 whatever its items hold (a lone surrogate becomes U+FFFD), so
a framework's state that carries it can always be saved.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field, field_serializer

from ..truncation import sendable_text, sendable_value
from ..workspace import DialogRef

__all__ = ["SECTION_TITLES", "CompactSummary", "DialogRef", "merge_refs"]

SECTION_TITLES: dict[str, str] = {
    "goal": "Goal",
    "constraints": "Constraints",
    "progress": "Progress",
    "key_decisions": "Key Decisions",
    "next_steps": "Next Steps",
    "critical_context": "Critical Context",
}
"""Summary fields and their Markdown section titles, in order."""


def merge_refs(refs: Iterable[DialogRef]) -> list[DialogRef]:
    """Runs of the same file that touch or overlap, merged; files in first-seen order.

    Consecutive compactions append consecutive lines, so 59 compactions of one day's dialog
    are one range, not 59 lines of the path guide.
    """
    merged: list[DialogRef] = []
    for ref in refs:
        for index, kept in enumerate(merged):
            if (
                kept.file == ref.file
                and ref.first_line <= kept.last_line + 1
                and (ref.last_line >= kept.first_line - 1)
            ):
                merged[index] = DialogRef(
                    file=ref.file,
                    first_line=min(kept.first_line, ref.first_line),
                    last_line=max(kept.last_line, ref.last_line),
                )
                break
        else:
            merged.append(ref)
    return merged


class CompactSummary(BaseModel):
    """What the agent must remember of the compacted conversation."""

    goal: list[str] = Field(default_factory=list)
    """What the user wants, in their words."""
    constraints: list[str] = Field(default_factory=list)
    """Rules and preferences the user set (must, never, always, please ...)."""
    progress: list[str] = Field(default_factory=list)
    """What was done, with outcomes: files changed and how, commands and their errors."""
    key_decisions: list[str] = Field(default_factory=list)
    """Choices made and why."""
    next_steps: list[str] = Field(default_factory=list)
    """What remains to do."""
    critical_context: list[str] = Field(default_factory=list)
    """Identifiers, paths, numbers and URLs that must survive verbatim."""
    source: Literal["llm", "extractive"] = "llm"
    """Who wrote it: the compaction model, or the extractive summary."""
    created_at: str = Field(default_factory=lambda: datetime.now().isoformat(timespec="seconds"))
    """When it was written."""
    dialog_refs: list[DialogRef] = Field(default_factory=list)
    """Where the raw messages it replaces are saved, oldest first."""
    compactions: int = 1
    """How many compactions it accumulates."""

    @field_serializer(*SECTION_TITLES, "created_at")
    def _sendable(self, value: list[str] | str) -> list[str] | str:
        # model_copy(update=...) does not validate: the text is made sendable on the way out.
        return sendable_value(value)

    def to_markdown(self) -> str:
        """The sections as Markdown (empty sections say so, so the layout never shifts)."""
        parts = []
        for name, title in SECTION_TITLES.items():
            items = getattr(self, name)
            body = "\n".join(f"- {item}" for item in items) if items else "- (none recorded)"
            parts.append(f"## {title}\n{body}")
        return sendable_text("\n\n".join(parts))

    def dialog_guide(self) -> str:
        """The dialog path guide: where the raw messages are and how to read them."""
        if not self.dialog_refs:
            return ""
        ranges = "\n".join(f"- {ref}" for ref in merge_refs(self.dialog_refs))
        return (
            "## Raw Dialog\n"
            "The messages this summary replaces are saved word for word in the workspace:\n"
            f"{ranges}\n"
            "When a detail is missing here, read them from the end backwards with "
            "`read_dialog(date=..., start_line=...)` (newest first by default) or find them with "
            "`search_dialog(query)`."
        )

    def render(self) -> str:
        """The full text of the summary message."""
        header = (
            "<context-summary>\n"
            f"Earlier conversation was compacted ({self.compactions} time(s), last at "
            f"{self.created_at}; written by {'the model' if self.source == 'llm' else 'extraction'}). "
            "This is its summary.\n\n"
        )
        guide = self.dialog_guide()
        return sendable_text(
            header + self.to_markdown() + (f"\n\n{guide}" if guide else "") + "\n</context-summary>"
        )
