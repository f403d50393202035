"""Recognising a provider's "the prompt is too long" answer, and the numbers it gives."""

from __future__ import annotations

import pytest

from agentscope_context_ext.core.provider_errors import length_rejection

CASES = [
    # (what the provider said, its count of the prompt, its window)
    (
        "Error code: 400 - {'error': {'message': \"This model's maximum context length is 16385 "
        "tokens. However, your messages resulted in 17000 tokens. Please reduce the length of "
        "the messages.\", 'type': 'invalid_request_error', 'code': 'context_length_exceeded'}}",
        17000,
        16385,
    ),
    (  # vLLM, DeepSeek
        "This model's maximum context length is 4096 tokens. However, you requested 5000 tokens "
        "(4000 in the messages, 1000 in the completion).",
        4000,
        4096,
    ),
    (  # Anthropic
        "prompt is too long: 210,000 tokens > 200,000 maximum",
        210000,
        200000,
    ),
    (  # DashScope
        "InvalidParameter: Range of input length should be [1, 30720]",
        None,
        30720,
    ),
    (  # Gemini
        "The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).",
        1200000,
        1048576,
    ),
    (  # llama.cpp server
        "the request exceeds the available context size, try increasing it "
        '{"code":400,"type":"exceed_context_size_error","n_prompt_tokens":5120,"n_ctx":4096}',
        5120,
        4096,
    ),
    (  # Ollama
        "input length exceeds maximum context length",
        None,
        None,
    ),
]


def test_the_room_kept_for_the_answer_is_read() -> None:
    said = (
        "This model's maximum context length is 16384 tokens. However, you requested 16600 "
        "tokens (216 in the messages, 16384 in the completion)."
    )
    rejection = length_rejection(RuntimeError(said))
    assert (rejection.prompt_tokens, rejection.completion_tokens) == (216, 16384)
    anthropic = "input length and `max_tokens` exceed context limit: 188240 + 21333 > 200000"
    rejection = length_rejection(RuntimeError(anthropic))
    assert rejection is not None
    assert (rejection.prompt_tokens, rejection.completion_tokens, rejection.limit_tokens) == (
        188240,
        21333,
        200000,
    )


@pytest.mark.parametrize(("said", "prompt", "limit"), CASES)
def test_length_rejections_are_recognised_with_their_numbers(said, prompt, limit):
    rejection = length_rejection(RuntimeError(said))
    assert rejection is not None
    assert (rejection.prompt_tokens, rejection.limit_tokens) == (prompt, limit)
    assert "\n" not in rejection.message and len(rejection.message) <= 300


def test_the_cause_of_a_wrapped_error_is_read() -> None:
    try:
        try:
            raise ValueError("prompt is too long: 9000 tokens > 8192 maximum")
        except ValueError as inner:
            raise RuntimeError("model call failed") from inner
    except RuntimeError as outer:
        rejection = length_rejection(outer)
    assert rejection is not None and rejection.prompt_tokens == 9000


@pytest.mark.parametrize(
    "said",
    [
        "Error code: 401 - invalid api key",
        "rate limit exceeded, retry after 20 seconds",
        "Error code: 400 - tool_choice is not supported",
        "connection reset by peer",
        # an error that only quotes the user's words is not a length rejection
        "Error code: 400 - Invalid value for 'messages[1].content': unsupported character in "
        "'what is the maximum context length of gpt-4o? And why is my prompt is too long?'",
    ],
)
def test_other_failures_are_not_length_rejections(said):
    assert length_rejection(RuntimeError(said)) is None
