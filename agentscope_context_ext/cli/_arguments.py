"""Reading the command line: argparse with one-line errors, checked numbers, and the query of
``search`` that starts with a dash.

Every mistake is one line and exit code 2 (``main`` prints :class:`UsageError`), never
argparse's usage block; ``--help`` shows the usage.
"""

from __future__ import annotations

import argparse
import math
import re
from typing import NoReturn

__all__ = ["ArgumentParser", "BadInput", "UsageError", "dash_query", "days"]


class UsageError(Exception):
    """A bad option or value, as argparse words it, with the command it belongs to."""


class BadInput(Exception):
    """A user mistake a command finds (a missing folder, a bad value): one line, exit code 2."""


class ArgumentParser(argparse.ArgumentParser):
    """argparse with this command's one-line errors: a bad option or value is one line on
    stderr and exit code 2 (returned by ``main``), not a usage block (``--help`` shows the
    usage)."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{self.prog}: {message} (see {self.prog} --help)")


def days(value: str) -> float:
    """A number of days for ``--ttl-days``: finite and positive (``nan`` compares false with
    every age, so it would have deleted every saved result; ``inf`` would never delete one)."""
    from ..core.workspace import MAX_TTL_DAYS  # only when --ttl-days is given

    try:
        number = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of days: {value!r}") from None
    if not (math.isfinite(number) and 0 < number <= MAX_TTL_DAYS):
        raise argparse.ArgumentTypeError(
            f"must be positive (a number of days up to {MAX_TTL_DAYS}), got {value!r}"
        )
    return number


_DASH_WORD = re.compile(r"-[^-].+|-[^-h]")
"""A word with one leading dash, ``-h`` aside: no option of ``search`` looks like that."""


def dash_query(
    parser: argparse.ArgumentParser, argv: list[str], error: UsageError
) -> argparse.Namespace:
    """``search WS -permission``: argparse takes a word starting with ``-`` for an option it
    does not know, so the query is missing. When ``argv`` did not parse (``error``) and exactly
    one such word follows ``search``, it is the query (as if written after ``--``); otherwise
    ``error`` stands (raised again)."""
    command = next((i for i, arg in enumerate(argv) if not arg.startswith("-")), None)
    if command is None or argv[command] != "search" or "--" in argv:
        raise error
    words = [i for i, arg in enumerate(argv) if i > command and _DASH_WORD.fullmatch(arg)]
    if len(words) != 1:
        raise error
    word = argv[words[0]]
    try:
        args = parser.parse_args([*argv[: words[0]], *argv[words[0] + 1 :], "--", word])
    except UsageError:
        raise error from None
    if args.query != word:
        raise error
    return args
