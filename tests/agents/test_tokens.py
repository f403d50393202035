"""Offline token counting (design §5, 12.6, 12.13): the core's counter on text, formatted prompts
and neutral messages; and against the formatters of the installed AgentScope."""

from __future__ import annotations

import base64
import hashlib
import json
import random
from pathlib import Path

import dashscope
import pytest
from harness_common import model_summary
from installed_harness import FORMATTERS, formatter, is_compaction_call, managed

from agentscope_context_ext.adapter import installed
from agentscope_context_ext.core.messages import Media, Message, Text, ToolCall, ToolResult
from agentscope_context_ext.core.tokens import (
    DEFAULT_MAX_INPUT_TOKENS,
    TokenCounter,
    backend_for_model,
    get_token_counter,
    known_max_input_tokens,
)
from agentscope_context_ext.core.tokens._backends import tiktoken_cache_path
from agentscope_context_ext.core.transcripts import Record
from agentscope_context_ext.testing import ModelCall, ScriptedChatModel, reply, tool_call

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


@pytest.mark.agentscope1
def test_counter_is_an_agentscope_token_counter() -> None:
    from agentscope.token import TokenCounterBase  # 1.x only: 2.x has no token counter class

    counter = installed.get_token_counter("qwen")
    assert isinstance(counter, TokenCounterBase)
    assert counter.exact


def _random_text(first: int, last: int, count: int, seed: int = 1) -> str:
    rng = random.Random(seed)
    return "".join(chr(rng.randrange(first, last)) for _ in range(count))


ESTIMATE_CASES = {
    # (text, the estimate over Qwen's count at least): measured, see core/tokens/_estimate.py
    "random CJK (issue 42)": (_random_text(0x4E00, 0x9FA5, 3000), 1.2),
    "random Hangul": (_random_text(0xAC00, 0xD7A3, 3000), 1.05),
    "CJK Extension A": (_random_text(0x3400, 0x4DB5, 1000), 1.15),
    "CJK Extension B": (_random_text(0x20000, 0x2A6D6, 1000), 1.2),
    "Chinese prose": ("上下文管理让智能体在长时间工作中保持上下文窗口小而有用。" * 50, 1.5),
    "hiragana": (_random_text(0x3041, 0x3096, 2000), 1.5),
    "emoji": (_random_text(0x1F600, 0x1F64F, 500), 1.5),
    "digits": ("".join(str(i % 10) for i in range(3000)), 1.0),
    "hex": (hashlib.sha256(b"x").hexdigest() * 40, 0.95),
    "base64": (base64.b64encode(random.Random(2).randbytes(3000)).decode(), 0.9),
    "code": ("def f(x):\n    return {'a': [1, 2, 3]}\n" * 100, 1.0),
}


@pytest.mark.parametrize("name", list(ESTIMATE_CASES))
def test_the_estimate_errs_on_the_safe_side(qwen: TokenCounter, name: str) -> None:
    """``tokenizer: estimate`` sent 22,956 tokens on a 16,384 window with 14k CJK characters
    (bytes/4 counts a CJK character as 0.75 tokens; Qwen spends 1.6 on random ones)."""
    text, at_least = ESTIMATE_CASES[name]
    estimate = get_token_counter("estimate")
    assert not estimate.exact
    assert estimate.count_text(text) >= at_least * qwen.count_text(text)


def test_the_estimate_on_the_shared_transcripts(qwen: TokenCounter, shared_data: Path) -> None:
    """Over every text of the shared transcripts: at most 0.5% counted short, by 10% at most
    (bytes/4: 44% short, by up to 2.3x), and about 1.5x Qwen's count in all."""
    texts = []

    def walk(value: object) -> None:
        if isinstance(value, str) and len(value) >= 40:
            texts.append(value)
        elif isinstance(value, dict):
            for item in value.values():
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    for path in sorted((shared_data / "transcripts").glob("*/*")):
        if path.name == "LICENSE":
            continue
        raw = path.read_text(encoding="utf-8", errors="replace")
        try:
            walk(json.loads(raw))  # a JSON file (swe-agent's .traj)
        except ValueError:
            for line in raw.splitlines():  # JSON lines
                try:
                    walk(json.loads(line))
                except ValueError:
                    continue
    texts = list(dict.fromkeys(texts))
    assert len(texts) > 1000
    estimate = get_token_counter("estimate")
    ratios = [estimate.count_text(t) / qwen.count_text(t) for t in texts]
    assert sum(r < 1 for r in ratios) <= 0.005 * len(ratios)
    assert min(ratios) >= 0.9
    total = sum(estimate.count_text(t) for t in texts) / sum(qwen.count_text(t) for t in texts)
    assert 1.0 < total < 1.7


