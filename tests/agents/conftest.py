"""Fixtures only the tests of real agents use: a real llama-cpp-python server."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture(scope="session")
def llama() -> Iterator[Any]:
    """A real llama-cpp-python server (``python -m llama_cpp.server``) on loopback with
    SmolLM2-135M-Instruct, for the whole session (``llama_server.py``). Skipped when this
    interpreter has no server or no model; a failure when ACE_REQUIRE_LLAMA=1 (``.ci/run`` sets
    it after installing them)."""
    from llama_server import REQUIRE_ENV, LlamaServer, find_gguf, server_missing

    problem = server_missing()
    gguf, label = find_gguf("small") if problem is None else (None, problem)
    if gguf is None:
        if os.environ.get(REQUIRE_ENV) == "1":
            pytest.fail(f"{label}, and {REQUIRE_ENV}=1 requires it")
        pytest.skip(label)
    with LlamaServer(gguf, n_ctx=4096) as server:
        yield server
