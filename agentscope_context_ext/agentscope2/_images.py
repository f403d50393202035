"""2.x's own ``max_image_num`` step, which its compression runs first and ours replaces.

The oldest images over the limit leave the context, each saved by the agent's offloader (ours,
unless the agent has another) and replaced by 2.x's reminder naming the copy. A copy that cannot
be saved leaves every image where it is (2.x applies the replacements only once all are saved).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from typing import Any

from agentscope.message import DataBlock, HintBlock, Msg, ToolResultBlock

from ..core.events import ContextWarning, EventBus

__all__ = ["ImageLimit"]

logger = logging.getLogger("agentscope_context_ext")


class ImageLimit:
    """Runs 2.x's image limit on one agent.

    Args:
        agent: The 2.x ``Agent``.
        bus (`EventBus`): Where a failed save is reported.
        touched (`Callable[[list[Msg]], None]`): Told of the messages whose blocks the limit
            replaced in place (the port's fingerprints do not see such a change).
    """

    def __init__(self, agent: Any, bus: EventBus, touched: Callable[[list[Msg]], None]) -> None:
        self.agent = agent
        self.bus = bus
        self.touched = touched

    async def apply(self) -> None:
        """Take the oldest images over ``context_config.max_image_num`` out of the context."""
        limit = getattr(self.agent, "_limit_context_images", None)
        context_config = getattr(self.agent, "context_config", None)
        if limit is None or context_config is None or self.agent.offloader is None:
            return  # another 2.x release, or an offloader taken away: keep every image
        # Only a message holding an image can change; with no more images than the limit,
        # nothing can (every step pays this scan, not the block ids of the whole context).
        holding = [(msg, n) for msg in self.agent.state.context if (n := _images(msg))]
        most = getattr(context_config, "max_image_num", None)
        if isinstance(most, int) and sum(n for _, n in holding) <= most:
            return
        before = [_block_ids(msg) for msg, _ in holding]
        try:
            await limit(context_config)
        except OSError as exc:  # our offloader's WorkspaceError, or another offloader's
            logger.warning("cannot save an image over max_image_num (%s); keeping it", exc)
            await self.bus.emit(ContextWarning(where="max_image_num", error=repr(exc)[:300]))
            return
        changed = [
            msg for (msg, _), ids in zip(holding, before, strict=True) if _block_ids(msg) != ids
        ]
        if changed:
            self.touched(changed)


def _image_places(msg: Any) -> Iterator[list]:
    """The block lists of ``msg`` where 2.x's image limit looks for images and replaces them
    in place: its content, and the list outputs of its tool results and hints."""
    yield msg.content
    for block in msg.content:
        if isinstance(block, ToolResultBlock) and isinstance(block.output, list):
            yield block.output
        elif isinstance(block, HintBlock) and isinstance(block.hint, list):
            yield block.hint


def _images(msg: Any) -> int:
    """How many images ``msg`` holds where 2.x's image limit counts them."""
    return sum(_is_image(item) for place in _image_places(msg) for item in place)


def _is_image(block: Any) -> bool:
    return isinstance(block, DataBlock) and block.source.media_type.startswith("image/")


def _block_ids(msg: Any) -> tuple[int, ...]:
    """The identity of every item where 2.x's image limit may replace one (a replacement in
    place leaves the message's own fingerprint as it was)."""
    return tuple(id(item) for place in _image_places(msg) for item in place)
