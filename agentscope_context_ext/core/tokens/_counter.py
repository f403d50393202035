"""``TokenCounter``: exact offline token counts for text, formatted prompts and messages.

A prompt is counted the way a chat template lays it out: each formatted message becomes
``<|im_start|>{role}\\n{content}<|im_end|>\\n`` (tool calls as ``<tool_call>`` JSON lines, the
Qwen/ChatML layout). Because the message delimiters are special tokens, no BPE merge crosses a
message boundary, so the count of a prompt is exactly the sum of its messages' counts. That is
what makes incremental accounting exact: a message is tokenized once, cached by id and content
fingerprint, and a step with no new message re-tokenizes nothing.

Large texts are tokenized once while they are among the last few counted (:meth:`count_text`
keeps their counts keyed by the text itself): a tool's output is counted when stage one fits
its excerpt, and the same excerpt is what the count before the next call and stage two's
estimate of what a cut would free look at again. :meth:`known_count` answers from those counts
without tokenizing (for the bound of a message, see ``core.pipeline.message_bound``). The
tool schemas, rendered as sent, are such a text.

Media blocks cost ``media_token_cost`` tokens each, never their base64 length (design §12.6).
"""

from __future__ import annotations

import copy
import json
import logging
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from ..messages import Media, Message, Text, Thinking, ToolCall, ToolResult

logger = logging.getLogger("agentscope_context_ext")

DEFAULT_MEDIA_TOKEN_COST = 1280

_TEXT_PART_TYPES = {"text", "input_text", "output_text"}
_MEDIA_PART_TYPES = {
    "image",
    "image_url",
    "input_image",
    "audio",
    "input_audio",
    "video",
    "video_url",
    "file",
}
_MEDIA_KEYS = ("image", "image_url", "audio", "input_audio", "video")
_CACHE_SIZE = 200_000
MEMO_MIN_CHARS = 2048
"""Texts at least this long keep their count among the last :data:`MEMO_SIZE` counted."""
MEMO_SIZE = 64


