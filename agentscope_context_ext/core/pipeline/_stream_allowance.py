"""What of a tool's output may be shown while it streams, before stage one has seen the whole
(design §3.2): a budget of bytes and tokens the shown chunks stay within.
"""

from __future__ import annotations

from ..tokens import TokenCounter
from ..truncation import encoded_size

__all__ = ["StreamAllowance"]


class StreamAllowance:
    """The part of one streamed output that may be shown before it is whole: chunks are
    taken while their texts stay within ``max_bytes`` UTF-8 bytes and ``max_tokens`` tokens
    (counted chunk by chunk: the sum is never below the count of the joined text by more than
    a token a chunk, and the halved budgets leave room for that).

    Args:
        max_bytes (`int`): UTF-8 bytes that may be shown.
        max_tokens (`int`): Tokens that may be shown.
        counter (`TokenCounter`): Counts a chunk's text.
    """

    def __init__(self, max_bytes: int, max_tokens: int, counter: TokenCounter) -> None:
        self.max_bytes = max_bytes
        self.max_tokens = max_tokens
        self._counter = counter
        self._bytes = 0
        self._tokens = 0

    def take(self, text: str) -> bool:
        """Whether ``text`` (the next chunk's) still fits; if it does, it is counted as shown."""
        size = encoded_size(text)
        if self._bytes + size > self.max_bytes:
            return False
        tokens = self._counter.count_text(text) if text else 0
        if self._tokens + tokens > self.max_tokens:
            return False
        self._bytes += size
        self._tokens += tokens
        return True
