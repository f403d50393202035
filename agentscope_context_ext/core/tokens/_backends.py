"""Tokenizer backends, all offline (design §5.1).

- ``qwen``: the Qwen BPE vocabulary bundled inside the ``dashscope`` package; exact for Qwen
  models and a good proxy for other modern BPE vocabularies.
- ``o200k_base`` / ``cl100k_base``: tiktoken encodings, used only when tiktoken already has the
  encoding file in its local cache (tiktoken downloads missing files; this package never lets
  it).
- ``estimate``: no vocabulary, on request only: each kind of text counted at what real
  vocabularies spend on it at worst (``_estimate.py``), so a count errs on the safe side.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import os
import tempfile
from collections.abc import Callable

from ._estimate import estimate_tokens

logger = logging.getLogger("agentscope_context_ext")

BACKENDS = ("qwen", "o200k_base", "cl100k_base", "estimate")

# URL and sha256 of each encoding file, as tiktoken_ext.openai_public names them: tiktoken
# caches a file under sha1(url) and re-downloads it when the hash does not match.
_TIKTOKEN_FILES = {
    "o200k_base": (
        "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken",
        "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
    ),
    "cl100k_base": (
        "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken",
        "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
    ),
}


@functools.lru_cache(maxsize=1)
def qwen_tokenizer():
    """The Qwen tokenizer bundled with dashscope (loaded once per process)."""
    from dashscope import get_tokenizer

    return get_tokenizer("qwen-plus")


def tiktoken_cache_path(name: str) -> str | None:
    """Where tiktoken would find encoding ``name`` locally, or ``None`` when caching is off."""
    url, _ = _TIKTOKEN_FILES[name]
    if "TIKTOKEN_CACHE_DIR" in os.environ:
        cache_dir = os.environ["TIKTOKEN_CACHE_DIR"]
    elif "DATA_GYM_CACHE_DIR" in os.environ:
        cache_dir = os.environ["DATA_GYM_CACHE_DIR"]
    else:
        cache_dir = os.path.join(tempfile.gettempdir(), "data-gym-cache")
    if not cache_dir:
        return None
    return os.path.join(cache_dir, hashlib.sha1(url.encode()).hexdigest())


def tiktoken_available_offline(name: str) -> bool:
    """Whether ``tiktoken.get_encoding(name)`` would succeed without touching the network."""
    import tiktoken.registry

    if name in tiktoken.registry.ENCODINGS:
        return True
    path = tiktoken_cache_path(name)
    if path is None or not os.path.isfile(path):
        return False
    _, expected = _TIKTOKEN_FILES[name]
    with open(path, "rb") as handle:
        return hashlib.sha256(handle.read()).hexdigest() == expected


@functools.lru_cache(maxsize=4)
def _tiktoken_encoding(name: str):
    import tiktoken

    return tiktoken.get_encoding(name)


def make_encoder(backend: str) -> Callable[[str], int]:
    """A function ``text -> token count`` for ``backend`` (which must be available)."""
    if backend == "qwen":
        tokenizer = qwen_tokenizer()
        return lambda text: len(tokenizer.encode(text))
    if backend in _TIKTOKEN_FILES:
        encoding = _tiktoken_encoding(backend)
        # Special-token strings inside tool output are ordinary text to the model.
        return lambda text: len(encoding.encode(text, disallowed_special=()))
    if backend == "estimate":
        return estimate_tokens
    raise ValueError(f"unknown tokenizer backend {backend!r}; choose one of {BACKENDS}")
