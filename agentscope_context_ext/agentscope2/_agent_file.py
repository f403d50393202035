"""Build the AgentScope 2.x agent an agent file describes.

2.x models take a credential object and a ``Parameters`` model; each provider maps onto 2.x's own
classes, so the real client stack runs:

====================  ========================  =======================  ======================
provider              model class               credential               ``base_url`` goes to
====================  ========================  =======================  ======================
``dashscope``         ``DashScopeChatModel``    ``DashScopeCredential``  the credential
``openai``            ``OpenAIChatModel``       ``OpenAICredential``     the credential
``openai-compatible`` ``OpenAIChatModel``       ``OpenAICredential``     the credential (required)
``anthropic``         ``AnthropicChatModel``    ``AnthropicCredential``  the credential
``ollama``            ``OllamaChatModel``       ``OllamaCredential``     ``host``
====================  ========================  =======================  ======================

``model.options`` are the model class's ``Parameters`` (``temperature``, ``max_tokens``, ...);
a name it does not have is an error that lists the ones it has. ``openai-compatible`` runs on
:class:`OpenAICompatibleModel` and :class:`OpenAICompatibleFormatter`: subclasses that shape the
request and the answer as ``model.compat`` says (``_openai_compatible.py``).
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

from agentscope.agent import Agent, ReActConfig
from agentscope.model import ChatModelBase
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
from ..core.model_servers import ANTHROPIC_MESSAGES, OLLAMA_CHAT, OPENAI_CHAT, ModelApi
from ..core.tools import make_explorer_functions
from ._middleware import ContextMiddleware
from ._openai_compatible import OpenAICompatibleFormatter, OpenAICompatibleModel
from ._tools import as_tool
from ._tracing import traced

__all__ = [
    "MODEL_APIS",
    "ModelUnavailable",
    "build_agent",
    "build_model",
]

MODEL_APIS: dict[str, ModelApi] = {
    "dashscope": OPENAI_CHAT,  # 2.x's DashScopeChatModel speaks DashScope's OpenAI-compatible mode
    "openai": OPENAI_CHAT,
    "openai-compatible": OPENAI_CHAT,
    "anthropic": ANTHROPIC_MESSAGES,
    "ollama": OLLAMA_CHAT,
}
"""The API each provider's model speaks to its ``base_url``."""


_CLASSES = {
    "dashscope": ("DashScopeChatModel", "DashScopeCredential"),
    "openai": ("OpenAIChatModel", "OpenAICredential"),
    "openai-compatible": ("OpenAIChatModel", "OpenAICredential"),
    "anthropic": ("AnthropicChatModel", "AnthropicCredential"),
    "ollama": ("OllamaChatModel", "OllamaCredential"),
}


_SERVED_CLASSES = {
    "dashscope": ("dashscope_credential", "dashscope_chat"),
    "openai": ("openai_credential", "openai_chat"),
    "openai-compatible": ("openai_credential", "openai_chat"),
    "anthropic": ("anthropic_credential", "anthropic_chat"),
    "ollama": ("ollama_credential", "ollama_chat"),
}


def model_credential(settings: ModelSettings) -> tuple[dict[str, Any], str]:
    """The agent file's model as ``create_app`` keeps it: the credential's data (its ``type``,
    key and server) and the ``model_class`` a session names.

    Raises:
        `ConfigError`: A key the provider needs is not set, ``openai-compatible`` has no
            ``base_url``, or the file asks for ``compat`` behaviour (the service builds the
            provider's own model class from the credential, which has none).
    """
    provider = settings.provider
    if provider == "openai-compatible" and not settings.base_url:
        raise ConfigError("model.base_url: an openai-compatible model needs the server's URL")
    if settings.compat is not None and (
        settings.compat.string_content or settings.compat.tool_choice_auto
    ):
        raise ConfigError(
            "model.compat: the service builds AgentScope's own model class from the credential, "
            "without compat settings; serve this agent from a server that needs none"
        )
    credential_type, model_class = _SERVED_CLASSES[provider]
    data: dict[str, Any] = {"type": credential_type}
    if provider == "ollama":
        if settings.base_url:
            data["host"] = settings.base_url
    else:
        data["api_key"] = settings.api_key() or LOCAL_KEY
        if settings.base_url:
            data["base_url"] = settings.base_url
    return data, model_class


