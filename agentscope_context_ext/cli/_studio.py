"""``--studio-url`` and ``--project`` of ``demo``, ``replay`` and ``chat``: attach a run to
AgentScope Studio without code (``agentscope.init(studio_url=...)``)."""

from __future__ import annotations

import argparse
import logging
from urllib.parse import urlparse

__all__ = ["StudioError", "connect_studio", "studio_arguments"]

DEFAULT_PROJECT = "agentscope-context"


class StudioError(ValueError):
    """A bad Studio URL, or a Studio that cannot be reached."""


def studio_arguments(command: argparse.ArgumentParser) -> None:
    """Add ``--studio-url`` and ``--project`` to ``command``."""
    command.add_argument(
        "--studio-url",
        metavar="URL",
        help="show the run in AgentScope Studio at URL (e.g. http://127.0.0.1:3000)",
    )
    command.add_argument(
        "--project",
        default=DEFAULT_PROJECT,
        help=f"Studio project of the run (default: {DEFAULT_PROJECT})",
    )


def connect_studio(url: str, project: str, name: str) -> None:
    """Register this process's run with Studio; every agent message (tool results as the model
    sees them, compaction notices) is forwarded from then on.

    AgentScope's warnings stay visible (a message Studio did not accept is logged, not lost in
    silence).

    Raises:
        `StudioError`: ``url`` is not an http(s) URL, or Studio does not answer there.
    """
    parsed = urlparse(url)
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        raise StudioError(f"--studio-url {url!r}: expected http://HOST:PORT")
    from ..compat import agentscope_major, agentscope_version

    if agentscope_major() >= 2:
        raise StudioError(
            f"--studio-url: AgentScope {agentscope_version()} has no Studio connection "
            "(agentscope.init(studio_url=...) is AgentScope 1.x's); use AgentScope 1.x to watch "
            "a run in Studio"
        )
    import agentscope

    try:
        agentscope.init(
            project=project, name=name, studio_url=url.rstrip("/"), logging_level="WARNING"
        )
    except OSError as exc:  # requests' errors (refused, timed out, HTTP status) are OSErrors
        reason = " ".join(str(exc).split())[:200]
        raise StudioError(f"cannot reach AgentScope Studio at {url}: {reason}") from None
    logging.getLogger("as").setLevel(logging.WARNING)
