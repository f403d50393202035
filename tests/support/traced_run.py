"""One traced run of a managed agent, in a process of its own (a tracer provider is
process-wide and cannot be taken back): ``python traced_run.py SCENARIO URL OUT``.

Scenarios:

- ``session``: ``trace_to(URL)``, then a managed agent of the installed AgentScope fetches
  large documents (stage one and stage two cut them) in a small window (two or more
  compactions, summarised by the scripted model), with long-term memory on (the Summarizer runs
  after each compaction);
- ``misordered`` (2.x): the same with the agent's ``TracingMiddleware`` put *behind* the
  ``ContextMiddleware``;
- ``off``: the session with no ``trace_to`` (``OTEL_EXPORTER_OTLP_ENDPOINT`` may be set);
- ``overflow``: the session, with the provider rejecting the sixth agent call for its length
  once (recovered: compacted and sent again);
- ``refuse``: an exempt tool's result larger than the window (the call after it refused);
- ``compact_now``: a short reply, then ``manager.compact_now()`` between replies.

Prints JSON: the manager's stats, the tools of every agent model call, the session id.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from harness_common import session_plan
from installed_harness import (
    is_agent_call,
    managed,
    scripted_session,
    session_responder,
    tool_names,
)

from agentscope_context_ext import ContextOverflowError, trace_to
from agentscope_context_ext.compat import agentscope_major
from agentscope_context_ext.testing import ScriptedChatModel


def config(out: Path) -> dict:
    return {
        "workspace": str(out / "workspace"),
        "max_input_tokens": 16384,
        "truncation": {"first_max_bytes": 8192, "second_max_bytes": 1500, "recent_n": 2},
        "long_term_memory": {"consolidation_time": "off", "retry_backoff_seconds": 0},
        # the summary model's call inside its compaction's span: asked at the compaction (one
        # written ahead runs beside the agent's steps, design §4.6)
        "compaction": {"background_summary": False},
    }


def rejecting_once(respond):
    """``respond``, except that the sixth agent call is rejected for its length, once."""
    seen = {"agent_calls": 0}

    def answer(call):
        if is_agent_call(call):
            seen["agent_calls"] += 1
            if seen["agent_calls"] == 6:
                return RuntimeError(
                    "Error code: 400 - This model's maximum context length is 16384 tokens. "
                    "However, your messages resulted in 17000 tokens."
                )
        return respond(call)

    return answer


def misordered_agent(model, out: Path):
    """A 2.x ``Agent`` built as ``middlewares=[context, TracingMiddleware()]``: the tracing
    middleware behind ours (the ContextMiddleware moves it in front for tool calls)."""
    from agentscope.agent import Agent
    from agentscope.middleware import TracingMiddleware
    from agentscope.tool import Toolkit
    from harness_common import fetch

    from agentscope_context_ext import ContextMiddleware
    from agentscope_context_ext.agentscope2 import as_tool

    context = ContextMiddleware(config(out))
    agent = Agent(
        name="researcher",
        system_prompt="You are a diligent research agent.",
        model=model,
        toolkit=Toolkit(tools=[as_tool(fetch)]),
        middlewares=[context, TracingMiddleware()],
        offloader=context.offloader,
    )
    agent.react_config.max_iters = 100
    return agent, context


async def main(scenario: str, url: str, out: Path) -> dict:
    export = None
    if scenario != "off":
        export = trace_to(url, project="context-ext-tests")
    model = scripted_session(session_plan(24, [30, 150, 60]))
    ask = "Fetch every document, one after another."
    if scenario == "overflow":
        model = ScriptedChatModel(
            rejecting_once(session_responder(session_plan(24, [30, 150, 60])))
        )
    if scenario == "refuse":
        # a result of an exempt tool, never cut, over the window: nothing left to offload
        model = scripted_session(session_plan(2, [150]))
        settings = config(out)
        settings["truncation"] = {**settings["truncation"], "exempt_tools": ["fetch"]}
        agent = managed(model, settings)
        try:
            await agent.ask(ask)
        except ContextOverflowError as exc:
            refused = str(exc)
        else:
            raise AssertionError("a prompt over the window was not refused")
        if export is not None:
            assert export.flush()
        return {"refused": refused, "calls": len(model.calls)}
    if scenario == "compact_now":  # a short reply, then a compaction asked for between replies
        model = scripted_session(session_plan(6, [30, 60]))
        agent = managed(model, {**config(out), "max_input_tokens": 65536}, max_iters=100)
        await agent.ask(ask)
        await agent.manager.compact_now()
        await agent.manager.drain()
        assert export.flush()
        return {"compactions": agent.manager.stats.compactions}
    if scenario == "misordered":
        from agentscope.message import UserMsg

        inner, context = misordered_agent(model, out)
        await inner.reply(UserMsg("user", ask))
        manager = context.manager
    else:
        agent = managed(model, config(out), max_iters=100)
        await agent.ask(ask)
        inner, manager = agent.agent, agent.manager
    await manager.drain()
    if export is not None:
        assert export.flush(), "the receiver did not take the spans"
    stats = manager.stats
    session = inner.state.session_id if agentscope_major() >= 2 else None
    return {
        "compactions": stats.compactions,
        "truncations": stats.truncations,
        "retruncations": stats.retruncations,
        "agent_call_tools": [sorted(tool_names(c)) for c in model.calls if is_agent_call(c)],
        "session_id": session,
    }


if __name__ == "__main__":
    result = asyncio.run(main(sys.argv[1], sys.argv[2], Path(sys.argv[3])))
    print(json.dumps(result))
