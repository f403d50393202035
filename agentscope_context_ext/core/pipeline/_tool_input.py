"""What the truncation stages read of a tool call's arguments (design §3.2): the file it read or
wrote (whose kind sets the limits, and which ``read_file``'s notices name) and where a read
began.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["PATH_ARGUMENTS", "read_position", "source_path"]

PATH_ARGUMENTS = ("file_path", "path", "filepath", "filename", "file")
"""The argument names a tool's file is looked for under, in this order."""


def source_path(tool_input: Mapping[str, Any]) -> str | None:
    """The file a tool was called on (the first of :data:`PATH_ARGUMENTS` that is a
    non-empty string), else ``None``."""
    for key in PATH_ARGUMENTS:
        value = tool_input.get(key)
        if isinstance(value, str) and value.strip():
            return value
    return None


def read_position(tool_input: Mapping[str, Any]) -> tuple[int, int]:
    """(start_line, start_byte) a read began at, from its arguments (1 and 0 when absent)."""
    try:
        start_line = int(tool_input.get("start_line") or 1)
        start_byte = int(tool_input.get("start_byte") or 0)
    except (TypeError, ValueError, OverflowError):
        return 1, 0
    return max(start_line, 1), max(start_byte, 0)
