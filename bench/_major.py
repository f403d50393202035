"""The installed AgentScope's version and major, from its distribution's metadata (no import)."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version


def agentscope_version() -> str | None:
    """The installed AgentScope's version, ``None`` when it is not installed."""
    try:
        return version("agentscope")
    except PackageNotFoundError:
        return None


def agentscope_major() -> int:
    """The installed AgentScope's major version (0 when it is not installed)."""
    found = agentscope_version()
    try:
        return int(found.split(".")[0]) if found else 0
    except ValueError:
        return 0
