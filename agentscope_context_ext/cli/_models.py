"""Chat models for the commands that need a real one (``consolidate``, ``chat``)."""

from __future__ import annotations

import importlib
import os
from typing import Any, NamedTuple

from ..compat import agentscope_major


class _Provider(NamedTuple):
    env_var: str
    default_model: str
    model_class: str
    formatter_class: str
    credential_class: str


_PROVIDERS = (
    _Provider(
        "DASHSCOPE_API_KEY",
        "qwen-plus",
        "DashScopeChatModel",
        "DashScopeChatFormatter",
        "DashScopeCredential",
    ),
    _Provider(
        "OPENAI_API_KEY",
        "gpt-4o-mini",
        "OpenAIChatModel",
        "OpenAIChatFormatter",
        "OpenAICredential",
    ),
)

MODEL_ENV_VARS = tuple(provider.env_var for provider in _PROVIDERS)


class NoModelError(RuntimeError):
    """No API key in the environment."""


def model_from_environment(model_name: str | None = None) -> tuple[Any, Any]:
    """DashScope when ``DASHSCOPE_API_KEY`` is set, else OpenAI when ``OPENAI_API_KEY`` is set:
    the installed AgentScope's model and formatter (on 2.x, ``model.formatter``).

    Raises:
        `NoModelError`: Neither variable is set.
    """
    for provider in _PROVIDERS:
        api_key = os.environ.get(provider.env_var)
        if not api_key:
            continue
        model_class = getattr(importlib.import_module("agentscope.model"), provider.model_class)
        if agentscope_major() >= 2:
            credential = getattr(
                importlib.import_module("agentscope.credential"), provider.credential_class
            )(api_key=api_key)
            model = model_class(
                credential=credential, model=model_name or provider.default_model, stream=False
            )
            return model, model.formatter
        formatter_class = getattr(
            importlib.import_module("agentscope.formatter"), provider.formatter_class
        )
        model = model_class(
            model_name=model_name or provider.default_model, api_key=api_key, stream=False
        )
        return model, formatter_class()
    raise NoModelError(f"no model available: set {' or '.join(MODEL_ENV_VARS)}")
