"""The agent file's model on every call of a served agent (``agentscope-context serve``,
design §11.3).

``create_app`` makes a session's model itself, from a stored credential and the session's
``chat_model_config``: ``model_class(credential=..., model=..., parameters=...)``, with no
``stream``, no formatter and only the parameters the client sent. So ``serve`` registers
(``create_app(extra_credentials=...)``) a credential type per provider that carries the agent
file's ``model:`` section, and whose model class takes the file's settings from it with
:func:`model_arguments`, as ``chat`` does: ``options`` (over the session's own parameters: the
file's win, a session adds only those the file leaves unset), ``stream`` and ``compat``. Every
session made with that credential gets them, whatever parameters it carries; the model name
is the session's. A call whose server cannot be reached (refused, reset, gone mid-answer) raises
:class:`ModelUnreachable` naming the file's ``base_url``: the turn's stream says it (a refusal,
``_refusal.py``) instead of the service's "Could not reach the model service".
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import AsyncGenerator, Iterator
from typing import Any, Literal

from agentscope.credential import (
    AnthropicCredential,
    CredentialBase,
    DashScopeCredential,
    OllamaCredential,
    OpenAICredential,
)
from agentscope.model import (
    AnthropicChatModel,
    ChatModelBase,
    DashScopeChatModel,
    OllamaChatModel,
    OpenAIChatModel,
)
from pydantic import BaseModel, ConfigDict, Field

from ..core.agent_file import LOCAL_KEY, ModelSettings, ModelUnavailable, ModelUnreachable
from ..core.errors import ConfigError
from ..core.installation import client_install_command
from ..core.model_servers import unreachable
from ._agent_file import model_arguments
from ._openai_compatible import OpenAICompatibleModel

__all__ = [
    "SERVED_CREDENTIALS",
    "ServedAnthropicCredential",
    "ServedDashScopeCredential",
    "ServedOllamaCredential",
    "ServedOpenAICompatibleCredential",
    "ServedOpenAICredential",
    "model_credential",
    "served_model",
]

_AGENT_FILE = "The agent file's model: section; its options, stream and compat apply to every call."


class AgentFileModel:
    """What a served model class adds to AgentScope's: the agent file's settings, read from
    the credential the service builds it with (first base of each ``Served*ChatModel``)."""

    def __init__(
        self,
        credential: Any,
        model: str,
        parameters: BaseModel | None = None,
        **kwargs: Any,
    ) -> None:
        settings: ModelSettings = credential.agent_file
        arguments = model_arguments(settings, type(self), parameters)  # type: ignore[arg-type]
        super().__init__(credential=credential, model=model, **{**kwargs, **arguments})  # type: ignore[call-arg]
        self.agent_file_url = settings.base_url

    async def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """AgentScope's call (its retries included); a server that cannot be reached, before
        or during a streamed answer, is :class:`ModelUnreachable`."""
        with self._named_server():
            response = await super().__call__(*args, **kwargs)  # type: ignore[misc]
        return self._relay(response) if inspect.isasyncgen(response) else response

    async def _relay(self, chunks: AsyncGenerator) -> AsyncGenerator[Any, None]:
        async with contextlib.aclosing(chunks):
            with self._named_server():
                async for chunk in chunks:
                    yield chunk

    @contextlib.contextmanager
    def _named_server(self) -> Iterator[None]:
        try:
            yield
        except Exception as exc:
            line = unreachable(exc, self.agent_file_url)
            if line is None:
                raise
            raise ModelUnreachable(line) from exc


class ServedOpenAIChatModel(AgentFileModel, OpenAIChatModel):
    """AgentScope's ``OpenAIChatModel`` with the agent file's settings (``openai``)."""


class ServedOpenAICompatibleChatModel(AgentFileModel, OpenAICompatibleModel):
    """:class:`OpenAICompatibleModel` (AgentScope's ``OpenAIChatModel`` shaped by ``compat``)
    with the agent file's settings (``openai-compatible``)."""


class ServedDashScopeChatModel(AgentFileModel, DashScopeChatModel):
    """AgentScope's ``DashScopeChatModel`` with the agent file's settings."""


class ServedAnthropicChatModel(AgentFileModel, AnthropicChatModel):
    """AgentScope's ``AnthropicChatModel`` with the agent file's settings."""


class ServedOllamaChatModel(AgentFileModel, OllamaChatModel):
    """AgentScope's ``OllamaChatModel`` with the agent file's settings."""


class ServedOpenAICredential(OpenAICredential):
    """An OpenAI(-compatible) server and key, with the agent file's model settings."""

    model_config = ConfigDict(title="OpenAI API, as an agent file says (agentscope-context)")
    type: Literal["context_ext_openai_credential"] = "context_ext_openai_credential"  # type: ignore[assignment]
    agent_file: ModelSettings = Field(description=_AGENT_FILE)

    @classmethod
    def get_chat_model_class(cls) -> type[ChatModelBase]:
        return ServedOpenAIChatModel


class ServedOpenAICompatibleCredential(OpenAICredential):
    """An OpenAI-compatible server (llama-cpp-python, vLLM, ...), with the agent file's model
    settings, ``compat`` included."""

    model_config = ConfigDict(
        title="OpenAI-compatible server, as an agent file says (agentscope-context)"
    )
    type: Literal["context_ext_openai_compatible_credential"] = (  # type: ignore[assignment]
        "context_ext_openai_compatible_credential"
    )
    agent_file: ModelSettings = Field(description=_AGENT_FILE)

    @classmethod
    def get_chat_model_class(cls) -> type[ChatModelBase]:
        return ServedOpenAICompatibleChatModel


class ServedDashScopeCredential(DashScopeCredential):
    """A DashScope key, with the agent file's model settings."""

    model_config = ConfigDict(title="DashScope API, as an agent file says (agentscope-context)")
    type: Literal["context_ext_dashscope_credential"] = "context_ext_dashscope_credential"  # type: ignore[assignment]
    agent_file: ModelSettings = Field(description=_AGENT_FILE)

    @classmethod
    def get_chat_model_class(cls) -> type[ChatModelBase]:
        return ServedDashScopeChatModel


class ServedAnthropicCredential(AnthropicCredential):
    """An Anthropic key, with the agent file's model settings."""

    model_config = ConfigDict(title="Anthropic API, as an agent file says (agentscope-context)")
    type: Literal["context_ext_anthropic_credential"] = "context_ext_anthropic_credential"  # type: ignore[assignment]
    agent_file: ModelSettings = Field(description=_AGENT_FILE)

    @classmethod
    def get_chat_model_class(cls) -> type[ChatModelBase]:
        return ServedAnthropicChatModel


class ServedOllamaCredential(OllamaCredential):
    """An Ollama host, with the agent file's model settings."""

    model_config = ConfigDict(title="Ollama, as an agent file says (agentscope-context)")
    type: Literal["context_ext_ollama_credential"] = "context_ext_ollama_credential"  # type: ignore[assignment]
    agent_file: ModelSettings = Field(description=_AGENT_FILE)

    @classmethod
    def get_chat_model_class(cls) -> type[ChatModelBase]:
        return ServedOllamaChatModel


SERVED_CREDENTIALS: tuple[type[CredentialBase], ...] = (
    ServedOpenAICredential,
    ServedOpenAICompatibleCredential,
    ServedDashScopeCredential,
    ServedAnthropicCredential,
    ServedOllamaCredential,
)
"""What ``serve`` passes as ``create_app(extra_credentials=...)``."""

_BY_PROVIDER: dict[str, type[CredentialBase]] = {
    "openai": ServedOpenAICredential,
    "openai-compatible": ServedOpenAICompatibleCredential,
    "dashscope": ServedDashScopeCredential,
    "anthropic": ServedAnthropicCredential,
    "ollama": ServedOllamaCredential,
}


def model_credential(settings: ModelSettings) -> tuple[dict[str, Any], str]:
    """The agent file's model as ``create_app`` keeps it: the credential's data (its
    ``type``, key, server and the file's ``model:`` section) and the ``model_class`` a
    session names.

    Raises:
        `ConfigError`: A key the provider needs is not set, or ``openai-compatible`` has no
            ``base_url``.
    """
    provider = settings.provider
    if provider == "openai-compatible" and not settings.base_url:
        raise ConfigError("model.base_url: an openai-compatible model needs the server's URL")
    credential_class = _BY_PROVIDER[provider]
    data: dict[str, Any] = {
        "type": credential_class.model_fields["type"].default,
        "agent_file": settings.model_dump(mode="json"),
    }
    if provider == "ollama":
        if settings.base_url:
            data["host"] = settings.base_url
    else:
        data["api_key"] = settings.api_key() or LOCAL_KEY
        if settings.base_url:
            data["base_url"] = settings.base_url
    model_class = credential_class.get_chat_model_class()
    return data, str(model_class.type)


def served_model(settings: ModelSettings) -> ChatModelBase:
    """The model a session of the served agent gets, made the way the service makes it (the
    credential, then the model class with the model name, then the window of a known model):
    what ``serve`` checks before it starts.

    Raises:
        `ConfigError`: As :func:`model_credential`, or an option the model does not have.
        `ModelUnavailable`: The provider's client is not installed.
    """
    data, _ = model_credential(settings)
    credential = _BY_PROVIDER[settings.provider].model_validate(data)
    model_class = credential.get_chat_model_class()
    try:
        model = model_class(credential=credential, model=settings.model)
    except ImportError as exc:
        raise ModelUnavailable(
            f"model.provider: {settings.provider} needs its client "
            f"({client_install_command(settings.provider, exc.name)})"
        ) from None
    try:
        cards = model_class.list_models()
    except Exception:  # noqa: BLE001 - as the service: no card, the class's default window
        cards = []
    for card in cards:
        if card.name == settings.model:
            model.context_size = card.context_size
            break
    return model
