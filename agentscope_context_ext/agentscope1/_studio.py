"""Showing a run in AgentScope Studio on 1.x: ``agentscope.init(studio_url=...)`` forwards every
agent message (tool results as the model sees them, the compaction notices) to Studio."""

from __future__ import annotations

import logging
from urllib.parse import urlparse

import agentscope

from ..core.errors import StudioError

__all__ = ["connect_studio"]


def connect_studio(url: str, project: str, name: str) -> None:
    """Register this process's run with Studio; every agent message is forwarded from then on.
    AgentScope's warnings stay visible (a message Studio did not accept is logged, not lost in
    silence).

    Raises:
        `StudioError`: ``url`` is not an http(s) URL, or Studio does not answer there.
    """
    parsed = urlparse(url)
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        raise StudioError(f"--studio-url {url!r}: expected http://HOST:PORT")
    try:
        agentscope.init(
            project=project, name=name, studio_url=url.rstrip("/"), logging_level="WARNING"
        )
    except OSError as exc:  # requests' errors (refused, timed out, HTTP status) are OSErrors
        reason = " ".join(str(exc).split())[:200]
        raise StudioError(f"cannot reach AgentScope Studio at {url}: {reason}") from None
    logging.getLogger("as").setLevel(logging.WARNING)
