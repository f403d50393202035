"""Standard output whose reader may go away (``agentscope-context search WS def | head -1``).

Python ignores SIGPIPE, so a write to a pipe nobody reads any more raises ``BrokenPipeError``:
at a ``print``, or at the interpreter's last flush when the output fit in the buffer (which is
why ``search ... | head -1`` failed in 2 runs of 5, with a traceback and exit code 1 or 120).
Every command ends quietly instead, as Unix tools do: nothing more is written, no traceback,
and exit code 141 (128 + SIGPIPE), what a shell reports for ``seq 1000000 | head -1``'s writer,
so a ``set -o pipefail`` script sees the same as with coreutils.
"""

from __future__ import annotations

import os
import select
import sys

__all__ = [
    "EXIT_BAD_INPUT",
    "EXIT_CLOSED_OUTPUT",
    "EXIT_ERROR",
    "EXIT_OK",
    "discard_stdout",
    "stdout_closed",
]

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_BAD_INPUT = 2
EXIT_CLOSED_OUTPUT = 141
"""The exit code when the reader of standard output went away (128 + SIGPIPE)."""


def stdout_closed() -> bool:
    """Whether standard output is a pipe whose reader is gone (its write end polls as an
    error), as opposed to a ``BrokenPipeError`` from some other pipe or socket."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, ValueError, OSError):  # no real file (None, a test's capture)
        return False
    if not hasattr(select, "poll"):  # Windows: no poll; a broken pipe there is stdout's
        return True
    poller = select.poll()
    poller.register(fd, select.POLLOUT)
    return any(events & select.POLLERR for _, events in poller.poll(0))


def discard_stdout() -> None:
    """Point standard output at the null device, so that what is still buffered (and the
    interpreter's flush at exit) goes nowhere instead of raising again."""
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, sys.stdout.fileno())
        os.close(null)
    except (AttributeError, ValueError, OSError):
        pass  # nothing to redirect: the exit code still says what happened
