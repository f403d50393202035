"""The ``agentscope-context`` command line (design §10): :func:`main` parses the arguments
(``_parser``), runs the command (``_commands``) and turns a user's mistake into exit code 2.

Exit codes: 0 ok, 2 bad input (one-line reason on stderr, no traceback), 1 internal error.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Sequence

from ._arguments import BadInput, UsageError, dash_query
from ._output import (
    EXIT_BAD_INPUT,
    EXIT_CLOSED_OUTPUT,
    EXIT_ERROR,
    EXIT_OK,
    discard_stdout,
    stdout_closed,
)
from ._parser import build_parser

__all__ = ["EXIT_BAD_INPUT", "EXIT_ERROR", "EXIT_OK", "BadInput", "build_parser", "main"]

_parser = build_parser
"""The name the parser had here before it got a module of its own (the docs' CLI reference
generator imports it)."""


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``agentscope-context``; returns the exit code (141 when the reader of
    standard output went away, see ``_output``)."""
    try:
        try:
            return _main(argv)
        finally:
            sys.stdout.flush()  # a reader gone shows here when the output fit in the buffer
    except BrokenPipeError as exc:
        if not stdout_closed():
            print(f"agentscope-context: internal error: {exc!r}", file=sys.stderr)
            return EXIT_ERROR
        discard_stdout()
        return EXIT_CLOSED_OUTPUT


def _main(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        try:
            args = parser.parse_args(argv)
        except UsageError as error:
            args = dash_query(parser, argv, error)
    except UsageError as exc:
        print(exc, file=sys.stderr)
        return EXIT_BAD_INPUT
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
    )
    if args.command is None:
        parser.print_help()
        return EXIT_BAD_INPUT
    # after parsing: --help and a usage error import none of what the commands need
    from ..core.errors import ConfigError, StudioError, WorkspaceError

    try:
        from ._commands import COMMANDS

        return COMMANDS[args.command](args)
    except (BadInput, ConfigError, WorkspaceError, StudioError) as exc:
        reason = " ".join(str(exc).split())
        print(f"agentscope-context {args.command}: {reason}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return EXIT_ERROR
    except Exception as exc:
        if isinstance(exc, BrokenPipeError) and stdout_closed():
            raise  # the reader of the output went away: main ends quietly
        logging.getLogger("agentscope_context_ext").debug("internal error", exc_info=True)
        print(
            f"agentscope-context {args.command}: internal error: {exc!r} (run with -v for details)",
            file=sys.stderr,
        )
        if args.verbose:
            raise
        return EXIT_ERROR
