"""Step-by-step replay of a transcript through the real hooks of AgentScope 1.x (design §10).

A ``ReActAgent`` with context management enabled receives the transcript's messages in order.
Before each assistant message (a model call in the original session) the ``pre_reasoning`` hook
runs, and the prompt the model would have received is formatted and measured: tokens, pair
violations, whether it extends the previous prompt byte for byte (prefix stability). Tool
results go through the ``post_acting`` hook. Compaction summaries are extractive (no model).
Afterwards every original message is checked to be recoverable byte for byte from memory,
``dialog/`` and ``tool_result/``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentscope.agent import ReActAgent
from agentscope.formatter import DashScopeChatFormatter, FormatterBase, OpenAIChatFormatter
from agentscope.message import Msg
from agentscope.model import ChatModelBase
from agentscope.tool import Toolkit

from ..core.config import ContextConfig
from ..core.errors import ContextOverflowError
from ..core.events import ContextEvent
from ..core.transcripts import (
    Record,
    ReplayResult,
    StepRecord,
    Transcript,
    prompt_pair_violations,
    replay_config,
)
from ._manager import enable_context_management
from ._messages import has_tool_results
from ._recovery import recovery_problems
from ._scripted_model import ScriptedChatModel

__all__ = ["record_to_msg", "records_to_msgs", "replay_transcript"]


def record_to_msg(record: Record) -> Msg:
    """A transcript's record as a 1.x ``Msg`` (same id when the record has one)."""
    msg = Msg(record.name or record.role, record.content, record.role, timestamp=record.timestamp)
    if record.id:
        msg.id = record.id
    return msg


def records_to_msgs(records: list[Record]) -> list[Msg]:
    """A transcript's records as the messages a 1.x memory holds: one each, except a 2.x
    message that holds its tool results after its calls (2.x keeps a reasoning step's calls
    and results in one message), which becomes the messages a ``ReActAgent`` would have
    stored: the calls, then a ``system`` message of their results, in turn (a result left in
    the assistant's message reached the prompt as a call without its result: 472 pair
    violations replaying the demo's own 2.x ``dialog/`` file)."""
    return [record_to_msg(part) for record in records for part in _as_1x_steps(record)]


def _as_1x_steps(record: Record) -> list[Record]:
    """``record`` cut where its blocks switch between results and anything else (a record with
    no result after another block is returned as it is); the parts after the first get the
    record's id with ``#n``."""
    blocks = record.blocks()
    kinds = [block.get("type") == "tool_result" for block in blocks]
    if not any(kinds) or all(kinds):
        return [record]
    runs: list[list[dict]] = []
    for block, is_result in zip(blocks, kinds, strict=True):
        if not runs or (runs[-1][0].get("type") == "tool_result") != is_result:
            runs.append([])
        runs[-1].append(block)
    return [
        Record(
            "system" if run[0].get("type") == "tool_result" else record.role,
            run,
            "system" if run[0].get("type") == "tool_result" else record.name,
            record.id if index == 0 or not record.id else f"{record.id}#{index}",
            record.timestamp,
        )
        for index, run in enumerate(runs)
    ]


