"""Save failures the pipeline must not forget (design §12: nothing leaves before it is on disk).

A tool result that cannot be saved stays whole in memory, and a compaction whose dialog write
fails keeps every message: nothing is lost, but the context no longer shrinks. The pipeline
keeps the open failures here, so that it reports each one once (a ``save_failed`` event) and,
when the prompt would then go over the window, refuses the model call with
:class:`~agentscope_context_ext.core.errors.WorkspaceWriteError` instead of sending it.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["SaveFault", "SaveFaults"]


@dataclass(frozen=True)
class SaveFault:
    """One write that failed."""

    what: str
    """``tool_result``, ``message`` (a user's text offloaded), ``dialog`` or ``held`` (a text
    that left the context unsaved, held in memory: 2.x's own split of a result)."""
    key: str
    """What it was for: a tool call id (``<id>#media<n>`` for its n-th media block), a message
    id (``<id>#<part>``), or ``dialog``."""
    path: str
    """Where it should have gone (workspace-relative or absolute)."""
    error: str
    """The operating system's message."""


class SaveFaults:
    """The open save failures of one pipeline, by key; a later success closes one."""

    def __init__(self) -> None:
        self._open: dict[str, SaveFault] = {}
        self._unreported: list[SaveFault] = []

    def failed(self, what: str, key: str, path: str, exc: BaseException) -> None:
        """Record that saving ``key`` to ``path`` failed with ``exc``."""
        error = (getattr(exc, "strerror", None) or str(exc) or type(exc).__name__)[:300]
        fault = SaveFault(what, key, str(path), error)
        if key not in self._open:
            self._unreported.append(fault)
        self._open[key] = fault

    def saved(self, key: str) -> None:
        """Saving ``key`` worked (now, or on a retry)."""
        self._open.pop(key, None)

    def forget_unless(self, live: set[str]) -> None:
        """Close the failures of tool results and user texts no longer in the context
        (compacted whole into ``dialog/``, or deleted): nothing of theirs is waiting to be saved
        any more. ``live``: the call ids and message ids in the context."""
        for key, fault in list(self._open.items()):
            if fault.what in ("tool_result", "message") and key.split("#", 1)[0] not in live:
                del self._open[key]

    @property
    def open(self) -> list[SaveFault]:
        """The failures not yet overcome, oldest first."""
        return list(self._open.values())

    def unreported(self) -> list[SaveFault]:
        """The failures not reported yet (each is returned once)."""
        faults, self._unreported = self._unreported, []
        return faults
