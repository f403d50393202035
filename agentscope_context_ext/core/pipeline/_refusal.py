"""Refusing a prompt over the window when the workspace failed (design §4.3, §4.4, invariant 6):
nothing is sent, every message stays in memory, and the caller learns why in one sentence."""

from __future__ import annotations

from ..errors import WorkspaceWriteError
from ..events import ContextError, EventBus
from ._faults import SaveFaults
from ._port import ContextPort
from ._tally import PromptCount

__all__ = ["live_keys", "refuse_on_faults", "refuse_unchecked"]


def live_keys(port: ContextPort) -> set[str]:
    """The call ids and message ids in the context (what a save failure can be about)."""
    calls = {
        slot.call_id for msg_id in port.result_message_ids() for slot in port.result_slots(msg_id)
    }
    return calls | set(port.message_ids())


async def refuse_on_faults(
    faults: SaveFaults, count: PromptCount, window: int, bus: EventBus
) -> None:
    """The workspace refused writes (``faults``, already narrowed to what still weighs on
    this prompt) and the prompt (``count``: exact, never a bound) is over the window: raise,
    keep all."""
    if not faults.open or count.floor <= window:  # (never on a shift: design §5.1)
        return
    fault = faults.open[-1]
    message = (
        f"the prompt is {count.total:,} tokens, over the {window:,}-token window, because "
        f"the workspace refused writes ({fault.path}: {fault.error}); nothing was sent and "
        "every message is kept in memory. Free space or make the workspace writable, then "
        "call the agent again."
    )
    await bus.emit(
        ContextError(
            reason="workspace write failed",
            path=fault.path,
            error=fault.error,
            tokens=count.total,
            max_input_tokens=window,
        )
    )
    raise WorkspaceWriteError(message, fault.path, count.total, window)


async def refuse_unchecked(
    count: PromptCount, window: int, bus: EventBus, failure: OSError
) -> None:
    """A step failed on the workspace (``failure``: a store that does not answer) where
    no save-failure path caught it, so the prompt was not fitted: refuse it when it is
    over the window (:class:`WorkspaceWriteError`, invariant 6); one within it goes out."""
    if count.total <= window:
        return
    reason = " ".join(str(failure).split())[:300] or type(failure).__name__
    message = (
        f"the prompt is {count.total:,} tokens, over the {window:,}-token window, and the "
        f"workspace failed before it could be fitted ({reason}); nothing was sent and every "
        "message is kept in memory. Call the agent again once the workspace answers."
    )
    await bus.emit(
        ContextError(
            reason="workspace write failed",
            tokens=count.total,
            max_input_tokens=window,
            error=reason,
        )
    )
    raise WorkspaceWriteError(message, "", count.total, window)
