"""Offline token counting (design §5).

Example:
    .. code-block:: python

        from agentscope_context_ext.core.tokens import get_token_counter

        counter = get_token_counter("qwen-plus")
        counter.count_text("你好, world")          # exact Qwen count, no network
        await counter.count(formatted_messages)   # an agentscope TokenCounterBase too
"""

from __future__ import annotations

import logging
from typing import Any

from ._backends import BACKENDS, make_encoder, tiktoken_available_offline
from ._counter import (
    DEFAULT_MEDIA_TOKEN_COST,
    MEMO_SIZE,
    TokenCounter,
    content_fingerprint,
    render_formatted_message,
    view_to_formatted,
)
from ._usage import UsageSample, UsageVerdict, implausible_usage, judge_usage
from ._windows import DEFAULT_MAX_INPUT_TOKENS, known_max_input_tokens

logger = logging.getLogger("agentscope_context_ext")

__all__ = [
    "BACKENDS",
    "DEFAULT_MAX_INPUT_TOKENS",
    "DEFAULT_MEDIA_TOKEN_COST",
    "TokenCounter",
    "UsageSample",
    "UsageVerdict",
    "backend_for_model",
    "content_fingerprint",
    "get_token_counter",
    "implausible_usage",
    "judge_usage",
    "known_max_input_tokens",
    "render_formatted_message",
    "view_to_formatted",
]

_O200K_PREFIXES = ("gpt-4o", "chatgpt-4o", "gpt-4.1", "gpt-4.5", "gpt-5", "o1", "o3", "o4")
_CL100K_PREFIXES = ("gpt-4", "gpt-3.5", "text-embedding-3", "text-embedding-ada")


def backend_for_model(model_name: str | None) -> str:
    """The backend ``tokenizer: auto`` wants for ``model_name`` (before availability checks)."""
    name = (model_name or "").lower().rpartition("/")[2]
    if name.startswith(_O200K_PREFIXES):
        return "o200k_base"
    if name.startswith(_CL100K_PREFIXES):
        return "cl100k_base"
    return "qwen"


def get_token_counter(
    name_or_model: Any = "auto",
    *,
    model_name: str | None = None,
    media_token_cost: int = DEFAULT_MEDIA_TOKEN_COST,
    counter_class: type[TokenCounter] = TokenCounter,
    memo_size: int = MEMO_SIZE,
) -> TokenCounter:
    """Build a :class:`TokenCounter`.

    Args:
        name_or_model (`str | ChatModelBase`): A backend (``auto``, ``qwen``, ``o200k_base``,
            ``cl100k_base``, ``estimate``), a model name (``qwen-plus``, ``gpt-4o``), or an
            AgentScope chat model (its model name is used: ``model_name`` on 1.x, ``model`` on
            2.x).
        model_name (`str | None`): With ``auto``: the model to pick a backend for.
        media_token_cost (`int`): Tokens counted per image/audio/video block.
        counter_class (`type[TokenCounter]`): The class to build (an adapter's subclass).
        memo_size (`int`): How many large texts keep their count (``0``: none, every count
            tokenizes; what a comparison with a plain tokenizer needs).

    Returns:
        `TokenCounter`: Never touches the network. A tiktoken encoding that is not in the local
        tiktoken cache falls back to the Qwen vocabulary with a warning.
    """
    if isinstance(name_or_model, str):
        name = name_or_model.strip()
    elif name_or_model is None:
        name = "auto"
    else:
        name = "auto"
        # 1.x chat models name their model ``model_name``, 2.x ones ``model``
        named = getattr(name_or_model, "model_name", None) or getattr(name_or_model, "model", None)
        model_name = named if isinstance(named, str) else model_name
    if name == "auto":
        backend = backend_for_model(model_name)
    elif name in BACKENDS:
        backend = name
    else:
        backend = backend_for_model(name)
    if backend in ("o200k_base", "cl100k_base") and not tiktoken_available_offline(backend):
        logger.warning(
            "tiktoken encoding %s is not in the local tiktoken cache and will not be downloaded; "
            "counting with the Qwen vocabulary instead (set TIKTOKEN_CACHE_DIR to a folder "
            "holding the encoding file to use it)",
            backend,
        )
        backend = "qwen"
    if media_token_cost < 0:
        raise ValueError(f"media_token_cost must not be negative, got {media_token_cost}")
    return counter_class(
        backend, make_encoder(backend), media_token_cost=media_token_cost, memo_size=memo_size
    )
