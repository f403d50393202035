"""Step-by-step replay of a transcript through a real AgentScope 2.x ``Agent`` (design §10).

2.x has no memory to fill message by message: an agent builds its context itself, one reply at
a time. So the replay *plays* the transcript: each user message starts a reply; the scripted
model answers every model call with the next recorded assistant message of that reply (text,
thinking, tool calls, ids kept); every tool returns its recorded output. The middleware runs as
in a real session (stage one in ``on_acting``, the pipeline before every reasoning step,
extractive summaries), and each model call is one step, measured as the model received it:
tokens, pair violations, prefix stability. Afterwards every original text, call and output is
checked to be recoverable byte for byte from the context, ``dialog/`` and ``tool_result/``.

What playing changes against the recording: a transcript that starts with the assistant gets a
first user message ("Continue."); a reply whose recorded messages run out answers "Done."; a
tool call the recording never answered returns an empty output; media in recorded tool outputs
is replayed as an ``[image]`` placeholder text. A tool-call id the recording reuses gets the
suffix ``~n`` (a provider's ids are unique; 2.x looks results up by id).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentscope.agent import Agent, InjectionConfig, ReActConfig
from agentscope.message import (
    UserMsg,
)
from agentscope.model import ChatModelBase
from agentscope.permission import PermissionBehavior, PermissionDecision
from agentscope.tool import FunctionTool, Toolkit

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
from ._middleware import ContextMiddleware
from ._records import output_of, record_blocks
from ._recovery import recovery_problems
from ._result_blocks import Records
from ._scripted_model import ScriptedChatModel
from ._tracing import traced

__all__ = ["replay_transcript"]

FIRST_USER_TEXT = "Continue."
"""The user message a transcript that starts with the assistant is played after."""
_ALLOW = PermissionDecision(behavior=PermissionBehavior.ALLOW, message="replayed tool")


@dataclass
class _Play:
    """A transcript as replies to play: the user's text and the assistant's recorded messages."""

    turns: list[tuple[str, list[list[dict]]]] = field(default_factory=list)
    outputs: dict[str, list[str]] = field(default_factory=dict)
    """Tool name -> recorded outputs, in call order."""
    texts: list[str] = field(default_factory=list)
    """Every user and assistant text and thinking, for the recovery check."""
    calls: dict[str, dict] = field(default_factory=dict)
    """Call id (as played) -> the recorded arguments."""
    results: dict[str, str] = field(default_factory=dict)
    """Call id (as played) -> the recorded output text."""
    unpaired: list[str] = field(default_factory=list)
    """Recorded results whose call the transcript does not have (cannot be played)."""


def _play(records: list[Record]) -> _Play:
    play = _Play()
    uses: dict[str, int] = {}
    current: dict[str, str] = {}
    names: dict[str, str] = {}
    pending: list[tuple[str, str]] = []  # (played id, tool name), in call order
    for record in records:
        if record.role == "user":
            text = "\n".join(b.get("text", "") for b in record.blocks() if b.get("type") == "text")
            play.turns.append((text, []))
            play.texts.append(text)
            continue
        if not play.turns:
            play.turns.append((FIRST_USER_TEXT, []))
        said: list[dict] = []
        for block in record.blocks():
            kind = block.get("type")
            if kind in ("text", "thinking") and record.role == "assistant":
                said.append(block)
                play.texts.append(str(block.get(kind, "")))
            elif kind == "tool_use":
                raw = str(block.get("id"))
                uses[raw] = uses.get(raw, 0) + 1
                played = raw if uses[raw] == 1 else f"{raw}~{uses[raw]}"
                current[raw] = played
                names[played] = str(block.get("name"))
                play.calls[played] = block.get("input") or {}
                pending.append((played, names[played]))
                said.append({**block, "id": played})
            elif kind == "tool_result":
                played = current.get(str(block.get("id")))
                if played is None:
                    play.unpaired.append(str(block.get("id")))
                    continue
                play.results[played] = output_of(block.get("output"))
        if said:
            play.turns[-1][1].append(said)
    for played, name in pending:
        play.outputs.setdefault(name, []).append(play.results.get(played, ""))
    return play


def _tool(name: str, outputs: list[str]) -> FunctionTool:
    async def replayed(**kwargs: Any) -> str:
        return outputs.pop(0) if outputs else ""

    return FunctionTool(
        replayed,
        name=name,
        description=f"The recorded {name} tool.",
        input_schema={"type": "object", "properties": {}, "additionalProperties": True},
        permission=_ALLOW,
    )


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
    compaction_formatter: Any = None,
    on_event: Callable[[ContextEvent], Any] | None = None,
) -> ReplayResult:
    """Replay one transcript on AgentScope 2.x; the workspace receives its dialog and
    tool-result files (same arguments and result as the 1.x replayer; ``show`` prints each
    step's figures, 2.x has no Studio run to show them in).

    Args:
        compaction_model (`ChatModelBase | None`): Writes the compaction summaries (the
            recorded turns are still played by the scripted model); ``None``: extractive.
        compaction_formatter: 1.x's argument; a 2.x model formats its own input.
        on_event (`Callable[[ContextEvent], Any] | None`): Receives every event of the
            replay's manager (e.g. ``compaction_finished``, with who wrote the summary).
    """
    started = time.perf_counter()
    records = [m for m in transcript.messages if isinstance(m, Record)]
    if len(records) != len(transcript.messages):
        raise TypeError("on AgentScope 2.x a transcript holds replay Records (load_transcripts)")
    play = _play(records)
    # The recorded tools are the agent's: one named like ours (read_file in our own dialog/
    # files) replays its recorded outputs, and ours is off (a toolkit holds one tool a name).
    config = replay_config(
        config, workspace, max_input_tokens, notices=show, recorded_tools=play.outputs
    )
    if compaction_model is not None:
        # replay_config makes summaries extractive; a given compaction model writes them
        config = config.model_copy(
            update={"compaction": config.compaction.model_copy(update={"model": None})}
        )
    replies = [list(said) for _, said in play.turns]
    turn = [0]
    middleware = ContextMiddleware(config, compaction_model=compaction_model)
    steps: list[StepRecord] = []
    previous: list[str] | None = None
    hooks_before = [0.0]

    def respond(call: Any) -> Any:
        nonlocal previous
        manager = middleware.manager
        tokens = model.counter.count_formatted(call.messages, call.tools)
        rendered = [
            json.dumps(m, ensure_ascii=False, sort_keys=True, default=str) for m in call.messages
        ]
        calls = {str(c.get("id")) for m in call.messages for c in m.get("tool_calls") or []}
        record = StepRecord(
            step=len(steps) + 1,
            prompt_tokens=tokens,
            messages=len(call.messages),
            pair_violations=prompt_pair_violations(call.messages, calls),
            stable_prefix=previous is not None and rendered[: len(previous)] == previous,
            compactions=manager.stats.compactions,
            hook_seconds=round(manager.stats.hook_seconds - hooks_before[0], 6),
        )
        hooks_before[0] = manager.stats.hook_seconds
        previous = rendered
        steps.append(record)
        if tokens > manager.max_input_tokens and overflows[0] == overflows[1]:
            result.unexplained_over_window += 1
        overflows[1] = overflows[0]
        if on_step is not None:
            on_step(record)
        queue = replies[turn[0]]
        while queue:
            blocks = record_blocks(queue.pop(0))
            if blocks:
                return blocks
        return "Done."

    window = config.max_input_tokens or 131072
    model = ScriptedChatModel(respond, context_size=window)
    toolkit = Toolkit(tools=[_tool(name, outputs) for name, outputs in play.outputs.items()])
    agent = Agent(
        name="replay",
        system_prompt=transcript.system_prompt or "You are a helpful agent.",
        model=model,
        toolkit=toolkit,
        middlewares=traced(middleware),
        offloader=middleware.offloader,
        injection_config=InjectionConfig(inject_runtime_state=False),
        react_config=ReActConfig(max_iters=100_000),
    )
    manager = middleware.bind(agent)
    result = ReplayResult(
        transcript.name, manager.max_input_tokens, manager.pipeline.trigger_tokens
    )
    overflows = [0, 0]  # context_overflow events: so far, and at the previous step

    def count_overflow(event: Any) -> None:
        if event.type == "context_overflow":
            overflows[0] += 1

    manager.subscribe(count_overflow)
    if on_event is not None:
        manager.subscribe(on_event)
    result.original_tokens = sum(manager.counter.count_text(t) for t in play.texts) + sum(
        manager.counter.count_text(t) for t in play.results.values()
    )
    unplayed: set[str] = set()
    for index, (text, _) in enumerate(play.turns):
        turn[0] = index
        try:
            await agent.reply(UserMsg("user", text))
        except ContextOverflowError as exc:
            # Refused before it was sent: what cannot be offloaded does not fit the window. The
            # rest of this reply was never played, so it is not in the context to recover.
            steps.append(
                StepRecord(
                    step=len(steps) + 1,
                    prompt_tokens=exc.tokens,
                    messages=0,
                    pair_violations=0,
                    stable_prefix=False,
                    compactions=manager.stats.compactions,
                    hook_seconds=0.0,
                    refused=True,
                )
            )
            for recorded in replies[index]:
                for block in recorded:
                    unplayed.add(str(block.get("id") or block.get(block.get("type"), "")))
            replies[index].clear()
    result.steps = steps
    result.stats = manager.stats.as_dict()
    result.overflow_events = manager.stats.counts["context_overflow"]
    result.seconds_hooks = manager.stats.hook_seconds
    if check_recovery:
        result.recovery_problems = recovery_problems(
            play,
            agent.state.context,
            middleware.dialog_store,
            middleware.storage,
            unplayed,
            Records(agent.state),
        )
    manager.detach()
    result.seconds_total = time.perf_counter() - started
    return result
