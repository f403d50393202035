"""A pytest plugin that adds a ``ContextMiddleware`` to every AgentScope 2.x ``Agent``.

Loaded by ``bench/agentscope_tests.py`` into a run of AgentScope's own tests
(``-p bench.agentscope_inject``); ``ACE_INJECT=1`` turns the injection on, otherwise the plugin
only applies the snapshot's normalisation, so that both runs differ by the middleware alone.

The middleware goes in the way a user puts it in: last in ``middlewares``, its offloader as the
agent's when the agent has none, a fresh workspace per agent, every other setting the default
(the window is the model's ``context_size``, as for any agent). ``ACE_INJECT_DEFAULTS=1``:
``ContextMiddleware()`` as it comes, every agent sharing the default workspace in the folder
the tests run in.

``ACE_DROP_NONE_BLOCK_END_TEXT=1``: AgentScope 2.0.11 added ``TextBlockEndEvent.text`` (``None``
unless a voice reply was cut); a source snapshot older than the installed release expects the
event without it, so the key is left out of its dump when it is ``None``.
"""

from __future__ import annotations

import functools
import os
import shutil
import tempfile
from typing import Any

_ROOT = tempfile.mkdtemp(prefix="ace-agentscope-tests-")


def _inject() -> None:
    from agentscope.agent import Agent

    from agentscope_context_ext import ContextMiddleware

    original = Agent.__init__

    @functools.wraps(original)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        middlewares = list(kwargs.get("middlewares") or [])
        if not any(isinstance(mw, ContextMiddleware) for mw in middlewares):
            if os.environ.get("ACE_INJECT_DEFAULTS") == "1":
                context = ContextMiddleware()  # the defaults: one workspace in the folder
            else:
                context = ContextMiddleware(
                    {"workspace": tempfile.mkdtemp(dir=_ROOT)}, print_notices=False
                )
            kwargs["middlewares"] = [*middlewares, context]
            if kwargs.get("offloader") is None:
                kwargs["offloader"] = context.offloader
        original(self, *args, **kwargs)

    Agent.__init__ = __init__


def _drop_none_block_end_text() -> None:
    from agentscope.event import TextBlockEndEvent

    if "text" not in TextBlockEndEvent.model_fields:
        return
    original = TextBlockEndEvent.model_dump

    @functools.wraps(original)
    def model_dump(self: Any, *args: Any, **kwargs: Any) -> dict:
        dumped = original(self, *args, **kwargs)
        if dumped.get("text", "") is None:
            del dumped["text"]
        return dumped

    TextBlockEndEvent.model_dump = model_dump


def pytest_configure(config: Any) -> None:
    if os.environ.get("ACE_DROP_NONE_BLOCK_END_TEXT") == "1":
        _drop_none_block_end_text()
    if os.environ.get("ACE_INJECT") == "1":
        _inject()


def pytest_unconfigure(config: Any) -> None:
    shutil.rmtree(_ROOT, ignore_errors=True)
