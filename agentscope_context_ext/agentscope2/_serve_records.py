"""Where a served agent's service keeps its records (``agentscope-context serve --storage``,
design §11.3): the URL read (:class:`StorageUrl`), the places proved usable before the service
starts, and AgentScope's storage opened on them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from ..core.errors import ConfigError
from ..core.installation import install_command
from ..core.workspace import redact_url

__all__ = ["StorageUrl", "check_places", "open_records", "parse_storage_url", "probe_records"]


@dataclass(frozen=True)
class StorageUrl:
    """Where the service keeps its records: ``sqlite:///app.db`` or ``redis://host:port/db``."""

    kind: str
    """``sqlite`` or ``redis``."""
    path: Path | None = None
    """The SQLite file."""
    host: str = "127.0.0.1"
    port: int = 6379
    db: int = 0
    password: str | None = None

    def files(self) -> list[Path]:
        """The files holding the records (a SQLite database and its journals; none for
        Redis): every user's conversations, hidden from the agents' file tools."""
        if self.path is None:
            return []
        path = self.path.absolute()
        return [path, *(path.with_name(path.name + end) for end in ("-wal", "-shm", "-journal"))]


def parse_storage_url(url: str) -> StorageUrl:
    """``sqlite:///path/app.db`` (relative: ``sqlite:///app.db``) or
    ``redis://[:password@]host:port/db``.

    Raises:
        `ConfigError`: Any other form, naming the two that work.
    """
    forms = "sqlite:///path/app.db or redis://host:port/db"
    shown = redact_url(url)  # the password never reaches a message
    if url.startswith("sqlite:///"):
        path = url[len("sqlite:///") :]
        if not path:
            raise ConfigError(f"--storage {shown}: no database file ({forms})")
        return StorageUrl("sqlite", path=Path(path).expanduser())
    if url.startswith("redis://"):
        # urlsplit itself raises on a bracket left open ("redis://[::1"), .port on a port out
        # of range: each is the user's typo, not an internal error
        try:
            parts = urlsplit(url)
            port = parts.port or 6379
        except ValueError as exc:
            raise ConfigError(f"--storage {shown}: not a Redis URL ({exc}; {forms})") from None
        if not parts.hostname:
            raise ConfigError(f"--storage {shown}: no host ({forms})")
        db = parts.path.lstrip("/") or "0"
        if not (db.isascii() and db.isdigit()):
            raise ConfigError(f"--storage {shown}: the database is not a number ({forms})")
        return StorageUrl(
            "redis", host=parts.hostname, port=port, db=int(db), password=parts.password
        )
    raise ConfigError(f"--storage {shown}: not a storage URL ({forms})")


def check_places(storage: StorageUrl, workspaces: Path) -> None:
    """Prove, before the service starts, that its records and its workspaces can be used: a
    SQLite file that is a database (or not there yet) in a folder that can be made, a Redis
    server that answers, a workspaces folder.

    Raises:
        `ConfigError`: Naming the option and the reason, in one line.
    """
    if workspaces.exists() and not workspaces.is_dir():
        raise ConfigError(f"--workspaces {workspaces}: exists and is not a folder")
    try:
        workspaces.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"--workspaces {workspaces}: {exc.strerror}") from None
    if storage.kind == "sqlite":
        assert storage.path is not None
        path = storage.path
        if path.is_dir():
            raise ConfigError(f"--storage sqlite:///{path}: a folder, not a database file")
        if path.is_file() and path.stat().st_size:
            with path.open("rb") as handle:
                if handle.read(16) != b"SQLite format 3\x00":
                    raise ConfigError(f"--storage sqlite:///{path}: not a SQLite database")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ConfigError(f"--storage sqlite:///{path}: {exc.strerror}") from None
        return
    try:
        import redis
    except ImportError:
        raise ConfigError(
            f"--storage redis://...: the redis client is not installed ({install_command('redis')})"
        ) from None
    client = redis.Redis(
        host=storage.host,
        port=storage.port,
        db=storage.db,
        password=storage.password,
        socket_connect_timeout=5,
        socket_timeout=5,
    )
    try:
        client.ping()
    except redis.RedisError as exc:
        reason = " ".join(str(exc).split())[:200]
        raise ConfigError(
            f"--storage redis://{storage.host}:{storage.port}/{storage.db}: the server does not "
            f"answer ({reason})"
        ) from None
    finally:
        client.close()


def open_records(storage: StorageUrl) -> Any:
    """AgentScope's storage for ``storage`` (not entered yet)."""
    from agentscope.app.storage import AsyncSQLAlchemyStorage, RedisStorage

    if storage.kind == "sqlite":
        assert storage.path is not None
        return AsyncSQLAlchemyStorage(f"sqlite+aiosqlite:///{storage.path.resolve()}")
    return RedisStorage(
        host=storage.host, port=storage.port, db=storage.db, password=storage.password
    )


async def probe_records(storage: StorageUrl, url: str) -> None:
    """Open and close the service's storage once, as its start will (a damaged database, a
    schema it cannot create): one clear error now instead of a failed start.

    Raises:
        `ConfigError`: Naming ``--storage`` and the reason.
    """
    try:
        async with open_records(storage):
            pass
    except Exception as exc:  # noqa: BLE001 - whatever the database driver raises
        reason = " ".join(str(getattr(exc, "orig", None) or exc).split())[:200]
        raise ConfigError(f"--storage {url}: cannot be opened ({reason})") from None
