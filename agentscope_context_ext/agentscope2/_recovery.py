"""Whether every recorded text, call and output of a 2.x replay can be recovered byte for byte
(benchmark B3): from the agent's context and ``dialog/``, texts by content, calls and outputs by
id, a cut output or an offloaded user text from the saved file its notice names."""

from __future__ import annotations

import json
from typing import Any

from agentscope.message import Msg, TextBlock, ThinkingBlock, ToolCallBlock, ToolResultBlock

from ..core.pipeline import TruncationRecord
from ..core.truncation import split_notice
from ..core.workspace import Storage, ToolResultStore
from ._convert import output_text
from ._result_blocks import META_KEY, Records

__all__ = ["recovery_problems"]


def recovery_problems(
    play: Any,
    context: list[Msg],
    dialog: Any,
    storage: Storage,
    unplayed: set[str] = frozenset(),
    records: Records | None = None,
) -> list[str]:
    """Every way a recorded text, call or output is NOT recoverable byte for byte from the
    context and ``dialog/`` (texts by content, an offloaded user text and a cut output from
    the saved file its notice names, calls and outputs by id). Empty: all are. ``unplayed``:
    the texts and call ids of replies refused before they were played (never in the
    context); ``records``: the live context's records (a saved message carries its own)."""
    texts: set[str] = set()
    calls: dict[str, str] = {}
    results: dict[str, str] = {}
    live = {id(msg) for msg in context}
    messages = [*(r.msg for r in dialog.iter_records()), *context]
    store = ToolResultStore(storage)
    for msg in messages:
        if isinstance(msg.content, str):
            texts.add(msg.content)
            continue
        if id(msg) in live and records is not None:
            parts_of = records.texts(msg)
        else:
            parts_of = (msg.metadata or {}).get(META_KEY, {}).get("texts", {})
        for index, block in enumerate(msg.content):
            if isinstance(block, TextBlock):
                texts.add(block.text)
                parts = split_notice(block.text)
                saved = storage.read(parts[1].file_path) if parts is not None else None
                if saved is not None:  # a user's text offloaded whole
                    texts.add(saved.decode("utf-8", errors="replace"))
                record = TruncationRecord.from_dict(parts_of.get(str(block.id or index)))
                part = record.saved_part(store)
                if part is not None:  # one of many parts saved together in one file
                    texts.add(part)
            elif isinstance(block, ThinkingBlock):
                texts.add(block.thinking)
            elif isinstance(block, ToolCallBlock):
                calls.setdefault(block.id, block.input)
            elif isinstance(block, ToolResultBlock):
                results.setdefault(block.id, output_text(block.output))
    problems = [f"tool result {i}: its call is not in the transcript" for i in play.unpaired]
    problems += [
        f"a text is missing: {t[:60]!r}"
        for t in play.texts
        if t and t not in texts and t not in unplayed
    ]
    for call_id, arguments in play.calls.items():
        if call_id in unplayed:
            continue
        kept = calls.get(call_id)
        if kept is None:
            problems.append(f"tool call {call_id}: missing")
        elif json.loads(kept or "{}") != (arguments if isinstance(arguments, dict) else {}):
            problems.append(f"tool call {call_id}: its arguments differ")
    for call_id, original in play.results.items():
        if call_id in unplayed:
            continue
        kept = results.get(call_id)
        if kept is None:
            problems.append(f"tool result {call_id}: missing")
        elif kept != original:
            parts = split_notice(kept)
            data = storage.read(parts[1].file_path) if parts is not None else None
            if parts is None:
                problems.append(f"tool result {call_id}: changed without a notice")
            elif data is None or data.decode("utf-8") != original:
                problems.append(f"tool result {call_id}: the saved file differs or is missing")
    return problems
