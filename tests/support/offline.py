"""What the offline guard of the tests (``no_network`` in tests/conftest.py) raises: here, not in
the conftest, so a test imports it by one name whichever folder's conftest was loaded last."""


class NetworkBlockedError(RuntimeError):
    """A test (or the code under test) tried to reach a non-loopback address."""
