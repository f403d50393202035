"""A folder of a storage seen as a storage of its own: every key under one prefix.

A served agent keeps one session's files (its dialog, its saved tool results) apart from
another session's in one shared store (design §11.3): ``SubStorage(redis, "agents/a1/sessions/s1")``
is that session's workspace, ``SubStorage(redis, "agents/a1")`` the agent's long-term memory.
The stores above it see plain workspace keys (``dialog/2026-12-06.jsonl``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from ._keys import check_key
from ._storage import Storage

__all__ = ["SubStorage"]


class SubStorage:
    """The keys of ``base`` under ``folder``, as a :class:`Storage`.

    Args:
        base (`Storage`): The whole store.
        folder (`str`): A workspace key (``agents/a1/sessions/s1``) every key is put under.

    Raises:
        `ValueError`: ``folder`` is not a workspace key (absolute, or with ``..``).
    """

    def __init__(self, base: Storage, folder: str) -> None:
        self.base = base
        self.folder = check_key(folder.strip("/"))
        self.location = f"{base.location} ({self.folder}/)"
        self.atomic_appends = base.atomic_appends

    def _key(self, key: str) -> str:
        return f"{self.folder}/{check_key(key)}"

    def read(self, key: str, limit: int | None = None) -> bytes | None:
        return self.base.read(self._key(key), limit)

    def write(self, key: str, data: bytes, ttl_seconds: float | None = None) -> None:
        self.base.write(self._key(key), data, ttl_seconds)

    def delete(self, key: str) -> bool:
        return self.base.delete(self._key(key))

    def touch(self, key: str, ttl_seconds: float | None = None) -> bool:
        return self.base.touch(self._key(key), ttl_seconds)

    def mtime(self, key: str) -> float | None:
        return self.base.mtime(self._key(key))

    def size(self, key: str) -> int:
        return self.base.size(self._key(key))

    def version(self, key: str) -> tuple | None:
        return self.base.version(self._key(key))

    def log_versions(self, keys: list[str]) -> list[tuple | None]:
        return self.base.log_versions([self._key(key) for key in keys])

    def names(self, prefix: str) -> list[str]:
        inner = prefix.strip("/")
        return self.base.names(f"{self.folder}/{inner}" if inner else self.folder)

    def append_lines(self, key: str, lines: list[bytes]) -> int:
        return self.base.append_lines(self._key(key), lines)

    def line_count(self, key: str) -> int:
        return self.base.line_count(self._key(key))

    def lines(self, key: str, start: int = 1) -> Iterator[tuple[int, bytes]]:
        return self.base.lines(self._key(key), start)

    def lines_backwards(self, key: str) -> Iterator[tuple[int, bytes]]:
        return self.base.lines_backwards(self._key(key))

    def lock(self, name: str, timeout: float = 30.0) -> contextlib.AbstractContextManager:
        return self.base.lock(self._key(name), timeout)