async def test_an_estimating_agent_stays_in_its_window_on_cjk(workspace: Path) -> None:
    """Issue 42's case on an agent of the installed AgentScope: 14,000 CJK characters (a
    2,000-character request, eight 1,500-character documents) with ``tokenizer: estimate`` on
    a 16,384-token window. Every call the model received, counted in Qwen's vocabulary (what
    the scripted model reports as usage), fits: bytes/4 sent 23,568."""
    rng = random.Random(5)

    def cjk(count: int) -> str:
        return "".join(chr(rng.randrange(0x4E00, 0x9FA5)) for _ in range(count))

    async def read_doc(part: int) -> str:
        """Read one part of the document.

        Args:
            part (int): The part.
        """
        return cjk(1500)

    steps = {"made": 0}

    def respond(call: ModelCall) -> object:
        if is_compaction_call(call):
            return model_summary(call)
        steps["made"] += 1
        if steps["made"] <= 8:
            return reply(None, tool_call("read_doc", part=steps["made"]))
        return "读完了。"

    model = ScriptedChatModel(respond)
    agent = managed(
        model,
        {"workspace": str(workspace), "tokenizer": "estimate", "max_input_tokens": 16384},
        tools=(read_doc,),
    )
    assert await agent.ask("请读这个文档。" + cjk(2000)) == "读完了。"
    sent = [model.counter.count_formatted(call.messages, call.tools) for call in model.calls]
    assert max(sent) <= 16384, sent
    assert agent.manager.stats.compactions >= 1


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


TOOL_CONVERSATION = [
    Record("user", "请读一下 README 并总结"),
    Record(
        "assistant",
        [
            {"type": "text", "text": "Reading two files."},
            {"type": "tool_use", "id": "c1", "name": "read_file", "input": {"file_path": "a"}},
            {"type": "tool_use", "id": "c2", "name": "read_file", "input": {"file_path": "b"}},
        ],
    ),
    Record(
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
    ),
    Record("assistant", "Both files describe the project."),
]
"""A conversation with parallel tool calls, as transcript records (either major's messages)."""


def _tool_conversation() -> list[Message]:
    """:data:`TOOL_CONVERSATION` as neutral messages."""
    return [
        Message("m1", "user", "user", "", (Text("请读一下 README 并总结"),)),
        Message(
            "m2",
            "assistant",
            "assistant",
            "",
            (
                Text("Reading two files."),
                ToolCall("c1", "read_file", {"file_path": "a"}),
                ToolCall("c2", "read_file", {"file_path": "b"}),
            ),
        ),
        Message(
            "m3",
            "system",
            "system",
            "",
            (
                ToolResult("c1", "read_file", "alpha " * 300),
                ToolResult("c2", "read_file", "beta\n" * 200),
            ),
        ),
        Message("m4", "assistant", "assistant", "", (Text("Both files describe the project."),)),
    ]


@pytest.mark.parametrize("layout", FORMATTERS)
async def test_incremental_count_matches_the_formatted_prompt(
    qwen: TokenCounter, layout: str
) -> None:
    """Message by message, the neutral count is within 1% of the installed AgentScope's
    formatter output counted whole."""
    msgs = installed.records_to_msgs(TOOL_CONVERSATION)
    formatted = await formatter(layout).format(msgs)
    exact = await qwen.count(formatted)
    incremental = sum(qwen.count_view(view) for view in installed.to_views(msgs))
    assert abs(incremental - exact) / exact < 0.01
    neutral = sum(qwen.count_view(view) for view in _tool_conversation())
    assert abs(neutral - exact) / exact < 0.01


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


def test_image_in_a_tool_result_is_counted_as_media() -> None:
    counter = get_token_counter("qwen", media_token_cost=500)
    image = Media("image", "image/png", data="A" * 10**6)
    msg = Message("shot", "system", "system", "", (ToolResult("x", "shot", "", (image,)),))
    assert 500 <= counter.count_view(msg) < 520


def test_message_cache_avoids_retokenizing() -> None:
    counter = get_token_counter("qwen")
    msgs = _tool_conversation()
    first = sum(counter.count_view(msg) for msg in msgs)
    tokenized = counter.tokenized_messages
    assert sum(counter.count_view(msg) for msg in msgs) == first
    assert counter.tokenized_messages == tokenized, "unchanged messages must not be tokenized"


def test_message_cache_notices_in_place_edits(qwen: TokenCounter) -> None:
    counter = get_token_counter("qwen")
    msgs = _tool_conversation()
    before = counter.count_view(msgs[2])
    msgs[2].parts = (ToolResult("c1", "read_file", "short"), *msgs[2].parts[1:])  # same id
    after = counter.count_view(msgs[2])
    assert after < before
    assert after == qwen.count_view(msgs[2])


def test_real_transcript_text_counts_exactly(shared_data: Path, qwen: TokenCounter) -> None:
    """Long real tool output from a Claude Code session, counted against dashscope itself."""
    path = shared_data / "transcripts" / "claude-code" / "short.jsonl"
    texts = []
    for line in path.read_text(encoding="utf-8").splitlines():
        texts.append(json.dumps(json.loads(line).get("message", {}), ensure_ascii=False))
    text = "\n".join(texts)
    assert qwen.count_text(text) == len(dashscope.get_tokenizer("qwen-plus").encode(text))
