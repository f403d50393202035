"""A decision on one result written as a change and its measured outcome (design §3.2-3.4):
what the adapter writes back (:class:`ResultChange`) and what the events report
(:class:`TruncationOutcome`).
"""

from __future__ import annotations

from ..messages import Media
from ..tokens import TokenCounter
from ..truncation import encoded_size
from ._slots import ResultChange, ResultSlot, TruncationOutcome

__all__ = ["measured_change"]


def measured_change(
    counter: TokenCounter,
    slot: ResultSlot,
    new_text: str,
    media: tuple[Media | str, ...],
    stage: int,
    path: str | None,
    bytes_before: int,
    offloaded: int,
    replaced: int = 0,
) -> tuple[ResultChange, TruncationOutcome]:
    """The change of a result to ``new_text`` and its outcome, its tokens measured by
    ``counter`` (those before estimated from the bytes at the same density)."""
    bytes_after = encoded_size(new_text)
    tokens_after = counter.count_text(new_text)
    tokens_before = round(tokens_after * bytes_before / bytes_after) if bytes_after else 0
    outcome = TruncationOutcome(
        stage=stage,
        call_id=slot.call_id,
        tool=slot.tool,
        path=path,
        bytes_before=bytes_before,
        bytes_after=bytes_after,
        tokens_before=max(tokens_before, tokens_after),
        tokens_after=tokens_after,
        bytes_offloaded=offloaded,
        media_replaced=replaced,
    )
    return ResultChange(new_text, media), outcome
