"""Known input windows of common models (design §5.2), used when ``max_input_tokens`` is unset."""

from __future__ import annotations

DEFAULT_MAX_INPUT_TOKENS = 131072
"""The window assumed for a model that is not in the table."""

# Longest prefix wins; values are input tokens as the providers document them.
_KNOWN_WINDOWS: dict[str, int] = {
    "qwen-turbo": 1_000_000,
    "qwen-plus": 131_072,
    "qwen-max": 32_768,
    "qwen-long": 10_000_000,
    "qwen3-max": 262_144,
    "qwen3-coder": 262_144,
    "qwen3": 131_072,
    "qwen2.5": 131_072,
    "qwq": 131_072,
    "gpt-4o": 128_000,
    "gpt-4.1": 1_047_576,
    "gpt-4-turbo": 128_000,
    "gpt-4": 8_192,
    "gpt-3.5-turbo": 16_385,
    "gpt-5": 272_000,
    "o1": 200_000,
    "o3": 200_000,
    "o4-mini": 200_000,
    "deepseek-chat": 65_536,
    "deepseek-reasoner": 65_536,
    "claude": 200_000,
    "gemini-1.5": 1_048_576,
    "gemini-2": 1_048_576,
}


def known_max_input_tokens(model_name: str | None) -> int:
    """The window of ``model_name`` from the table, or ``DEFAULT_MAX_INPUT_TOKENS``."""
    if not model_name:
        return DEFAULT_MAX_INPUT_TOKENS
    name = model_name.lower().rpartition("/")[2]
    best = max((p for p in _KNOWN_WINDOWS if name.startswith(p)), key=len, default=None)
    return _KNOWN_WINDOWS[best] if best else DEFAULT_MAX_INPUT_TOKENS
