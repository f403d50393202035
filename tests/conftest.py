"""Fixtures shared by several folders (no network for any test, ../shared/data, the workspace,
Redis, both storage backends and both search engines; a folder's own are in its conftest.py) and
which folders each AgentScope major collects.

The tests sit in folders by layer (tests/README.md):

- ``core/``: the core alone, on its own messages and the tests' neutral port
  (``support/neutral_port.py``); no AgentScope adapter.
- ``agents/``: real agents of whichever AgentScope is installed, driven through
  ``adapter.installed`` (``support/installed_harness.py``): the same files run under each major,
  and CI runs the suite under both, so each file covers both adapters. A test about one major's
  own objects in there is marked ``agentscope1`` (or ``agentscope2``) and skipped on the other.
- ``agentscope1/``, ``agentscope2/``: one major's own objects; not collected on the other.
- ``served/``: ``create_app`` and ``serve`` (AgentScope 2.x's service); not collected on 1.x.
- ``cli/``, ``bench/``, ``docs/``: the command line, the benchmarks' code, the README and notebooks.
- ``support/``: helper modules, importable by name (``pythonpath`` in pyproject.toml)."""

from __future__ import annotations

import ipaddress
import os
import socket
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from offline import NetworkBlockedError

from agentscope_context_ext.compat import agentscope_major, agentscope_version

AGENTSCOPE1_ONLY = ("agentscope1",)
"""Folders about AgentScope 1.x's own objects (``ContextMemory``, the 1.x ``MemoryBase``): not
collected on 2.x."""

AGENTSCOPE2_ONLY = ("agentscope2", "served")
"""Folders about AgentScope 2.x's own objects (the middleware, its state, events and image
limit) and ``create_app``, the service 1.x does not have: not collected on 1.x."""

TESTS = Path(__file__).resolve().parent


def _other_majors_folders() -> tuple[str, ...]:
    return AGENTSCOPE1_ONLY if agentscope_major() >= 2 else AGENTSCOPE2_ONLY


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """Collect the folders of the installed AgentScope's major version (and every other one)."""
    path = Path(collection_path).resolve()
    # The folder, or anything in it named on the command line.
    folder = path.relative_to(TESTS).parts[:1] if path.is_relative_to(TESTS) else ()
    return True if folder and folder[0] in _other_majors_folders() else None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked ``agentscope1`` (``agentscope2``) inside a shared file are skipped on the
    other major (with the reason)."""
    other = "agentscope1" if agentscope_major() >= 2 else "agentscope2"
    skip = pytest.mark.skip(
        reason=f"drives AgentScope {other[-1]}.x objects; {agentscope_version()} installed"
    )
    for item in items:
        if item.get_closest_marker(other):
            item.add_marker(skip)


def pytest_report_header(config: pytest.Config) -> str:
    other = _other_majors_folders()
    return (
        f"AgentScope {agentscope_version()}: {len(other)} test folder(s) of the other major "
        f"version not collected ({', '.join(f'tests/{name}/' for name in other)})"
    )


REPO = Path(__file__).resolve().parent.parent
SHARED_DATA = Path(os.environ.get("ACE_SHARED_DATA", REPO.parent / "shared" / "data"))


def _is_loopback(host: object) -> bool:
    if not isinstance(host, str):
        return False
    if host in ("localhost", ""):
        return True
    try:
        return ipaddress.ip_address(host.split("%")[0]).is_loopback
    except ValueError:
        return False


@pytest.fixture(autouse=True)
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail any connection or name lookup that is not loopback: the tests run offline."""
    real_connect = socket.socket.connect
    real_connect_ex = socket.socket.connect_ex
    real_getaddrinfo = socket.getaddrinfo

    def _check(sock: socket.socket, address: object) -> None:
        if sock.family == getattr(socket, "AF_UNIX", None):
            return
        host = address[0] if isinstance(address, tuple) else address
        if not _is_loopback(host):
            raise NetworkBlockedError(f"network access blocked in tests: {address!r}")

    def connect(self: socket.socket, address: object) -> None:
        _check(self, address)
        return real_connect(self, address)

    def connect_ex(self: socket.socket, address: object) -> int:
        _check(self, address)
        return real_connect_ex(self, address)

    def getaddrinfo(host: object, *args: object, **kwargs: object):
        if host is not None and not _is_loopback(host if isinstance(host, str) else ""):
            raise NetworkBlockedError(f"name lookup blocked in tests: {host!r}")
        return real_getaddrinfo(host, *args, **kwargs)

    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(socket.socket, "connect_ex", connect_ex)
    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)


@pytest.fixture
def shared_data() -> Path:
    """``../shared/data``: skipped when absent, a failure when ACE_REQUIRE_SHARED_DATA=1."""
    if not SHARED_DATA.is_dir():
        message = f"shared data folder not found at {SHARED_DATA} (set ACE_SHARED_DATA)"
        if os.environ.get("ACE_REQUIRE_SHARED_DATA") == "1":
            pytest.fail(f"{message}, and ACE_REQUIRE_SHARED_DATA=1 requires it")
        pytest.skip(message)
    return SHARED_DATA


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """A fresh workspace folder."""
    path = tmp_path / "workspace"
    path.mkdir()
    return path


@pytest.fixture
def redis_url() -> Iterator[str]:
    """A Redis workspace URL with a prefix of its own, on the server ``ACE_REDIS_URL`` names
    (``.ci/run`` starts one). Skipped without one; a failure when ACE_REQUIRE_REDIS=1."""
    base = os.environ.get("ACE_REDIS_URL", "").strip()
    required = os.environ.get("ACE_REQUIRE_REDIS") == "1"
    problem = None
    if not base:
        problem = "no Redis server for the tests (set ACE_REDIS_URL=redis://127.0.0.1:PORT/0)"
    else:
        try:
            import redis

            client = redis.Redis.from_url(base, socket_connect_timeout=5)
            client.ping()
        except ImportError:
            problem = "the redis client is not installed (pip install -e '.[redis]')"
        except Exception as exc:  # noqa: BLE001 - any reason the server cannot be used
            problem = f"the Redis server at {base} does not answer: {exc}"
    if problem:
        if required:
            pytest.fail(f"{problem}, and ACE_REQUIRE_REDIS=1 requires it")
        pytest.skip(problem)
    prefix = f"test-{uuid.uuid4().hex[:12]}"
    yield f"{base}?prefix={prefix}"
    for key in client.scan_iter(match=f"{prefix}:*", count=1000):
        client.delete(key)


@pytest.fixture(params=["local", "redis"])
def storage(request: pytest.FixtureRequest, tmp_path: Path):
    """The same tests on both backends: a local folder, then a real Redis server."""
    from agentscope_context_ext.core.workspace import LocalStorage, open_storage

    if request.param == "local":
        return LocalStorage(tmp_path / "workspace")
    return open_storage(request.getfixturevalue("redis_url"))


@pytest.fixture(params=["tantivy", "fts5"])
def search_engine(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """The history index's two engines (design §6.2), chosen as a user does
    (``ACE_SEARCH_ENGINE``): Tantivy (the ``search`` extra, in ``[dev]``), then SQLite FTS5."""
    if request.param == "tantivy":
        pytest.importorskip("tantivy", reason="the search extra is not installed")
    monkeypatch.setenv("ACE_SEARCH_ENGINE", request.param)
    return request.param
