"""Workspace values that are URLs: which name a storage server (``redis://``, ``rediss://``),
which are refused (any other ``scheme://``, never taken for a folder), and how a URL is named in
a message (its password hidden)."""

from __future__ import annotations

import re

from ..errors import WorkspaceError

__all__ = [
    "STORAGE_SCHEMES",
    "is_storage_url",
    "redact_url",
    "refuse_other_schemes",
    "workspace_url_error",
]

STORAGE_SCHEMES = ("redis", "rediss")
"""The URL schemes a workspace may have; anything else is a folder path."""

_SCHEME = re.compile(r"^\s*([A-Za-z][A-Za-z0-9+.-]+)://")
"""A URL's scheme: at least two characters, since ``C://x`` is a Windows drive."""


def is_storage_url(workspace: str) -> bool:
    """Whether ``workspace`` names a server (``redis://`` / ``rediss://``) rather than a folder."""
    return workspace.strip().lower().startswith(tuple(f"{s}://" for s in STORAGE_SCHEMES))


def workspace_url_error(workspace: str) -> str | None:
    """Why ``workspace`` cannot be a workspace when it is a URL no storage speaks (``unix://``,
    ``http://``, ``file://``, ...); ``None`` for a folder path or a Redis URL.

    Taken as a path, such a value would be a local folder literally named ``unix:``. Only a
    scheme followed by ``://`` counts, so ``C:\\work``, ``C:/work`` and ``runs/a:b`` stay paths.
    """
    match = _SCHEME.match(workspace)
    if match is None or match.group(1).lower() in STORAGE_SCHEMES:
        return None
    return (
        f"{match.group(1)}:// is not a workspace: use a folder path, or a redis:// or rediss:// URL"
    )


def refuse_other_schemes(workspace: str) -> None:
    """Raise the :class:`WorkspaceError` of :func:`workspace_url_error`, if any."""
    problem = workspace_url_error(workspace)
    if problem:
        raise WorkspaceError(f"workspace {redact_url(workspace)}: {problem}")


def redact_url(text: str) -> str:
    """``text`` with the password of a ``scheme://user:password@host`` hidden (``***``), read
    without parsing, so that even a URL ``urllib`` refuses can be named in a message."""
    scheme, separator, rest = text.strip().partition("://")
    if not separator:
        return text
    end = min((i for i in map(rest.find, "/?#") if i >= 0), default=len(rest))
    userinfo, at, host = rest[:end].rpartition("@")
    if not at or ":" not in userinfo:
        return text.strip()
    user = userinfo.partition(":")[0]
    return f"{scheme}://{user}:***@{host}{rest[end:]}"
