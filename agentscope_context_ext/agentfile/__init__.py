"""Agents from an agent file: the model of your choice, tools, and context management on
(``build_agent("agent.yaml")``, ``agentscope-context chat --agent agent.yaml``)."""

from ._build import ModelUnavailable, build_agent, build_model

__all__ = ["ModelUnavailable", "build_agent", "build_model"]
