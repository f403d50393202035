"""``get_token_counter(model)`` reads the model's name on either major: 1.x chat models call it
``model_name``, 2.x ones ``model`` (the 2.x name was once ignored: every 2.x model got the Qwen
vocabulary whatever it was)."""

from __future__ import annotations

import logging

import pytest

from agentscope_context_ext.compat import agentscope_major
from agentscope_context_ext.core.tokens import get_token_counter


def openai_model(name: str):
    """A real OpenAI chat model of the installed AgentScope (never called)."""
    from agentscope.model import OpenAIChatModel

    if agentscope_major() >= 2:
        from agentscope.credential import OpenAICredential

        credential = OpenAICredential(api_key="test", base_url="http://127.0.0.1:9/v1")
        return OpenAIChatModel(credential=credential, model=name, stream=False)
    return OpenAIChatModel(
        model_name=name, api_key="test", client_kwargs={"base_url": "http://127.0.0.1:9/v1"}
    )


def test_an_openai_model_gets_its_own_vocabulary(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="agentscope_context_ext"):
        counter = get_token_counter(openai_model("gpt-4o"))
    # o200k_base when tiktoken has it offline; otherwise Qwen, saying that it wanted o200k_base
    wanted = counter.backend == "o200k_base" or "o200k_base" in caplog.text
    assert wanted, (counter.backend, caplog.text)


def test_a_qwen_model_counts_with_qwen_quietly(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="agentscope_context_ext"):
        counter = get_token_counter(openai_model("qwen-plus"))
    assert counter.backend == "qwen"
    assert "tiktoken" not in caplog.text