class TokenCounter:
    """Counts tokens offline with one backend.

    Build one with :func:`agentscope_context_ext.core.tokens.get_token_counter`.

    Args:
        backend (`str`): ``qwen``, ``o200k_base``, ``cl100k_base`` or ``estimate``.
        encode_count (`Callable[[str], int]`): Text -> token count for that backend.
        media_token_cost (`int`): Tokens counted per image/audio/video block.
        memo_size (`int`): How many large texts keep their count (``0``: none).
    """

    def __init__(
        self,
        backend: str,
        encode_count: Callable[[str], int],
        media_token_cost: int = DEFAULT_MEDIA_TOKEN_COST,
        memo_size: int = MEMO_SIZE,
    ) -> None:
        self.backend = backend
        self.media_token_cost = media_token_cost
        self._encode_count = encode_count
        self._msg_cache: OrderedDict[str, tuple[tuple, int]] = OrderedDict()
        self._text_counts: OrderedDict[str, int] = OrderedDict()
        self._last_tools: tuple[list[dict], int] | None = None
        self._memo_size = memo_size
        self.tokenized_messages = 0
        """How many times a message was actually tokenized (cache misses); for tests/benchmarks."""

    @property
    def exact(self) -> bool:
        """Whether counts come from a real vocabulary (not ``estimate``)."""
        return self.backend != "estimate"

    # ----------------------------------------------------------------- text

    def count_text(self, text: str) -> int:
        """Tokens of ``text`` with this counter's vocabulary."""
        if not text:
            return 0
        if len(text) < MEMO_MIN_CHARS or not self._memo_size:
            return self._encode_count(text)
        known = self._text_counts.get(text)
        if known is not None:
            self._text_counts.move_to_end(text)
            return known
        count = self._encode_count(text)
        self._text_counts[text] = count
        if len(self._text_counts) > self._memo_size:
            self._text_counts.popitem(last=False)
        return count

    def known_count(self, text: str) -> int | None:
        """The count of ``text`` if it is one of the large texts counted lately, else ``None``
        (nothing is tokenized)."""
        if len(text) < MEMO_MIN_CHARS:
            return None
        return self._text_counts.get(text)

    # ------------------------------------------------------- formatted prompts

    async def count(
        self,
        messages: list[dict],
        tools: list[dict] | None = None,
        **kwargs: Any,
    ) -> int:
        """Tokens of a formatted prompt (a formatter's output) plus tool schemas.

        The signature of AgentScope 1.x's ``TokenCounterBase.count``: the 1.x adapter's
        ``TokenCounter`` is one, and can be passed wherever AgentScope takes a token counter.
        """
        return self.count_formatted(messages, tools)

    def count_formatted(self, messages: Sequence[dict], tools: list[dict] | None = None) -> int:
        """Synchronous :meth:`count`."""
        total = sum(self.count_formatted_message(message) for message in messages)
        return total + self.count_tools(tools)

    def count_formatted_message(self, message: dict) -> int:
        """Tokens of one formatted message (OpenAI, DashScope or Anthropic layout)."""
        text, media = render_formatted_message(message)
        return self.count_text(text) + media * self.media_token_cost

    def count_tools(self, tools: list[dict] | None) -> int:
        """Tokens of the tool JSON schemas as they are sent. The last schemas counted are kept
        (a copy) with their count: schemas equal to them (compared value by value, so a schema
        edited in any way is counted again) are not rendered or counted again."""
        if not tools:
            return 0
        last = self._last_tools
        if last is not None and last[0] == tools:
            return last[1]
        rendered = "<tools>\n" + json.dumps(tools, ensure_ascii=False, default=str) + "\n</tools>"
        count = self.count_text(rendered)
        try:
            self._last_tools = (copy.deepcopy(tools), count)
        except Exception:  # noqa: BLE001 - a schema that cannot be copied is counted each time
            self._last_tools = None
        return count

    # --------------------------------------------------------------- messages

    def count_view(self, msg: Message) -> int:
        """Tokens of a message as an OpenAI/DashScope formatter would send it, cached.

        The cache key is the message id plus a fingerprint of its content that is O(parts) to
        compute (string hashes are cached by Python), so an unchanged message costs no
        tokenization, and a message edited in place (e.g. re-truncated) is counted again.
        """
        fingerprint = content_fingerprint(msg)
        cached = self._msg_cache.get(msg.id)
        if cached is not None and cached[0] == fingerprint:
            self._msg_cache.move_to_end(msg.id)
            return cached[1]
        count = sum(self.count_formatted_message(part) for part in view_to_formatted(msg))
        self.tokenized_messages += 1
        self._msg_cache[msg.id] = (fingerprint, count)
        if len(self._msg_cache) > _CACHE_SIZE:
            self._msg_cache.popitem(last=False)
        return count

    def forget(self, msg_ids: Iterable[str]) -> None:
        """Drop cached counts of messages that left the context."""
        for msg_id in msg_ids:
            self._msg_cache.pop(msg_id, None)

    def __repr__(self) -> str:
        return f"TokenCounter(backend={self.backend!r}, media_token_cost={self.media_token_cost})"


# --------------------------------------------------------------------- rendering


def render_formatted_message(message: dict) -> tuple[str, int]:
    """Lay out one formatted message as chat-template text; return (text, media block count)."""
    pieces: list[str] = []
    media = _collect(message.get("content"), pieces)
    for call in message.get("tool_calls") or []:
        function = call.get("function") or {}
        arguments = function.get("arguments", "")
        if not isinstance(arguments, str):
            arguments = json.dumps(arguments, ensure_ascii=False, default=str)
        pieces.append(
            f'<tool_call>\n{{"name": {json.dumps(function.get("name"), ensure_ascii=False)}, '
            f'"arguments": {arguments}}}\n</tool_call>'
        )
    role = message.get("role", "user")
    return f"<|im_start|>{role}\n" + "\n".join(pieces) + "<|im_end|>\n", media


