"""A Redis workspace's URL read into a client (design §2.3): its options (``prefix``,
``lock_lease``), a client whose every call has the workspace's deadline and no retry of its own,
and one breaker per server, shared by every store of the process opened on it.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import parse_qs, urlparse, urlunparse

from ..errors import WorkspaceError
from ..installation import install_command
from ._breaker import Breaker
from ._urls import redact_url

__all__ = ["DEFAULT_PREFIX", "LOCK_LEASE_SECONDS", "RedisConnection", "connect"]

DEFAULT_PREFIX = "ace"
LOCK_LEASE_SECONDS = 60.0
"""How long a lock outlives a holder that died without releasing it."""
_BREAKERS: dict[tuple, Breaker] = {}
"""The breaker of each server (scheme, host, port) stores of this process were opened on."""


@dataclass(frozen=True, slots=True)
class RedisConnection:
    """What a Redis workspace URL names, with a client made for it (not yet asked anything).

    Attributes:
        client: A ``redis.Redis`` client (bytes responses, socket timeouts of the deadline,
            no retry).
        prefix (`str`): Namespace of every key.
        location (`str`): The URL without its password, for messages.
        lock_lease_seconds (`float`): How long a lock outlives a holder that died.
        breaker (`Breaker`): The server's breaker (or the one given).
    """

    client: object
    prefix: str
    location: str
    lock_lease_seconds: float
    breaker: Breaker


def connect(url: str, timeout: float, breaker: Breaker | None = None) -> RedisConnection:
    """Read ``redis://[user:password@]host:port/db[?prefix=NAME][&lock_lease=SECONDS]`` and make
    its client (every call's deadline ``timeout`` seconds); the breaker is the server's unless
    given.

    Raises:
        `WorkspaceError`: A bad URL or no ``redis`` client installed.
    """
    try:
        parsed = urlparse(url.strip())  # "redis://[::1" or "redis://[zz]/0" raise here
    except ValueError as exc:
        raise WorkspaceError(
            f"workspace {redact_url(url)}: not a valid URL ({_one_line(exc)}); expected "
            "redis://[user:password@]host:port/db[?prefix=NAME]"
        ) from None
    query = parse_qs(parsed.query)
    unknown = set(query) - {"prefix", "lock_lease"}
    location = _redacted(parsed)
    if (
        not parsed.hostname
        or unknown
        or (parsed.path not in ("", "/") and not (parsed.path.strip("/").isdigit()))
    ):
        detail = f"unknown option {sorted(unknown)[0]!r}" if unknown else "expected"
        raise WorkspaceError(
            f"workspace {location}: {detail} redis://[user:password@]host:port/db[?prefix=NAME]"
        )
    prefix = (query.get("prefix") or [DEFAULT_PREFIX])[0]
    try:
        lease = float((query.get("lock_lease") or [LOCK_LEASE_SECONDS])[0])
    except ValueError:
        lease = 0.0
    if not 0.1 <= lease <= 3600:
        raise WorkspaceError(f"workspace {location}: lock_lease must be 0.1 to 3600 seconds")
    if not prefix or not all(c.isalnum() or c in "_-." for c in prefix):
        raise WorkspaceError(f"workspace {location}: prefix must be letters, digits, _ - .")
    try:
        import redis
    except ImportError:
        raise WorkspaceError(
            f"workspace {location} needs the redis client: {install_command('redis')}"
        ) from None
    try:
        parsed.port  # noqa: B018 - raises on a port that is not a number up to 65535
    except ValueError:
        raise WorkspaceError(
            f"workspace {location}: the port is not a number from 1 to 65535"
        ) from None
    from redis.backoff import NoBackoff
    from redis.retry import Retry

    client = redis.Redis.from_url(
        urlunparse(parsed._replace(query="")),
        socket_connect_timeout=timeout,
        socket_timeout=timeout,
        health_check_interval=30,
        # No retry inside a call: the client's default (3 more attempts, on a timeout
        # too) made one call on a frozen server last minutes. The deadline is the call's.
        retry=Retry(NoBackoff(), 0),
    )
    # One breaker per server: what one store learnt (the server is away) every store of
    # the process knows, including one opened for the next request.
    breaker = breaker or _BREAKERS.setdefault(
        (parsed.scheme, parsed.hostname, parsed.port or 6379), Breaker()
    )
    return RedisConnection(client, prefix, location, lease, breaker)


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:200] or type(exc).__name__


def _redacted(parsed) -> str:
    """The URL with its password replaced by ``***``."""
    if parsed.password is None:
        return urlunparse(parsed)
    netloc = parsed.netloc.replace(f":{parsed.password}@", ":***@")
    return urlunparse(parsed._replace(netloc=netloc))
