"""ContextConfig (design §8): defaults, files, and errors that name the key and the file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from pydantic import BaseModel

from agentscope_context_ext import ConfigError, ContextConfig, load_config
from agentscope_context_ext.core.config import render_yaml

REPO = Path(__file__).resolve().parents[2]


def test_default_yaml_equals_the_model_defaults() -> None:
    assert ContextConfig.from_file(REPO / "configs" / "default.yaml") == ContextConfig()


def test_default_yaml_is_what_render_yaml_produces() -> None:
    text = (REPO / "configs" / "default.yaml").read_text(encoding="utf-8")
    assert text.endswith(render_yaml()), "regenerate configs/default.yaml from render_yaml()"


def test_every_key_in_default_yaml_has_a_comment() -> None:
    for line in (REPO / "configs" / "default.yaml").read_text().splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("#") or stripped.endswith(":"):
            continue
        assert "  # " in line, f"key without a comment: {line!r}"


def test_every_field_is_in_default_yaml() -> None:
    data = yaml.safe_load((REPO / "configs" / "default.yaml").read_text())

    def keys(model, prefix=""):
        for name, value in model:
            if isinstance(value, BaseModel):
                yield from keys(value, f"{prefix}{name}.")
            else:
                yield f"{prefix}{name}"

    def lookup(path):
        node = data
        for part in path.split("."):
            node = node[part]
        return node

    for key in keys(ContextConfig()):
        lookup(key)  # KeyError if missing


def test_public_key_names_and_documented_defaults() -> None:
    config = ContextConfig()
    assert config.truncation.first_max_bytes == 51200
    assert config.truncation.second_max_bytes == 3000
    assert config.truncation.markdown_first_max_bytes == 102400
    assert config.truncation.markdown_second_max_bytes == 51200
    assert config.truncation.max_window_share == 0.25
    assert config.compaction.hook_point == "pre_reasoning"
    assert config.long_term_memory.consolidation_time == "00:00"
    assert config.long_term_memory.backups_kept == 7
    assert config.media_token_cost == 1280


def test_the_summary_calls_limits() -> None:
    """The summary call's time and output cap (they were 120 s hard-coded and no cap at all:
    a llama.cpp server wrote 2,400-token summaries and kept its one slot busy)."""
    compaction = ContextConfig().compaction
    assert compaction.summary_timeout_seconds == 120.0
    assert compaction.summary_output_tokens is None
    # twice the summary's own budget: 5% of the window, 512 to 4096 tokens
    assert compaction.summary_output_cap(8192) == 1024
    assert compaction.summary_output_cap(200_000) == 2 * 4096
    set_cap = load_config({"compaction": {"summary_output_tokens": 300}}).compaction
    assert set_cap.summary_output_cap(8192) == 300


def test_model_validate_with_a_nested_dict() -> None:
    config = ContextConfig.model_validate(
        {"max_input_tokens": 32768, "truncation": {"recent_n": 5, "retruncate": "batched"}}
    )
    assert config.max_input_tokens == 32768
    assert config.truncation.recent_n == 5
    assert config.truncation.retruncate == "batched"


def test_from_yaml_and_json(tmp_path: Path) -> None:
    yml = tmp_path / "c.yaml"
    yml.write_text("compaction:\n  trigger_ratio: 0.7\n  keep_recent_ratio: 0.2\n")
    assert ContextConfig.from_file(yml).compaction.trigger_ratio == 0.7
    js = tmp_path / "c.json"
    js.write_text(json.dumps({"tools": {"allowed_roots": ["/srv/data"]}}))
    assert ContextConfig.from_file(js).tools.allowed_roots == ["/srv/data"]
    empty = tmp_path / "empty.yaml"
    empty.write_text("")
    assert ContextConfig.from_file(empty) == ContextConfig()


def test_unknown_key_names_key_and_file(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("truncation:\n  first_max_byte: 100\n")
    with pytest.raises(ConfigError) as info:
        ContextConfig.from_file(path)
    message = str(info.value)
    assert str(path) in message
    assert "truncation.first_max_byte" in message
    assert "unknown key" in message


def test_out_of_range_value_names_key_and_file(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("compaction:\n  trigger_ratio: 1.5\n")
    with pytest.raises(ConfigError) as info:
        ContextConfig.from_file(path)
    assert str(path) in str(info.value)
    assert "compaction.trigger_ratio" in str(info.value)


@pytest.mark.parametrize(
    ("data", "key"),
    [
        ({"truncation": {"recent_n": -1}}, "truncation.recent_n"),
        ({"truncation": {"second_max_bytes": 60000}}, "truncation"),
        ({"compaction": {"keep_recent_ratio": 0.9}}, "compaction"),
        ({"compaction": {"hook_point": "post_reply"}}, "compaction.hook_point"),
        ({"long_term_memory": {"consolidation_time": "25:00"}}, "consolidation_time"),
        ({"tokenizer": "gpt2"}, "tokenizer"),
        ({"compaction": {"summary_timeout_seconds": 0}}, "compaction.summary_timeout_seconds"),
        ({"compaction": {"summary_output_tokens": 10}}, "compaction.summary_output_tokens"),
        ({"max_input_tokens": 10}, "max_input_tokens"),
        ({"nope": 1}, "nope"),
        ({"workspace": ""}, "workspace: must name a folder"),
        ({"workspace": "   "}, "workspace: must name a folder"),
        ({"workspace": "a\x00b"}, "workspace: must not contain NUL"),
        (
            {"max_input_tokens": 16384, "compaction": {"max_summary_tokens": 20000}},
            "config: compaction.max_summary_tokens: 20,000 tokens does not fit a 16,384-token",
        ),
        (
            {"max_input_tokens": 16384, "compaction": {"max_summary_tokens": 6554}},
            "at most half of the compaction trigger (6,553 tokens here)",
        ),
    ],
)
def test_bad_values_are_rejected_with_the_key(data: dict, key: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(data)
    assert key in str(info.value)


def test_markdown_extensions_are_normalised() -> None:
    config = ContextConfig.model_validate({"truncation": {"markdown_extensions": ["MD", ".Rst"]}})
    assert config.truncation.markdown_extensions == [".md", ".rst"]
    assert config.truncation.is_markdown("notes.rst")


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        ("a: [1, 2", "not valid YAML"),
        ("- 1\n- 2\n", "must be a mapping"),
    ],
)
def test_corrupt_files(tmp_path: Path, content: str, fragment: str) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(content)
    with pytest.raises(ConfigError, match=fragment):
        ContextConfig.from_file(path)


def test_corrupt_json_and_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    path.write_text("{nope")
    with pytest.raises(ConfigError, match="not valid JSON"):
        ContextConfig.from_file(path)
    with pytest.raises(ConfigError, match="not found"):
        ContextConfig.from_file(tmp_path / "missing.yaml")
    with pytest.raises(ConfigError, match="directory"):
        ContextConfig.from_file(tmp_path)


def test_load_accepts_every_form(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("notices: false\n")
    assert load_config(None) == ContextConfig()
    assert load_config(str(path)).notices is False
    assert load_config(path).notices is False
    config = ContextConfig(notices=False)
    assert load_config(config) is config
    with pytest.raises(ConfigError, match="must be a ContextConfig"):
        load_config(42)  # type: ignore[arg-type]


def test_assignment_is_validated() -> None:
    config = ContextConfig()
    with pytest.raises(ValueError, match="recent_n"):
        config.truncation.recent_n = -3


@pytest.mark.parametrize("name", ["default.yaml", "small-window.yaml", "coding-agent.yaml"])
def test_presets_are_valid(name: str) -> None:
    config = ContextConfig.from_file(REPO / "configs" / name)
    assert config.compaction.keep_recent_ratio < config.compaction.trigger_ratio


def test_presets_say_what_they_are_for() -> None:
    small = ContextConfig.from_file(REPO / "configs" / "small-window.yaml")
    assert small.max_input_tokens == 32768 and small.truncation.first_max_bytes < 51200
    coding = ContextConfig.from_file(REPO / "configs" / "coding-agent.yaml")
    assert coding.truncation.first_max_bytes > 51200
    assert coding.truncation.ttl_days > ContextConfig().truncation.ttl_days
    assert coding.truncation.is_markdown("docs/SKILL.md")


@pytest.mark.agentscope1
def test_a_summary_bigger_than_the_models_window_is_refused_at_enable() -> None:
    """The window may come from the model's name: the same check runs when enabling."""
    from agentscope.formatter import DashScopeChatFormatter

    from agentscope_context_ext import enable_context_management
    from agentscope_context_ext.testing import ScriptedChatModel

    from agent_harness import make_agent

    config = load_config({"compaction": {"max_summary_tokens": 200_000}})  # no window: fine
    agent = make_agent(ScriptedChatModel([]), DashScopeChatFormatter())
    with pytest.raises(ConfigError, match=r"compaction\.max_summary_tokens: 200,000 tokens"):
        enable_context_management(agent, config)
    assert not hasattr(agent, "context_manager")
