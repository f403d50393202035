"""The file-system layer of the context (SPEC 2.2): dialog files, saved tool results, locks."""

from ._dialog_records import DialogRecord, DialogRef, DictCodec, RecordCodec, dialog_date
from ._dialog_store import DIALOG_DIRNAME, DialogStore
from ._files import (
    atomic_write_bytes,
    atomic_write_text,
    check_writable,
    ensure_directory,
    file_lock,
    is_within,
)
from ._tool_result_store import (
    CLEANUP_INTERVAL_SECONDS,
    TOOL_RESULT_DIRNAME,
    ToolResultStore,
    saved_paths,
)

__all__ = [
    "CLEANUP_INTERVAL_SECONDS",
    "DIALOG_DIRNAME",
    "TOOL_RESULT_DIRNAME",
    "DialogRecord",
    "DialogRef",
    "DialogStore",
    "DictCodec",
    "RecordCodec",
    "ToolResultStore",
    "atomic_write_bytes",
    "atomic_write_text",
    "check_writable",
    "dialog_date",
    "ensure_directory",
    "file_lock",
    "is_within",
    "saved_paths",
]
