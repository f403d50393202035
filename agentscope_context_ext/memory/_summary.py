"""``CompactSummary``: the structured memo that replaces compacted messages (SPEC 2.1, 4.2).

It is rendered as ONE user-role message at the head of the context: the five dimensions of the
design plus critical context, followed by the dialog path guide, the real relative paths and
line ranges of the raw messages it replaces, so the agent can read any detail back.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from agentscope.message import Msg
from pydantic import BaseModel, Field

from ..workspace import DialogRef

SUMMARY_MSG_NAME = "context_summary"

SECTION_TITLES: dict[str, str] = {
    "goal": "Goal",
    "constraints": "Constraints",
    "progress": "Progress",
    "key_decisions": "Key Decisions",
    "next_steps": "Next Steps",
    "critical_context": "Critical Context",
}
"""Summary fields and their Markdown section titles, in order."""


class DialogRange(BaseModel):
    """A run of saved raw messages: ``dialog/2026-12-02.jsonl`` lines 1-340."""

    file: str
    """Workspace-relative dialog file."""
    first_line: int = Field(ge=1)
    """First line of the run."""
    last_line: int = Field(ge=1)
    """Last line of the run (inclusive)."""

    @classmethod
    def from_ref(cls, ref: DialogRef) -> DialogRange:
        """Convert a :class:`DialogRef` returned by the dialog store."""
        return cls(file=ref.file, first_line=ref.first_line, last_line=ref.last_line)

    def __str__(self) -> str:
        return f"{self.file} lines {self.first_line}-{self.last_line}"


class CompactSummary(BaseModel):
    """What the agent must remember of the compacted conversation."""

    goal: list[str] = Field(default_factory=list)
    """What the user wants, in their words where possible."""
    constraints: list[str] = Field(default_factory=list)
    """Rules and preferences the user set (must, never, always, please ...)."""
    progress: list[str] = Field(default_factory=list)
    """What was done, with outcomes (tool calls, results, errors)."""
    key_decisions: list[str] = Field(default_factory=list)
    """Choices made and why."""
    next_steps: list[str] = Field(default_factory=list)
    """What remains to do."""
    critical_context: list[str] = Field(default_factory=list)
    """Identifiers, paths, numbers and URLs that must survive verbatim."""
    source: Literal["llm", "extractive"] = "llm"
    """Who wrote it: the compaction model, or the extractive fallback."""
    created_at: str = Field(default_factory=lambda: datetime.now().isoformat(timespec="seconds"))
    """When it was written."""
    dialog_refs: list[DialogRange] = Field(default_factory=list)
    """Where the raw messages it replaces are saved, oldest first."""
    compactions: int = 1
    """How many compactions it accumulates."""

    def sections(self) -> dict[str, list[str]]:
        """The six content sections, in order."""
        return {name: getattr(self, name) for name in SECTION_TITLES}

    def to_markdown(self) -> str:
        """The sections as Markdown (empty sections say so, so the layout never shifts)."""
        parts = []
        for name, title in SECTION_TITLES.items():
            items = getattr(self, name)
            body = "\n".join(f"- {item}" for item in items) if items else "- (none recorded)"
            parts.append(f"## {title}\n{body}")
        return "\n\n".join(parts)

    def dialog_guide(self) -> str:
        """The dialog path guide: where the raw messages are and how to read them."""
        if not self.dialog_refs:
            return ""
        ranges = "\n".join(f"- {ref}" for ref in self.dialog_refs)
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
        return (
            header + self.to_markdown() + (f"\n\n{guide}" if guide else "") + "\n</context-summary>"
        )

    def to_msg(self, msg_id: str) -> Msg:
        """The summary as one user-role message with a stable id and timestamp."""
        msg = Msg(
            SUMMARY_MSG_NAME, self.render(), "user", timestamp=self.created_at.replace("T", " ")
        )
        msg.id = msg_id
        return msg
