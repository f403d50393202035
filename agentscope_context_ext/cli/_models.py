"""Chat models for commands that need a real one (``consolidate``; later ``chat``)."""

from __future__ import annotations

import os

from agentscope.formatter import FormatterBase
from agentscope.model import ChatModelBase

MODEL_ENV_VARS = ("DASHSCOPE_API_KEY", "OPENAI_API_KEY")


class NoModelError(RuntimeError):
    """No API key in the environment."""


def model_from_environment(model_name: str | None = None) -> tuple[ChatModelBase, FormatterBase]:
    """DashScope when ``DASHSCOPE_API_KEY`` is set, else OpenAI when ``OPENAI_API_KEY`` is set.

    Raises:
        `NoModelError`: Neither variable is set.
    """
    if os.environ.get("DASHSCOPE_API_KEY"):
        from agentscope.formatter import DashScopeChatFormatter
        from agentscope.model import DashScopeChatModel

        model = DashScopeChatModel(
            model_name=model_name or "qwen-plus",
            api_key=os.environ["DASHSCOPE_API_KEY"],
            stream=False,
        )
        return model, DashScopeChatFormatter()
    if os.environ.get("OPENAI_API_KEY"):
        from agentscope.formatter import OpenAIChatFormatter
        from agentscope.model import OpenAIChatModel

        model = OpenAIChatModel(
            model_name=model_name or "gpt-4o-mini",
            api_key=os.environ["OPENAI_API_KEY"],
            stream=False,
        )
        return model, OpenAIChatFormatter()
    raise NoModelError(f"no model available: set {' or '.join(MODEL_ENV_VARS)}")