def build_model(settings: ModelSettings) -> tuple[ChatModelBase, Any]:
    """The 2.x chat model for ``settings`` and its formatter (``model.formatter``; 2.x models
    format for themselves).

    Raises:
        `ConfigError`: A key the provider needs is not set, ``openai-compatible`` has no
            ``base_url``, or an option is not one of the model's parameters.
    """
    provider = settings.provider
    if provider == "openai-compatible" and not settings.base_url:
        raise ConfigError("model.base_url: an openai-compatible model needs the server's URL")
    key = settings.api_key()
    model_name, credential_name = _CLASSES[provider]
    try:
        model_class = getattr(importlib.import_module("agentscope.model"), model_name)
    except (ImportError, AttributeError):
        raise ModelUnavailable(
            f"model.provider: {provider} needs its client (pip install "
            f"'agentscope-context-ext[{provider}]')"
        ) from None
    credential_class = getattr(importlib.import_module("agentscope.credential"), credential_name)
    if provider == "ollama":
        credential = credential_class(host=settings.base_url)
    else:
        fields: dict[str, Any] = {"api_key": key or LOCAL_KEY}
        if settings.base_url:
            fields["base_url"] = settings.base_url
        credential = credential_class(**fields)
    extra: dict[str, Any] = {}
    compat = settings.openai_compat()
    if compat is not None:
        model_class = OpenAICompatibleModel
        extra["compat"] = compat
        extra["formatter"] = OpenAICompatibleFormatter(compat=compat)
    known = set(model_class.Parameters.model_fields)
    unknown = sorted(set(settings.options) - known)
    if unknown:
        raise ConfigError(
            f"model.options.{unknown[0]}: not a parameter of AgentScope 2.x's {model_name} "
            f"(it has: {', '.join(sorted(known))})"
        )
    try:
        model = model_class(
            credential=credential,
            model=settings.model,
            parameters=model_class.Parameters(**settings.options),
            stream=settings.stream,
            **extra,
        )
    except ImportError:
        raise ModelUnavailable(
            f"model.provider: {provider} needs its client (pip install "
            f"'agentscope-context-ext[{provider}]')"
        ) from None
    except ValueError as exc:  # pydantic: a parameter of the wrong type
        raise ConfigError(f"model.options: {' '.join(str(exc).split())[:300]}") from None
    return model, model.formatter


def build_agent(
    source: str | Path | dict[str, Any] | AgentFile,
    *,
    model: str | None = None,
    base_url: str | None = None,
) -> Agent:
    """The 2.x ``Agent`` an agent file describes, with a :class:`ContextMiddleware` and its
    offloader (``agent.context_manager`` is its manager). Same arguments and errors as on 1.x."""
    spec = source if isinstance(source, AgentFile) else load_agent_file(source)
    spec = spec.with_overrides(model, base_url)
    chat_model, _ = build_model(spec.model)
    tools: list[Any] = []
    context = spec.context
    if spec.tools.explorer is not None:
        roots, context = explorer_context(spec)
        tools += [as_tool(function) for function in make_explorer_functions(roots[0])]
    tools += [as_tool(import_tool(dotted), read_only=False) for dotted in spec.tools.functions]
    middleware = ContextMiddleware(context)
    agent = Agent(
        name=spec.name,
        system_prompt=spec.system_prompt,
        model=chat_model,
        toolkit=Toolkit(tools=tools),
        middlewares=traced(middleware),
        offloader=middleware.offloader,
        react_config=ReActConfig(max_iters=spec.max_iters),
    )
    middleware.bind(agent)
    return agent
