"""The offline demo: a real agent of the installed AgentScope exploring a real folder with
context management on."""

from ._run import DEMO_SETTINGS, default_root, demo_config, run_demo

__all__ = ["DEMO_SETTINGS", "default_root", "demo_config", "run_demo"]
