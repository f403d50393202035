"""The token counter as an AgentScope 1.x ``TokenCounterBase``."""

from __future__ import annotations

from typing import Any

from agentscope.message import Msg
from agentscope.token import TokenCounterBase

from ..core.tokens import TokenCounter as CoreTokenCounter
from ..core.tokens import get_token_counter as core_get_token_counter
from ._convert import to_view

__all__ = ["TokenCounter", "get_token_counter"]


class TokenCounter(CoreTokenCounter, TokenCounterBase):
    """Exact offline token counts (see the core ``TokenCounter``), also an AgentScope
    ``TokenCounterBase`` (``await counter.count(formatted_messages)``), counting 1.x messages."""

    def count_msg(self, msg: Msg) -> int:
        """Tokens of a 1.x message as an OpenAI/DashScope formatter sends it (cached)."""
        return self.count_view(to_view(msg))

    def count_msgs(self, msgs: list[Msg]) -> int:
        """Sum of :meth:`count_msg`."""
        return sum(self.count_msg(msg) for msg in msgs)


def get_token_counter(name_or_model: Any = "auto", **kwargs: Any) -> TokenCounter:
    """Build a :class:`TokenCounter` (arguments of the core ``get_token_counter``).

    Args:
        name_or_model (`str | ChatModelBase`): A backend (``auto``, ``qwen``, ``o200k_base``,
            ``cl100k_base``, ``estimate``), a model name (``qwen-plus``, ``gpt-4o``), or an
            AgentScope chat model (its ``model_name`` is used).
        **kwargs: ``model_name``, ``media_token_cost``.
    """
    return core_get_token_counter(name_or_model, counter_class=TokenCounter, **kwargs)
