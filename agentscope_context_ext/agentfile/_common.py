"""What the agent-file builders of both AgentScope versions share."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

from ..core.agent_file import AgentFile
from ..core.config import ContextConfig
from ..core.errors import ConfigError

__all__ = ["LOCAL_KEY", "ModelUnavailable", "explorer_context", "import_tool"]

LOCAL_KEY = "no-key"
"""What an OpenAI-compatible local server gets as its key when none is configured."""


class ModelUnavailable(ConfigError):
    """The model cannot be used as configured (a missing key, a client not installed)."""


def explorer_context(spec: AgentFile) -> tuple[list[Path], ContextConfig]:
    """The explorer's roots (each must be a folder) and the context config with them added to
    ``tools.allowed_roots`` (``read_file`` may read what the explorer lists)."""
    assert spec.tools.explorer is not None
    roots = [Path(root).expanduser().resolve() for root in spec.tools.explorer.roots]
    for root in roots:
        if not root.is_dir():
            raise ConfigError(f"tools.explorer.roots: {root} is not a folder")
    context = spec.context
    allowed = [*context.tools.allowed_roots, *(str(root) for root in roots)]
    context = context.model_copy(
        update={"tools": context.tools.model_copy(update={"allowed_roots": allowed})}
    )
    return roots, context


def import_tool(dotted: str) -> Any:
    """The function ``module:name`` of ``tools.functions``."""
    module_name, _, name = dotted.partition(":")
    try:
        function = getattr(importlib.import_module(module_name), name)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(f"tools.functions: cannot import {dotted} ({exc})") from None
    if not callable(function):
        raise ConfigError(f"tools.functions: {dotted} is not a function")
    return function
