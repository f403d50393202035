"""The storage layer of the context (design §2.2): dialog logs, saved tool results, locks, on a
local folder or a Redis server behind one :class:`Storage` interface."""

from ._boundary import BOUNDARY_REFUSAL, ReadBoundary
from ._breaker import Breaker
from ._dialog_records import DialogRecord, DialogRef, DictCodec, RecordCodec, dialog_date
from ._dialog_store import DIALOG_DIRNAME, DialogStore
from ._files import (
    atomic_write_bytes,
    atomic_write_text,
    cache_folder_path,
    check_writable,
    ensure_directory,
    file_lock,
    is_within,
    private_cache_folder,
)
from ._open import Placement, open_workspace
from ._portal import (
    blocking_calls,
    in_portal,
    inside_portal,
    portal,
    portal_stream,
    waits_pending,
)
from ._remote_calls import DEFAULT_TIMEOUT_SECONDS, RemoteCalls
from ._storage import (
    LocalStorage,
    Storage,
    check_storage_writable,
    is_storage_url,
    open_storage,
    redact_url,
    refuse_other_schemes,
    workspace_url_error,
)
from ._sub_storage import SubStorage
from ._tool_result_store import (
    CLEANUP_INTERVAL_SECONDS,
    MAX_TTL_DAYS,
    MESSAGE_DIRNAME,
    TOOL_RESULT_DIRNAME,
    ToolResultStore,
    saved_paths,
)

__all__ = [
    "BOUNDARY_REFUSAL",
    "CLEANUP_INTERVAL_SECONDS",
    "DEFAULT_TIMEOUT_SECONDS",
    "DIALOG_DIRNAME",
    "MAX_TTL_DAYS",
    "MESSAGE_DIRNAME",
    "TOOL_RESULT_DIRNAME",
    "Breaker",
    "DialogRecord",
    "DialogRef",
    "DialogStore",
    "DictCodec",
    "LocalStorage",
    "Placement",
    "ReadBoundary",
    "RecordCodec",
    "RemoteCalls",
    "Storage",
    "SubStorage",
    "ToolResultStore",
    "atomic_write_bytes",
    "atomic_write_text",
    "blocking_calls",
    "cache_folder_path",
    "check_storage_writable",
    "check_writable",
    "dialog_date",
    "ensure_directory",
    "file_lock",
    "in_portal",
    "inside_portal",
    "is_storage_url",
    "is_within",
    "open_storage",
    "open_workspace",
    "portal",
    "portal_stream",
    "private_cache_folder",
    "redact_url",
    "refuse_other_schemes",
    "saved_paths",
    "waits_pending",
    "workspace_url_error",
]
