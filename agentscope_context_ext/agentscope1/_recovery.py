"""Whether every original message of a replay can be recovered byte for byte (benchmark B3):
from memory, ``dialog/`` (by message id) and the saved ``tool_result/`` files its notices name."""

from __future__ import annotations

import base64
from pathlib import Path

from agentscope.message import Msg

from ..core.pipeline import TruncationRecord
from ..core.truncation import encode_text, split_notice
from ..core.workspace import DialogStore, Storage, ToolResultStore, open_storage
from ._messages import META_KEY

__all__ = ["recovery_problems"]


def recovery_problems(
    originals: list[Msg],
    in_memory: list[Msg],
    dialog: DialogStore,
    workspace: Path | str | Storage,
) -> list[str]:
    """Every way an original message is NOT recoverable byte for byte (empty: all are)."""
    storage = open_storage(workspace)
    store = ToolResultStore(storage)
    stored = {m.id: m for m in in_memory}
    for record in dialog.iter_records():
        stored.setdefault(record.msg.id, record.msg)
    problems = []
    for original in originals:
        kept = stored.get(original.id)
        if kept is None:
            problems.append(f"{original.id}: missing from memory and dialog/")
            continue
        if isinstance(original.content, str) or isinstance(kept.content, str):
            if not _same_text(original.content, kept.content, storage):
                problems.append(f"{original.id}: text differs")
            continue
        records = (kept.metadata or {}).get(META_KEY, {}).get("texts", {})
        for index, (before, after) in enumerate(zip(original.content, kept.content, strict=False)):
            if before == after:
                continue
            if before.get("type") == "text" and after.get("type") == "text":
                # one of many parts saved together in one file: read back by its record
                part = TruncationRecord.from_dict(records.get(str(index))).saved_part(store)
                if part != before.get("text") and not _same_text(
                    before.get("text"), after.get("text"), storage
                ):
                    problems.append(f"{original.id}: a text block differs")
                continue
            if before.get("type") != "tool_result":
                problems.append(f"{original.id}: a {before.get('type')} block differs")
                continue
            problem = _result_problem(before, after, storage)
            if problem:
                problems.append(f"{original.id}: {problem}")
        if len(original.content) != len(kept.content):
            problems.append(f"{original.id}: block count differs")
    return problems


def _same_text(original: object, kept: object, storage: Storage) -> bool:
    """Whether ``kept`` is ``original``, or a notice whose saved file holds it (a user's text
    offloaded because it alone would not fit the window)."""
    if original == kept:
        return True
    parts = split_notice(kept) if isinstance(kept, str) else None
    if parts is None or not isinstance(original, str):
        return False
    data = storage.read(parts[1].file_path)
    return data is not None and data.decode("utf-8", errors="replace") == original


def _result_problem(before: dict, after: dict, storage: Storage) -> str | None:
    original_text, original_media = _parts(before.get("output"))
    kept_text, kept_media = _parts(after.get("output"), skip_placeholders=True)
    placeholders = _placeholders(after.get("output"))
    if original_text != kept_text:
        parts = split_notice(kept_text)
        if parts is None:
            return "a tool result changed without a notice"
        try:
            data = storage.read(parts[1].file_path)
        except OSError:
            data = None
        if data is None:
            return f"saved file {parts[1].file_path} is missing"
        # bytes: "\r\n" must stay "\r\n", and undecodable bytes are saved as they were
        if data != encode_text(original_text):
            return f"saved file {parts[1].file_path} differs from the original output"
    for media in original_media:
        if media in kept_media:
            continue
        source = media.get("source") or {}
        if source.get("type") != "base64":
            continue
        placeholder = next((t for t in placeholders if "saved copy: " in t), None)
        if placeholder is None:
            return "an image was dropped without a saved copy"
        copy = storage.read(placeholder.split("saved copy: ")[1].rstrip("]"))
        data = str(source.get("data", "")).split(",", 1)[-1]
        if copy is None or copy != base64.b64decode(data):
            return "a saved media copy differs"
    return None


def _is_placeholder(block: object) -> bool:
    text = (
        str(block.get("text", ""))
        if isinstance(block, dict) and block.get("type") == "text"
        else ""
    )
    return text.startswith("[") and "removed from the context" in text


def _placeholders(output: object) -> list[str]:
    return (
        [str(b["text"]) for b in output if _is_placeholder(b)] if isinstance(output, list) else []
    )


def _parts(output: object, skip_placeholders: bool = False) -> tuple[str, list[dict]]:
    if isinstance(output, str):
        return output, []
    if isinstance(output, list):
        texts = [
            str(b.get("text", ""))
            for b in output
            if isinstance(b, dict)
            and b.get("type") == "text"
            and not (skip_placeholders and _is_placeholder(b))
        ]
        media = [
            b
            for b in output
            if isinstance(b, dict) and b.get("type") in ("image", "audio", "video")
        ]
        return "\n".join(texts), media
    return str(output), []
