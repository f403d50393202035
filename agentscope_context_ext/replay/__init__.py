"""Transcript importers: real agent sessions as AgentScope messages, for replay and benchmarks."""

from ._claude_code import load_claude_code

__all__ = ["load_claude_code"]
