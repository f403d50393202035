"""A workspace on a Redis server: every store shared by many worker processes and machines.

Layout, under ``<prefix>:`` (``?prefix=NAME`` in the URL, default ``ace``):

- a value (``tool_result/<hash>.txt``, ``Memory.md``, a note, a journal entry) is a string, and
  the time of its last write a companion key (``<prefix>:mtime:<key>``) with the same expiry; a
  TTL is Redis's own key expiry, so saved tool results vanish by themselves after ``ttl_days``
  unless the context still names them (the cleanup then renews them);
- a log (``dialog/<date>.jsonl``) is a list, one element per line: ``RPUSH`` is atomic and
  returns the new length, so line numbers are exactly those of the local file;
- each folder keeps a set of its names (``<prefix>:dir:<folder>``) so that listing never scans
  the keyspace; names whose key expired are dropped when listed;
- a lock is a key set with ``NX`` and a lease (``PX``), released only by its holder (a token
  compared in a Lua script): a worker killed while holding it blocks the others for the lease
  at most.

Each method is one call (:class:`RemoteCalls`): a deadline (``workspace_timeout``, default 3 s,
also the client's socket timeouts; no retry inside the client, whose default made one call on a
frozen server last minutes), off the event loop inside a portal, a breaker after repeated
timeouts, every failure a :class:`WorkspaceError`. A call that ran out of time may still happen
when the server wakes up; every write here can be repeated (a saved result is named by its
content, a dialog line written twice is read once).

Durability is Redis's: with AOF and ``appendfsync always`` an acknowledged write is on the
server's disk; with ``everysec`` up to a second of writes can be lost in a server crash; without
persistence a restart loses everything (``agentscope-context inspect`` warns about that).

One module on purpose: it implements one contract (``Storage``), and the layout above is read
with the code. Reading the URL into a client is ``_redis_connection``'s.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import secrets
import time
from collections.abc import Iterator

from ..errors import WorkspaceError
from ._breaker import Breaker
from ._keys import check_key
from ._redis_connection import DEFAULT_PREFIX, LOCK_LEASE_SECONDS, connect
from ._remote_calls import DEFAULT_TIMEOUT_SECONDS, RemoteCalls

__all__ = ["RedisStorage"]

logger = logging.getLogger("agentscope_context_ext")

_PAGE = 1000
_RELEASE = """if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end
return 0"""


class RedisStorage:
    """The :class:`~agentscope_context_ext.core.workspace.Storage` of a Redis workspace.

    ``RPUSH`` numbers and appends in one atomic command, so log appends need no lock.

    Args:
        client: A ``redis.Redis`` client (bytes responses; its socket timeouts should be
            ``timeout``, and it should not retry: :meth:`from_url` makes one so).
        prefix (`str`): Namespace of every key.
        location (`str`): The URL without its password, for messages.
        lock_lease_seconds (`float`): How long a lock outlives a holder that died.
        timeout (`float`): The deadline of one call, in seconds.
        breaker (`Breaker | None`): When calls fail at once (default: after 2 calls in a row
            out of time, for 10 s; :meth:`from_url` shares one per server).

    Attributes:
        calls (`RemoteCalls`): Every round trip goes through it (its ``breaker``, its
            ``blocking_calls``: calls that blocked an event loop's thread).
    """

    atomic_appends = True

    def __init__(
        self,
        client,
        prefix: str = DEFAULT_PREFIX,
        location: str = "redis",
        lock_lease_seconds: float = LOCK_LEASE_SECONDS,
        timeout: float = DEFAULT_TIMEOUT_SECONDS,
        breaker: Breaker | None = None,
    ) -> None:
        import redis

        self.client = client
        self.prefix = prefix
        self.location = location
        self.lock_lease_seconds = lock_lease_seconds
        self.calls = RemoteCalls(
            location,
            timeout,
            timeouts=(redis.TimeoutError,),
            errors=(redis.RedisError,),
            advice="check the server with redis-cli ping",
            breaker=breaker,
        )
        self._release = client.register_script(_RELEASE)

    @classmethod
    def from_url(
        cls,
        url: str,
        timeout: float = DEFAULT_TIMEOUT_SECONDS,
        breaker: Breaker | None = None,
    ) -> RedisStorage:
        """Connect to ``redis://[user:password@]host:port/db[?prefix=NAME][&lock_lease=SECONDS]``
        and check it answers (within ``timeout`` seconds, the deadline of every call). The
        breaker is the server's (shared by every store of the process on it) unless given.

        Raises:
            `WorkspaceError`: A bad URL, no ``redis`` client installed, or no server there.
        """
        found = connect(url, timeout, breaker)
        storage = cls(
            found.client,
            found.prefix,
            found.location,
            found.lock_lease_seconds,
            timeout,
            found.breaker,
        )
        location = found.location
        try:
            storage.calls(found.client.ping)
        except WorkspaceError as exc:
            reason = str(exc).removeprefix(f"the workspace {location} ").removeprefix("failed: ")
            raise WorkspaceError(f"cannot reach the workspace {location}: {reason}") from None
        return storage

    # ------------------------------------------------------------------ keys

    def _key(self, key: str) -> str:
        return f"{self.prefix}:{check_key(key)}"

    def _dir(self, key: str) -> str:
        folder = key.rpartition("/")[0]
        return f"{self.prefix}:dir:{folder}"

    # ------------------------------------------------------------------ values

    def _mtime_key(self, key: str) -> str:
        return f"{self.prefix}:mtime:{check_key(key)}"

    def read(self, key: str, limit: int | None = None) -> bytes | None:
        return self.calls(self._read, key, limit)

    def _read(self, key: str, limit: int | None = None) -> bytes | None:
        name = self._key(key)
        kind = self.client.type(name)
        if kind == b"list":
            lines = self.client.lrange(name, 0, -1)
            data = b"".join(line + b"\n" for line in lines)
            return data if limit is None else data[:limit]
        if kind != b"string":
            return None
        if limit is None:
            return self.client.get(name)
        return self.client.getrange(name, 0, limit - 1) if limit > 0 else b""

    def write(self, key: str, data: bytes, ttl_seconds: float | None = None) -> None:
        return self.calls(self._write, key, data, ttl_seconds)

    def _write(self, key: str, data: bytes, ttl_seconds: float | None = None) -> None:
        name = self._key(key)
        px = None if ttl_seconds is None else max(1, int(ttl_seconds * 1000))
        with self.client.pipeline(transaction=True) as pipe:
            pipe.set(name, data, px=px)
            pipe.set(self._mtime_key(key), repr(time.time()), px=px)
            pipe.sadd(self._dir(key), key.rpartition("/")[2])
            pipe.execute()

    def delete(self, key: str) -> bool:
        return self.calls(self._delete, key)

    def _delete(self, key: str) -> bool:
        with self.client.pipeline(transaction=True) as pipe:
            pipe.delete(self._key(key))
            pipe.delete(self._mtime_key(key))
            pipe.srem(self._dir(key), key.rpartition("/")[2])
            deleted, _, _ = pipe.execute()
        return bool(deleted)

    def touch(self, key: str, ttl_seconds: float | None = None) -> bool:
        return self.calls(self._touch, key, ttl_seconds)

    def _touch(self, key: str, ttl_seconds: float | None = None) -> bool:
        name = self._key(key)
        px = None if ttl_seconds is None else max(1, int(ttl_seconds * 1000))
        with self.client.pipeline(transaction=True) as pipe:
            pipe.exists(name)
            if px is not None:
                pipe.pexpire(name, px)
            pipe.set(self._mtime_key(key), repr(time.time()), px=px)
            exists = pipe.execute()[0]
        if not exists:
            self.client.delete(self._mtime_key(key))
        return bool(exists)

    def mtime(self, key: str) -> float | None:
        return self.calls(self._mtime, key)

    def _mtime(self, key: str) -> float | None:
        if not self.client.exists(self._key(key)):
            return None
        mtime = self.client.get(self._mtime_key(key))
        return time.time() if mtime is None else float(mtime)

    def size(self, key: str) -> int:
        return self.calls(self._size, key)

    def _size(self, key: str) -> int:
        name = self._key(key)
        kind = self.client.type(name)
        if kind == b"string":
            return int(self.client.strlen(name))
        if kind == b"list":
            return len(self._read(key) or b"")
        return 0

    def version(self, key: str) -> tuple | None:
        return self.calls(self._version, key)

    def _version(self, key: str) -> tuple | None:
        # Every write sets the companion mtime: (mtime, length) changes with each one.
        with self.client.pipeline(transaction=False) as pipe:
            pipe.get(self._mtime_key(key))
            pipe.strlen(self._key(key))
            mtime, length = pipe.execute()
        return None if mtime is None else (mtime, int(length))

    def names(self, prefix: str) -> list[str]:
        return self.calls(self._names, prefix)

    def _names(self, prefix: str) -> list[str]:
        folder = prefix.rstrip("/")
        members = sorted(m.decode() for m in self.client.smembers(f"{self.prefix}:dir:{folder}"))
        if not members:
            return []
        with self.client.pipeline(transaction=False) as pipe:
            for member in members:
                pipe.exists(self._key(f"{folder}/{member}"))
            alive = pipe.execute()
        gone = [m for m, exists in zip(members, alive, strict=True) if not exists]
        if gone:  # expired meanwhile (tool results): forget them
            self.client.srem(f"{self.prefix}:dir:{folder}", *gone)
        return [m for m, exists in zip(members, alive, strict=True) if exists]

    # ------------------------------------------------------------------ logs

    def append_lines(self, key: str, lines: list[bytes]) -> int:
        return self.calls(self._append_lines, key, lines)

    def _append_lines(self, key: str, lines: list[bytes]) -> int:
        if not lines:
            return self._line_count(key)
        with self.client.pipeline(transaction=True) as pipe:
            pipe.rpush(self._key(key), *lines)
            pipe.sadd(self._dir(key), key.rpartition("/")[2])
            length, _ = pipe.execute()
        return int(length) - len(lines)

    def line_count(self, key: str) -> int:
        return self.calls(self._line_count, key)

    def _line_count(self, key: str) -> int:
        name = self._key(key)
        return int(self.client.llen(name)) if self.client.type(name) == b"list" else 0

    def log_versions(self, keys: list[str]) -> list[tuple | None]:
        return self._log_versions(keys)

    def _log_versions(self, keys: list[str]) -> list[tuple | None]:
        # One round trip for every log (MULTI/EXEC: each length is read with its own last
        # line); a key that is not a list answers an error here, read as absent.
        if not keys:
            return []
        with self.client.pipeline(transaction=True) as pipe:
            for key in keys:
                name = self._key(key)
                pipe.llen(name)
                pipe.lindex(name, -1)
            replies = pipe.execute(raise_on_error=False)
        versions: list[tuple | None] = []
        for count, last in zip(replies[::2], replies[1::2], strict=True):
            ok = isinstance(count, int) and count > 0 and isinstance(last, bytes)
            versions.append((int(count), last) if ok else None)
        return versions

    def lines(self, key: str, start: int = 1) -> Iterator[tuple[int, bytes]]:
        name = self._key(key)
        index = max(start, 1) - 1
        while True:
            page = self.calls(self.client.lrange, name, index, index + _PAGE - 1)
            for offset, line in enumerate(page):
                yield index + offset + 1, line
            if len(page) < _PAGE:
                return
            index += _PAGE

    def lines_backwards(self, key: str) -> Iterator[tuple[int, bytes]]:
        name = self._key(key)
        end = self.line_count(key)  # a snapshot: lines appended meanwhile are not read
        while end > 0:
            begin = max(0, end - _PAGE)
            page = self.calls(self.client.lrange, name, begin, end - 1)
            for offset in range(len(page) - 1, -1, -1):
                yield begin + offset + 1, page[offset]
            end = begin

    # ------------------------------------------------------------------ locks

    @contextlib.contextmanager
    def lock(self, name: str, timeout: float = 30.0) -> Iterator[None]:
        key = f"{self.prefix}:lock:{check_key(name)}"
        token = secrets.token_hex(16)
        deadline = time.monotonic() + timeout
        pause = 0.001
        take = functools.partial(
            self.client.set, key, token, nx=True, px=int(self.lock_lease_seconds * 1000)
        )
        while not self.calls(take):
            if time.monotonic() >= deadline:
                raise TimeoutError(f"the workspace lock {name} is held by another worker")
            self.calls.pause(pause)
            pause = min(pause * 2, 0.01)
        try:
            yield
        finally:
            try:
                self.calls(functools.partial(self._release, keys=[key], args=[token]))
            except WorkspaceError as exc:  # its lease frees it: what the block did stands
                logger.warning("workspace lock %s not released (%s); its lease frees it", name, exc)

    # ------------------------------------------------------------------ server

    def persistence(self) -> dict[str, str]:
        """The server's persistence settings (``appendonly``, ``appendfsync``, ``save``)."""
        settings = {}
        for option in ("appendonly", "appendfsync", "save"):
            reply = self.calls(self.client.config_get, option)
            value = reply.get(option, reply.get(option.encode(), b""))
            settings[option] = value.decode() if isinstance(value, bytes) else str(value)
        return settings
