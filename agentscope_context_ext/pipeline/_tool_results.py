"""The two truncation stages applied to tool-result messages (SPEC 3.2, 3.3).

Stage one runs the moment a result lands in memory: text over the limit is saved whole to
``tool_result/`` FIRST, then replaced by excerpt + notice. Stage two runs on results older
than the last ``recent_n`` tool-result messages and cuts them down to ``second_max_bytes``
without touching the saved file. Each block's state is recorded in the message's metadata
(``result_state``), so a block is processed once per stage, even after a session reload, and
stage two re-cuts only notices this package wrote (a forged notice in tool output is treated
as fresh text and saved).

Both stages also respect the window: one result never takes more than ``max_window_share``
of ``max_input_tokens``.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from agentscope.message import Msg, TextBlock

from ..core.config import TruncationConfig
from ..memory import result_state
from ..core.tokens import TokenCounter
from ..core.truncation import (
    RETRUNCATE_SLACK_BYTES,
    encoded_size,
    split_notice,
    truncate_fresh,
    truncate_text_output,
)
from ..core.workspace import ToolResultStore

logger = logging.getLogger("agentscope_context_ext")

_PATH_ARGUMENTS = ("file_path", "path", "filepath", "filename", "file")
_MEDIA_TYPES = ("image", "audio", "video")
_MAX_FIT_ROUNDS = 8
NOTICE_RESERVE_TOKENS = 160
"""Tokens kept free for the truncation notice when fitting an excerpt under the window cap."""


@dataclass
class TruncationOutcome:
    """What one stage did to one tool result."""

    stage: int
    """1 or 2."""
    call_id: str
    """The tool call id."""
    tool: str
    """The tool name."""
    path: str | None
    """Where the full text is (a ``tool_result/`` file or the source file of ``read_file``)."""
    bytes_before: int
    """Size of the text before."""
    bytes_after: int
    """Size of the text after."""
    tokens_before: int
    """Tokens of the text before (estimated from the excerpt's tokens per byte)."""
    tokens_after: int
    """Tokens of the text after."""
    bytes_offloaded: int = 0
    """Bytes written to ``tool_result/`` by this step."""
    media_replaced: int = 0
    """Media blocks replaced by a placeholder."""


class ToolResultTruncator:
    """Applies stage one and stage two to the tool results of messages, in place.

    Args:
        config (`TruncationConfig`): Limits and policies.
        store (`ToolResultStore`): Where full texts (and old media) are saved.
        counter (`TokenCounter`): Measures the window share.
        max_result_tokens (`int`): Token cap of one result (window share).
        read_file_name (`str`): Name of this package's ``read_file`` tool, whose notices point
            at source files and are never copied.
    """

    def __init__(
        self,
        config: TruncationConfig,
        store: ToolResultStore,
        counter: TokenCounter,
        max_result_tokens: int,
        read_file_name: str = "read_file",
    ) -> None:
        self.config = config
        self.store = store
        self.counter = counter
        self.max_result_tokens = max(64, max_result_tokens)
        self.read_file_name = read_file_name
        # A token cap can be turned into a byte budget only loosely (1 token is 1 to ~6
        # bytes); start from 4 bytes per token and correct by measuring.
        self._max_result_bytes = self.max_result_tokens * 4

    # ------------------------------------------------------------ stage one

    def stage_one(self, msg: Msg, tool_input: Callable[[str], dict]) -> list[TruncationOutcome]:
        """Truncate every not-yet-processed tool result of ``msg``.

        Raises:
            `OSError`: Only if saving failed in a way the caller should see; a failed save
                leaves the result untruncated and is reported in the outcome list as nothing.
        """
        outcomes = []
        states = result_state(msg)
        for block in _tool_result_blocks(msg):
            call_id = str(block.get("id"))
            state = states.get(call_id)
            if state is not None and state.get("stage", 0) >= 1:
                continue
            outcome = self._stage_one_block(block, tool_input(call_id), states)
            if outcome is not None:
                outcomes.append(outcome)
        return outcomes

    def _stage_one_block(
        self, block: dict, tool_input: dict, states: dict[str, dict]
    ) -> TruncationOutcome | None:
        call_id, name = str(block.get("id")), str(block.get("name"))
        source = _source_path(tool_input)
        markdown = self.config.is_markdown(source)
        if name in self.config.exempt_tools:
            states[call_id] = {"stage": 1, "exempt": True}
            return None
        text, media = _split_output(block.get("output"))
        if text is None:
            states[call_id] = {"stage": 1, "markdown": markdown}
            return None
        first_limit, _ = self.config.limits_for(source)
        limit = min(first_limit, self._max_result_bytes)
        before_bytes = encoded_size(text)

        notice = split_notice(text)
        if name == self.read_file_name and notice is not None and notice[1].file_path == source:
            # Our read_file already cut its output with a notice on the source file: never copy
            # it, only make sure it respects the window.
            fitted = self._fit(text, limit)
            states[call_id] = {
                "stage": 1,
                "path": source,
                "source_file": True,
                "markdown": markdown,
            }
            if fitted == text:
                return None
            return self._apply(block, fitted, media, 1, name, source, before_bytes, 0)

        if before_bytes <= limit and self._tokens_fit(text, before_bytes):
            states[call_id] = {"stage": 1, "markdown": markdown}
            if not _is_clean_output(block.get("output"), text):
                block["output"] = _rebuild_output(text, media, block.get("output"))
            return None
        try:
            path = self.store.save(text)
        except OSError as exc:
            # Never lose the result: it stays whole in memory, and we say so.
            logger.warning("cannot save tool result %s (%s); keeping it untruncated", call_id, exc)
            states[call_id] = {"stage": 1, "save_failed": str(exc), "markdown": markdown}
            return None
        truncated = self._fit(truncate_fresh(text, max_bytes=limit, file_path=path), limit)
        states[call_id] = {"stage": 1, "path": path, "bytes": before_bytes, "markdown": markdown}
        return self._apply(block, truncated, media, 1, name, path, before_bytes, before_bytes)

    # ------------------------------------------------------------ stage two

    def stage_two_candidates(self, msgs: list[Msg]) -> list[tuple[Msg, dict]]:
        """Blocks of ``msgs`` (already old) that stage two has not processed yet."""
        found = []
        for msg in msgs:
            states = result_state(msg)
            for block in _tool_result_blocks(msg):
                state = states.get(str(block.get("id")), {})
                if state.get("exempt") or state.get("stage", 0) >= 2:
                    continue
                found.append((msg, block))
        return found

    def stage_two_block(self, msg: Msg, block: dict, tool_input: dict) -> TruncationOutcome | None:
        """Cut one old result down to the stage-two limit; replace its media by placeholders."""
        states = result_state(msg)
        call_id, name = str(block.get("id")), str(block.get("name"))
        state = states.setdefault(call_id, {"stage": 0})
        source = _source_path(tool_input)
        markdown = state["markdown"] if "markdown" in state else self.config.is_markdown(source)
        second_limit = (
            self.config.markdown_second_max_bytes if markdown else self.config.second_max_bytes
        )
        text, media = _split_output(block.get("output"))
        media, replaced = self._replace_media(media)
        if text is None:
            state["stage"] = 2
            if replaced:
                block["output"] = _rebuild_output("", media, block.get("output"))
                return TruncationOutcome(
                    2, call_id, name, None, 0, 0, 0, 0, media_replaced=replaced
                )
            return None
        before_bytes = encoded_size(text)
        offloaded = 0
        path = state.get("path")
        if path and split_notice(text) is not None:
            new_text = truncate_text_output(text, max_bytes=second_limit)
        elif before_bytes > second_limit:
            try:
                path = self.store.save(text)
            except OSError as exc:
                logger.warning(
                    "cannot save tool result %s (%s); not re-truncating it", call_id, exc
                )
                return None
            offloaded = before_bytes
            state["path"] = path
            new_text = truncate_fresh(text, max_bytes=second_limit, file_path=path)
        else:
            new_text = text
        state["stage"] = 2
        if new_text == text and not replaced:
            return None
        return self._apply(block, new_text, media, 2, name, path, before_bytes, offloaded, replaced)

    # ------------------------------------------------------------ internals

    def _apply(
        self,
        block: dict,
        new_text: str,
        media: list[dict],
        stage: int,
        name: str,
        path: str | None,
        before_bytes: int,
        offloaded: int,
        replaced: int = 0,
    ) -> TruncationOutcome:
        block["output"] = _rebuild_output(new_text, media, block.get("output"))
        after_bytes = encoded_size(new_text)
        tokens_after = self.counter.count_text(new_text)
        # Tokenizing a 200 KB original only to report "tokens saved" would cost more than the
        # whole step: the excerpt is a sample of the same text, so scale its count by size.
        tokens_before = (
            round(tokens_after * before_bytes / after_bytes) if after_bytes else tokens_after
        )
        return TruncationOutcome(
            stage=stage,
            call_id=str(block.get("id")),
            tool=name,
            path=path,
            bytes_before=before_bytes,
            bytes_after=after_bytes,
            tokens_before=max(tokens_before, tokens_after),
            tokens_after=tokens_after,
            bytes_offloaded=offloaded,
            media_replaced=replaced,
        )

    def _tokens_fit(self, text: str, size: int) -> bool:
        # Cheap first: a text of at most max_tokens bytes cannot exceed max_tokens tokens.
        return (
            size <= self.max_result_tokens
            or self.counter.count_text(text) <= self.max_result_tokens
        )

    def _fit(self, text: str, limit: int) -> str:
        """Re-cut an excerpt + notice until it is within the token cap.

        Only the excerpt is measured, against the cap minus a fixed reserve for the notice: the
        notice names a random file, whose token count varies, and the cut must not depend on it
        (the same session must give the same prompts).
        """
        budget = max(self.max_result_tokens - NOTICE_RESERVE_TOKENS, 1)
        for _ in range(_MAX_FIT_ROUNDS):
            parts = split_notice(text)
            if parts is None:
                return text
            excerpt, notice = parts
            tokens = self.counter.count_text(excerpt)
            if tokens <= budget or notice.excerpt_bytes <= 1:
                return text
            target = int(notice.excerpt_bytes * budget / tokens * 0.95)
            target = max(1, min(target, notice.excerpt_bytes - RETRUNCATE_SLACK_BYTES - 1))
            text = truncate_text_output(text, max_bytes=target)
        return text

    def _replace_media(self, media: list[dict]) -> tuple[list[dict], int]:
        if not media:
            return media, 0
        kept: list[dict] = []
        replaced = 0
        for block in media:
            kind = block.get("type")
            if kind not in _MEDIA_TYPES:
                kept.append(block)
                continue
            kept.append(TextBlock(type="text", text=self._media_placeholder(block)))
            replaced += 1
        return kept, replaced

    def _media_placeholder(self, block: dict) -> str:
        kind = block.get("type")
        source = block.get("source") or {}
        if isinstance(source, dict) and source.get("type") == "base64":
            media_type = str(source.get("media_type", "application/octet-stream"))
            data = str(source.get("data", ""))
            if data.startswith("data:") and "," in data:
                data = data.split(",", 1)[1]
            try:
                raw = base64.b64decode(data, validate=False)
                path = self.store.save_media(raw, media_type)
            except (binascii.Error, ValueError, OSError) as exc:
                logger.warning(
                    "cannot save an old %s block (%s); dropping it from context", kind, exc
                )
                return f"[{kind} ({media_type}) removed from the context; it could not be saved]"
            return (
                f"[{kind} ({media_type}, {len(raw)} bytes) removed from the context to save tokens; "
                f"saved copy: {path}]"
            )
        url = source.get("url") if isinstance(source, dict) else None
        return f"[{kind} removed from the context to save tokens; source: {url}]"


# ---------------------------------------------------------------------- helpers


def _tool_result_blocks(msg: Msg) -> list[dict]:
    if not isinstance(msg.content, list):
        return []
    return [b for b in msg.content if isinstance(b, dict) and b.get("type") == "tool_result"]


def _source_path(tool_input: dict) -> str | None:
    for key in _PATH_ARGUMENTS:
        value = tool_input.get(key)
        if isinstance(value, str) and value.strip():
            return value
    return None


def _split_output(output: Any) -> tuple[str | None, list[dict]]:
    """(all text joined, the non-text blocks) of a tool output of any shape."""
    if output is None:
        return None, []
    if isinstance(output, str):
        return _clean(output), []
    if isinstance(output, list):
        texts, media = [], []
        for item in output:
            if isinstance(item, dict) and item.get("type") == "text":
                texts.append(str(item.get("text", "")))
            elif isinstance(item, dict) and item.get("type") in _MEDIA_TYPES:
                media.append(item)
            elif isinstance(item, str):
                texts.append(item)
            else:
                texts.append(_as_text(item))
        return (_clean("\n".join(texts)) if texts else None), media
    return _clean(_as_text(output)), []


def _as_text(value: Any) -> str:
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (RecursionError, ValueError, TypeError):
        try:
            return str(value)
        except RecursionError:
            return f"<{type(value).__name__} too deeply nested to show>"


def _is_clean_output(output: Any, text: str) -> bool:
    """Whether ``output`` is already in the shape the formatters expect, with ``text`` as is."""
    if isinstance(output, str):
        return output == text
    if not isinstance(output, list):
        return False
    texts = []
    for item in output:
        if not isinstance(item, dict) or item.get("type") not in ("text", *_MEDIA_TYPES):
            return False
        if item.get("type") == "text":
            if not isinstance(item.get("text"), str):
                return False
            texts.append(item["text"])
    return "\n".join(texts) == text


def _rebuild_output(text: str, media: list[dict], original: Any) -> Any:
    if isinstance(original, str) and not media:
        return text
    blocks: list[dict] = [TextBlock(type="text", text=text)] if text else []
    return blocks + list(media)


def _clean(text: str) -> str:
    # Lone surrogates (undecodable bytes) cannot be sent to a provider or written as UTF-8.
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-8", errors="replace").decode("utf-8")
