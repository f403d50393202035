"""``agentscope-context demo``: the extension at work on a real agent, offline (design §10).

A real agent of the installed AgentScope (a 2.x ``Agent`` with the ``ContextMiddleware``, or a
1.x ``ReActAgent``) with real tools (``read_file``, ``list_dir``, ``grep``, all confined to the
explored folder; by default the installed AgentScope package) explores the folder, driven by
a scripted plan shipped in the package. The window is small enough that stage-one truncation,
stage-two re-truncation and compaction happen; compaction summaries are extractive.
Progress is shown live; ``report.md``, ``report.json`` and ``tokens.png`` go to the output folder.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
import time
from pathlib import Path
from typing import Any, TextIO

import agentscope

from ..adapter import agentscope_version, installed
from ..core.config import ContextConfig
from ..core.messages import Message
from ..core.rendering import offload_paths
from ..core.tools import make_explorer_functions
from ..core.workspace import Storage
from ..replay import Curve, prompt_pair_violations, write_report
from ..testing import ModelCall, ScriptedChatModel
from ._plan import exploration_plan

DEMO_SETTINGS: dict[str, Any] = {
    "max_input_tokens": 16384,
    "truncation": {"first_max_bytes": 8192, "second_max_bytes": 1500, "recent_n": 2},
}
"""A window small enough that every stage of the pipeline shows up in one short run."""


def default_root() -> Path:
    """The installed AgentScope package."""
    return Path(agentscope.__file__).resolve().parent


def demo_config(
    config: ContextConfig | None, out: Path, workspace: str | None = None, notices: bool = False
) -> ContextConfig:
    """The demo's settings (or the user's config), with the workspace in the output folder (or
    ``workspace``, e.g. a Redis URL), extractive summaries (no model is needed offline),
    long-term memory off and no notices but with ``notices`` (Studio: the demo reports each
    compaction itself otherwise)."""
    data = (
        config.model_dump()
        if config is not None
        else ContextConfig.model_validate(DEMO_SETTINGS).model_dump()
    )
    data["workspace"] = workspace or str(out / "workspace")
    data["compaction"]["model"] = "extractive"
    data["long_term_memory"]["enabled"] = False
    # the demo prints one line per compaction itself (with its step, to its stream): the
    # pipeline's own notices would say each compaction a second time. With Studio attached
    # they are on (they are how Studio shows a compaction) and the demo's line is left out.
    data["notices"] = notices
    return ContextConfig.model_validate(data)


def run_demo(
    out: Path,
    config: ContextConfig | None = None,
    root: Path | None = None,
    stream: TextIO | None = None,
    studio: bool = False,
    workspace: str | None = None,
) -> dict[str, Any]:
    """Run the demo and write its report; returns the report's figures. With ``studio`` (the
    process is attached to AgentScope Studio), AgentScope's warnings stay visible; ``workspace``
    (a folder or a ``redis://`` URL) replaces ``<out>/workspace``."""
    return asyncio.run(_run(out, config, root or default_root(), stream, studio, workspace))


async def _run(
    out: Path,
    user_config: ContextConfig | None,
    root: Path,
    stream: TextIO | None,
    studio: bool = False,
    workspace: str | None = None,
) -> dict[str, Any]:
    def say(line: str = "") -> None:
        if stream is not None:
            print(line, file=stream, flush=True)

    # Offline, AgentScope's info lines would drown the progress; warnings (a message Studio
    # could not take) must stay visible when a Studio is attached.
    logging.getLogger("as").setLevel(logging.WARNING if studio else logging.ERROR)
    if workspace is None and (out / "workspace").exists():
        shutil.rmtree(out / "workspace")  # a fresh run, not a continuation of the last one
    config = demo_config(user_config, out, workspace, notices=studio)
    root = root.resolve()
    plan = exploration_plan(root)
    tokens_per_step: list[int] = []
    violations = 0
    holder: dict[str, Any] = {}

    def respond(call: ModelCall) -> object:
        nonlocal violations
        manager = holder["manager"]
        tokens = model.counter.count_formatted(call.messages, call.tools)
        tokens_per_step.append(tokens)
        ids = {str(c.get("id")) for m in call.messages for c in m.get("tool_calls") or []}
        violations += prompt_pair_violations(call.messages, ids)
        stats = manager.stats
        window = manager.max_input_tokens
        bar = "#" * round(20 * tokens / window) + "-" * max(0, 20 - round(20 * tokens / window))
        say(
            f"step {len(tokens_per_step):>3} | prompt {tokens:>6,} / {window:,} tokens [{bar}] | "
            f"truncations {stats.truncations:>2} | retruncations {stats.retruncations:>2} | "
            f"compactions {stats.compactions}"
        )
        return plan(call)

    model = ScriptedChatModel(respond)
    sys_prompt = (
        f"You explore the code base at {root} with list_dir, grep and read_file, and report "
        "what you find."
    )
    data = config.model_dump()
    data["tools"]["allowed_roots"] = [str(root)]
    run = installed.ManagedAgent.create(
        model,
        ContextConfig.model_validate(data),
        name="explorer",
        system_prompt=sys_prompt,
        tools=make_explorer_functions(root),
        max_iters=200,
    )
    manager = run.manager
    holder["manager"] = manager
    compaction_steps: list[int] = []
    compaction_tokens: list[int] = []

    def on_event(event) -> None:
        if event.type == "compaction_finished":
            # The context the trigger counted never reaches the model (the next prompt is the
            # compacted one): the report and the plot show it at the compaction's step.
            compaction_steps.append(len(tokens_per_step) + 1)
            compaction_tokens.append(event.tokens_before)
            if config.notices:
                return  # the pipeline's notice said it
            say(
                f"      compaction before step {len(tokens_per_step) + 1}: context "
                f"{event.tokens_before:,} -> {event.tokens_after:,} tokens, "
                f"{event.messages_compacted} messages saved to {', '.join(event.dialog_refs)}"
            )

    manager.subscribe(on_event)
    say(f"agentscope-context demo: exploring {root} (AgentScope {agentscope_version()}), offline")
    say(
        f"window {manager.max_input_tokens:,} tokens, compaction at {manager.pipeline.trigger_tokens:,}; workspace {config.workspace}"
    )
    say()
    started = time.perf_counter()
    answer = await run.ask(f"Explore {root.name} and tell me how it is organised.")
    seconds = time.perf_counter() - started
    say()
    say(f"answer: {answer}")

    stats = manager.stats
    storage = manager.storage
    missing = _missing_offloads(run.views(), run.dialog_views(), storage)
    report = {
        "steps": len(tokens_per_step),
        "peak_prompt_tokens": max(tokens_per_step, default=0),
        # the largest context counted, a compaction's "before" included (never sent as it was)
        "peak_context_tokens": max([*tokens_per_step, *compaction_tokens], default=0),
        "mean_prompt_tokens": round(sum(tokens_per_step) / len(tokens_per_step))
        if tokens_per_step
        else 0,
        "max_input_tokens": manager.max_input_tokens,
        "trigger_tokens": manager.pipeline.trigger_tokens,
        "compactions": stats.compactions,
        "truncations": stats.truncations,
        "retruncations": stats.retruncations,
        "bytes_offloaded": stats.bytes_offloaded,
        "tokens_saved": stats.tokens_saved_by_truncation + stats.tokens_saved_by_compaction,
        "pair_violations": violations,
        "offloaded_files_missing": missing,
        "hook_seconds": round(stats.hook_seconds, 4),
        "run_seconds": round(seconds, 3),
        "explored_root": str(root),
        "agentscope_version": agentscope_version(),
    }
    manager.detach()
    paths = write_report(
        out,
        f"agentscope-context demo: exploring {root.name}",
        report,
        [Curve("prompt tokens", tokens_per_step, compaction_steps, compaction_tokens)],
        manager.max_input_tokens,
        manager.pipeline.trigger_tokens,
        details={
            "per_step_tokens": tokens_per_step,
            "compaction_steps": compaction_steps,
            "compaction_tokens_before": compaction_tokens,
            "answer": answer,
        },
    )
    say()
    say("| figure | value |\n|---|---:|")
    for key in (
        "steps",
        "peak_prompt_tokens",
        "peak_context_tokens",
        "max_input_tokens",
        "compactions",
        "truncations",
        "retruncations",
        "bytes_offloaded",
        "pair_violations",
        "hook_seconds",
    ):
        say(
            f"| {key} | {report[key]:,} |"
            if isinstance(report[key], int)
            else f"| {key} | {report[key]} |"
        )
    say()
    say("report: " + ", ".join(str(p) for p in paths.values()))
    return report


def _missing_offloads(live: list[Message], saved: list[Message], storage: Storage) -> int:
    """Notices (in memory or dialog/) whose saved file does not exist: must be 0."""
    return sum(
        1
        for view in [*live, *saved]
        for path in offload_paths(view)
        if path.startswith("tool_result/") and storage.mtime(path) is None
    )
