"""Which tool schemas the model is shown (the dialog tools only once there is a dialog).

``read_dialog`` and ``search_dialog`` can only answer "nothing was compacted" until a dialog
exists, and their schemas would cost every prompt (B8: ~565 tokens on a 6k window where plain
2.x pays nothing). So they are left out until a compaction happened, the context holds a
summary, or the workspace has dialog files from before (or, served, the user has other
sessions with the agent to search); from then on they stay, so the tool
list changes once at most, at a compaction, which re-sends the message prefix anyway. They
stay registered: a call made anyway is answered.

Every count of the pipeline goes through :class:`ToolOffer`, so a count taken right after a
compaction already includes the dialog tools the next call will carry.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable

from ..events import ContextStats
from ..workspace import DialogStore
from ._port import ContextPort

__all__ = ["DIALOG_TOOL_NAMES", "ToolOffer", "tool_name"]

logger = logging.getLogger("agentscope_context_ext")

DIALOG_TOOL_NAMES = frozenset({"read_dialog", "search_dialog"})
"""The dialog tools: shown to the model once there is a dialog to read."""


def tool_name(schema: dict) -> str:
    """The name in one tool schema (OpenAI's ``{"function": {"name": ...}}`` or a bare one)."""
    function = schema.get("function")
    return str((function if isinstance(function, dict) else schema).get("name", ""))


class ToolOffer:
    """Filters tool schemas to those the model should see now.

    Args:
        stats (`ContextStats`): Whether a compaction happened.
        port (`ContextPort`): Whether the context holds a summary.
        dialog (`DialogStore`): Whether the workspace has dialog files (listed once).
    """

    def __init__(self, stats: ContextStats, port: ContextPort, dialog: DialogStore) -> None:
        self.stats = stats
        self.port = port
        self.dialog = dialog
        self.elsewhere: Callable[[], bool] | None = None
        """Whether there is history elsewhere to search (a served user's other sessions)."""
        self._shown = False
        self._checked = False
        self._last: tuple[list[dict], list[dict]] | None = None
        """The schemas last filtered (a copy: compared by value, so an edited schema is
        filtered again) and what was left of them."""

    def __call__(self, schemas: list[dict] | None) -> list[dict]:
        """``schemas`` as the model should see them."""
        if not schemas:
            return []
        if self._shown:
            return schemas
        last = self._last
        if last is not None and last[0] == schemas and not self._now_shown():
            return last[1]
        offered = self._filter(schemas)
        if not (self._checked or self._shown):  # not listed yet (or the store failed): again
            return offered
        try:
            self._last = (copy.deepcopy(schemas), offered)
        except Exception:  # noqa: BLE001 - schemas that cannot be copied are filtered each time
            self._last = None
        return offered

    def _now_shown(self) -> bool:
        return bool(self.stats.compactions) or self.port.summary is not None

    def _filter(self, schemas: list[dict]) -> list[dict]:
        if not any(tool_name(s) in DIALOG_TOOL_NAMES for s in schemas):
            return schemas
        if self.stats.compactions or self.port.summary is not None:
            self._shown = True
        elif not self._checked:
            try:  # dialog files from before (or other sessions): listed once
                self._shown = bool(self.dialog.files()) or bool(self.elsewhere and self.elsewhere())
                self._checked = True
            except OSError as exc:  # a store that does not answer: hidden, asked next step
                logger.warning("cannot list the dialog files (%s); asking again next step", exc)
        if self._shown:
            return schemas
        return [s for s in schemas if tool_name(s) not in DIALOG_TOOL_NAMES]
