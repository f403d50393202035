"""B13: how long the agent waits at each compaction, with a summary model that writes at a
fixed pace: ours (the summary written ahead, ``compaction.background_summary: true``) against
synchronous compaction (``false``: today's behaviour before issue 44) and 2.x's own
compression.

The shared transcripts that compact (the coding sessions at B3's and B8's 32k window) are
replayed through real 2.x ``Agent`` objects as in B8: the scripted model answers with the
recorded assistant turns, the tools with their recorded outputs. Every model call takes the
time a server takes to write it: one loopback OpenAI-compatible server (``_paced_server.py``)
writes 25 or 100 tokens a second after 1 s to the first token. The agent's own calls ask it
for as many tokens as the recorded turn holds (its text and tool arguments); our summary model
is AgentScope's ``OpenAIChatModel`` on the real ``openai`` client against it (a memo of the
summary's budget); 2.x's compression asks the scripted model, which waits for the server to
write as many tokens before it answers (B8's extractive answer). The server serves requests in
parallel, as a hosted API does (a single-slot local server is B12's).

Time runs ``scale`` times faster than the pace (the server writes ``scale`` times faster, 1 s
becomes ``1/scale``), so the quick run takes minutes; every wait is reported in the pace's
time: the wall-clock between two agent calls at a compaction (what our pipeline or 2.x's
compression took), with the summary calls the agent sat through counted ``scale`` times and
the rest (our own CPU time) as measured.

The served row (**ours, served**) is ours as ``create_app`` runs it: every turn a new agent and
a new middleware from :func:`context_middleware_factory`, on the agent state the turn before left
(stored and loaded as JSON, as the service does). Its turns are shorter than a summary's writing:
each makes at most :data:`TURN_CALLS` of the recorded agent calls, then answers, and the next turn
("Go on.") takes the recording up where it stopped.

Reported per side and pace: compactions, p50/p95/max wait, the share of compactions whose
summary the model wrote (ours: at the compaction; swapped in later is counted apart), and the
tokens the summary model wrote into answers never used. Target: ours' and ours-served's p95
wait < 1 s at 25 tokens/s and >= 90% of their compactions model-written. 2.x only."""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from ._major import agentscope_major, agentscope_version
from ._paced_server import MEMO_MARK, PacedServer
from ._replayed import next_reply, replayed_tool
from .b8_own_compression import RESERVE, TRIGGER, _coding_scripts, own_summary_answer

TITLE = "the wait at each compaction: the summary written ahead, synchronous, 2.x's own"
TARGET = (
    "ours and ours served: p95 wait < 1 s at 25 tokens/s and >= 90% of compactions with a "
    "model-written summary (at the compaction, or swapped in when it arrives)"
)
WINDOW = 32768
FIRST_TOKEN = 1.0
PACES = (25, 100)
SERVED = "ours, served"
SIDES = ("ours", "synchronous", "2.x", SERVED)
TURN_CALLS = 2
"""The served row's turns make at most this many recorded agent calls, then answer: most turns
take less than a summary's writing (66 s at 25 tokens/s, 17 s at 100)."""


def _output_tokens(blocks: list[Any], count: Any) -> int:
    """What the model wrote for one recorded turn: its text and its tool calls' arguments."""
    text = ""
    for block in blocks:
        text += getattr(block, "text", "") or ""
        text += getattr(block, "input", "") or ""
        text += getattr(block, "name", "") or ""
    return max(count(text), 1) if text else 1


async def _pace(client: Any, tokens: int) -> None:
    """Have the server write ``tokens`` tokens, streamed (the agent's own generation)."""
    stream = await client.chat.completions.create(
        model="paced",
        messages=[{"role": "user", "content": "go on"}],
        max_tokens=tokens,
        stream=True,
    )
    async for _ in stream:
        pass


