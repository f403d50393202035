"""Agents from an agent file: the model of your choice, tools, and context management on
(``build_agent("agent.yaml")``, ``agentscope-context chat --agent agent.yaml``), on the installed
AgentScope: a 1.x ``ReActAgent`` or a 2.x ``Agent``."""

from ..compat import agentscope_major
from ._common import ModelUnavailable

if agentscope_major() >= 2:
    from ._build2 import build_agent, build_model
else:
    from ._build import build_agent, build_model

__all__ = ["ModelUnavailable", "build_agent", "build_model"]
