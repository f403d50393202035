"""One tool result's share of the window (design §3.2-3.4): the token cap a result is held to,
the byte budget it starts from, and an excerpt + notice re-cut until it is within the cap.
"""

from __future__ import annotations

from ..config import TruncationConfig
from ..tokens import TokenCounter
from ..truncation import RETRUNCATE_SLACK_BYTES, retruncate, split_notice
from ._window_size import Window

__all__ = ["NOTICE_RESERVE_TOKENS", "NOTICE_TOKENS", "ResultBudget"]

_MAX_FIT_ROUNDS = 8
NOTICE_RESERVE_TOKENS = 160
"""Tokens kept free for the truncation notice when fitting an excerpt under the window cap."""
NOTICE_TOKENS = 80
"""About what a truncation notice costs, taken off a cut's estimated gain."""


class ResultBudget:
    """What one result may take of the window, measured by the counter.

    Args:
        config (`TruncationConfig`): The share (``max_window_share``).
        counter (`TokenCounter`): Measures the excerpts.
        window (`Window`): The window the share is of.
    """

    def __init__(self, config: TruncationConfig, counter: TokenCounter, window: Window) -> None:
        self.config = config
        self.counter = counter
        self.window = window
        self.window_changed()

    def window_changed(self) -> None:
        """Take the window's size now: a result's token cap is its share of it."""
        self.max_result_tokens = max(64, self.config.result_tokens(self.window.tokens))
        # A token cap turns into a byte budget only loosely (1 token is 1 to ~6 bytes): start
        # from 4 bytes per token and correct by measuring (:meth:`fit`).
        self.max_result_bytes = self.max_result_tokens * 4

    def estimated_tokens(self, text: str) -> int:
        """About the tokens of ``text``: of a truncated output, its excerpt's (which stage one
        counted when it fitted it, so the counter knows it) plus its notice's."""
        parts = split_notice(text)
        if parts is None:
            return self.counter.count_text(text)
        excerpt = parts[0]
        return self.counter.count_text(excerpt) + self.counter.count_text(text[len(excerpt) :])

    def tokens_fit(self, text: str, size: int) -> bool:
        """Whether ``text`` (``size`` bytes) is within the token cap."""
        # Cheap first: a text of at most max_tokens bytes cannot exceed max_tokens tokens.
        return (
            size <= self.max_result_tokens
            or self.counter.count_text(text) <= self.max_result_tokens
        )

    def fit(self, text: str, limit: int, cap: int | None = None) -> str:
        """Re-cut an excerpt + notice until it is within the token cap (default: the window
        share).

        Only the excerpt is measured, against the cap minus a fixed reserve for the notice: the
        notice names a file whose token count varies, and the cut must not depend on it (the
        same session must give the same prompts).
        """
        cap = self.max_result_tokens if cap is None else cap
        budget = max(cap - NOTICE_RESERVE_TOKENS, 1)
        for _ in range(_MAX_FIT_ROUNDS):
            parts = split_notice(text)
            if parts is None:
                return text
            excerpt, notice = parts
            tokens = self.counter.count_text(excerpt)
            if tokens <= budget or notice.excerpt_bytes <= 1:
                return text
            target = int(notice.excerpt_bytes * budget / tokens * 0.95)
            target = max(1, min(target, notice.excerpt_bytes - RETRUNCATE_SLACK_BYTES - 1))
            text = retruncate(text, max_bytes=target)
        return text