async def _run(script: Any, side: str, rate: float, scale: float, workdir: Path) -> dict:
    """One replay of ``script`` on ``side`` at ``rate`` tokens a second (``scale`` faster)."""
    from agentscope.agent import Agent, ContextConfig, InjectionConfig, ReActConfig
    from agentscope.credential import OpenAICredential
    from agentscope.message import UserMsg
    from agentscope.model import OpenAIChatModel
    from agentscope.state import AgentState
    from agentscope.tool import Toolkit
    from openai import AsyncOpenAI

    from agentscope_context_ext import ContextConfig as OurConfig
    from agentscope_context_ext import context_middleware_factory, get_token_counter
    from agentscope_context_ext.agentscope2 import ContextMiddleware
    from agentscope_context_ext.core.events import CompactionFinished
    from agentscope_context_ext.testing import ScriptedChatModel

    server = PacedServer(rate * scale, FIRST_TOKEN / scale)
    client = AsyncOpenAI(api_key="paced", base_url=server.url, max_retries=0)
    count = get_token_counter("auto").count_text
    budget = OurConfig().compaction.summary_tokens(WINDOW)
    outputs = {name: list(values) for name, values in script.outputs.items()}
    replies = [list(r) for _, r in script.turns]
    turn = [0]
    calls_left: list[int | None] = [None]  # the served turn's agent calls still to make
    agent_calls: list[tuple[float, float]] = []
    own_summaries: list[tuple[float, float]] = []  # 2.x's compression calls
    compactions: list[tuple[float, str]] = []
    turns: list[float] = []  # the served turns' lengths
    seen: set[int] = set()
    middlewares: list[Any] = []  # ours: one, or one per served turn

    def look(summary: Any) -> None:
        if summary is not None:
            seen.update(int(n) for n in MEMO_MARK.findall(summary.render()))

    async def respond(call: Any) -> Any:
        started = time.perf_counter()
        if call.structured:  # 2.x's own compression: the model writes its summary
            await _pace(client, budget)
            own_summaries.append((started, time.perf_counter()))
            return own_summary_answer(call.msgs[1:-1], budget)
        if middlewares:
            look(middlewares[-1].manager.port.summary)
        if calls_left[0] == 0:  # the served turn is over: the agent answers
            answer: Any = "Paused."
        else:
            calls_left[0] = None if calls_left[0] is None else calls_left[0] - 1
            answer = next_reply(replies[turn[0]])
        await _pace(client, _output_tokens(answer, count) if isinstance(answer, list) else 1)
        agent_calls.append((started, time.perf_counter()))
        return answer

    def listen(event: Any) -> None:
        if isinstance(event, CompactionFinished):
            compactions.append((time.perf_counter(), event.summary_source))

    config: dict[str, Any] = {}
    summary_model = None
    if side != "2.x":
        summary_model = OpenAIChatModel(
            credential=OpenAICredential(api_key="paced", base_url=server.url),
            model="paced",
            stream=True,
            context_size=WINDOW,
        )
        config = {
            "workspace": str(workdir / "ws"),
            "max_input_tokens": WINDOW,
            "notices": False,
            "long_term_memory": {"enabled": False},
            "compaction": {
                "trigger_ratio": TRIGGER,
                "background_summary": side != "synchronous",
                # the default 120 s, in the run's time
                "summary_timeout_seconds": 120.0 / scale,
            },
        }

    def agent_with(extra: list[Any], state: Any = None) -> Any:
        kwargs: dict[str, Any] = {"state": state} if state is not None else {}
        if extra:
            kwargs.update(middlewares=extra, offloader=extra[-1].offloader)
        return Agent(
            name="agent",
            system_prompt=script.system,
            model=ScriptedChatModel(respond, context_size=WINDOW),
            toolkit=Toolkit(tools=[replayed_tool(name, outputs) for name in outputs]),
            context_config=ContextConfig(trigger_ratio=TRIGGER, reserve_ratio=RESERVE),
            injection_config=InjectionConfig(inject_runtime_state=False),
            react_config=ReActConfig(max_iters=1000),
            **kwargs,
        )

    try:
        if side == SERVED:
            # create_app's way: the factory called every turn, the state stored and loaded
            factory = context_middleware_factory(config, compaction_model=summary_model)
            state = None
            for index, (text, _) in enumerate(script.turns):
                turn[0], say = index, text
                while True:
                    middleware = (await factory("user", "agent", "session"))[-1]
                    middleware.subscribe(listen)
                    middlewares.append(middleware)
                    agent = agent_with([middleware], state)
                    calls_left[0] = TURN_CALLS
                    started = time.perf_counter()
                    await agent.reply(UserMsg("user", say))
                    turns.append((time.perf_counter() - started) * scale)
                    state = AgentState.model_validate_json(agent.state.model_dump_json())
                    if not replies[index]:
                        break
                    say = "Go on."
        else:
            if side != "2.x":
                middleware = ContextMiddleware(config, compaction_model=summary_model)
                middleware.subscribe(listen)
                middlewares.append(middleware)
            agent = agent_with(middlewares)
            for index, (text, _) in enumerate(script.turns):
                turn[0] = index
                await agent.reply(UserMsg("user", text))
        if middlewares:
            look(middlewares[-1].manager.port.summary)
            if side != SERVED:
                await middlewares[-1].manager.pipeline.stop_background()
    finally:
        await client.close()
        server.close()
    if side == "2.x":
        compactions = [(end, "llm") for _, end in own_summaries]
    # the summary calls that ended (one the run's end cut off has no end yet)
    summary_calls = [(s.started, s.ended) for s in server.served if s.kind == "summary" and s.ended]
    blocking = own_summaries if side == "2.x" else summary_calls
    waits = [_wait(at, agent_calls, blocking, scale) for at, _ in compactions]
    # a summary was used when its memo reached the context, or a used summary extends it
    summaries = [s for s in server.served if s.kind == "summary"]
    for later in sorted(summaries, key=lambda s: -s.number):
        if later.number in seen:
            seen.update(later.based_on)
    unused = sum(s.tokens for s in summaries if s.number not in seen)
    aheads = [m.manager.pipeline.parts.compaction.ahead for m in middlewares if m.manager]
    return {
        "compactions": len(compactions),
        "waits": waits,
        "model_written": sum(source == "llm" for _, source in compactions),
        "swapped_in_later": sum(a.stats.used_late for a in aheads if a is not None),
        "summary_tokens": (
            budget * len(own_summaries)  # 2.x's are asked for through the agent's model
            if side == "2.x"
            else sum(s.tokens for s in server.served if s.kind == "summary")
        ),
        "unused_tokens": unused,
        "turns": turns,
        "summary_seconds": [  # the summaries written whole
            (s.ended - s.started) * scale
            for s in server.served
            if s.kind == "summary" and s.ended and not s.closed_early
        ],
    }


