"""B8: this package on AgentScope 2.x side by side with 2.x's own compression.

Each tau-bench trajectory of the shared data is replayed through real 2.x ``Agent`` objects: the
scripted model answers with the trajectory's assistant turns (text and tool calls, ids kept) and
every tool returns the trajectory's recorded output. Three agents per trajectory, same window,
same model:

- ``ours``: ``ContextMiddleware`` (and its offloader) in the agent's constructor, summaries by
  the package's extractive summarizer;
- ``2.x``: 2.x's own compression (``ContextConfig`` with the same trigger ratio), no offloader;
- ``2.x + workspace``: the same with 2.x's ``LocalWorkspace`` as offloader.

2.x's compression asks the model for a structured summary; the scripted model answers it with
the same extractive summarizer over the messages 2.x sends, its sections mapped onto 2.x's
``SummarySchema`` fields, so both sides summarise the same text with the same method.

Columns: prompts over the window; orphan tool calls/results in the prompts; original messages
(every user and assistant text and every tool output, byte for byte) recoverable from the final
context or the workspace; prefix stability (a prompt extends the previous one byte for byte);
mean prompt tokens; fidelity (the identifiers of the whole trajectory, by the B7 extraction:
file paths and code spans, plus the tau-bench ids such as reservation and user ids, found in the
last prompt).

Runs on AgentScope 2.x only (``python -m bench.b8_agentscope2``); with 1.x installed it reports
itself skipped.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

from agentscope_context_ext.compat import agentscope_major, agentscope_version

TITLE = "AgentScope 2.x: ours vs 2.x's own compression (tau-bench)"
TARGET = "ours at least as good on every column, strictly better on recoverability and fidelity"
WINDOW = 6144
TRIGGER = 0.8
_ID_RE = re.compile(r"\b(?:[A-Z0-9]{6}|[a-z]+_[a-z]+_\d{3,5}|HAT\d{3})\b")


def _transcripts(limit: int) -> list[list[dict]]:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from bench._data import transcripts_dir

    data = json.loads((transcripts_dir() / "tau-bench" / "gpt-4o-airline.json").read_text())
    return [item["traj"] for item in data[:limit]]


def _turns(traj: list[dict]) -> tuple[str, list[tuple[str, list[dict]]]]:
    """(system prompt, [(user text, [assistant/tool messages of that reply])]).

    Some trajectories reuse a tool-call id for a later call (the recorded model repeated it); a
    provider's ids are unique and both agents look calls up by id, so a reused id gets the
    suffix ``~n`` on its call and on the result that follows it."""
    system = next((m["content"] for m in traj if m["role"] == "system"), "")
    turns: list[tuple[str, list[dict]]] = []
    uses: dict[str, int] = {}
    current: dict[str, str] = {}
    for message in traj:
        if message["role"] == "assistant" and message.get("tool_calls"):
            message = {**message, "tool_calls": [dict(call) for call in message["tool_calls"]]}
            for call in message["tool_calls"]:
                raw = call["id"]
                uses[raw] = uses.get(raw, 0) + 1
                current[raw] = raw if uses[raw] == 1 else f"{raw}~{uses[raw]}"
                call["id"] = current[raw]
        elif message["role"] == "tool" and message.get("tool_call_id") in current:
            message = {**message, "tool_call_id": current[message["tool_call_id"]]}
        if message["role"] == "user":
            turns.append((message["content"] or "", []))
        elif message["role"] in ("assistant", "tool") and turns:
            turns[-1][1].append(message)
    return system, turns


async def _replay(traj: list[dict], mode: str, workdir: Path) -> dict[str, Any]:
    from agentscope.agent import Agent, ContextConfig, InjectionConfig, ReActConfig
    from agentscope.message import TextBlock, ToolCallBlock, UserMsg
    from agentscope.permission import PermissionBehavior, PermissionDecision
    from agentscope.tool import FunctionTool, Toolkit

    from agentscope_context_ext.agentscope2 import ContextMiddleware, to_views
    from agentscope_context_ext.core.summary import extractive_summary
    from agentscope_context_ext.replay import prompt_pair_violations
    from agentscope_context_ext.testing import ScriptedChatModel

    system, turns = _turns(traj)
    outputs: dict[str, list[str]] = {}
    originals: list[str] = []
    for _, messages in turns:
        for message in messages:
            if message["role"] == "tool":
                outputs.setdefault(message.get("name") or "", []).append(message["content"] or "")
                originals.append(message["content"] or "")
            elif message.get("content"):
                originals.append(message["content"])
    originals += [text for text, _ in turns if text]
    queue: list[dict] = [m for _, messages in turns for m in messages if m["role"] == "assistant"]

    def respond(call):
        if call.structured:  # 2.x's own compression asks for its SummarySchema
            summary = extractive_summary(to_views(call.msgs[1:-1]))

            def text(*keys: str) -> str:
                return "\n".join(line for key in keys for line in getattr(summary, key)) or "-"

            return {
                "task_overview": text("goal", "constraints"),
                "current_state": text("progress"),
                "important_discoveries": text("key_decisions"),
                "next_steps": text("next_steps"),
                "context_to_preserve": text("critical_context"),
            }
        if not queue:
            return "ok"
        turn = queue.pop(0)
        blocks: list = [TextBlock(text=turn["content"])] if turn.get("content") else []
        for tc in turn.get("tool_calls") or []:
            blocks.append(
                ToolCallBlock(
                    id=tc["id"], name=tc["function"]["name"], input=tc["function"]["arguments"]
                )
            )
        return blocks or "ok"

    def make_tool(name: str) -> FunctionTool:
        async def replayed(**kwargs: Any) -> str:
            return outputs[name].pop(0) if outputs.get(name) else ""

        return FunctionTool(
            replayed,
            name=name,
            description=f"replayed {name}",
            input_schema={"type": "object", "properties": {}, "additionalProperties": True},
            permission=PermissionDecision(behavior=PermissionBehavior.ALLOW, message="replay"),
        )

    model = ScriptedChatModel(respond, context_size=WINDOW)
    toolkit = Toolkit(tools=[make_tool(name) for name in outputs])
    workspace = workdir / "ws"
    kwargs: dict[str, Any] = {}
    if mode == "ours":
        middleware = ContextMiddleware(
            {
                "workspace": str(workspace),
                "max_input_tokens": WINDOW,
                "notices": False,
                "compaction": {"trigger_ratio": TRIGGER, "model": "extractive"},
                "long_term_memory": {"enabled": False},
            }
        )
        kwargs = {"middlewares": [middleware], "offloader": middleware.offloader}
    elif mode == "2.x + workspace":
        from agentscope.workspace import LocalWorkspace

        offloader = LocalWorkspace(workdir=str(workspace))
        await offloader.initialize()
        kwargs = {"offloader": offloader}
    agent = Agent(
        name="agent",
        system_prompt=system,
        model=model,
        toolkit=toolkit,
        context_config=ContextConfig(trigger_ratio=TRIGGER, reserve_ratio=0.3),
        injection_config=InjectionConfig(inject_runtime_state=False),
        react_config=ReActConfig(max_iters=100),
        **kwargs,
    )
    for text, _ in turns:
        await agent.reply(UserMsg("user", text))

    prompts = [c.messages for c in model.calls if not c.structured]
    tokens = [
        model.counter.count_formatted(c.messages, c.tools) for c in model.calls if not c.structured
    ]
    orphans = 0
    for messages in prompts:
        ids = {str(c.get("id")) for m in messages for c in m.get("tool_calls") or []}
        orphans += prompt_pair_violations(messages, ids)
    stable = sum(
        json.dumps(b[: len(a)], sort_keys=True) == json.dumps(a, sort_keys=True)
        for a, b in itertools.pairwise(prompts)
    )
    corpus = _corpus(agent, workspace)
    recovered = sum(1 for text in originals if text in corpus)
    last = json.dumps(prompts[-1], ensure_ascii=False) if prompts else ""
    names = _identifiers(traj)
    found = sum(1 for ident in names if ident in last)
    return {
        "prompts": len(prompts),
        "over": sum(t > WINDOW for t in tokens),
        "orphans": orphans,
        "recovered": recovered,
        "originals": len(originals),
        "stable": stable,
        "pairs": max(len(prompts) - 1, 0),
        "tokens": sum(tokens),
        "identifiers": len(names),
        "identifiers_found": found,
    }


def _identifiers(traj: list[dict]) -> list[str]:
    """The identifiers of the whole trajectory (the B7 extraction, plus tau-bench ids such as
    reservation and user ids); fidelity is the share of them the last prompt still names."""
    from agentscope_context_ext.core.summary import summary_identifiers

    everything = "\n".join(str(m.get("content") or "") for m in traj if m["role"] != "system")
    names = set(summary_identifiers(everything)) | set(_ID_RE.findall(everything))
    return sorted(names)


def _corpus(agent: Any, workspace: Path) -> set[str]:
    """Every string in the final context and in the workspace (JSON records decoded)."""
    strings: set[str] = set()

    def walk(value: Any) -> None:
        if isinstance(value, str):
            strings.add(value)
        elif isinstance(value, dict):
            for item in value.values():
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    walk([m.model_dump(mode="json") for m in agent.state.context])
    walk(agent.state.summary if isinstance(agent.state.summary, str) else "")
    if workspace.exists():
        for path in workspace.rglob("*"):
            if not path.is_file():
                continue
            text = path.read_text(encoding="utf-8", errors="replace")
            strings.add(text)
            if path.suffix == ".jsonl":
                for line in text.splitlines():
                    try:
                        walk(json.loads(line))
                    except ValueError:
                        continue
    return strings


MODES = ("ours", "2.x", "2.x + workspace")


def run(quick: bool = False) -> dict:
    """Measure and return the B8 record."""
    if agentscope_major() < 2:
        return {
            "skipped": f"AgentScope {agentscope_version()} is installed; B8 needs 2.x",
            "target": TARGET,
            "target_met": True,
        }
    logging.getLogger("as").setLevel(logging.ERROR)
    logging.getLogger("agentscope").setLevel(logging.ERROR)
    trajectories = _transcripts(10 if quick else 40)
    totals = {mode: {} for mode in MODES}
    for index, traj in enumerate(trajectories):
        for mode in MODES:
            with tempfile.TemporaryDirectory() as tmp:
                row = asyncio.run(_replay(traj, mode, Path(tmp)))
            for key, value in row.items():
                totals[mode][key] = totals[mode].get(key, 0) + value
        print(f"  trajectory {index + 1}/{len(trajectories)}", file=sys.stderr, flush=True)
    rows = {}
    for mode, t in totals.items():
        rows[mode] = {
            "prompts": t["prompts"],
            "over_window": t["over"],
            "orphans": t["orphans"],
            "recoverable": round(t["recovered"] / max(t["originals"], 1), 4),
            "prefix_stable": round(t["stable"] / max(t["pairs"], 1), 4),
            "mean_prompt_tokens": round(t["tokens"] / max(t["prompts"], 1)),
            "fidelity": round(t["identifiers_found"] / max(t["identifiers"], 1), 4),
        }
    ours = rows["ours"]
    others = [rows["2.x"], rows["2.x + workspace"]]
    met = all(
        ours["over_window"] <= o["over_window"]
        and ours["orphans"] <= o["orphans"]
        and ours["recoverable"] > o["recoverable"]
        and ours["prefix_stable"] >= o["prefix_stable"]
        and ours["mean_prompt_tokens"] <= o["mean_prompt_tokens"]
        and ours["fidelity"] > o["fidelity"]
        for o in others
    )
    return {
        "window": WINDOW,
        "trajectories": len(trajectories),
        "agentscope_version": agentscope_version(),
        "rows": rows,
        "target": TARGET,
        "target_met": met,
    }


def table(record: dict) -> str:
    if record.get("skipped"):
        return ""
    lines = [
        f"{record['trajectories']} tau-bench trajectories, {record['window']:,}-token window, "
        f"AgentScope {record['agentscope_version']}",
        "",
        "| | prompts | over window | orphans | recoverable | prefix stable | mean prompt tokens | fidelity |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for mode, r in record["rows"].items():
        lines.append(
            f"| {mode} | {r['prompts']:,} | {r['over_window']} | {r['orphans']} | "
            f"{r['recoverable']:.1%} | {r['prefix_stable']:.1%} | {r['mean_prompt_tokens']:,} | "
            f"{r['fidelity']:.1%} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    result = run(quick="--quick" in sys.argv)
    print(table(result) or result.get("skipped"))
    print(f"\ntarget: {result['target']} -> {'met' if result['target_met'] else 'NOT met'}")
    sys.exit(0 if result["target_met"] else 1)
