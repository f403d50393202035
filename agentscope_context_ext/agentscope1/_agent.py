"""``ContextReActAgent``: a ``ReActAgent`` with context management from its constructor."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agentscope.agent import ReActAgent

from ..core.config import ContextConfig
from ._manager import ContextManager, enable_context_management


class ContextReActAgent(ReActAgent):
    """A ``ReActAgent`` with context management enabled from its constructor.

    Takes every ``ReActAgent`` argument plus ``context_config`` (a ``ContextConfig``, a dict or a
    YAML/JSON path). The manager is ``agent.context_manager``.

    Example:
        .. code-block:: python

            agent = ContextReActAgent(
                name="assistant", sys_prompt="You are helpful.", model=model,
                formatter=DashScopeChatFormatter(), toolkit=toolkit,
                context_config={"max_input_tokens": 32768},
            )
    """

    def __init__(
        self,
        *args: Any,
        context_config: ContextConfig | dict | str | Path | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.context_manager: ContextManager | None = None
        enable_context_management(self, context_config)
