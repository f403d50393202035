"""The tool schemas a 2.x agent sends, read every step without 2.x's deep copies.

The count before each reasoning step needs the tool schemas the model will be shown, and
2.0.11's ``Toolkit.get_tool_schemas`` builds each one again on every call from a deep copy of
the tool's ``input_schema`` (about a quarter of this package's hook time in a replay). A
schema there depends on nothing but the tool's name, description and input schema, so
:class:`ToolSchemas` asks the toolkit which tools are available (MCP servers, skills and tool
groups included, as 2.x does) and builds a tool's schema again only when one of those three
changed: compared by value, so a schema edited in place or a description computed on each
read is seen at once. A toolkit that is not 2.0.11's (a subclass with its own
``get_tool_schemas``, another release) is simply asked for its schemas.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from agentscope.tool import Toolkit

__all__ = ["ToolSchemas"]


@dataclass(slots=True)
class _Built:
    tool: Any
    """The tool (held: its id cannot be reused while the entry lives)."""
    name: str
    description: Any
    input_schema: Any
    """A copy of the input schema the schema was built from."""
    schema: dict


class ToolSchemas:
    """``await schemas(toolkit, groups)``: what ``toolkit.get_tool_schemas(groups)`` returns,
    the same dicts while nothing they are built from changed (read them, never change them)."""

    def __init__(self) -> None:
        self._built: dict[int, _Built] = {}

    async def __call__(self, toolkit: Any, groups: list[str] | None) -> list[dict]:
        available = getattr(toolkit, "_get_available_tools", None)
        if available is None or type(toolkit).get_tool_schemas is not Toolkit.get_tool_schemas:
            return await toolkit.get_tool_schemas(groups)
        built: dict[int, _Built] = {}
        schemas = []
        for registered in (await available(groups)).values():
            if getattr(registered, "extended_model", None) is not None:
                schemas.append(registered.get_tool_schema())
                continue
            tool = registered.tool
            name, description, input_schema = tool.name, tool.description, tool.input_schema
            entry = self._built.get(id(tool))
            if (
                entry is None
                or entry.tool is not tool
                or entry.name != name
                or entry.description != description
                or entry.input_schema != input_schema
            ):
                entry = _Built(
                    tool,
                    name,
                    description,
                    copy.deepcopy(input_schema),
                    registered.get_tool_schema(),
                )
            built[id(tool)] = entry
            schemas.append(entry.schema)
        self._built = built
        return schemas