def _wait(
    at: float, calls: list[tuple[float, float]], blocking: list[tuple[float, float]], scale: float
) -> float:
    """The wait of the compaction at ``at``: the time between the agent call before it and the
    one after, the summary calls inside that gap (the agent sat through them) at the pace's
    time (``scale`` times), the rest as measured."""
    before = max((end for _, end in calls if end <= at), default=at)
    after = min((start for start, _ in calls if start >= at), default=at)
    gap = max(after - before, 0.0)
    inside = sum(end - start for start, end in blocking if start >= before and end <= after)
    return gap + (scale - 1.0) * inside


def _model_share(row: dict[str, Any]) -> float:
    """Compactions whose summary the model wrote, at the compaction or swapped in later."""
    if not row["compactions"]:
        return 0.0
    return (
        min(row["model_written"] + row["swapped_in_later"], row["compactions"]) / row["compactions"]
    )


def _percentile(values: list[float], share: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


def run(quick: bool = False) -> dict:
    """Every side at every pace over the coding transcripts that compact."""
    if agentscope_major() < 2:
        return {"skipped": f"needs AgentScope 2.x; {agentscope_version()} is installed"}
    scale = 50.0 if quick else 10.0
    # the sessions long enough to compact at the window (the quick run: the first)
    scripts = [(name, s) for name, s in _coding_scripts() if sum(len(r) for _, r in s.turns) > 50]
    scripts = scripts[:1] if quick else scripts
    rows: list[dict[str, Any]] = []
    for rate in PACES:
        for side in SIDES:
            total: dict[str, Any] = {"side": side, "rate": rate, "waits": []}
            for name, script in scripts:
                with tempfile.TemporaryDirectory() as tmp:
                    one = asyncio.run(_run(script, side, rate, scale, Path(tmp)))
                print(f"  {side} at {rate} tok/s, {name}: {one['compactions']} compactions")
                for key, value in one.items():
                    default = [] if isinstance(value, list) else 0
                    total[key] = total.get(key, default) + value
            waits, turns, summaries = (total.pop(k) for k in ("waits", "turns", "summary_seconds"))
            total.update(
                p50=statistics.median(waits) if waits else 0.0,
                p95=_percentile(waits, 0.95),
                max=max(waits, default=0.0),
                turns=len(turns),
                turn_p50=statistics.median(turns) if turns else 0.0,
                turn_max=max(turns, default=0.0),
                summary_p50=statistics.median(summaries) if summaries else 0.0,
            )
            rows.append(total)
    checked = [r for r in rows if r["side"] in ("ours", SERVED) and r["rate"] == 25]
    return {
        "id": "B13",
        "target": TARGET,
        "scale": scale,
        "sessions": [name for name, _ in scripts],
        "rows": rows,
        "target_met": all(
            r["compactions"] > 0 and r["p95"] < 1.0 and _model_share(r) >= 0.9 for r in checked
        ),
    }


def table(record: dict) -> str:
    """The Markdown table of one run."""
    lines = [
        f"{len(record['sessions'])} coding sessions at a {WINDOW:,}-token window, time "
        f"{record['scale']:g}x faster, waits in the pace's time.",
        "",
        "| side | tokens/s | compactions | p50 wait | p95 wait | max wait | model-written at "
        "the compaction | swapped in later | model-written, all | summary tokens | unused |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in record["rows"]:
        share = r["model_written"] / r["compactions"] if r["compactions"] else 0.0
        lines.append(
            f"| {r['side']} | {r['rate']} | {r['compactions']} | {r['p50']:.2f} s | "
            f"{r['p95']:.2f} s | {r['max']:.2f} s | {share:.0%} | {r['swapped_in_later']} | "
            f"{_model_share(r):.0%} | {r['summary_tokens']:,} | {r['unused_tokens']:,} |"
        )
    lines.append("")
    for r in record["rows"]:
        if r["side"] == SERVED:
            lines.append(
                f"{SERVED} at {r['rate']} tokens/s: {r['turns']} turns, p50 {r['turn_p50']:.1f} s "
                f"(max {r['turn_max']:.1f} s); a whole summary's writing p50 {r['summary_p50']:.1f} s."
            )
    return "\n".join(lines)
