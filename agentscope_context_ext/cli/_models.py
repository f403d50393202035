"""Chat models for the commands that need a real one (``consolidate``, ``chat``) when no agent
file names one: the environment's DashScope or OpenAI key."""

from __future__ import annotations

import os
from typing import Any

from ..agentfile import build_model
from ..core.agent_file import ModelSettings

_PROVIDERS = (
    ("DASHSCOPE_API_KEY", "dashscope", "qwen-plus"),
    ("OPENAI_API_KEY", "openai", "gpt-4o-mini"),
)

MODEL_ENV_VARS = tuple(env_var for env_var, _, _ in _PROVIDERS)


class NoModelError(RuntimeError):
    """No API key in the environment."""


def model_from_environment(model_name: str | None = None) -> tuple[Any, Any]:
    """DashScope when ``DASHSCOPE_API_KEY`` is set, else OpenAI when ``OPENAI_API_KEY`` is set:
    the installed AgentScope's model and formatter (a 2.x model formats for itself: its
    ``formatter``), built as an agent file's model is.

    Raises:
        `NoModelError`: Neither variable is set.
    """
    for env_var, provider, default_model in _PROVIDERS:
        if os.environ.get(env_var):
            settings = ModelSettings(
                provider=provider,
                model=model_name or default_model,
                api_key_env=env_var,
                stream=False,
            )
            return build_model(settings)
    raise NoModelError(f"no model available: set {' or '.join(MODEL_ENV_VARS)}")
