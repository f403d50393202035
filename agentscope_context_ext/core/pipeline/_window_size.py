"""``Window``: how many tokens a prompt may take, as every step of the pipeline sees it.

It starts as the configured window (``max_input_tokens``, else the model's) and only ever gets
smaller: when the provider rejects a prompt and says (or shows) that its own window is smaller
than that, the pipeline fits the prompts of the rest of the session to the provider's.
"""

from __future__ import annotations

__all__ = ["Window"]


class Window:
    """The window the pipeline fits prompts in (shared by its steps).

    Args:
        configured (`int`): The configured window.
        trigger_ratio (`float`): Compaction starts above this share of the window.
    """

    def __init__(self, configured: int, trigger_ratio: float = 0.8) -> None:
        self.configured = configured
        self.trigger_ratio = trigger_ratio
        self.tokens = configured
        """The window now (the configured one, or the provider's when it showed it is smaller)."""

    @property
    def trigger_tokens(self) -> int:
        """Compaction starts above this many prompt tokens (of the window now)."""
        return int(self.trigger_ratio * self.tokens)

    def lower_to(self, tokens: int) -> bool:
        """Make the window ``tokens`` when that is smaller; whether it changed."""
        if tokens >= self.tokens:
            return False
        self.tokens = max(1, tokens)
        return True
