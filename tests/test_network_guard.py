"""The offline guard itself must work, or 'no test touches the network' means nothing."""

import socket

import pytest
from offline import NetworkBlockedError


def test_non_loopback_connection_is_blocked() -> None:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        with pytest.raises(NetworkBlockedError):
            sock.connect(("203.0.113.1", 443))
    finally:
        sock.close()


def test_name_lookup_is_blocked() -> None:
    with pytest.raises(NetworkBlockedError):
        socket.getaddrinfo("openaipublic.blob.core.windows.net", 443)


def test_loopback_is_allowed() -> None:
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    client = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        client.connect(server.getsockname())
    finally:
        client.close()
        server.close()
