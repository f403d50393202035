"""Which AgentScope is installed, without importing it (importing AgentScope 1.x with the wrong
``mcp`` fails; ``adapter`` must still say what to do)."""

from __future__ import annotations

import functools

__all__ = ["agent_class_name", "agentscope_major", "agentscope_version"]


@functools.cache
def agentscope_version() -> str:
    """The installed AgentScope's version (``""`` when it is not installed)."""
    # imported here: importlib.metadata (and the email package it loads) is most of what
    # ``import agentscope_context_ext`` costs, and only a name of the adapters needs it
    from importlib import metadata

    try:
        return metadata.version("agentscope")
    except metadata.PackageNotFoundError:
        return ""


def agentscope_major() -> int:
    """1 or 2 (0 when AgentScope is not installed)."""
    version = agentscope_version()
    head = version.split(".", 1)[0]
    return int(head) if head.isdigit() else 0


def agent_class_name() -> str:
    """The installed major's agent class, as its users know it: ``Agent`` (2.x) or
    ``ReActAgent`` (1.x); for help texts, which must not import AgentScope to say so."""
    return "Agent" if agentscope_major() >= 2 else "ReActAgent"
