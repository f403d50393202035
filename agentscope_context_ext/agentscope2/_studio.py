"""Showing a run in AgentScope Studio on 2.x. AgentScope 2.0.11 has no Studio connection of
its own (``agentscope.init(studio_url=...)`` is 1.x's), so ``--studio-url`` is refused with a
one-line reason."""

from __future__ import annotations

from importlib import metadata
from urllib.parse import urlparse

from ..core.errors import StudioError

__all__ = ["connect_studio"]


def connect_studio(url: str, project: str, name: str) -> None:
    """Refuse: no Studio connection on this AgentScope.

    Raises:
        `StudioError`: Always (a bad URL is named as such first).
    """
    parsed = urlparse(url)
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        raise StudioError(f"--studio-url {url!r}: expected http://HOST:PORT")
    raise StudioError(
        f"--studio-url: AgentScope {metadata.version('agentscope')} has no Studio connection "
        "(agentscope.init(studio_url=...) is AgentScope 1.x's); use AgentScope 1.x to watch "
        "a run in Studio"
    )
