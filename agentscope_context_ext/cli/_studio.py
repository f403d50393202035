"""``--studio-url`` and ``--project`` of ``demo``, ``replay``, ``chat`` and ``serve``: attach a
run to AgentScope Studio without code (the installed adapter's ``connect_studio``: on 1.x a
Studio run with its traces, on 2.x the traces, design §9.1)."""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Iterator

__all__ = ["studio", "studio_arguments"]


@contextlib.contextmanager
def studio(args: argparse.Namespace, name: str) -> Iterator[None]:
    """Attach the command's run to Studio when ``--studio-url`` is given (a Studio that cannot
    be reached is a ``core.errors.StudioError``, one line), and send the last spans when it ends."""
    if args.studio_url is None:
        yield
        return
    from ..adapter import installed  # AgentScope, only for a run that goes to Studio

    export = installed.connect_studio(args.studio_url, args.project, name)
    if export is not None:
        print(f"traces: {export.endpoint} (project {export.project})", flush=True)
    try:
        yield
    finally:
        if export is not None:
            taken = export.flush(timeout=5.0)
            if not taken:
                print(
                    f"warning: AgentScope Studio at {args.studio_url} did not take the last spans",
                    file=sys.stderr,
                )
            # a receiver that did not take them will not take more: do not wait for it again
            export.close(timeout=5.0 if taken else 0.5, warn=taken)


DEFAULT_PROJECT = "agentscope-context"


def studio_arguments(command: argparse.ArgumentParser) -> None:
    """Add ``--studio-url`` and ``--project`` to ``command``."""
    command.add_argument(
        "--studio-url",
        metavar="URL",
        help="show the run in AgentScope Studio at URL (e.g. http://127.0.0.1:3000); on "
        "AgentScope 2.x its traces (Trace page)",
    )
    command.add_argument(
        "--project",
        default=DEFAULT_PROJECT,
        help=f"Studio project of the run (default: {DEFAULT_PROJECT})",
    )
