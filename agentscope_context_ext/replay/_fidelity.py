"""Summary fidelity against a reference summary (benchmark B7).

Claude Code compacts its own sessions and logs the summary it wrote. Replaying the same session
up to that point and compacting it once, as late as possible, gives two summaries of (nearly)
the same conversation. What a summary must keep above all are the *identifiers* the work needs
again: names, paths, commands. So fidelity is measured on the identifiers of the reference
summary (:func:`summary_identifiers`) that occur in the messages this package compacted: the
share our summary keeps, the share the compaction model's input keeps (an LLM summary can only
keep what it is shown), and the share ``search_dialog`` finds in the saved dialog (what the
agent can still reach when the summary lost it). Containment is :func:`mentions`: whole names,
not pieces of longer ones.

The summary is extractive by default; given a ``compaction_model``, the replay's one compaction
asks that model (the package's own summary prompt, through the real ``SummaryWriter``) while the
conversation is still played from the recording. The window is found with extractive summaries
either way: when compaction triggers does not depend on the summary's text, and the bisection
would otherwise call the model a dozen times.
"""

from __future__ import annotations

import json
import math
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..adapter import installed
from ..core.config import ContextConfig
from ..core.pipeline import SummaryWriter
from ..core.summary import mentions, summary_identifiers
from ..core.tokens import get_token_counter
from ..core.tools import make_dialog_tools
from ..core.transcripts import Record, Transcript
from ..core.workspace import ToolResultStore

_MINIMAL_ANSWER = "## Goal\n- (recorded)\n## Progress\n- (recorded)\n## Next Steps\n- (recorded)"

__all__ = ["FidelityResult", "latest_single_compaction", "summary_fidelity", "summary_identifiers"]


@dataclass
class FidelityResult:
    """How much of a reference summary's identifiers survive one compaction."""

    name: str
    window: int
    """The ``max_input_tokens`` of the replay."""
    compactions: int
    compacted_messages: int
    total_messages: int
    identifiers: list[str] = field(default_factory=list)
    """Identifiers of the reference that occur in the compacted messages (the denominator)."""
    not_in_compacted: list[str] = field(default_factory=list)
    """Identifiers of the reference that the compacted messages do not hold (not counted)."""
    missing_from_summary: list[str] = field(default_factory=list)
    missing_from_input: list[str] = field(default_factory=list)
    missing_from_search: list[str] = field(default_factory=list)
    summary_chars: int = 0
    reference_chars: int = 0
    summary_tokens: int = 0
    reference_tokens: int = 0
    summary_text: str = ""
    summary_source: str = ""
    """Who wrote the summary: ``llm`` (the compaction model) or ``extractive`` (no model, or
    the package's fallback when the model's answers failed); empty when nothing compacted."""
    model_attempts: int = 0
    """Calls made to the compaction model for this summary."""
    model_failures: int = 0
    """Of those, the calls that failed (an error, or an answer that is not a summary)."""

    @property
    def model_written(self) -> bool:
        """The summary is the compaction model's (it did not fall back to extraction)."""
        return self.summary_source == "llm"

    def share(self, missing: Sequence[str]) -> float:
        """Share of the identifiers not in ``missing``."""
        if not self.identifiers:
            return 1.0
        return round(1 - len(missing) / len(self.identifiers), 4)

    def as_dict(self) -> dict:
        """The figures (without the texts; who wrote the summary is :attr:`summary_source`)."""
        return {
            "transcript": self.name,
            "window": self.window,
            "compactions": self.compactions,
            "compacted_messages": self.compacted_messages,
            "total_messages": self.total_messages,
            "identifiers": len(self.identifiers),
            "summary_share": self.share(self.missing_from_summary),
            "input_share": self.share(self.missing_from_input),
            "search_share": self.share(self.missing_from_search),
            "summary_chars": self.summary_chars,
            "reference_chars": self.reference_chars,
            "summary_tokens": self.summary_tokens,
            "reference_tokens": self.reference_tokens,
            "missing_from_summary": self.missing_from_summary,
            "missing_from_input": self.missing_from_input,
            "missing_from_search": self.missing_from_search,
        }


async def latest_single_compaction(
    messages: list[Record],
    config: ContextConfig,
    *,
    precision: float = 0.01,
    workspace: Path | None = None,
) -> int:
    """The largest window at which replaying ``messages`` compacts at all: one compaction, as
    late as possible. Found by bisection, to ``precision`` of the window."""
    counter = get_token_counter("qwen")
    tokens = sum(counter.count_text(json.dumps(m.content, ensure_ascii=False)) for m in messages)
    high = math.ceil(tokens / config.compaction.trigger_ratio) + 1024
    low = 4096
    if not await _compacts(messages, config, low, workspace):
        raise ValueError("the conversation does not compact even at a 4096-token window")
    while high - low > max(precision * low, 64):
        middle = (low + high) // 2
        if await _compacts(messages, config, middle, workspace):
            low = middle
        else:
            high = middle
    return low


