"""Reading configuration files and explaining validation errors (design §8)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from .errors import ConfigError

__all__ = ["describe_errors", "read_config_file", "render_yaml"]


def read_config_file(path: str | Path) -> dict[str, Any]:
    """The mapping a YAML (``.yaml``/``.yml``) or JSON (``.json``) file holds.

    Raises:
        `ConfigError`: The file is missing, unreadable, not valid, or not a mapping.
    """
    path = Path(path)
    try:
        raw_text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{path}: config file not found") from None
    except IsADirectoryError:
        raise ConfigError(f"{path}: is a directory, not a config file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read config file ({exc})") from None
    try:
        if path.suffix.lower() == ".json":
            data = json.loads(raw_text) if raw_text.strip() else {}
        else:
            data = yaml.safe_load(raw_text)
    except (yaml.YAMLError, json.JSONDecodeError) as exc:
        reason = " ".join(str(exc).split())
        raise ConfigError(f"{path}: not valid {_format_name(path)}: {reason}") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(
            f"{path}: the top level must be a mapping of keys, got {type(data).__name__}",
        )
    return data


def _format_name(path: Path) -> str:
    return "JSON" if path.suffix.lower() == ".json" else "YAML"


def describe_errors(exc: ValidationError, source: str) -> str:
    """Turn pydantic's report into lines of ``source: dotted.key: reason``."""
    lines = []
    for error in exc.errors():
        key = ".".join(str(part) for part in error["loc"]) or "(top level)"
        if error["type"] == "extra_forbidden":
            reason = "unknown key"
        else:
            reason = error["msg"].removeprefix("Value error, ")
            # A check across sections names its key itself: "compaction.max_summary_tokens: ..."
            named = re.match(r"^([a-z_]+(?:\.[a-z_]+)+): (.*)$", reason, re.DOTALL)
            if not error["loc"] and named:
                key, reason = named.groups()
            if (
                "input" in error
                and error["type"] != "missing"
                and not isinstance(error["input"], dict)
            ):
                reason += f" (got {error['input']!r})"
        lines.append(f"{source}: {key}: {reason}")
    return "\n".join(lines)


def render_yaml(config: BaseModel | None = None, indent: int = 0) -> str:
    """``config`` as commented YAML: every key, its value and its one-line description."""
    pad = "  " * indent
    lines: list[str] = []
    for name, field in type(config).model_fields.items():
        value = getattr(config, name)
        description = (field.description or "").strip()
        comment = description.splitlines()[0].replace("``", "") if description else ""
        if isinstance(value, BaseModel):
            if lines and indent == 0:
                lines.append("")
            lines.append(f"{pad}# {comment}")
            lines.append(f"{pad}{name}:")
            lines.append(render_yaml(value, indent + 1).rstrip("\n"))
            continue
        rendered = yaml.safe_dump(value, default_flow_style=True, allow_unicode=True)
        rendered = rendered.strip().removesuffix("...").strip()
        lines.append(f"{pad}{name}: {rendered}  # {comment}")
    return "\n".join(lines) + "\n"
