"""The ``agentscope-context`` command line (design §10)."""

from ._main import EXIT_BAD_INPUT, EXIT_ERROR, EXIT_OK, main

__all__ = ["EXIT_BAD_INPUT", "EXIT_ERROR", "EXIT_OK", "main"]
