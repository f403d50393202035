"""Build the AgentScope 1.x agent an agent file describes.

Each provider maps onto AgentScope's own model and formatter classes, so the real client stack
runs (HTTP, streaming with tool-call deltas, reported usage):

====================  ========================  ===========================  ====================
provider              model class               formatter                    ``base_url`` goes to
====================  ========================  ===========================  ====================
``dashscope``         ``DashScopeChatModel``    ``DashScopeChatFormatter``   ``base_http_api_url``
``openai``            ``OpenAIChatModel``       ``OpenAIChatFormatter``      the client's base URL
``openai-compatible`` ``OpenAICompatibleModel``  ``OpenAICompatibleFormatter`` (required)
``anthropic``         ``AnthropicChatModel``    ``AnthropicChatFormatter``   the client's base URL
``ollama``            ``OllamaChatModel``       ``OllamaChatFormatter``      ``host``
====================  ========================  ===========================  ====================

``openai-compatible`` runs on :class:`OpenAICompatibleModel` and :class:`OpenAICompatibleFormatter`:
subclasses that shape the request and the answer as ``model.compat`` says
(``_openai_compatible.py``).
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

from agentscope.agent import ReActAgent
from agentscope.formatter import FormatterBase, OpenAIChatFormatter
from agentscope.model import ChatModelBase, OpenAIChatModel
from agentscope.tool import Toolkit

from ..core.agent_file import (
    LOCAL_KEY,
    AgentFile,
    ModelSettings,
    ModelUnavailable,
    explorer_context,
    import_tool,
    load_agent_file,
)
from ..core.errors import ConfigError
from ..core.installation import install_command
from ..core.model_servers import (
    ANTHROPIC_MESSAGES,
    DASHSCOPE_GENERATION,
    OLLAMA_CHAT,
    OPENAI_CHAT,
    ModelApi,
)
from ..core.tools import make_explorer_functions
from ._convert import as_tool
from ._manager import enable_context_management
from ._openai_compatible import OpenAICompatibleFormatter, OpenAICompatibleModel

__all__ = [
    "MODEL_APIS",
    "ModelUnavailable",
    "build_agent",
    "build_model",
]

MODEL_APIS: dict[str, ModelApi] = {
    "dashscope": DASHSCOPE_GENERATION,  # 1.x's DashScopeChatModel speaks DashScope's own API
    "openai": OPENAI_CHAT,
    "openai-compatible": OPENAI_CHAT,
    "anthropic": ANTHROPIC_MESSAGES,
    "ollama": OLLAMA_CHAT,
}
"""The API each provider's model speaks to its ``base_url``."""


def build_model(settings: ModelSettings) -> tuple[ChatModelBase, FormatterBase]:
    """AgentScope's model and formatter for ``settings``.

    Raises:
        `ConfigError`: A key the provider needs is not set, or ``openai-compatible`` has no
            ``base_url``.
    """
    provider = settings.provider
    options = dict(settings.options)
    if provider == "openai-compatible" and not settings.base_url:
        raise ConfigError("model.base_url: an openai-compatible model needs the server's URL")
    key = settings.api_key()
    models = importlib.import_module("agentscope.model")
    formatters = importlib.import_module("agentscope.formatter")
    if provider == "dashscope":
        model = models.DashScopeChatModel(
            model_name=settings.model,
            api_key=key,
            stream=settings.stream,
            generate_kwargs=options or None,
            base_http_api_url=settings.base_url,
        )
        return model, formatters.DashScopeChatFormatter()
    if provider in ("openai", "openai-compatible"):
        client = {"base_url": settings.base_url} if settings.base_url else {}
        compat = settings.openai_compat()
        arguments: dict[str, Any] = {
            "model_name": settings.model,
            "api_key": key or LOCAL_KEY,
            "stream": settings.stream,
            "client_kwargs": client or None,
            "generate_kwargs": options or None,
        }
        if compat is None:
            return OpenAIChatModel(**arguments), OpenAIChatFormatter()
        model = OpenAICompatibleModel(**arguments, compat=compat)
        return model, OpenAICompatibleFormatter(compat)
    if provider == "anthropic":
        max_tokens = int(options.pop("max_tokens", 2048))
        model = models.AnthropicChatModel(
            model_name=settings.model,
            api_key=key,
            max_tokens=max_tokens,
            stream=settings.stream,
            client_kwargs={"base_url": settings.base_url} if settings.base_url else None,
            generate_kwargs=options or None,
        )
        return model, formatters.AnthropicChatFormatter()
    try:
        model = models.OllamaChatModel(
            model_name=settings.model,
            stream=settings.stream,
            options=options or None,
            host=settings.base_url,
        )
    except ImportError:
        raise ModelUnavailable(
            f"model.provider: ollama needs its client: {install_command('ollama')}"
        ) from None
    return model, formatters.OllamaChatFormatter()


def build_agent(
    source: str | Path | dict[str, Any] | AgentFile,
    *,
    model: str | None = None,
    base_url: str | None = None,
) -> ReActAgent:
    """The ``ReActAgent`` an agent file describes, with context management on
    (``agent.context_manager`` is its manager).

    Args:
        source: The agent file (YAML/JSON path), its keys as a mapping, or an :class:`AgentFile`.
        model (`str | None`): Replaces the file's model name.
        base_url (`str | None`): Replaces the file's server.

    Raises:
        `ConfigError`: A bad agent file (the key is named), a missing key, a tool that cannot
            be imported.
    """
    spec = source if isinstance(source, AgentFile) else load_agent_file(source)
    spec = spec.with_overrides(model, base_url)
    chat_model, formatter = build_model(spec.model)
    toolkit = Toolkit()
    context = spec.context
    if spec.tools.explorer is not None:
        roots, context = explorer_context(spec)
        for tool in map(as_tool, make_explorer_functions(roots[0])):
            toolkit.register_tool_function(tool)
    for dotted in spec.tools.functions:
        toolkit.register_tool_function(import_tool(dotted))
    agent = ReActAgent(
        name=spec.name,
        sys_prompt=spec.system_prompt,
        model=chat_model,
        formatter=formatter,
        toolkit=toolkit,
        max_iters=spec.max_iters,
    )
    enable_context_management(agent, context)
    return agent
