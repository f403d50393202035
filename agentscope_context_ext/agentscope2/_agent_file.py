"""Build the AgentScope 2.x agent an agent file describes.

2.x models take a credential object and a ``Parameters`` model; each provider maps onto 2.x's own
classes, so the real client stack runs:

====================  ========================  =======================  ======================
provider              model class               credential               ``base_url`` goes to
====================  ========================  =======================  ======================
``dashscope``         ``DashScopeChatModel``    ``DashScopeCredential``  the credential
``openai``            ``OpenAIChatModel``       ``OpenAICredential``     the credential
``openai-compatible`` ``OpenAICompatibleModel`` ``OpenAICredential``     the credential (required)
``anthropic``         ``AnthropicChatModel``    ``AnthropicCredential``  the credential
``ollama``            ``OllamaChatModel``       ``OllamaCredential``     ``host``
====================  ========================  =======================  ======================

``model.options`` are the model class's ``Parameters`` (``temperature``, ``max_tokens``, ...);
a name it does not have is an error that lists the ones it has. ``openai-compatible`` runs on
:class:`OpenAICompatibleModel` and :class:`OpenAICompatibleFormatter`: subclasses that shape the
request and the answer as ``model.compat`` says (``_openai_compatible.py``).
:func:`model_arguments` is what a served session's model gets of the same settings
(``_served_model.py``), so ``chat`` and ``serve`` send the same requests.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

from agentscope.agent import Agent, ReActConfig
from agentscope.model import ChatModelBase
from agentscope.tool import Toolkit
from pydantic import BaseModel

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
from ..core.installation import client_install_command
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
    "model_arguments",
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
    except (ImportError, AttributeError) as exc:
        missing = getattr(exc, "name", None)
        raise ModelUnavailable(
            f"model.provider: {provider} needs its client "
            f"({client_install_command(provider, missing)})"
        ) from None
    credential_class = getattr(importlib.import_module("agentscope.credential"), credential_name)
    if provider == "ollama":
        credential = credential_class(host=settings.base_url)
    else:
        fields: dict[str, Any] = {"api_key": key or LOCAL_KEY}
        if settings.base_url:
            fields["base_url"] = settings.base_url
        credential = credential_class(**fields)
    if settings.openai_compat() is not None:
        model_class = OpenAICompatibleModel
    arguments = model_arguments(settings, model_class)
    try:
        model = model_class(credential=credential, model=settings.model, **arguments)
    except ImportError as exc:
        raise ModelUnavailable(
            f"model.provider: {provider} needs its client "
            f"({client_install_command(provider, exc.name)})"
        ) from None
    return model, model.formatter


def model_arguments(
    settings: ModelSettings,
    model_class: type[ChatModelBase],
    session: BaseModel | None = None,
) -> dict[str, Any]:
    """The agent file's model settings beyond the server and the key, as keyword arguments of
    ``model_class``: ``parameters`` (``model.options``), ``stream`` and, for an
    :class:`OpenAICompatibleModel`, ``compat`` and its ``formatter``. ``chat``'s model and every served session's
    (``_served_model.py``) are made with them.

    Args:
        settings (`ModelSettings`): The agent file's ``model:``.
        model_class (`type[ChatModelBase]`): The 2.x model class (its ``Parameters``).
        session (`BaseModel | None`): A served session's own parameters: those it set itself
            are kept where the file's options say nothing; the file's options win.

    Raises:
        `ConfigError`: An option is not one of the model's parameters, or of the wrong type.
    """
    known = set(model_class.Parameters.model_fields)
    unknown = sorted(set(settings.options) - known)
    if unknown:
        # the class the user knows: AgentScope's, not a subclass of ours
        name = next(
            c.__name__ for c in model_class.__mro__ if c.__module__.startswith("agentscope.")
        )
        raise ConfigError(
            f"model.options.{unknown[0]}: not a parameter of AgentScope 2.x's {name} "
            f"(it has: {', '.join(sorted(known))})"
        )
    chosen = session.model_dump(include=session.model_fields_set) if session is not None else {}
    try:
        parameters = model_class.Parameters(**{**chosen, **settings.options})
    except ValueError as exc:  # pydantic: a parameter of the wrong type
        raise ConfigError(f"model.options: {' '.join(str(exc).split())[:300]}") from None
    arguments: dict[str, Any] = {"parameters": parameters, "stream": settings.stream}
    compat = settings.openai_compat()
    if compat is not None and issubclass(model_class, OpenAICompatibleModel):
        arguments["compat"] = compat
        arguments["formatter"] = OpenAICompatibleFormatter(compat=compat)
    return arguments


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
