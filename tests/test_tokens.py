"""Offline token counting (design §5, 12.6, 12.13)."""

from __future__ import annotations

import json
from pathlib import Path

import dashscope
import pytest
from agentscope.formatter import DashScopeChatFormatter, OpenAIChatFormatter
from agentscope.message import Msg
from agentscope.token import TokenCounterBase

from agentscope_context_ext import TokenCounter, get_token_counter
from agentscope_context_ext.core.tokens import (
    DEFAULT_MAX_INPUT_TOKENS,
    backend_for_model,
    known_max_input_tokens,
)
from agentscope_context_ext.core.tokens._backends import tiktoken_cache_path

SAMPLES = [
    "hello world",
    "你好，世界！这是一个测试。",
    "def f(x):\n    return {'a': [1, 2, 3]}\n",
    "emoji 😀 and <|im_end|> special",
    "",
    "x" * 250_000,
]


@pytest.fixture(scope="module")
def qwen() -> TokenCounter:
    return get_token_counter("qwen")


@pytest.mark.parametrize("text", SAMPLES)
def test_qwen_count_equals_dashscope(qwen: TokenCounter, text: str) -> None:
    expected = len(dashscope.get_tokenizer("qwen-plus").encode(text))
    assert qwen.count_text(text) == expected


def test_counter_is_an_agentscope_token_counter(qwen: TokenCounter) -> None:
    assert isinstance(qwen, TokenCounterBase)
    assert qwen.exact


def test_estimate_is_bytes_over_four() -> None:
    estimate = get_token_counter("estimate")
    assert estimate.count_text("abcd" * 100) == 100
    assert estimate.count_text("中") == 1  # 3 bytes -> ceil(3/4)
    assert not estimate.exact


def test_estimate_is_far_off_on_chinese(qwen: TokenCounter) -> None:
    # Why the estimate is opt-in only (design §12.13): measured here, not assumed.
    text = "上下文管理让智能体在长时间工作中保持上下文窗口小而有用。" * 50
    exact = qwen.count_text(text)
    estimate = get_token_counter("estimate").count_text(text)
    assert abs(estimate - exact) / exact > 0.2  # measured: 24% over


@pytest.mark.parametrize(
    ("name", "backend"),
    [
        ("qwen-plus", "qwen"),
        ("qwen3-max", "qwen"),
        ("gpt-4o", "o200k_base"),
        ("openai/gpt-4.1-mini", "o200k_base"),
        ("o3-mini", "o200k_base"),
        ("gpt-4-turbo", "cl100k_base"),
        ("gpt-3.5-turbo", "cl100k_base"),
        ("claude-3-5-sonnet", "qwen"),
        (None, "qwen"),
    ],
)
def test_backend_for_model(name: str | None, backend: str) -> None:
    assert backend_for_model(name) == backend


