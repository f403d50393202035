"""The ``agentscope-context`` command line (design §10)."""

from ._main import EXIT_BAD_INPUT, EXIT_ERROR, EXIT_OK, main
from ._parser import build_parser

__all__ = ["EXIT_BAD_INPUT", "EXIT_ERROR", "EXIT_OK", "build_parser", "main"]
