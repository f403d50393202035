"""The tools given to a 1.x agent (design §6): the core's tool functions as AgentScope tools."""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from agentscope.tool import ToolResponse

from ..core.config import TruncationConfig
from ..core.longterm import LongTermMemory
from ..core.longterm import make_memory_tools as core_memory_tools
from ..core.tools import make_dialog_tools as core_dialog_tools
from ..core.tools import make_read_file
from ..core.workspace import DialogStore, Storage
from ._convert import as_tool

__all__ = ["make_dialog_tools", "make_memory_tools", "make_read_file_tool"]

Tool = Callable[..., Awaitable[ToolResponse]]


def make_read_file_tool(
    workspace: str | os.PathLike[str] | Storage,
    truncation: TruncationConfig | None = None,
    allowed_roots: Sequence[str | os.PathLike[str]] | None = None,
    max_bytes_cap: int | None = None,
) -> Tool:
    """The ``read_file`` tool function for a ``Toolkit``: the core's
    :func:`~agentscope_context_ext.core.tools.make_read_file` (same arguments) returning a
    ``ToolResponse``.

    Example:
        .. code-block:: python

            toolkit = Toolkit()
            toolkit.register_tool_function(make_read_file_tool(".agentscope-context"))
    """
    return as_tool(make_read_file(workspace, truncation, allowed_roots, max_bytes_cap))


def make_dialog_tools(store: DialogStore) -> tuple[Tool, Tool]:
    """``(read_dialog, search_dialog)`` over a dialog store of 1.x messages."""
    read_dialog, search_dialog = core_dialog_tools(store)
    return as_tool(read_dialog), as_tool(search_dialog)


def make_memory_tools(
    memory: LongTermMemory,
    on_write: Callable[[str, dict[str, Any]], Any] | None = None,
    writer: str = "agent",
) -> tuple[Tool, Tool, Tool, Tool]:
    """``(memory_read, memory_append, memory_edit, daily_note)`` over ``memory``: the core's
    :func:`~agentscope_context_ext.core.longterm.make_memory_tools` (same arguments) returning
    ``ToolResponse``s."""
    read, append, edit, note = core_memory_tools(memory, on_write, writer)
    return as_tool(read), as_tool(append), as_tool(edit), as_tool(note)