def test_openai_model_falls_back_to_qwen_without_cached_encoding(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # An empty cache: tiktoken would download; we must not (the network fixture would raise).
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    import tiktoken.registry

    monkeypatch.setattr(tiktoken.registry, "ENCODINGS", {})
    counter = get_token_counter("gpt-4o")
    assert counter.backend == "qwen"
    assert "not in the local tiktoken cache" in caplog.text


def test_corrupt_tiktoken_cache_file_is_not_trusted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    import tiktoken.registry

    monkeypatch.setattr(tiktoken.registry, "ENCODINGS", {})
    Path(tiktoken_cache_path("o200k_base")).write_bytes(b"garbage")
    assert get_token_counter("o200k_base").backend == "qwen"


def test_counter_from_a_model_object() -> None:
    class FakeModel:
        model_name = "qwen-max"

    assert get_token_counter(FakeModel()).backend == "qwen"


def test_windows_table() -> None:
    assert known_max_input_tokens("qwen-plus") == 131072
    assert known_max_input_tokens("qwen-max-latest") == 32768
    assert known_max_input_tokens("gpt-4o-mini") == 128000
    assert known_max_input_tokens("some-unknown-model") == DEFAULT_MAX_INPUT_TOKENS
    assert known_max_input_tokens(None) == DEFAULT_MAX_INPUT_TOKENS


def _tool_conversation() -> list[Msg]:
    return [
        Msg("user", "请读一下 README 并总结", "user"),
        Msg(
            "assistant",
            [
                {"type": "text", "text": "Reading two files."},
                {"type": "tool_use", "id": "c1", "name": "read_file", "input": {"file_path": "a"}},
                {"type": "tool_use", "id": "c2", "name": "read_file", "input": {"file_path": "b"}},
            ],
            "assistant",
        ),
        Msg(
            "system",
            [
                {"type": "tool_result", "id": "c1", "name": "read_file", "output": "alpha " * 300},
                {
                    "type": "tool_result",
                    "id": "c2",
                    "name": "read_file",
                    "output": [{"type": "text", "text": "beta\n" * 200}],
                },
            ],
            "system",
        ),
        Msg("assistant", "Both files describe the project.", "assistant"),
    ]


@pytest.mark.parametrize("formatter_class", [DashScopeChatFormatter, OpenAIChatFormatter])
async def test_incremental_count_matches_the_formatted_prompt(
    qwen: TokenCounter, formatter_class: type
) -> None:
    msgs = _tool_conversation()
    formatted = await formatter_class().format(msgs)
    exact = await qwen.count(formatted)
    incremental = qwen.count_msgs(msgs)
    assert abs(incremental - exact) / exact < 0.01


async def test_count_includes_tools_schema(qwen: TokenCounter) -> None:
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
    messages = [{"role": "user", "content": "hi"}]
    assert await qwen.count(messages, tools) > await qwen.count(messages)


async def test_media_blocks_cost_the_configured_amount() -> None:
    counter = get_token_counter("qwen", media_token_cost=1280)
    base64_image = "data:image/png;base64," + "A" * 1_000_000
    with_image = [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "look"},
                {"type": "image_url", "image_url": {"url": base64_image}},
            ],
        }
    ]
    without = [{"role": "user", "content": [{"type": "text", "text": "look"}]}]
    assert await counter.count(with_image) - await counter.count(without) == 1280
    dashscope_layout = [{"role": "user", "content": [{"text": "look"}, {"image": base64_image}]}]
    assert await counter.count(dashscope_layout) == await counter.count(with_image)


def test_image_in_a_tool_result_msg_is_counted_as_media() -> None:
    counter = get_token_counter("qwen", media_token_cost=500)
    image = {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": "A" * 10**6},
    }
    msg = Msg(
        "system",
        [{"type": "tool_result", "id": "x", "name": "shot", "output": [image]}],
        "system",
    )
    assert 500 <= counter.count_msg(msg) < 520


def test_message_cache_avoids_retokenizing(qwen: TokenCounter) -> None:
    counter = get_token_counter("qwen")
    msgs = _tool_conversation()
    first = counter.count_msgs(msgs)
    tokenized = counter.tokenized_messages
    assert counter.count_msgs(msgs) == first
    assert counter.tokenized_messages == tokenized, "unchanged messages must not be tokenized"


def test_message_cache_notices_in_place_edits(qwen: TokenCounter) -> None:
    counter = get_token_counter("qwen")
    msgs = _tool_conversation()
    before = counter.count_msg(msgs[2])
    msgs[2].content[0]["output"] = "short"
    after = counter.count_msg(msgs[2])
    assert after < before
    assert after == qwen.count_msgs([msgs[2]])


def test_real_transcript_text_counts_exactly(shared_data: Path, qwen: TokenCounter) -> None:
    """Long real tool output from a Claude Code session, counted against dashscope itself."""
    path = shared_data / "transcripts" / "claude-code" / "short.jsonl"
    texts = []
    for line in path.read_text(encoding="utf-8").splitlines():
        texts.append(json.dumps(json.loads(line).get("message", {}), ensure_ascii=False))
    text = "\n".join(texts)
    assert qwen.count_text(text) == len(dashscope.get_tokenizer("qwen-plus").encode(text))
