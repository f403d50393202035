"""Media blocks replaced by placeholders naming their saved copies: an old tool result's (design
§3.3, stage two) and, as the last resort before the window, a user message's (§4.3). A block
leaves the context only once it is on disk.
"""

from __future__ import annotations

import base64
import binascii
import logging

from ..messages import Media
from ..workspace import ToolResultStore
from ._faults import SaveFaults
from ._slots import ResultSlot

__all__ = ["media_placeholder", "replace_media"]

logger = logging.getLogger("agentscope_context_ext")


def replace_media(
    slot: ResultSlot, store: ToolResultStore, faults: SaveFaults
) -> tuple[tuple[Media | str, ...], int]:
    """Each media block as a placeholder naming its saved copy; a block that cannot be
    saved stays as it is (nothing leaves the context before it is on disk)."""
    replaced = tuple(
        media_placeholder(media, f"{slot.call_id}#media{index}", store, faults)
        for index, media in enumerate(slot.media)
    )
    return replaced, sum(1 for item in replaced if isinstance(item, str))


def media_placeholder(
    media: Media, key: str, store: ToolResultStore, faults: SaveFaults
) -> Media | str:
    """The placeholder text naming ``media``'s saved copy (its URL for a URL block), or
    ``media`` itself when it cannot be saved (a fault recorded under ``key``)."""
    if media.data is None:
        return f"[{media.kind} removed from the context to save tokens; source: {media.url}]"
    data = media.data.split(",", 1)[1] if media.data.startswith("data:") else media.data
    media_type = media.media_type or "application/octet-stream"
    try:
        try:
            raw = base64.b64decode("".join(data.split()), validate=True)
        except (binascii.Error, ValueError):
            # Not base64 after all: keep exactly what the block held, as text.
            path = store.save(media.data)
            faults.saved(key)
            return (
                f"[{media.kind} ({media_type}) removed from the context; its data was not "
                f"valid base64 and is saved as text: {path}]"
            )
        path = store.save_media(raw, media_type)
    except OSError as exc:
        logger.warning("cannot save an old %s block (%s); keeping it", media.kind, exc)
        faults.failed("tool_result", key, store.directory, exc)
        return media
    faults.saved(key)
    return (
        f"[{media.kind} ({media_type}, {len(raw)} bytes) removed from the context to "
        f"save tokens; saved copy: {path}]"
    )
