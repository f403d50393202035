"""Which tool schemas the model is shown: this package's tools only when they can be of use,
and never more of them than a tenth of the window holds.

Every schema costs every prompt. So of this package's tools (the agent's own are always shown):

- ``read_dialog`` and ``search_dialog`` are left out until there is a dialog to read: a
  compaction happened, the context holds a summary, or the workspace has dialog files from
  before (or, served, the user has other sessions with the agent to search); from then on they
  stay, so that change comes at a compaction, which re-sends the message prefix anyway;
- the memory tools the long-term memory says are of no use now (``memory_edit`` on an empty
  ``Memory.md``, ``memory_read`` while the prompt shows the whole file) are left out;
- what is left is shown in :data:`OFFER_ORDER` as long as it fits in :data:`TOOLS_SHARE` of
  the window: an agent on a small window pays nothing for tools it has no room to use (said
  once in the log, at INFO).

They all stay registered: a call made anyway is answered. Every count of the pipeline goes
through :class:`ToolOffer`, so a count already holds the tools the next call will carry.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable

from ..events import ContextStats
from ..tokens import TokenCounter
from ..workspace import DialogStore
from ._port import ContextPort
from ._window_size import Window

__all__ = ["DIALOG_TOOL_NAMES", "OFFER_ORDER", "TOOLS_SHARE", "ToolOffer", "tool_name"]

logger = logging.getLogger("agentscope_context_ext")

DIALOG_TOOL_NAMES = frozenset({"read_dialog", "search_dialog"})
"""The dialog tools: shown to the model once there is a dialog to read."""

OFFER_ORDER = (
    "read_file",
    "read_dialog",
    "search_dialog",
    "memory_append",
    "daily_note",
    "memory_edit",
    "memory_read",
)
"""This package's tools, the most needed first: what reads back what left the context, then
what writes long-term memory."""

TOOLS_SHARE = 0.1
"""This package's tool schemas take at most this share of the window."""


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
        counter (`TokenCounter`): What one schema costs.
        window (`Window`): The window the schemas share.
    """

    def __init__(
        self,
        stats: ContextStats,
        port: ContextPort,
        dialog: DialogStore,
        counter: TokenCounter,
        window: Window,
    ) -> None:
        self.stats = stats
        self.port = port
        self.dialog = dialog
        self.counter = counter
        self.window = window
        self.ours: frozenset[str] = frozenset()
        """The names of this package's tools (set when they are registered); others pass."""
        self.elsewhere: Callable[[], bool] | None = None
        """Whether there is history elsewhere to search (a served user's other sessions)."""
        self.unused: Callable[[], frozenset[str]] | None = None
        """This package's tools of no use now (the long-term memory's view)."""
        self._dialog_shown = False
        self._checked = False
        self._costs: dict[str, tuple[dict, int]] = {}
        """Each of our schemas (a copy, compared by value) with its token count."""
        self._said: frozenset[str] = frozenset()

    def __call__(self, schemas: list[dict] | None) -> list[dict]:
        """``schemas`` as the model should see them."""
        if not schemas:
            return []
        ours = {tool_name(s): s for s in schemas if tool_name(s) in self.ours}
        if not ours:
            return schemas
        left_out = set(self.unused()) if self.unused is not None else set()
        if not self._dialog_available(ours):
            left_out |= DIALOG_TOOL_NAMES
        budget = int(self.window.tokens * TOOLS_SHARE)
        no_room: list[str] = []
        for name in sorted(ours, key=_rank):
            if name in left_out:
                continue
            cost = self._cost(name, ours[name])
            if cost > budget:
                no_room.append(name)
                left_out.add(name)
            else:
                budget -= cost
        if no_room and frozenset(no_room) != self._said:
            self._said = frozenset(no_room)
            logger.info(
                "the %s-token window leaves no room for %s: not offered to the model "
                "(this package's tools take at most %d%% of the window)",
                f"{self.window.tokens:,}",
                ", ".join(no_room),
                round(TOOLS_SHARE * 100),
            )
        if not left_out:
            return schemas
        return [s for s in schemas if tool_name(s) not in left_out or tool_name(s) not in ours]

    def _cost(self, name: str, schema: dict) -> int:
        known = self._costs.get(name)
        if known is not None and known[0] == schema:
            return known[1]
        cost = self.counter.count_tools([schema])
        try:
            self._costs[name] = (copy.deepcopy(schema), cost)
        except Exception:  # noqa: BLE001 - a schema that cannot be copied is counted each time
            self._costs.pop(name, None)
        return cost

    def _dialog_available(self, ours: dict[str, dict]) -> bool:
        if self._dialog_shown or not DIALOG_TOOL_NAMES & ours.keys():
            return self._dialog_shown
        if self.stats.compactions or self.port.summary is not None:
            self._dialog_shown = True
        elif not self._checked:
            try:  # dialog files from before (or other sessions): listed once
                self._dialog_shown = bool(self.dialog.files()) or bool(
                    self.elsewhere and self.elsewhere()
                )
                self._checked = True
            except OSError as exc:  # a store that does not answer: hidden, asked next step
                logger.warning("cannot list the dialog files (%s); asking again next step", exc)
        return self._dialog_shown


def _rank(name: str) -> int:
    return OFFER_ORDER.index(name) if name in OFFER_ORDER else len(OFFER_ORDER)
