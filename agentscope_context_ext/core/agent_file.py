"""The agent file: one YAML file that says which model, which tools and which context settings an
agent runs with (``agentscope-context chat --agent agent.yaml``, ``build_agent("agent.yaml")``).

.. code-block:: yaml

    name: assistant
    system_prompt: You are a careful coding assistant.
    model:
      provider: openai-compatible       # dashscope | openai | anthropic | ollama | openai-compatible
      model: qwen2.5:7b
      base_url: http://localhost:11434/v1
      api_key_env: null                 # the variable holding the key; none for a local server
      stream: true
      options: {temperature: 0.2}       # generation options, passed to the provider as they are
      compat: {unescape_html: true}     # openai-compatible: request/answer shapes (design §8)
    tools:
      explorer: {roots: ["."]}          # read_file, list_dir and grep, confined to the roots
      functions: ["mypackage.tools:search_issues"]
      agentscope_builtins: false        # serve: AgentScope's Bash, Read, ... as well (host!)
    context:                            # exactly the package's configuration, or a path to one
      max_input_tokens: 32768

Validated with pydantic; an unknown key is an error that names it. This module is the schema
only (no AgentScope): an adapter builds the agent.
"""

from __future__ import annotations

import importlib
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
)

from ._config_io import describe_errors, read_config_file
from .config import ContextConfig
from .errors import ConfigError

__all__ = [
    "LOCAL_KEY",
    "AgentFile",
    "ModelSettings",
    "ModelUnavailable",
    "ModelUnreachable",
    "OpenAICompatibility",
    "ToolSettings",
    "explorer_context",
    "import_tool",
    "load_agent_file",
    "serve_data_folder",
]

Provider = Literal["dashscope", "openai", "anthropic", "ollama", "openai-compatible"]

DEFAULT_KEY_ENV = {
    "dashscope": "DASHSCOPE_API_KEY",
    "openai": "OPENAI_API_KEY",
    "anthropic": "ANTHROPIC_API_KEY",
}
"""The key variable of each provider when ``api_key_env`` is not given (local servers need none)."""

_DOTTED_RE = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class OpenAICompatibility(_Section):
    """Request and answer shapes for an OpenAI-compatible server (``provider:
    openai-compatible``; design §8). The request keys default to ``true`` but
    ``tool_results_as_user``: the shapes they pick are valid OpenAI requests that every
    compatible server takes, and llama-cpp-python's server takes nothing else (it answers HTTP
    500 to a list of content parts or a ``null`` content, offers its model no tool unless
    ``tool_choice`` is ``auto`` and ignores ``max_completion_tokens``; checked against the real
    server in B12)."""

    string_content: bool = True
    """Send each message's content as one string (its text parts joined by newlines), and
    ``""`` where OpenAI's format has ``null`` (an assistant turn with only tool calls)."""
    tool_choice_auto: bool = True
    """Send ``tool_choice: "auto"`` with the tools when the agent sets no tool choice."""
    max_tokens: bool = True
    """Send the output cap (``options.max_tokens``, the summary call's cap) as ``max_tokens``,
    not as ``max_completion_tokens`` (OpenAI's newer name, which llama.cpp ignores)."""
    unescape_html: bool = False
    """Turn HTML entities in the answers back into characters (``&#39;`` -> ``'``): a server
    whose chat template HTML-escapes the prompt (llama-cpp-python's
    ``chatml-function-calling``) has its model answer with entities."""
    empty_answer_retry: bool = True
    """Ask an empty answer to a request that offered tools with ``tool_choice: "auto"`` again
    with ``tool_choice: "none"``: llama-cpp-python's ``chatml-function-calling`` lets a model
    that chose to answer in text write nothing (its grammar after ``message:`` allows only a
    function name or the end)."""
    tool_results_as_user: bool = False
    """Send each tool result as a user message (``[tool result: NAME, call ID]`` and its
    text): llama-cpp-python's ``chatml-function-calling`` template drops ``tool`` messages, so
    its model never sees what a tool returned (a server that checks the order of tool calls
    and results refuses this)."""


class ModelSettings(_Section):
    """Which model the agent (and its compaction, Summarizer and consolidation) talks to."""

    provider: Provider
    """The API it speaks."""
    model: str = Field(min_length=1)
    """The model name, as the provider spells it."""
    base_url: str | None = None
    """The server (required for ``openai-compatible``; Ollama's host for ``ollama``)."""
    api_key_env: str | None = None
    """The environment variable that holds the key (default: the provider's usual one)."""
    stream: bool = True
    """Stream the answer (tool-call deltas included)."""
    options: dict[str, Any] = Field(default_factory=dict)
    """Generation options (``temperature``, ``max_tokens``, ...), passed on as they are."""
    compat: OpenAICompatibility | None = None
    """``openai-compatible`` only: request and answer shapes (default: each key's default)."""

    @field_validator("base_url")
    @classmethod
    def _is_http(cls, value: str | None) -> str | None:
        if value is not None and not re.match(r"^https?://[^/\s]+", value):
            raise ValueError(f"must be an http(s) URL, got {value!r}")
        return value

    @field_validator("compat")
    @classmethod
    def _openai_compatible_only(
        cls, value: OpenAICompatibility | None, info: ValidationInfo
    ) -> OpenAICompatibility | None:
        provider = info.data.get("provider")
        if value is not None and provider != "openai-compatible":
            raise ValueError(f"only for provider openai-compatible, not {provider}")
        return value

    def openai_compat(self) -> OpenAICompatibility | None:
        """The shapes an ``openai-compatible`` model's requests take (``compat``, or every
        key's default when the file has none); ``None`` for the other providers."""
        if self.provider != "openai-compatible":
            return None
        return self.compat or OpenAICompatibility()

    def key_env(self) -> str | None:
        """The variable the key comes from (``None``: no key needed)."""
        return self.api_key_env or DEFAULT_KEY_ENV.get(self.provider)

    def api_key(self) -> str | None:
        """The key from the environment.

        Raises:
            `ConfigError`: The provider needs a key and the variable is not set.
        """
        name = self.key_env()
        if name is None:
            return None
        value = os.environ.get(name, "").strip()
        if not value:
            raise ConfigError(
                f"model.api_key_env: the {self.provider} model needs {name} to be set"
            )
        return value


