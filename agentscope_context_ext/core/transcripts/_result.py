"""What a replay measures, on either AgentScope version (design §10, benchmarks B3/B4)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ..config import ContextConfig

__all__ = ["ReplayResult", "StepRecord", "replay_config"]


@dataclass
class StepRecord:
    """What the model would have received at one step."""

    step: int
    """1-based model call."""
    prompt_tokens: int
    """Tokens of the formatted prompt plus tool schemas."""
    messages: int
    """Formatted messages in the prompt."""
    pair_violations: int
    """Orphan tool calls/results in the prompt."""
    stable_prefix: bool
    """The prompt extends the previous one byte for byte."""
    compactions: int
    """Compactions so far."""
    hook_seconds: float
    """Time spent in the hooks for this step."""
    refused: bool = False
    """The call was refused before it was sent (``ContextOverflowError``: what cannot be
    offloaded does not fit the window); ``prompt_tokens`` is what it would have been."""


@dataclass
class ReplayResult:
    """The outcome of one transcript's replay."""

    name: str
    max_input_tokens: int
    trigger_tokens: int
    steps: list[StepRecord] = field(default_factory=list)
    stats: dict = field(default_factory=dict)
    overflow_events: int = 0
    unexplained_over_window: int = 0
    recovery_problems: list[str] = field(default_factory=list)
    original_tokens: int = 0
    seconds_total: float = 0.0
    seconds_hooks: float = 0.0

    def summary(self) -> dict:
        """The figures of the report (design §10, BENCHMARKS B3/B4)."""
        sent = [s for s in self.steps if not s.refused]
        tokens = [s.prompt_tokens for s in sent]
        stable = [s.stable_prefix for s in sent[1:]]
        return {
            "transcript": self.name,
            "steps": len(self.steps),
            "refused_calls": len(self.steps) - len(sent),
            "max_input_tokens": self.max_input_tokens,
            "peak_prompt_tokens": max(tokens, default=0),
            "mean_prompt_tokens": round(sum(tokens) / len(tokens)) if tokens else 0,
            "over_window": sum(t > self.max_input_tokens for t in tokens),
            "unexplained_over_window": self.unexplained_over_window,
            "context_overflow_events": self.overflow_events,
            "compactions": self.stats.get("compactions", 0),
            "truncations": self.stats.get("truncations", 0),
            "retruncations": self.stats.get("retruncations", 0),
            "bytes_offloaded": self.stats.get("bytes_offloaded", 0),
            "tokens_saved": self.stats.get("tokens_saved_by_truncation", 0)
            + self.stats.get("tokens_saved_by_compaction", 0),
            "original_tokens": self.original_tokens,
            "pair_violations": sum(s.pair_violations for s in sent),
            "prefix_stability": round(sum(stable) / len(stable), 4) if stable else 1.0,
            "recoverable": not self.recovery_problems,
            "hook_seconds": round(self.seconds_hooks, 4),
            "replay_seconds": round(self.seconds_total, 4),
        }

    def as_dict(self) -> dict:
        """Summary plus per-step records."""
        return {
            **self.summary(),
            "per_step": [asdict(s) for s in self.steps],
            "recovery_problems": self.recovery_problems[:20],
        }


OWN_TOOLS = {"read_file": "read_file", "read_dialog": "dialog", "search_dialog": "dialog"}
"""This package's tools that a replay may give its agent, with the ``tools.*`` key that turns each
off (the memory tools are off with long-term memory)."""


def replay_config(
    config: ContextConfig,
    workspace: Path | str,
    max_input_tokens: int | None,
    notices: bool = False,
    recorded_tools: Iterable[str] = (),
) -> ContextConfig:
    """The user's config adjusted for replay: its own workspace, extractive summaries, no
    long-term memory (it would need a model), notices only when shown (Studio). A tool the
    recording used under the name of one of ours (``read_file`` in this package's own
    ``dialog/`` files) is the recording's: ours is off, since what is replayed is the recorded
    output (and 2.x refuses two tools of one name)."""
    data = config.model_dump()
    for name in recorded_tools:
        if name in OWN_TOOLS:
            data["tools"][OWN_TOOLS[name]] = False
    data["workspace"] = str(workspace)
    data["notices"] = notices
    if max_input_tokens is not None:
        data["max_input_tokens"] = max_input_tokens
    data["compaction"]["model"] = "extractive"
    data["long_term_memory"]["enabled"] = False
    return ContextConfig.model_validate(data)
