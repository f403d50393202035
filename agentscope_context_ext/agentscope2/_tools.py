"""The tools given to a 2.x agent (design §6): the core's tool functions as 2.x ``FunctionTool``\\ s.

2.x asks the user before running a ``FunctionTool`` unless the tool carries its own permission;
these tools only read the workspace (or write ``Memory.md`` for the agent), so each is allowed.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Coroutine, Sequence
from typing import Any

from agentscope.permission import PermissionBehavior, PermissionDecision
from agentscope.tool import FunctionTool

from ..core.config import TruncationConfig
from ..core.longterm import LongTermMemory
from ..core.longterm import make_memory_tools as core_memory_tools
from ..core.tools import make_dialog_tools as core_dialog_tools
from ..core.tools import make_read_file
from ..core.workspace import DialogStore, Storage, portal

__all__ = [
    "as_memory_tools",
    "as_tool",
    "make_dialog_tools",
    "make_memory_tools",
    "make_read_file_tool",
]

CoreTool = Callable[..., Coroutine[Any, Any, str]]


def as_tool(function: CoreTool, read_only: bool = True) -> FunctionTool:
    """A core tool (an async function returning text) as a 2.x ``FunctionTool``: same name,
    schema from its signature and docstring, always allowed. It runs in a portal: its
    workspace calls wait on the event loop (2.x runs each tool call in a task of its own)."""
    return FunctionTool(
        portal(function),
        is_read_only=read_only,
        is_concurrency_safe=read_only,
        permission=PermissionDecision(
            behavior=PermissionBehavior.ALLOW,
            message=f"{function.__name__} is part of context management and always allowed.",
        ),
    )


def make_read_file_tool(
    workspace: str | os.PathLike[str] | Storage,
    truncation: TruncationConfig | None = None,
    allowed_roots: Sequence[str | os.PathLike[str]] | None = None,
    max_bytes_cap: int | None = None,
) -> FunctionTool:
    """The ``read_file`` tool: the core's
    :func:`~agentscope_context_ext.core.tools.make_read_file` (same arguments) as a tool.

    Example:
        .. code-block:: python

            toolkit = Toolkit(tools=[make_read_file_tool(".agentscope-context")])
    """
    return as_tool(make_read_file(workspace, truncation, allowed_roots, max_bytes_cap))


def make_dialog_tools(store: DialogStore) -> tuple[FunctionTool, FunctionTool]:
    """``(read_dialog, search_dialog)`` over a dialog store of 2.x messages."""
    read_dialog, search_dialog = core_dialog_tools(store)
    return as_tool(read_dialog), as_tool(search_dialog)


def make_memory_tools(
    memory: LongTermMemory,
    on_write: Callable[[str, dict[str, Any]], Any] | None = None,
    writer: str = "agent",
) -> tuple[FunctionTool, FunctionTool, FunctionTool, FunctionTool]:
    """``(memory_read, memory_append, memory_edit, daily_note)`` over ``memory`` as tools."""
    return as_memory_tools(core_memory_tools(memory, on_write, writer))


def as_memory_tools(tools: Sequence[CoreTool]) -> tuple[FunctionTool, ...]:
    """The core's memory tools as ``FunctionTool``\\ s: ``memory_read`` (the first) reads,
    the others write."""
    if not tools:
        return ()
    read, *writers = tools
    return (as_tool(read), *(as_tool(tool, read_only=False) for tool in writers))
