"""Shared fixtures: no network for any test, and access to ../shared/data; which test files
each AgentScope major collects.

Every test file runs on both majors but two: the core's tests use the core's own messages and a
port of the tests' own (``neutral_port.py``), the adapters' tests drive the installed major
through ``adapter.installed`` (``installed_harness.py``, and ``test_port_contract.py``, the
contract both adapters meet). A test about one major's own objects inside a shared file is
marked ``agentscope1`` (or skipped on 1.x)."""

from __future__ import annotations

import ipaddress
import os
import socket
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentscope_context_ext.compat import agentscope_major, agentscope_version

AGENTSCOPE1_ONLY = frozenset(
    {
        "test_context_memory.py",
    }
)
"""Test files about AgentScope 1.x's own objects (``ContextMemory``, the 1.x ``MemoryBase``):
not collected on 2.x."""

AGENTSCOPE2_ONLY = frozenset(
    {
        "test_agentscope2.py",
        "test_served.py",
        "test_served_app.py",
        "test_served_harness.py",
        "test_served_workers.py",
        "test_served_adversary.py",
        "test_serve_agent_file.py",
        "test_served_refusals.py",
        "test_serve_stop.py",
    }
)
"""Test files about AgentScope 2.x's own objects (the middleware, its state, events and image
limit; ``create_app``, the service 1.x does not have): not collected on 1.x."""


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """Collect the files of the installed AgentScope's major version (and every core test)."""
    other = AGENTSCOPE1_ONLY if agentscope_major() >= 2 else AGENTSCOPE2_ONLY
    return True if collection_path.name in other else None


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
    other = AGENTSCOPE1_ONLY if agentscope_major() >= 2 else AGENTSCOPE2_ONLY
    return (
        f"AgentScope {agentscope_version()}: {len(other)} test file(s) of the other major "
        f"version not collected ({', '.join(sorted(other))})"
    )


REPO = Path(__file__).resolve().parent.parent
SHARED_DATA = Path(os.environ.get("ACE_SHARED_DATA", REPO.parent / "shared" / "data"))


class NetworkBlockedError(RuntimeError):
    """A test (or the code under test) tried to reach a non-loopback address."""


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


@pytest.fixture(scope="session")
def llama() -> Iterator[Any]:
    """A real llama-cpp-python server (``python -m llama_cpp.server``) on loopback with
    SmolLM2-135M-Instruct, for the whole session (``llama_server.py``). Skipped when this
    interpreter has no server or no model; a failure when ACE_REQUIRE_LLAMA=1 (``.ci/run`` sets
    it after installing them)."""
    from llama_server import REQUIRE_ENV, LlamaServer, find_gguf, server_missing

    problem = server_missing()
    gguf, label = find_gguf("small") if problem is None else (None, problem)
    if gguf is None:
        if os.environ.get(REQUIRE_ENV) == "1":
            pytest.fail(f"{label}, and {REQUIRE_ENV}=1 requires it")
        pytest.skip(label)
    with LlamaServer(gguf, n_ctx=4096) as server:
        yield server


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