def _collect(content: Any, pieces: list[str]) -> int:
    """Append the text of ``content`` to ``pieces``; return how many media parts it holds."""
    if content is None:
        return 0
    if isinstance(content, str):
        pieces.append(content)
        return 0
    if not isinstance(content, list):
        pieces.append(json.dumps(content, ensure_ascii=False, default=str))
        return 0
    media = 0
    for part in content:
        if isinstance(part, str):
            pieces.append(part)
            continue
        if not isinstance(part, dict):
            continue
        kind = part.get("type")
        if kind in _TEXT_PART_TYPES or (kind is None and "text" in part):
            pieces.append(str(part.get("text", "")))
        elif kind == "thinking":
            pieces.append(str(part.get("thinking", "")))
        elif kind == "tool_use":  # Anthropic layout
            arguments = json.dumps(part.get("input", {}), ensure_ascii=False, default=str)
            pieces.append(
                f'<tool_call>\n{{"name": {json.dumps(part.get("name"), ensure_ascii=False)}, '
                f'"arguments": {arguments}}}\n</tool_call>'
            )
        elif kind == "tool_result":  # Anthropic layout
            media += _collect(part.get("content"), pieces)
        elif kind in _MEDIA_PART_TYPES or any(key in part for key in _MEDIA_KEYS):
            media += 1
        else:
            pieces.append(json.dumps(part, ensure_ascii=False, default=str))
    return media


def view_to_formatted(msg: Message) -> list[dict]:
    """The formatted messages an OpenAI/DashScope formatter makes of ``msg``, for counting.

    Text and tool calls stay in one message of the sender's role; every tool result becomes a
    ``tool`` message of its own, as the formatters lay them out. Thinking is not sent.
    """
    parts: list[dict] = []
    tool_calls: list[dict] = []
    results: list[dict] = []
    for part in msg.parts:
        if isinstance(part, Text):
            parts.append({"type": "text", "text": part.text})
        elif isinstance(part, Media):
            parts.append({"type": part.kind})
        elif isinstance(part, ToolCall):
            arguments = json.dumps(dict(part.arguments), ensure_ascii=False, default=str)
            tool_calls.append({"function": {"name": part.name, "arguments": arguments}})
        elif isinstance(part, ToolResult):
            content: list[dict] = [{"type": "text", "text": part.text}] if part.text else []
            content += [{"type": m.kind} for m in part.media]
            results.append({"role": "tool", "content": content})
    formatted = []
    if parts or tool_calls:
        formatted.append({"role": msg.role, "content": parts, "tool_calls": tool_calls})
    return formatted + results


def content_fingerprint(msg: Message) -> tuple:
    """A cheap value that changes whenever the content of ``msg`` changes."""
    return (msg.role, *(_part_fingerprint(part) for part in msg.parts))


def _part_fingerprint(part: object) -> object:
    if isinstance(part, Text | Thinking):
        return (type(part).__name__, hash(part.text))
    if isinstance(part, ToolCall):
        return ("u", part.id, part.name, _input_fingerprint(dict(part.arguments)))
    if isinstance(part, ToolResult):
        return ("r", part.id, hash(part.text), *(_part_fingerprint(m) for m in part.media))
    if isinstance(part, Media):
        return (part.kind, hash(part.data or part.url or ""))
    return hash(repr(part))


def _input_fingerprint(value: Any) -> Any:
    # Tool inputs are small dicts of JSON values; hashing their strings keeps this O(size of
    # the keys), and big string arguments hit Python's cached string hash.
    if isinstance(value, dict):
        return tuple((key, _input_fingerprint(item)) for key, item in value.items())
    if isinstance(value, list):
        return tuple(_input_fingerprint(item) for item in value)
    if isinstance(value, str):
        return hash(value)
    return repr(value)
