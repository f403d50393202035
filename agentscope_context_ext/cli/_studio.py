"""``--studio-url`` and ``--project`` of ``demo``, ``replay`` and ``chat``: attach a run to
AgentScope Studio without code (the installed adapter's ``connect_studio``)."""

from __future__ import annotations

import argparse

from ..adapter import installed
from ..core.errors import StudioError

__all__ = ["StudioError", "connect_studio", "studio_arguments"]

connect_studio = installed.connect_studio

DEFAULT_PROJECT = "agentscope-context"


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
