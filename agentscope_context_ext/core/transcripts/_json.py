"""JSON read from a transcript, which nothing vouches for.

``json.loads`` breaks on hostile input in ways that are not ``JSONDecodeError``: nesting deeper
than the interpreter's recursion limit is a ``RecursionError`` (``'[' * 100000``), an integer of
more than 4,300 digits a bare ``ValueError``. And JSON nested just under the limit parses, then
breaks whatever walks it next (a deep copy, a formatter). :func:`load_json` turns all of these
into a ``ValueError`` that says what is wrong, so each importer reports the file in one line.
"""

from __future__ import annotations

import json
import sys
from typing import Any

__all__ = ["MAX_DEPTH", "load_json"]

MAX_DEPTH = 100
"""Deepest nesting of arrays and objects accepted; real transcripts stay under ten or so
(tool arguments included)."""


def load_json(text: str | bytes) -> Any:
    """``json.loads(text)``, refused with a ``ValueError`` (``json.JSONDecodeError`` for bad
    syntax) when it is not JSON, nests deeper than :data:`MAX_DEPTH`, or holds a number Python
    will not convert."""
    try:
        value = json.loads(text)
    except RecursionError:
        raise ValueError(f"JSON nested more than {MAX_DEPTH} levels deep") from None
    except json.JSONDecodeError:
        raise
    except ValueError:  # the one other failure: an integer Python will not convert
        digits = sys.get_int_max_str_digits()
        raise ValueError(f"a number in it has more than {digits:,} digits") from None
    if _deeper_than(value, MAX_DEPTH):
        raise ValueError(f"JSON nested more than {MAX_DEPTH} levels deep")
    return value


def _deeper_than(value: Any, limit: int) -> bool:
    """Whether arrays and objects in ``value`` nest more than ``limit`` deep (iterative: the
    walk itself must not recurse)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return False
