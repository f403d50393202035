"""The identifiers a summary names, as benchmark B7 (and B8) count them."""

from __future__ import annotations

import re

__all__ = ["summary_identifiers"]

_FENCED_RE = re.compile(r"```.*?```", re.S)
_INLINE_CODE_RE = re.compile(r"`([^`\n]+)`")
_PATH_RE = re.compile(r"(?<![\w/.-])(?:[\w.-]+/)+[\w.-]+\.[A-Za-z]\w{0,7}\b")
_TRAILING = ".,:;"


def summary_identifiers(text: str) -> list[str]:
    """The identifiers a summary names: its inline-code spans and its file paths.

    Every ```` `span` ```` and every ``dir/name.ext`` path outside fenced code blocks (a code
    block is code, not a list of names), stripped of surrounding blanks and trailing ``.,:;``,
    at least two characters long, each once, in order of appearance.
    """
    prose = _FENCED_RE.sub(" ", text)
    found = [span.strip() for span in _INLINE_CODE_RE.findall(prose)]
    found += _PATH_RE.findall(_INLINE_CODE_RE.sub(" ", prose))
    identifiers: list[str] = []
    for item in found:
        item = item.strip().rstrip(_TRAILING)
        if len(item) >= 2 and item not in identifiers:
            identifiers.append(item)
    return identifiers
