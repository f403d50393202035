"""Refusing a prompt over the window when the workspace failed (design §4.3, §4.4, invariant 6):
nothing is sent, every message stays in memory, and the caller learns why in one sentence."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import WorkspaceWriteError
from ..events import ContextError

if TYPE_CHECKING:
    from ._pipeline import ContextPipeline

__all__ = ["refuse_on_faults", "refuse_unchecked"]


def live_keys(pipeline: ContextPipeline) -> set[str]:
    """The call ids and message ids in the context (what a save failure can be about)."""
    port = pipeline.port
    calls = {
        slot.call_id for msg_id in port.result_message_ids() for slot in port.result_slots(msg_id)
    }
    return calls | set(port.message_ids())


async def refuse_on_faults(
    pipeline: ContextPipeline, sys_prompt: str, tools: list[dict] | None
) -> None:
    """The workspace refused writes and the prompt is over the window: raise, keep all."""
    faults = pipeline.parts.faults
    faults.forget_unless(live_keys(pipeline))  # only what still weighs on this prompt
    count = await pipeline.count(sys_prompt, tools)  # exact: never refuse on a bound
    window = pipeline.parts.window.tokens
    if not faults.open or count.floor <= window:  # (never on a shift: design §5.1)
        return
    fault = faults.open[-1]
    message = (
        f"the prompt is {count.total:,} tokens, over the {window:,}-token window, because "
        f"the workspace refused writes ({fault.path}: {fault.error}); nothing was sent and "
        "every message is kept in memory. Free space or make the workspace writable, then "
        "call the agent again."
    )
    await pipeline.bus.emit(
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
    pipeline: ContextPipeline, sys_prompt: str, tools: list[dict] | None, failure: OSError
) -> None:
    """A step failed on the workspace (``failure``: a store that does not answer) where
    no save-failure path caught it, so the prompt was not fitted: refuse it when it is
    over the window (:class:`WorkspaceWriteError`, invariant 6); one within it goes out."""
    count = await pipeline.count(sys_prompt, tools)  # exact, and with no store call
    window = pipeline.parts.window.tokens
    if count.total <= window:
        return
    reason = " ".join(str(failure).split())[:300] or type(failure).__name__
    message = (
        f"the prompt is {count.total:,} tokens, over the {window:,}-token window, and the "
        f"workspace failed before it could be fitted ({reason}); nothing was sent and every "
        "message is kept in memory. Call the agent again once the workspace answers."
    )
    await pipeline.bus.emit(
        ContextError(
            reason="workspace write failed",
            tokens=count.total,
            max_input_tokens=window,
            error=reason,
        )
    )
    raise WorkspaceWriteError(message, "", count.total, window)
