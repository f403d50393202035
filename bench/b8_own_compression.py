"""B8: this package on AgentScope 2.x side by side with 2.x's own compression.

Two workloads of the shared data are replayed through real 2.x ``Agent`` objects: the first 40
tau-bench trajectories at a 6,144-token window (short, tool-heavy: a window small enough that
they compact), and every coding transcript (Claude Code, SWE-agent) at the 32k window of B3 and
B4. The scripted model answers with the recorded assistant turns (text and tool calls, ids kept)
and every tool returns its recorded output. Four agents per transcript, same window, same model:

- ``ours``: ``ContextMiddleware`` (and its offloader) in the agent's constructor, summaries by
  the package's extractive summarizer;
- ``2.x``: 2.x's own compression (``ContextConfig`` with the same trigger ratio), no offloader;
- ``2.x + workspace``: the same with 2.x's ``LocalWorkspace`` as offloader;
- ``2.x, exact count`` (not a 2.x setting): 2.x with a model whose ``count_tokens`` is exact.

2.x's compression asks the model for a structured summary; the scripted model answers it with
the same extractive summarizer over the messages 2.x sends, its sections mapped onto 2.x's
``SummarySchema`` fields, so both sides summarise the same text with the same method.

Columns: prompts over the window; orphan tool calls/results in the prompts; original messages
(every user and assistant text and every tool output, byte for byte) recoverable from the final
context or the workspace; prefix stability (a prompt extends the previous one byte for byte);
mean prompt tokens; the identifiers of the whole transcript (by the B7 extraction: file paths
and code spans, plus the tau-bench ids such as reservation and user ids) found in the last
prompt; and fidelity by B7's method on the Claude Code sessions.

Runs on AgentScope 2.x only (``python -m bench.b8_own_compression``); with 1.x installed it reports
itself skipped, ``target_met`` false (not measured, not met).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import re
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ._data import shared_files, transcripts_dir
from ._major import agentscope_major, agentscope_version

TITLE = "AgentScope 2.x: ours vs 2.x's own compression (tau-bench, coding transcripts)"
TARGET = "ours at least as good on every column, strictly better on recoverability and fidelity"
WORKSPACE = "2.x + workspace"
ESTIMATE = "ours, bytes/4 count"
"""Ours with ``tokenizer: estimate``: the same count as every 2.0.11 model, for a comparison
with plain 2.x that differs in nothing but the two mechanisms."""
READ_BACK = "2.x + workspace, Read/Grep"
"""2.x + workspace with the workspace's own ``Read`` and ``Grep`` tools in the toolkit: what a
plain 2.x agent needs to read its offloaded context back (``Agent`` wires no tool of the
offloader in; 2.x's app does). Tau-bench only: the coding transcripts have tools of those names.
"""
EXACT = "2.x, exact count"
"""Not a 2.x setting: 2.x with a model whose ``count_tokens`` is exact, to show what its
bytes/4 estimate (every 2.0.11 model's) does to the other columns."""
TAU_WINDOW = 6144
CODING_WINDOW = 32768
"""B3's and B4's small window: the coding transcripts compact there."""
TRIGGER = 0.8
RESERVE = 0.3
_ID_RE = re.compile(r"\b(?:[A-Z0-9]{6}|[a-z]+_[a-z]+_\d{3,5}|HAT\d{3})\b")


@dataclass
class _Script:
    """A recorded conversation as the scripted model and the replayed tools play it back."""

    system: str
    turns: list[tuple[str, list[list[dict]]]]
    """(user text, the assistant messages of that reply, as 1.x-shaped blocks)."""
    outputs: dict[str, list[str]] = field(default_factory=dict)
    """Tool name -> its recorded outputs, in call order."""
    originals: list[str] = field(default_factory=list)
    """Every user and assistant text and every tool output, for recoverability."""


def _tau_trajectories(limit: int) -> list[list[dict]]:
    data = json.loads((transcripts_dir() / "tau-bench" / "gpt-4o-airline.json").read_text())
    return [item["traj"] for item in data[:limit]]


def _call_ids() -> Callable[[str], str]:
    """Unique ids for recorded tool calls.

    Some transcripts reuse a tool-call id for a later call (the recorded model repeated it, in
    tau-bench and in SWE-agent); a provider's ids are unique and 2.x's agent looks a call's
    result up by id (a reused one is taken as answered and never run), so the n-th use of an id
    gets the suffix ``~n``. Results are matched by the replayed tools, not by id."""
    uses: dict[str, int] = {}

    def unique(raw: str) -> str:
        uses[raw] = uses.get(raw, 0) + 1
        return raw if uses[raw] == 1 else f"{raw}~{uses[raw]}"

    return unique


def _tau_script(traj: list[dict]) -> _Script:
    """A tau-bench trajectory as a script (call ids made unique: :func:`_call_ids`)."""
    script = _Script(next((m["content"] for m in traj if m["role"] == "system"), ""), [])
    unique = _call_ids()
    for message in traj:
        role, content = message["role"], message.get("content") or ""
        if role == "user":
            script.turns.append((content, []))
            script.originals.append(content)
        elif role == "assistant" and script.turns:
            blocks = [{"type": "text", "text": content}] if content else []
            for call in message.get("tool_calls") or []:
                function = call["function"]
                blocks.append(
                    {
                        "type": "tool_use",
                        "id": unique(call["id"]),
                        "name": function["name"],
                        "input": function["arguments"],
                    }
                )
            script.turns[-1][1].append(blocks)
            if content:
                script.originals.append(content)
        elif role == "tool" and script.turns:
            script.outputs.setdefault(message.get("name") or "", []).append(content)
            script.originals.append(content)
    return script


def _records_script(records: list[Any], system: str = "") -> _Script:
    """A transcript's records (``replay.claude_code_records``, ``replay.load_transcripts``)
    as a script (call ids made unique: :func:`_call_ids`); Claude Code sessions carry no system
    prompt, so they get a one-line one."""
    script = _Script(
        system or "You are Claude Code, a coding agent working in the user's repository.", []
    )
    unique = _call_ids()
    for record in records:
        if record.role == "user":
            text = "\n".join(b["text"] for b in record.blocks() if b["type"] == "text")
            script.turns.append((text, []))
            script.originals.append(text)
        elif record.role == "assistant" and script.turns:
            script.turns[-1][1].append(
                [
                    {**b, "id": unique(b["id"])} if b["type"] == "tool_use" else b
                    for b in record.blocks()
                ]
            )
            script.originals += [b["text"] for b in record.blocks() if b["type"] == "text"]
        elif record.role == "system" and script.turns:
            for block in record.blocks():
                output = block["output"]
                if not isinstance(output, str):
                    output = "\n".join(b["text"] for b in output if b.get("type") == "text")
                script.outputs.setdefault(block["name"], []).append(output)
                script.originals.append(output)
    return script


@dataclass
class _Run:
    agent: Any
    model: Any
    middleware: Any
    workspace: Path

    def prompts(self) -> list[list[dict]]:
        return [c.messages for c in self.model.calls if not c.structured]

    @property
    def compactions(self) -> int:
        if self.middleware is not None:
            return self.middleware.manager.stats.compactions
        return sum(1 for c in self.model.calls if c.structured)


def _exactly_counted() -> type:
    from agentscope_context_ext.testing import ScriptedChatModel

    class ExactlyCounted(ScriptedChatModel):
        """The scripted model with an exact ``count_tokens`` (2.0.11's models estimate)."""

        async def count_tokens(self, messages: list, tools: list[dict] | None) -> int:
            return self.counter.count_formatted(await self.formatter.format(messages), tools)

    return ExactlyCounted


def _blocks(blocks: list[dict]) -> list[Any]:
    from agentscope.message import TextBlock, ThinkingBlock, ToolCallBlock

    made: list[Any] = []
    for block in blocks:
        if block["type"] == "text":
            made.append(TextBlock(text=block["text"]))
        elif block["type"] == "thinking" and block["thinking"]:
            made.append(ThinkingBlock(thinking=block["thinking"]))
        elif block["type"] == "tool_use":
            arguments = block["input"]
            if not isinstance(arguments, str):
                arguments = json.dumps(arguments, ensure_ascii=False)
            made.append(ToolCallBlock(id=block["id"], name=block["name"], input=arguments))
    return made


async def _run(script: _Script, mode: str, workdir: Path, window: int) -> _Run:
    """Replay ``script`` through a real 2.x ``Agent`` in ``mode`` at ``window``."""
    from agentscope.agent import Agent, ContextConfig, InjectionConfig, ReActConfig
    from agentscope.message import UserMsg
    from agentscope.permission import PermissionBehavior, PermissionDecision
    from agentscope.tool import FunctionTool, Toolkit

    from agentscope_context_ext import ContextConfig as OurConfig
    from agentscope_context_ext.agentscope2 import ContextMiddleware, to_views
    from agentscope_context_ext.core.summary import extractive_summary
    from agentscope_context_ext.testing import ScriptedChatModel

    outputs = {name: list(values) for name, values in script.outputs.items()}
    # The same summary budget on both sides: ours sizes its summary by the window.
    summary_tokens = OurConfig().compaction.summary_tokens(window)
    replies: list[list[list[dict]]] = [list(replies) for _, replies in script.turns]
    turn = [-1]

    def respond(call):
        if call.structured:  # 2.x's own compression asks for its SummarySchema
            summary = extractive_summary(to_views(call.msgs[1:-1]), budget_tokens=summary_tokens)

            def text(*keys: str) -> str:
                return "\n".join(line for key in keys for line in getattr(summary, key)) or "-"

            return {
                "task_overview": text("goal", "constraints"),
                "current_state": text("progress"),
                "important_discoveries": text("key_decisions"),
                "next_steps": text("next_steps"),
                "context_to_preserve": text("critical_context"),
            }
        queue = replies[turn[0]]
        while queue:
            blocks = _blocks(queue.pop(0))
            if blocks:
                return blocks
        return "ok"

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

    model_class = _exactly_counted() if mode == EXACT else ScriptedChatModel
    model = model_class(respond, context_size=window)
    tools = [make_tool(name) for name in outputs]
    workspace = workdir / "ws"
    kwargs: dict[str, Any] = {}
    middleware = None
    if mode in ("ours", ESTIMATE):
        middleware = ContextMiddleware(
            {
                "workspace": str(workspace),
                "max_input_tokens": window,
                "notices": False,
                "tokenizer": "estimate" if mode == ESTIMATE else "auto",
                "compaction": {"trigger_ratio": TRIGGER, "model": "extractive"},
                "long_term_memory": {"enabled": False},
            }
        )
        kwargs = {"middlewares": [middleware], "offloader": middleware.offloader}
    elif mode in (WORKSPACE, READ_BACK):
        from agentscope.workspace import LocalWorkspace

        offloader = LocalWorkspace(workdir=str(workspace))
        await offloader.initialize()
        kwargs = {"offloader": offloader}
        if mode == READ_BACK:
            readers = [t for t in await offloader.list_tools() if t.name in ("Read", "Grep")]
            clash = {t.name for t in readers} & set(outputs)
            if clash:
                raise ValueError(f"{READ_BACK}: the transcript has tools named {sorted(clash)}")
            tools += readers
    agent = Agent(
        name="agent",
        system_prompt=script.system,
        model=model,
        toolkit=Toolkit(tools=tools),
        context_config=ContextConfig(trigger_ratio=TRIGGER, reserve_ratio=RESERVE),
        injection_config=InjectionConfig(inject_runtime_state=False),
        react_config=ReActConfig(max_iters=1000),
        **kwargs,
    )
    for index, (text, _) in enumerate(script.turns):
        turn[0] = index
        await agent.reply(UserMsg("user", text))
    return _Run(agent, model, middleware, workspace)


async def _row(
    script: _Script, mode: str, workdir: Path, window: int, names: list[str]
) -> dict[str, Any]:
    """One transcript replayed in ``mode``: the columns' counts (summed over a workload)."""
    from agentscope_context_ext.replay import prompt_pair_violations

    run = await _run(script, mode, workdir, window)
    prompts = run.prompts()
    counter = run.model.counter
    tokens = [
        counter.count_formatted(c.messages, c.tools) for c in run.model.calls if not c.structured
    ]
    orphans = 0
    for messages in prompts:
        ids = {str(c.get("id")) for m in messages for c in m.get("tool_calls") or []}
        orphans += prompt_pair_violations(messages, ids)
    stable = sum(
        json.dumps(b[: len(a)], sort_keys=True) == json.dumps(a, sort_keys=True)
        for a, b in itertools.pairwise(prompts)
    )
    corpus = _corpus(run.agent, run.workspace)
    recovered = sum(1 for text in script.originals if text in corpus)
    last = _text_of(prompts[-1]) if prompts else ""
    return {
        "prompts": len(prompts),
        "over": sum(t > window for t in tokens),
        "orphans": orphans,
        "recovered": recovered,
        "originals": len(script.originals),
        "stable": stable,
        "pairs": max(len(prompts) - 1, 0),
        "tokens": sum(tokens),
        "compactions": run.compactions,
        "identifiers": len(names),
        "identifiers_found": sum(1 for ident in names if ident in last),
    }


def _text_of(value: Any) -> str:
    """Every string in a formatted prompt, joined (not its JSON: escaping would hide a name
    with a quote or a backslash in it)."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        return "\n".join(_text_of(item) for item in value.values())
    if isinstance(value, list):
        return "\n".join(_text_of(item) for item in value)
    return ""


def _tau_identifiers(traj: list[dict]) -> list[str]:
    """The identifiers of the whole trajectory (file paths and code spans, plus tau-bench ids
    such as reservation and user ids); the share the last prompt still names is reported."""
    from agentscope_context_ext.core.summary import summary_identifiers

    everything = "\n".join(str(m.get("content") or "") for m in traj if m["role"] != "system")
    names = set(summary_identifiers(everything)) | set(_ID_RE.findall(everything))
    return sorted(names)


def _coding_identifiers(script: _Script) -> list[str]:
    """The identifiers (B7's extraction: file paths, code spans) of a coding transcript."""
    from agentscope_context_ext.core.summary import summary_identifiers

    return sorted(set(summary_identifiers("\n".join(script.originals))))


async def _compacts(script: _Script, mode: str, window: int) -> bool:
    """Whether the replay compacts at ``window``. A window too small for the conversation even
    after compacting (ours refuses the call: ``ContextOverflowError``) counts as compacting:
    it lies below the window sought, and the bisection goes up from it."""
    from agentscope_context_ext import ContextOverflowError

    with tempfile.TemporaryDirectory() as tmp:
        try:
            run = await _run(script, mode, Path(tmp), window)
        except ContextOverflowError:
            return True
        return run.compactions >= 1


async def _latest_single_compaction(script: _Script, mode: str, precision: float) -> int:
    """B7's window: the largest at which the replay compacts at all (bisection)."""
    with tempfile.TemporaryDirectory() as tmp:
        run = await _run(script, mode, Path(tmp), 10_000_000)
        counter = run.model.counter
        peak = max(counter.count_formatted(c.messages, c.tools) for c in run.model.calls)
    low, high = 4096, int(peak / TRIGGER) + 1024
    if not await _compacts(script, mode, low):
        raise RuntimeError(f"{mode}: the session does not compact even at a 4,096-token window")
    while high - low > max(precision * low, 64):
        middle = (low + high) // 2
        if await _compacts(script, mode, middle):
            low = middle
        else:
            high = middle
    return low


async def _claude_row(name: str, script: _Script, reference: str, mode: str, window: int):
    """B7's fidelity for ``mode`` at ``window``."""
    from agentscope_context_ext.agentscope2 import open_dialog, to_views
    from agentscope_context_ext.core.summary import mentions, summary_identifiers
    from agentscope_context_ext.core.workspace import ToolResultStore

    with tempfile.TemporaryDirectory() as tmp:
        run = await _run(script, mode, Path(tmp), window)
        if run.middleware is not None:
            saved = ToolResultStore(run.workspace).read_text
            dialog = open_dialog(run.workspace)
            compacted = [r.msg for r in dialog.iter_records(newest_first=False)]
            views = to_views(compacted, saved)
        else:
            last = [c for c in run.model.calls if c.structured][-1]
            views = to_views(last.msgs[1:-1])
        corpus = "\n".join(view.raw_text() for view in views)
        summary = run.agent.state.summary if isinstance(run.agent.state.summary, str) else ""
        prompt = _text_of(run.prompts()[-1])
        compactions = run.compactions
    conversation = "\n".join(script.originals)
    names = [n for n in summary_identifiers(reference) if mentions(conversation, n)]
    compacted_names = [n for n in names if mentions(corpus, n)]
    return {
        "session": name,
        "window": window,
        "compactions": compactions,
        "identifiers": len(compacted_names),
        "in_summary": sum(1 for n in compacted_names if mentions(summary, n)),
        "conversation_identifiers": len(names),
        "in_prompt": sum(1 for n in names if mentions(prompt, n)),
        "summary_chars": len(summary),
        "reference_chars": len(reference),
    }


def _claude_sessions() -> list[tuple[str, list[Any], str]]:
    from agentscope_context_ext.replay import claude_code_compactions, claude_code_records

    sessions = []
    for path in sorted((transcripts_dir() / "claude-code").glob("*.jsonl")):
        for index, point in enumerate(claude_code_compactions(path)):
            records = claude_code_records(path, until_line=point.line)
            sessions.append((f"{path.name[:8]}#{index + 1}", records, point.summary))
    return sessions


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
            # Bytes decoded, not read_text: universal newlines would turn a saved \r\n into \n.
            text = path.read_bytes().decode("utf-8", errors="replace")
            strings.add(text)
            if path.suffix == ".jsonl":
                for line in text.splitlines():
                    try:
                        walk(json.loads(line))
                    except ValueError:
                        continue
    return strings


MODES = ("ours", ESTIMATE, "2.x", WORKSPACE, READ_BACK, EXACT)
CODING_MODES = tuple(mode for mode in MODES if mode != READ_BACK)
COMPARED = ("2.x", WORKSPACE)
"""The 2.x settings the target compares ours with (the other rows explain the numbers)."""
CLAUDE_MODES = ("ours", "2.x")
COLUMNS = {
    "over_window": "prompts over the window",
    "orphans": "orphans",
    "recoverable": "recoverable",
    "prefix_stable": "prefix stability",
    "mean_prompt_tokens": "mean prompt tokens",
    "fidelity": "fidelity (B7)",
}


def _coding_scripts() -> list[tuple[str, _Script]]:
    """Every coding transcript of the shared data (B3's list without tau-bench)."""
    from agentscope_context_ext.replay import load_transcripts

    return [
        (t.name, _records_script(t.messages, t.system_prompt))
        for path in shared_files()
        if path.parent.name != "tau-bench"
        for t in load_transcripts(path)
    ]


def _workload(
    label: str, items: list[tuple[_Script, list[str]]], window: int, modes: tuple[str, ...]
) -> dict[str, dict[str, int]]:
    """Every transcript in every one of ``modes`` at ``window``: the counts summed per mode."""
    totals: dict[str, dict[str, int]] = {mode: {} for mode in modes}
    for index, (script, names) in enumerate(items):
        for mode in modes:
            with tempfile.TemporaryDirectory() as tmp:
                row = asyncio.run(_row(script, mode, Path(tmp), window, names))
            for key, value in row.items():
                totals[mode][key] = totals[mode].get(key, 0) + value
        print(f"  {label} {index + 1}/{len(items)}", file=sys.stderr, flush=True)
    return totals


def _columns(t: dict[str, int], sessions: list[dict]) -> dict[str, Any]:
    return {
        "prompts": t["prompts"],
        "over_window": t["over"],
        "orphans": t["orphans"],
        "recoverable": round(t["recovered"] / max(t["originals"], 1), 4),
        "prefix_stable": round(t["stable"] / max(t["pairs"], 1), 4),
        "mean_prompt_tokens": round(t["tokens"] / max(t["prompts"], 1)),
        "compactions": t["compactions"],
        "ids_in_last_prompt": round(t["identifiers_found"] / max(t["identifiers"], 1), 4),
        "fidelity": (
            round(
                sum(r["in_summary"] for r in sessions)
                / max(sum(r["identifiers"] for r in sessions), 1),
                4,
            )
            if sessions
            else None
        ),
    }


def shortfalls(rows: dict[str, dict[str, Any]]) -> list[tuple[str, str]]:
    """(column, 2.x setting) where ours misses the target: at least as good on every column,
    strictly better on recoverability and fidelity."""
    ours = rows["ours"]
    missed = []
    for other in COMPARED:
        o = rows[other]
        checks = {
            "over_window": ours["over_window"] <= o["over_window"],
            "orphans": ours["orphans"] <= o["orphans"],
            "recoverable": ours["recoverable"] > o["recoverable"],
            "prefix_stable": ours["prefix_stable"] >= o["prefix_stable"],
            "mean_prompt_tokens": ours["mean_prompt_tokens"] <= o["mean_prompt_tokens"],
            "fidelity": o["fidelity"] is None or ours["fidelity"] > o["fidelity"],
        }
        missed += [(column, other) for column, ok in checks.items() if not ok]
    return missed


def run(quick: bool = False) -> dict:
    """Measure and return the B8 record."""
    if agentscope_major() < 2:
        return {
            "skipped": f"AgentScope {agentscope_version()} is installed; B8 needs 2.x",
            "target": TARGET,
            "target_met": False,
        }
    logging.getLogger("as").setLevel(logging.ERROR)
    logging.getLogger("agentscope").setLevel(logging.ERROR)
    logging.getLogger("agentscope_context_ext").setLevel(logging.ERROR)
    trajectories = _tau_trajectories(10 if quick else 40)
    tau = _workload(
        "tau-bench",
        [(_tau_script(t), _tau_identifiers(t)) for t in trajectories],
        TAU_WINDOW,
        MODES,
    )
    coding_scripts = _coding_scripts()
    coding = _workload(
        "coding transcripts",
        [(script, _coding_identifiers(script)) for _, script in coding_scripts],
        CODING_WINDOW,
        CODING_MODES,
    )
    claude: dict[str, list[dict]] = {mode: [] for mode in CLAUDE_MODES}
    for name, records, reference in _claude_sessions():
        script = _records_script(records)
        # Both sides at both sides' B7 windows (each one's latest single compaction).
        windows = {
            mode: asyncio.run(_latest_single_compaction(script, mode, 0.03 if quick else 0.01))
            for mode in CLAUDE_MODES
        }
        for chosen_by, window in windows.items():
            for mode in CLAUDE_MODES:
                row = asyncio.run(_claude_row(name, script, reference, mode, window))
                claude[mode].append({**row, "window_of": chosen_by})
            print(f"  claude code {name}: window {window:,} ({chosen_by})", file=sys.stderr)
    workloads = {
        "tau-bench": {
            "window": TAU_WINDOW,
            "transcripts": len(trajectories),
            "rows": {mode: _columns(t, claude.get(mode, [])) for mode, t in tau.items()},
        },
        "coding": {
            "window": CODING_WINDOW,
            "transcripts": len(coding_scripts),
            "names": [name for name, _ in coding_scripts],
            "rows": {mode: _columns(t, claude.get(mode, [])) for mode, t in coding.items()},
        },
    }
    missed = {name: shortfalls(w["rows"]) for name, w in workloads.items()}
    return {
        "agentscope_version": agentscope_version(),
        "workloads": workloads,
        "claude_code": claude,
        "shortfalls": missed,
        "target": TARGET,
        "target_met": not any(missed.values()),
    }


def _share(part: int, whole: int) -> str:
    return f"{part / whole:.1%}" if whole else "-"


def table(record: dict) -> str:
    if record.get("skipped"):
        return ""
    titles = {
        "tau-bench": "tau-bench trajectories (the first {n}) at a {window:,}-token window",
        "coding": "coding transcripts (Claude Code, SWE-agent: {n}) at a {window:,}-token window",
    }
    lines = [
        f"AgentScope {record['agentscope_version']}; fidelity: the Claude Code sessions by B7's "
        "method (the same figure in both tables)",
    ]
    for name, workload in record["workloads"].items():
        lines += [
            "",
            titles[name].format(n=workload["transcripts"], window=workload["window"]),
            "",
            "| | prompts | over window | orphans | recoverable | prefix stable "
            "| mean prompt tokens | compactions | fidelity (B7) | ids in last prompt |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for mode, r in workload["rows"].items():
            fidelity = "-" if r["fidelity"] is None else f"{r['fidelity']:.1%}"
            lines.append(
                f"| {mode} | {r['prompts']:,} | {r['over_window']} | {r['orphans']} | "
                f"{r['recoverable']:.1%} | {r['prefix_stable']:.1%} | "
                f"{r['mean_prompt_tokens']:,} | {r['compactions']} | {fidelity} | "
                f"{r['ids_in_last_prompt']:.1%} |"
            )
    lines += [
        "",
        "| Claude Code session | window (whose latest single compaction) | side | compactions "
        "| identifiers compacted | in summary | in the last prompt | summary chars (side / CC) |",
        "|---|---|---|---:|---:|---:|---:|---:|",
    ]
    claude = [(r, mode) for mode, rows in record["claude_code"].items() for r in rows]
    for r, mode in sorted(claude, key=lambda item: (item[0]["session"], -item[0]["window"])):
        lines.append(
            f"| {r['session']} | {r['window']:,} ({r['window_of']}) | {mode} | {r['compactions']} | "
            f"{r['identifiers']} | {_share(r['in_summary'], r['identifiers'])} | "
            f"{_share(r['in_prompt'], r['conversation_identifiers'])} | "
            f"{r['summary_chars']:,} / {r['reference_chars']:,} |"
        )
    missed = [
        f"{name}: {COLUMNS[column]} vs {other}"
        for name, items in record["shortfalls"].items()
        for column, other in items
    ]
    if missed:
        lines += ["", "ours behind on: " + "; ".join(missed)]
    return "\n".join(lines)


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m bench.b8_own_compression", description=f"B8 - {TITLE}. Target: {TARGET}."
    )
    parser.add_argument(
        "--quick", action="store_true", help="10 tau-bench trajectories, coarser B7 windows"
    )
    result = run(quick=parser.parse_args().quick)
    if result.get("skipped"):
        print(f"skipped: {result['skipped']}")
        sys.exit(0)
    print(table(result))
    print(f"\ntarget: {result['target']} -> {'met' if result['target_met'] else 'NOT met'}")
    sys.exit(0 if result["target_met"] else 1)