async def replay_transcript(
    transcript: Transcript,
    config: ContextConfig,
    workspace: Path | str,
    max_input_tokens: int | None = None,
    on_step: Callable[[StepRecord], None] | None = None,
    check_recovery: bool = True,
    show: bool = False,
    *,
    compaction_model: ChatModelBase | None = None,
    compaction_formatter: FormatterBase | None = None,
    on_event: Callable[[ContextEvent], Any] | None = None,
) -> ReplayResult:
    """Replay one transcript; the workspace receives its dialog and tool-result files.

    With ``show``, the replay agent prints each message once it is in memory (tool results as
    stage one left them) and the compaction notices: with AgentScope Studio attached, the replay
    is a run there.

    Args:
        compaction_model (`ChatModelBase | None`): Writes the compaction summaries (the
            recorded turns are still played as they were); ``None``: extractive.
        compaction_formatter (`FormatterBase | None`): The compaction model's formatter
            (default: OpenAI's layout).
        on_event (`Callable[[ContextEvent], Any] | None`): Receives every event of the
            replay's manager (e.g. ``compaction_finished``, with who wrote the summary).
    """
    started = time.perf_counter()
    config = replay_config(config, workspace, max_input_tokens, notices=show)
    if compaction_model is not None:
        # replay_config makes summaries extractive; a given compaction model writes them
        config = config.model_copy(
            update={"compaction": config.compaction.model_copy(update={"model": None})}
        )
    agent = ReActAgent(
        name="replay",
        sys_prompt=transcript.system_prompt or "You are a helpful agent.",
        model=ScriptedChatModel([], when_exhausted=None),
        formatter=DashScopeChatFormatter(),
        toolkit=Toolkit(),
    )
    agent.set_console_output_enabled(False)
    manager = enable_context_management(
        agent,
        config,
        compaction_model=compaction_model,
        # the replay agent's DashScope formatter is not the compaction model's layout
        compaction_formatter=compaction_formatter or OpenAIChatFormatter(),
    )
    if on_event is not None:
        manager.subscribe(on_event)
    counter = manager.counter
    overflow_steps: set[int] = set()
    step_no = {"n": 0}
    manager.subscribe(
        lambda e: overflow_steps.add(step_no["n"]) if e.type == "context_overflow" else None
    )
    result = ReplayResult(
        transcript.name, manager.max_input_tokens, manager.pipeline.trigger_tokens
    )
    originals = [
        msg
        for m in transcript.messages
        for msg in (records_to_msgs([m]) if isinstance(m, Record) else [m])
    ]
    result.original_tokens = counter.count_msgs(originals)
    previous: list[str] | None = None
    answered: set[str] = set()
    hook_total = 0.0
    for msg in originals:
        if msg.role == "assistant":
            step_no["n"] += 1
            tick = time.perf_counter()
            refused = False
            try:
                await manager.hooks.pre_reasoning(agent, {})
            except ContextOverflowError:
                refused = True  # not sent; the recorded answer still comes next
            hook = time.perf_counter() - tick
            hook_total += hook
            prompt = await agent.formatter.format(
                [Msg("system", agent.sys_prompt, "system"), *await agent.memory.get_memory()]
            )
            tools = manager.offered_tools(agent.toolkit.get_json_schemas())
            tokens = counter.count_formatted(prompt, tools)
            rendered = [
                json.dumps(m, ensure_ascii=False, sort_keys=True, default=str) for m in prompt
            ]
            stable = previous is not None and rendered[: len(previous)] == previous
            if not refused:
                previous = rendered
            record = StepRecord(
                step=step_no["n"],
                prompt_tokens=tokens,
                messages=len(prompt),
                pair_violations=prompt_pair_violations(prompt, answered),
                stable_prefix=stable,
                compactions=manager.stats.compactions,
                hook_seconds=round(hook, 6),
                refused=refused,
            )
            if (
                not refused
                and tokens > manager.max_input_tokens
                and step_no["n"] not in overflow_steps
            ):
                result.unexplained_over_window += 1
            result.steps.append(record)
            if on_step is not None:
                on_step(record)
            await agent.memory.add(msg)
            if show:
                await agent.print(agent.memory.get(msg.id) or msg)
        else:
            await agent.memory.add(msg)
            if has_tool_results(msg):
                answered.update(
                    str(b.get("id"))
                    for b in msg.content
                    if isinstance(b, dict) and b.get("type") == "tool_result"
                )
                tick = time.perf_counter()
                await manager.hooks.post_acting(agent, {}, None)
                hook_total += time.perf_counter() - tick
            if show:  # as the memory holds it: after stage one
                await agent.print(agent.memory.get(msg.id) or msg)
    result.stats = manager.stats.as_dict()
    result.overflow_events = manager.stats.counts["context_overflow"]
    result.seconds_hooks = hook_total
    if check_recovery:
        result.recovery_problems = recovery_problems(
            originals, agent.memory.messages, manager.dialog_store, manager.storage
        )
    manager.detach()
    result.seconds_total = time.perf_counter() - started
    return result
