"""Workspace keys: the workspace-relative names every store uses (the local paths)."""

from __future__ import annotations

import re

__all__ = ["check_key"]

_KEY_RE = re.compile(r"^[A-Za-z0-9_.\-]+(?:/[A-Za-z0-9_.\-]+)*$")


def check_key(key: str) -> str:
    """``key`` if it is a workspace-relative name (no ``..``, no absolute path), else
    ``ValueError``: nothing from outside ever becomes a path or a key unchecked."""
    if not isinstance(key, str) or not _KEY_RE.match(key) or ".." in key.split("/"):
        raise ValueError(f"not a workspace key: {key!r}")
    return key
