"""The configuration tree (design §8).

One pydantic model, nested by concern. Key names are public API: they appear in YAML files,
in ``configs/default.yaml`` and in the README. Unknown keys are errors, so a typo never silently
falls back to a default.

Example:
    .. code-block:: python

        from agentscope_context_ext import ContextConfig

        config = ContextConfig.from_file("configs/small-window.yaml")
        config = ContextConfig.model_validate({"max_input_tokens": 32768})

One module on purpose: the whole configuration tree, in the order of ``configs/default.yaml``,
so a key is found where the file shows it.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from ._config_io import describe_errors, read_config_file
from ._config_io import render_yaml as _render_yaml
from .errors import ConfigError
from .workspace import MAX_TTL_DAYS, redact_url, workspace_url_error

__all__ = [
    "CompactionConfig",
    "ContextConfig",
    "LongTermMemoryConfig",
    "ToolsConfig",
    "TruncationConfig",
    "load_config",
    "render_yaml",
]


class _Section(BaseModel):
    """Base of every config section: unknown keys are rejected, assignments are validated."""

    model_config = ConfigDict(
        extra="forbid", validate_assignment=True, use_attribute_docstrings=True
    )


SUMMARY_WINDOW_SHARE = 0.05
"""``max_summary_tokens: null`` gives the summary this share of the window ..."""
MIN_AUTO_SUMMARY_TOKENS = 512
"""... but at least this many tokens ..."""
MAX_AUTO_SUMMARY_TOKENS = 4096
"""... and at most this many (about Claude Code's own summaries on a 200k window)."""


class CompactionConfig(_Section):
    """When and how the oldest conversation is summarised (design §4)."""

    enabled: bool = True
    """Compact the conversation when it passes the trigger."""
    trigger_ratio: float = Field(0.8, gt=0.0, le=1.0)
    """Compact when the prompt passes this share of ``max_input_tokens``."""
    keep_recent_ratio: float = Field(0.3, gt=0.0, lt=1.0)
    """Keep the newest messages that fit in this share of ``max_input_tokens``."""
    hook_point: Literal["pre_reasoning", "pre_reply"] = "pre_reasoning"
    """Run the pipeline before every model call, or once per reply."""
    summary_language: str = "auto"
    """Language of the summary; ``auto`` follows the user's language."""
    model: str | None = None
    """Model name for summaries; ``null``: the agent's own model; ``extractive``: no model at all."""
    max_summary_tokens: int | None = Field(None, ge=256)
    """Size of the summary message in tokens; ``null``: 5% of the window, 512 to 4096."""
    summary_timeout_seconds: float = Field(120.0, gt=0)
    """Seconds one summary call may take; then its request is closed and the next attempt made."""
    summary_output_tokens: int | None = Field(None, ge=64)
    """The summary call's output cap, sent as the provider's max_tokens; ``null``: twice the summary's size."""
    background_summary: bool = True
    """Write the model's summary in the background before the trigger (the agent does not wait); false: at the trigger, waited for."""

    def summary_tokens(self, max_input_tokens: int) -> int:
        """The summary's token budget for a window of ``max_input_tokens``."""
        if self.max_summary_tokens is not None:
            return self.max_summary_tokens
        share = int(max_input_tokens * SUMMARY_WINDOW_SHARE)
        return max(MIN_AUTO_SUMMARY_TOKENS, min(MAX_AUTO_SUMMARY_TOKENS, share))

    def summary_output_cap(self, max_input_tokens: int) -> int:
        """The summary call's output cap for a window of ``max_input_tokens``: the model writes
        the sections in the summary's budget, which it may pass (they are fitted afterwards),
        but not by more than double (a summary call without a cap once ran 2,400 tokens)."""
        if self.summary_output_tokens is not None:
            return self.summary_output_tokens
        return 2 * self.summary_tokens(max_input_tokens)

    def summary_budget_error(self, max_input_tokens: int) -> str | None:
        """Why ``max_summary_tokens`` cannot work with this window (``None`` when it can): the
        summary must leave room under the trigger for the messages kept, so it may take at most
        half of the trigger's tokens."""
        if self.max_summary_tokens is None:
            return None
        limit = int(self.trigger_ratio * max_input_tokens) // 2
        if self.max_summary_tokens <= limit:
            return None
        return (
            f"compaction.max_summary_tokens: {self.max_summary_tokens:,} tokens does not fit a "
            f"{max_input_tokens:,}-token window: a summary may take at most half of the "
            f"compaction trigger ({limit:,} tokens here)"
        )

    @model_validator(mode="after")
    def _keep_below_trigger(self) -> CompactionConfig:
        if self.keep_recent_ratio >= self.trigger_ratio:
            raise ValueError(
                f"keep_recent_ratio ({self.keep_recent_ratio}) must be smaller than "
                f"trigger_ratio ({self.trigger_ratio}), or every compaction would trigger the next",
            )
        return self


class TruncationConfig(_Section):
    """The two stages of tool-result truncation (design §3)."""

    enabled: bool = True
    """Truncate large tool results at all."""
    recent_n: int = Field(3, ge=0)
    """Tool-result messages this recent keep their stage-one excerpt."""
    first_max_bytes: int = Field(51200, ge=256)
    """Stage one: a tool result larger than this is truncated the moment it arrives."""
    second_max_bytes: int = Field(3000, ge=128)
    """Stage two: tool results older than ``recent_n`` are cut down to this."""
    markdown_first_max_bytes: int = Field(102400, ge=256)
    """Stage-one limit for Markdown files (see ``markdown_extensions``)."""
    markdown_second_max_bytes: int = Field(51200, ge=128)
    """Stage-two limit for Markdown files."""
    markdown_extensions: list[str] = Field(default_factory=lambda: [".md", ".markdown", ".mdx"])
    """File extensions that get the Markdown limits, matched on the real extension."""
    exempt_tools: list[str] = Field(default_factory=list)
    """Tools whose results are never truncated."""
    retruncate: Literal["eager", "batched"] = "batched"
    """Stage two when it frees enough or compaction is due (``batched``: stable prefix), or every step (``eager``)."""
    retruncate_min_gain_tokens: int = Field(2000, ge=0)
    """``batched``: re-truncate between compactions only when this many tokens are freed."""
    max_window_share: float = Field(0.25, gt=0.0, le=1.0)
    """One tool result never takes more than this share of ``max_input_tokens``."""
    ttl_days: float = Field(7, gt=0, le=MAX_TTL_DAYS, allow_inf_nan=False)
    """Files in ``tool_result/`` older than this many days are deleted (at most 36500)."""

    def result_tokens(self, max_input_tokens: int) -> int:
        """The most tokens one tool result may take in a window of ``max_input_tokens``."""
        return int(self.max_window_share * max_input_tokens)

    def read_file_max_bytes(self, max_input_tokens: int) -> int:
        """The most bytes one ``read_file`` answer returns (twice the result share, at least
        1 KB)."""
        return max(self.result_tokens(max_input_tokens) * 2, 1024)

    @field_validator("markdown_extensions")
    @classmethod
    def _normalise_extensions(cls, value: list[str]) -> list[str]:
        normalised = []
        for ext in value:
            ext = ext.strip().lower()
            if not ext or ext == ".":
                raise ValueError("an extension cannot be empty")
            normalised.append(ext if ext.startswith(".") else f".{ext}")
        return normalised

    @model_validator(mode="after")
    def _second_not_above_first(self) -> TruncationConfig:
        if self.second_max_bytes > self.first_max_bytes:
            raise ValueError(
                f"second_max_bytes ({self.second_max_bytes}) must not exceed "
                f"first_max_bytes ({self.first_max_bytes})",
            )
        if self.markdown_second_max_bytes > self.markdown_first_max_bytes:
            raise ValueError(
                f"markdown_second_max_bytes ({self.markdown_second_max_bytes}) must not exceed "
                f"markdown_first_max_bytes ({self.markdown_first_max_bytes})",
            )
        return self

    def is_markdown(self, file_path: str | None) -> bool:
        """Whether ``file_path`` has one of the Markdown extensions (its real suffix, any case).

        Args:
            file_path (`str | None`): The path a tool read, or ``None`` when unknown.
        """
        if not file_path:
            return False
        return Path(file_path.strip()).suffix.lower() in self.markdown_extensions

    def limits_for(self, file_path: str | None) -> tuple[int, int]:
        """The (stage one, stage two) byte limits for a result read from ``file_path``."""
        if self.is_markdown(file_path):
            return self.markdown_first_max_bytes, self.markdown_second_max_bytes
        return self.first_max_bytes, self.second_max_bytes


_HHMM = re.compile(r"^([01]\d|2[0-3]):([0-5]\d)$")


class LongTermMemoryConfig(_Section):
    """``Memory.md``, daily notes, the Summarizer and daily consolidation (design §7)."""

    enabled: bool = True
    """Register the memory tools and keep ``Memory.md``."""
    summarize_on_compaction: bool = True
    """Run the Summarizer agent over the messages each compaction removes."""
    consolidation_time: str = "00:00"
    """Local time (HH:MM) of the daily consolidation of notes into ``Memory.md``; ``off`` disables it."""
    backups_kept: int = Field(7, ge=1)
    """How many backups of ``Memory.md`` to keep in ``memory/backup/``."""
    inject_max_tokens: int = Field(2000, ge=0)
    """At most this many tokens of ``Memory.md`` are shown in its head message."""
    max_bytes: int = Field(16384, ge=1024)
    """Consolidation keeps ``Memory.md`` under this size."""
    model: str | None = None
    """Model name for the Summarizer and consolidation; ``null`` uses the agent's own."""
    summarizer_retries: int = Field(3, ge=1, le=10)
    """Attempts per Summarizer job before it is recorded as failed."""
    retry_backoff_seconds: float = Field(2.0, ge=0)
    """Wait before the n-th retry of a Summarizer job: this times 2**(n-1)."""

    @field_validator("consolidation_time")
    @classmethod
    def _check_time(cls, value: str) -> str:
        if value != "off" and not _HHMM.match(value):
            raise ValueError(f"must be a 24-hour time HH:MM or off, got {value!r}")
        return value


class ToolsConfig(_Section):
    """Which tools ``enable_context_management`` gives the agent (design §6)."""

    read_file: bool = True
    """Register ``read_file``, so the agent can read offloaded results back."""
    dialog: bool = True
    """Register ``read_dialog`` and ``search_dialog``."""
    memory: bool = True
    """Register the memory tools (when ``long_term_memory.enabled``)."""
    allowed_roots: list[str] = Field(default_factory=list)
    """Directories ``read_file`` may read; empty means the workspace and the current directory."""


class ContextConfig(_Section):
    """Everything the extension can be told (design §8). Defaults are the documented ones."""

    workspace: str = ".agentscope-context"
    """Folder of ``dialog/``, ``tool_result/``, ``Memory.md`` and ``memory/``, or a Redis URL."""
    workspace_timeout: float = Field(3.0, gt=0.0, le=300.0)
    """Seconds one call to a Redis workspace may take; then it fails (two in a row: fail at once for 10 s)."""
    max_input_tokens: int | None = Field(None, ge=1024)
    """The model's input window; ``null`` looks the model up in a small table (else 131072)."""
    tokenizer: Literal["auto", "qwen", "o200k_base", "cl100k_base", "estimate"] = "auto"
    """Token counter; ``auto`` picks by model name (Qwen vocabulary, tiktoken, a safe estimate)."""
    media_token_cost: int = Field(1280, ge=0)
    """Tokens counted for each image, audio or video block."""
    prompt_cache_price: float = Field(0.1, ge=0.0, le=1.0)
    """Price of a cached prompt token as a share of a full one (1.0: no caching); sets when to compact."""
    calibrate_with_usage: bool = False
    """Shift our count by a count error the provider's usage shows (never template skew; bounded).
    Design §5.1: never below our exact count, at most 15% of the window, decaying."""
    notices: bool = True
    """Print compaction start/finish through ``agent.print`` (console and Studio)."""
    compaction: CompactionConfig = Field(default_factory=CompactionConfig)
    """When and how the oldest conversation is summarised."""
    truncation: TruncationConfig = Field(default_factory=TruncationConfig)
    """The two stages of tool-result truncation."""
    long_term_memory: LongTermMemoryConfig = Field(default_factory=LongTermMemoryConfig)
    """Memory.md, daily notes, the Summarizer and daily consolidation."""
    tools: ToolsConfig = Field(default_factory=ToolsConfig)
    """Tools given to the agent."""

    @field_validator("workspace")
    @classmethod
    def _workspace_is_a_path(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must name a folder (use '.' for the current folder)")
        if "\x00" in value:
            raise ValueError("must not contain NUL characters")
        problem = workspace_url_error(value)
        # The error repeats the value ("(got ...)"): a URL with a password in it is refused
        # when the workspace is opened instead, with the password hidden.
        if problem and redact_url(value) == value.strip():
            raise ValueError(problem)
        return value

    @model_validator(mode="after")
    def _summary_fits_the_window(self) -> ContextConfig:
        if self.max_input_tokens is not None:
            error = self.compaction.summary_budget_error(self.max_input_tokens)
            if error:
                raise ValueError(error)
        return self

    @classmethod
    def from_file(cls, path: str | Path) -> ContextConfig:
        """Read a configuration from a YAML (``.yaml``/``.yml``) or JSON (``.json``) file.

        Args:
            path (`str | Path`): The file.

        Raises:
            `ConfigError`: The file is missing, unreadable, not a mapping, or holds an unknown
                key or a bad value; the message names the file and the key.
        """
        return _validate(read_config_file(path), source=str(path))

    @classmethod
    def load(cls, source: ContextConfig | dict[str, Any] | str | Path | None) -> ContextConfig:
        """Accept any of the forms ``enable_context_management`` takes.

        Args:
            source (`ContextConfig | dict | str | Path | None`): A config, a mapping of keys, a
                path to a YAML/JSON file, or ``None`` for the defaults.
        """
        if source is None:
            return cls()
        if isinstance(source, ContextConfig):
            return source
        if isinstance(source, dict):
            return _validate(source, source="config")
        if isinstance(source, str | Path):
            return cls.from_file(source)
        raise ConfigError(
            "config must be a ContextConfig, a dict or a path to a YAML/JSON file, "
            f"got {type(source).__name__}",
        )


def render_yaml(config: BaseModel | None = None, indent: int = 0) -> str:
    """``config`` (default: the defaults) as commented YAML: every key, its value and its
    one-line description. ``configs/default.yaml`` is ``render_yaml()``; a test keeps them equal.
    """
    return _render_yaml(config if config is not None else ContextConfig(), indent)


def load_config(source: ContextConfig | dict[str, Any] | str | Path | None) -> ContextConfig:
    """Shortcut for :meth:`ContextConfig.load`."""
    return ContextConfig.load(source)


def _validate(data: dict[str, Any], source: str) -> ContextConfig:
    try:
        return ContextConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(describe_errors(exc, source)) from None