async def summary_fidelity(
    name: str,
    messages: list[Record],
    reference: str,
    config: ContextConfig | None = None,
    *,
    window: int | None = None,
    precision: float = 0.01,
    compaction_model: Any = None,
    compaction_formatter: Any = None,
) -> FidelityResult:
    """Replay ``messages``, compact once as late as possible, and compare with ``reference``.

    Args:
        name (`str`): For the report.
        messages (`list[Record]`): The conversation the reference summarises (e.g.
            ``claude_code_records(path, until_line=...)``).
        reference (`str`): The reference summary (e.g. Claude Code's).
        config (`ContextConfig | None`): The configuration to replay with (default: defaults).
        window (`int | None`): The window; ``None`` finds the largest that compacts once
            (always with extractive summaries, see the module's docstring).
        precision (`float`): Bisection precision of that search.
        compaction_model (`ChatModelBase | None`): The installed AgentScope's model that
            writes the scored replay's summary (e.g. ``installed.build_model(settings)[0]``);
            ``None``: the extractive summary. When every answer fails, the package falls back
            to extraction: ``summary_source`` says so.
        compaction_formatter (`FormatterBase | None`): That model's formatter (1.x; a 2.x
            model formats its own input).
    """
    config = config or ContextConfig()
    # Scored is what the model writes for exactly what the one compaction folds: asked then, not
    # ahead of it for a predicted part (design §4.6; when does not matter here).
    synchronous = config.compaction.model_copy(update={"background_summary": False})
    config = config.model_copy(update={"compaction": synchronous})
    counter = get_token_counter("qwen")
    with tempfile.TemporaryDirectory() as scratch:
        if window is None:
            window = await latest_single_compaction(
                messages, config, precision=precision, workspace=Path(scratch)
            )
        workspace = Path(scratch) / "final"
        finished: list[Any] = []
        replay = await installed.replay_transcript(
            Transcript(name, messages),
            config,
            workspace,
            window,
            check_recovery=False,
            compaction_model=compaction_model,
            compaction_formatter=compaction_formatter,
            on_event=lambda event: (
                finished.append(event) if event.type == "compaction_finished" else None
            ),
        )
        dialog = installed.open_dialog(workspace)
        compacted = [record.msg for record in dialog.iter_records(newest_first=False)]
        # what the compacted messages hold, each truncated output read back whole
        store = ToolResultStore(workspace)
        corpus = "\n".join(
            view.raw_text() for view in installed.to_views(compacted, store.read_text)
        )
        summary_file = workspace / "summary.md"
        summary = summary_file.read_text(encoding="utf-8") if summary_file.is_file() else ""
        model_input = await _compaction_input(compacted, store, config, window)
        _, search_dialog = make_dialog_tools(dialog)  # the tool's function, as the agent runs it
        result = FidelityResult(
            name=name,
            window=window,
            compactions=replay.stats.get("compactions", 0),
            compacted_messages=len(compacted),
            total_messages=len(messages),
            summary_chars=len(summary),
            reference_chars=len(reference),
            summary_tokens=counter.count_text(summary),
            reference_tokens=counter.count_text(reference),
            summary_text=summary,
        )
        if finished:  # the summary.md read above is the last compaction's
            last = finished[-1]
            result.summary_source = last.summary_source
            result.model_attempts = sum(event.model_attempts for event in finished)
            # without a model the writer records "no compaction model": no call that failed
            result.model_failures = sum(
                min(event.model_failures, event.model_attempts) for event in finished
            )
        for identifier in summary_identifiers(reference):
            if not mentions(corpus, identifier):
                result.not_in_compacted.append(identifier)
                continue
            result.identifiers.append(identifier)
            if not mentions(summary, identifier):
                result.missing_from_summary.append(identifier)
            if not mentions(model_input, identifier):
                result.missing_from_input.append(identifier)
            answer = await search_dialog(identifier)
            if answer.startswith(("No saved message", "Nothing in")):
                result.missing_from_search.append(identifier)
    return result


async def _compacts(
    messages: list[Record], config: ContextConfig, window: int, scratch: Path | None
) -> bool:
    with tempfile.TemporaryDirectory(dir=scratch) as workspace:
        result = await installed.replay_transcript(
            Transcript("probe", messages), config, Path(workspace), window, check_recovery=False
        )
    return result.stats.get("compactions", 0) >= 1


async def _compaction_input(
    compacted: list[Any], store: ToolResultStore, config: ContextConfig, window: int
) -> str:
    """Everything the compaction model would have been sent for ``compacted``: the real
    ``SummaryWriter``, with a scripted model that records each call and answers briefly."""
    model = installed.ScriptedChatModel(lambda call: _MINIMAL_ANSWER)
    counter = get_token_counter("qwen")
    writer = SummaryWriter(
        installed.model_call(model),
        counter,
        max_input_tokens=window,
        budget_tokens=config.compaction.summary_tokens(window),
    )
    await writer.summarize(installed.to_views(compacted, store.read_text), None)
    return "\n".join(call.text for call in model.calls)
