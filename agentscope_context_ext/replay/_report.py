"""Reports of a replay or a demo run: ``report.json``, ``report.md`` and ``tokens.png``."""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..compat import agentscope_version
from ..core.installation import install_command

logger = logging.getLogger("agentscope_context_ext")


@dataclass
class Curve:
    """Prompt tokens per step of one run, with the steps where a compaction happened."""

    label: str
    tokens: list[int]
    compaction_steps: list[int] = field(default_factory=list)
    compaction_tokens: list[int] = field(default_factory=list)
    """The context each compaction found (its "before", in ``compaction_steps``' order): drawn
    at that height, a line down to the step's prompt; without it, the mark is on the curve."""


def aggregate(summaries: Sequence[dict]) -> dict[str, Any]:
    """One summary over several replays (tau-bench files hold many trajectories)."""
    if len(summaries) == 1:
        return dict(summaries[0])
    steps = sum(s["steps"] for s in summaries)
    stable_weight = sum(max(s["steps"] - 1, 0) for s in summaries)
    return {
        "transcript": f"{len(summaries)} trajectories",
        "trajectories": len(summaries),
        "steps": steps,
        "max_input_tokens": summaries[0]["max_input_tokens"],
        "peak_prompt_tokens": max(s["peak_prompt_tokens"] for s in summaries),
        "mean_prompt_tokens": round(
            sum(s["mean_prompt_tokens"] * s["steps"] for s in summaries) / steps
        )
        if steps
        else 0,
        **{
            key: sum(s[key] for s in summaries)
            for key in (
                "over_window",
                "unexplained_over_window",
                "context_overflow_events",
                "compactions",
                "truncations",
                "retruncations",
                "bytes_offloaded",
                "tokens_saved",
                "original_tokens",
                "pair_violations",
            )
        },
        "prefix_stability": round(
            sum(s["prefix_stability"] * max(s["steps"] - 1, 0) for s in summaries) / stable_weight,
            4,
        )
        if stable_weight
        else 1.0,
        "recoverable": all(s["recoverable"] for s in summaries),
        "hook_seconds": round(sum(s["hook_seconds"] for s in summaries), 4),
        "replay_seconds": round(sum(s["replay_seconds"] for s in summaries), 4),
    }


def write_report(
    out: Path,
    title: str,
    summary: dict[str, Any],
    curves: Sequence[Curve],
    window: int,
    trigger: int,
    rows: Sequence[dict] = (),
    details: dict[str, Any] | None = None,
) -> dict[str, Path]:
    """Write the three files into ``out``; returns their paths (no PNG without matplotlib).
    ``report.json`` records the AgentScope version the run used."""
    out.mkdir(parents=True, exist_ok=True)
    paths = {"json": out / "report.json", "md": out / "report.md"}
    payload = {**summary, "agentscope_version": agentscope_version(), **(details or {})}
    if rows:
        payload["runs"] = list(rows)
    paths["json"].write_text(json.dumps(payload, indent=2, default=str), encoding="utf-8")
    paths["md"].write_text(_markdown(title, summary, rows), encoding="utf-8")
    png = out / "tokens.png"
    if plot_tokens(png, title, curves, window, trigger):
        paths["png"] = png
    return paths


def _markdown(title: str, summary: dict[str, Any], rows: Sequence[dict]) -> str:
    lines = [f"# {title}", "", "| figure | value |", "|---|---:|"]
    for key, value in summary.items():
        lines.append(f"| {key} | {_fmt(value)} |")
    if rows and len(rows) > 1:
        keys = [
            "transcript",
            "steps",
            "peak_prompt_tokens",
            "compactions",
            "truncations",
            "retruncations",
            "pair_violations",
            "prefix_stability",
            "recoverable",
        ]
        lines += ["", "## Runs", "", "| " + " | ".join(keys) + " |", "|" + "---|" * len(keys)]
        for row in rows:
            lines.append("| " + " | ".join(_fmt(row.get(k, "")) for k in keys) + " |")
    lines += ["", "![prompt tokens per step](tokens.png)", ""]
    return "\n".join(lines)


def _fmt(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.4g}"
    return str(value)


def plot_tokens(path: Path, title: str, curves: Sequence[Curve], window: int, trigger: int) -> bool:
    """Prompt tokens per step with the window and trigger lines and compactions marked."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        logger.warning("matplotlib is not installed (%s): no tokens.png", install_command("plot"))
        return False
    figure, axis = plt.subplots(figsize=(9, 4.5), dpi=110)
    many = len(curves) > 5
    for curve in curves:
        steps = list(range(1, len(curve.tokens) + 1))
        axis.plot(
            steps,
            curve.tokens,
            linewidth=0.8 if many else 1.6,
            alpha=0.35 if many else 0.95,
            label=None if many else curve.label,
        )
        marks = [
            (step, curve.compaction_tokens[i] if i < len(curve.compaction_tokens) else None)
            for i, step in enumerate(curve.compaction_steps)
            if 1 <= step <= len(curve.tokens)
        ]
        for step, before in marks:
            if before is not None:
                axis.vlines(step, curve.tokens[step - 1], before, color="crimson", linestyle=":")
        if marks:
            axis.scatter(
                [step for step, _ in marks],
                [curve.tokens[step - 1] if before is None else before for step, before in marks],
                marker="v",
                color="crimson",
                zorder=5,
                s=28,
                label=None
                if many or curve is not curves[0]
                else "compaction (the context it found)"
                if curve.compaction_tokens
                else "compaction",
            )
    axis.axhline(window, color="black", linewidth=1.2, linestyle="-", label=f"window ({window:,})")
    axis.axhline(
        trigger, color="darkorange", linewidth=1.2, linestyle="--", label=f"trigger ({trigger:,})"
    )
    axis.set_xlabel("step (model call)")
    axis.set_ylabel("prompt tokens")
    axis.set_title(title)
    highest = [max([*c.tokens, *c.compaction_tokens], default=0) * 1.05 for c in curves]
    axis.set_ylim(0, max([window * 1.08, *highest]))
    axis.grid(alpha=0.3)
    axis.legend(loc="upper left", fontsize=8)
    figure.tight_layout()
    figure.savefig(path)
    plt.close(figure)
    return True
