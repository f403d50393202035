"""Every change context management makes to a 1.x agent, through its public API, recorded so
that :meth:`Attachment.detach` undoes it exactly.

The changes: ``agent.memory`` becomes a :class:`ContextMemory` holding the same messages (on
detach the original memory object comes back holding the current messages, the summary first);
two instance hooks; the tools; the model wrapped by a usage tap; the agent's own
``compression_config`` turned off (two compactions would fight over the same messages).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from agentscope.memory import MemoryBase
from agentscope.message import Msg

from ._memory import ContextMemory

__all__ = ["Attachment", "adopt_memory"]

logger = logging.getLogger("agentscope_context_ext")


class Attachment:
    """The record of what was changed on one agent, undone in reverse order by :meth:`detach`.

    Args:
        agent: The agent (a ``ReActAgent`` or any ``ReActAgentBase``).
    """

    def __init__(self, agent: Any) -> None:
        self.agent = agent
        self.changes: list[str] = []
        """What was changed, in order, for people (``manager.attachment.changes``)."""
        self._undo: list[Callable[[], None]] = []
        self.detached = False

    def set_attribute(self, name: str, value: Any) -> None:
        """``agent.<name> = value``, remembering the old value (or its absence)."""
        missing = object()
        old = getattr(self.agent, name, missing)
        setattr(self.agent, name, value)

        def undo() -> None:
            if old is missing:
                delattr(self.agent, name)
            else:
                setattr(self.agent, name, old)

        self._record(f"agent.{name}", undo)

    def register_hook(self, hook_type: str, name: str, hook: Callable) -> None:
        """``agent.register_instance_hook``; undone with ``remove_instance_hook``."""
        self.agent.register_instance_hook(hook_type, name, hook)
        self._record(
            f"{hook_type} hook {name!r}", lambda: self.agent.remove_instance_hook(hook_type, name)
        )

    def register_toolkit_middleware(self, middleware: Any) -> bool:
        """``toolkit.register_middleware`` (AgentScope >= 1.0.21; returns whether it could).
        AgentScope has no call to remove one, so the undo takes it out of the toolkit's list
        and also switches it off (``middleware.active``), in case the list is not where it was."""
        toolkit = self.agent.toolkit
        if not hasattr(toolkit, "register_middleware"):
            return False
        toolkit.register_middleware(middleware)

        def undo() -> None:
            middleware.active = False
            registered = getattr(toolkit, "_middlewares", None)
            if isinstance(registered, list) and middleware in registered:
                registered.remove(middleware)

        self._record("toolkit middleware (stage one)", undo)
        return True

    def register_tool(self, tool: Callable) -> bool:
        """Register a tool function unless the agent already has one of that name (returns
        whether it was registered); undone with ``remove_tool_function``."""
        toolkit = self.agent.toolkit
        name = tool.__name__
        if name in toolkit.tools:
            logger.warning(
                "the agent already has a tool named %r; keeping it (truncation notices expect "
                "this package's %s with start_line/start_byte)",
                name,
                name,
            )
            return False
        toolkit.register_tool_function(tool)
        self._record(f"tool {name!r}", lambda: _remove_tool(toolkit, name))
        return True

    def replace_memory(self, memory: ContextMemory) -> None:
        """``agent.memory = memory``; on detach the original memory comes back with the current
        messages (the summary first, as a message), so nothing the agent knows is lost."""
        original = self.agent.memory
        self.agent.memory = memory

        def restore() -> None:
            messages = [(msg, list(memory.marks_of(msg.id))) for msg in memory.messages]
            summary = memory.summary_msg()
            if summary is not None:
                messages.insert(0, (summary, []))
            _load(original, messages, memory.compressed_summary)
            self.agent.memory = original

        self._record("agent.memory", restore)

    def detach(self) -> None:
        """Undo every change, newest first."""
        if self.detached:
            return
        self.detached = True
        for undo in reversed(self._undo):
            try:
                undo()
            except Exception:
                logger.exception("could not undo a change while detaching")
        self._undo.clear()

    def _record(self, description: str, undo: Callable[[], None]) -> None:
        self.changes.append(description)
        self._undo.append(undo)


def adopt_memory(original: MemoryBase | None) -> ContextMemory:
    """A :class:`ContextMemory` holding what ``original`` holds (messages, marks, summaries),
    read through its ``state_dict()``."""
    if isinstance(original, ContextMemory):
        return original
    memory = ContextMemory()
    if original is None:
        return memory
    state = original.state_dict()
    if isinstance(state, dict) and "content" in state:
        memory.load_state_dict(state, strict=False)
    else:
        logger.warning(
            "agent memory of type %s has no 'content' in its state; starting the managed "
            "memory empty",
            type(original).__name__,
        )
    return memory


def _load(original: MemoryBase, messages: list[tuple[Msg, list[str]]], compressed: str) -> None:
    original.load_state_dict(
        {
            "content": [[msg.to_dict(), marks] for msg, marks in messages],
            "_compressed_summary": compressed,
        },
        strict=False,
    )


def _remove_tool(toolkit: Any, name: str) -> None:
    if name in toolkit.tools:
        toolkit.remove_tool_function(name)