class ExplorerTools(_Section):
    """The demo's ``read_file``/``list_dir``/``grep``, confined to ``roots``."""

    roots: list[str] = Field(min_length=1)


class ToolSettings(_Section):
    """The tools the agent gets (this package's own come with context management)."""

    explorer: ExplorerTools | None = None
    """The explorer tools, confined to folders."""
    functions: list[str] = Field(default_factory=list)
    """Tool functions by import path, ``package.module:function`` (its docstring is the schema)."""
    agentscope_builtins: bool = False
    """``serve`` only: also give the agent the tools AgentScope's service attaches to every
    agent (its workspace's Bash, Read, Write, Edit, Glob and Grep, the Task*, Team* and
    Schedule* tools, skills and MCPs) and the workspace's instructions. Off, the served agent
    has the file's tools and this package's, as ``chat`` does. With a local workspace, Bash
    runs commands on the serving host."""

    @field_validator("functions")
    @classmethod
    def _dotted(cls, values: list[str]) -> list[str]:
        for value in values:
            if not _DOTTED_RE.match(value):
                raise ValueError(f"a tool is 'package.module:function', got {value!r}")
        return values


class AgentFile(_Section):
    """An agent: its name, system prompt, model, tools and context configuration."""

    name: str = Field("assistant", min_length=1, max_length=64)
    system_prompt: str = "You are a helpful assistant. Use your tools when they help."
    model: ModelSettings
    tools: ToolSettings = Field(default_factory=ToolSettings)
    context: ContextConfig = Field(default_factory=ContextConfig)
    """The package's configuration (``configs/default.yaml`` lists every key)."""
    max_iters: int = Field(30, ge=1, le=1000)
    """Reasoning-acting rounds per reply."""

    def with_overrides(self, model: str | None = None, base_url: str | None = None) -> AgentFile:
        """A copy with the model name and/or the server replaced (``chat --model/--base-url``)."""
        updates = {k: v for k, v in (("model", model), ("base_url", base_url)) if v}
        if not updates:
            return self
        settings = ModelSettings.model_validate({**self.model.model_dump(), **updates})
        return self.model_copy(update={"model": settings})


def load_agent_file(source: str | Path | dict[str, Any]) -> AgentFile:
    """Read and validate an agent file (YAML or JSON), or a mapping of the same keys.

    ``context:`` may be a mapping or the path of a config file (relative to the agent file).

    Raises:
        `ConfigError`: A missing file, bad YAML or an invalid or unknown key (named).
    """
    base = Path.cwd()
    where = "agent file"
    if isinstance(source, dict):
        data = dict(source)
    else:
        path = Path(source)
        data = read_config_file(path)
        base, where = path.parent, str(path)
    context = data.get("context")
    if isinstance(context, str):
        context_path = Path(context) if Path(context).is_absolute() else base / context
        data["context"] = read_config_file(context_path)
    try:
        return AgentFile.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(describe_errors(exc, where)) from None


# What the agent-file builders of both adapters share.

LOCAL_KEY = "no-key"
"""What an OpenAI-compatible local server gets as its key when none is configured."""


class ModelUnavailable(ConfigError):
    """The model cannot be used as configured (a missing key, a client not installed)."""


class ModelUnreachable(ModelUnavailable):
    """The model's server cannot be reached (refused, reset, timed out, gone mid-answer); the
    message names its URL (``cannot reach the model at URL: connection refused``)."""


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


def serve_data_folder() -> Path:
    """Where ``serve`` keeps its records and workspaces unless told: this user's data folder
    (``$XDG_DATA_HOME/agentscope-context/serve``, else ``~/.local/share/...``), never the
    current directory, which the agents' file tools read by default (design §11.4)."""
    base = os.environ.get("XDG_DATA_HOME", "")
    if not base or not Path(base).is_absolute():  # a relative one is to be ignored (XDG spec)
        base = str(Path.home() / ".local" / "share")
    return Path(base) / "agentscope-context" / "serve"


@dataclass(frozen=True)
class ServeSettings:
    """What ``agentscope-context serve`` was asked for: the agent file, where to listen, where
    the service keeps its records and its agents' workspaces (default: in
    :func:`serve_data_folder`), and the user it registers the agent for."""

    agent: Path
    host: str = "127.0.0.1"
    port: int = 8000
    storage: str = field(default_factory=lambda: f"sqlite:///{serve_data_folder() / 'app.db'}")
    workspaces: Path = field(default_factory=lambda: serve_data_folder() / "workspaces")
    user: str = "local"
