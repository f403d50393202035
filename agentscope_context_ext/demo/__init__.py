"""The offline demo: a real ReActAgent exploring a real folder with context management on."""

from ._run import DEMO_SETTINGS, default_root, demo_config, run_demo
from ._tools import make_explorer_tools

__all__ = ["DEMO_SETTINGS", "default_root", "demo_config", "make_explorer_tools", "run_demo"]
