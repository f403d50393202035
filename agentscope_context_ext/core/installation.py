"""How this package was installed, for the messages that say what to install next.

A missing extra is named with the command that adds it to the install at hand: a developer's
checkout (``pip install -e ".[dev]"``, what the README says) gets
``pip install -e "<checkout>[serve]"``; an install from an index gets
``pip install 'agentscope-context-ext[serve]'``. The former used to be told the latter, which
installs a second copy from the index beside the checkout.
"""

from __future__ import annotations

import functools
import tomllib
from pathlib import Path

__all__ = ["DISTRIBUTION", "client_install_command", "install_command"]

DISTRIBUTION = "agentscope-context-ext"


@functools.cache
def _checkout() -> Path | None:
    """The source checkout this package runs from (editable, or on ``sys.path``): the folder
    above the package whose ``pyproject.toml`` names it; ``None`` for an installed copy (its
    parent is ``site-packages``). Read from the files, not from the install's metadata: run from
    the checkout, ``importlib.metadata`` finds the build's ``egg-info`` there, which does not
    say it is editable."""
    root = Path(__file__).resolve().parents[2]
    try:
        project = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return root if project.get("project", {}).get("name") == DISTRIBUTION else None


def install_command(extra: str) -> str:
    """The ``pip`` command that adds ``extra`` (e.g. ``serve``) to this package as it was
    installed: ``pip install -e "<checkout>[extra]"`` from a checkout, else
    ``pip install 'agentscope-context-ext[extra]'``."""
    checkout = _checkout()
    if checkout is not None:
        return f'pip install -e "{checkout}[{extra}]"'
    return f"pip install '{DISTRIBUTION}[{extra}]'"


EXTRAS = ("ollama", "redis", "serve")
"""The extras of this package that install a model's or a store's client."""


def client_install_command(provider: str, missing: str | None) -> str:
    """What installs the client a ``provider`` needs: this package's extra of that name where
    there is one (``ollama``), else the missing module's own package (``pip install anthropic``;
    ``missing`` is ``ImportError.name``)."""
    if provider in EXTRAS or not missing:
        return install_command(provider if provider in EXTRAS else "dev")
    return f"pip install {missing.split('.')[0]}"
