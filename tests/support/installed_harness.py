"""Helpers for tests that drive a managed agent of the installed AgentScope (1.x or 2.x) through
the adapter's facade: ``installed.ManagedAgent`` on the scripted model, with core tools (plain
async functions returning text). What the agent holds is read as the core's neutral views, so
the same assertions hold on both majors."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from harness_common import (
    COMPACTION_MARKER,
    CONSOLIDATOR_MARKER,
    SUMMARIZER_MARKER,
    fetch,
    model_summary,
)

from agentscope_context_ext.adapter import installed
from agentscope_context_ext.core.messages import Message, Text, ToolResult
from agentscope_context_ext.core.truncation import split_notice
from agentscope_context_ext.testing import ModelCall, ScriptedChatModel, reply, tool_call

FORMATTERS = ["dashscope", "openai"]
"""The formatters a prompt is laid out with (a 1.x agent's, a 2.x model's)."""


def formatter(name: str = "dashscope") -> Any:
    """AgentScope's own formatter of that name (the same class path on 1.x and 2.x)."""
    from agentscope.formatter import DashScopeChatFormatter, OpenAIChatFormatter

    return {"dashscope": DashScopeChatFormatter, "openai": OpenAIChatFormatter}[name]()


def system_text(call: ModelCall) -> str:
    """The text of a formatted prompt's system messages (a string, or its text blocks)."""
    texts = []
    for message in call.messages:
        if message.get("role") != "system":
            continue
        content = message.get("content")
        if isinstance(content, list):
            texts += [str(b.get("text") or "") for b in content if isinstance(b, dict)]
        else:
            texts.append(str(content))
    return "\n".join(texts)


def is_compaction_call(call: ModelCall) -> bool:
    return COMPACTION_MARKER in system_text(call)


def is_background_call(call: ModelCall) -> bool:
    """A call of the Summarizer or the consolidation agent (long-term memory)."""
    text = system_text(call)
    return SUMMARIZER_MARKER in text or CONSOLIDATOR_MARKER in text


def is_agent_call(call: ModelCall) -> bool:
    return not is_compaction_call(call) and not is_background_call(call)


def tool_names(call: ModelCall) -> set[str]:
    """The tools the model was shown in one call."""
    return {t["function"]["name"] for t in call.tools or []}


def session_responder(
    plan: list[list[tuple[int, int]]],
    compaction: Callable[[ModelCall], object] = model_summary,
    first_step: int = 0,
) -> Callable[[ModelCall], object]:
    """The answers of a model that follows ``plan`` (one step of ``fetch`` calls per agent
    call, then "All documents fetched."), answers compaction calls with ``compaction`` and
    background calls with ``[SILENT]``. ``first_step``: where a resumed session continues
    ``plan`` (call ids stay those of the whole plan)."""
    state = {"step": first_step}

    def respond(call: ModelCall) -> object:
        if is_compaction_call(call):
            return compaction(call)
        if is_background_call(call):
            return "[SILENT]"
        step = state["step"]
        state["step"] += 1
        if step < len(plan):
            calls = [
                tool_call("fetch", f"call-{step}-{k}", size_kb=s, seed=seed)
                for k, (s, seed) in enumerate(plan[step])
            ]
            return reply(f"step {step}", *calls)
        return "All documents fetched."

    return respond


def scripted_session(
    plan: list[list[tuple[int, int]]],
    compaction: Callable[[ModelCall], object] = model_summary,
    stream: bool = False,
) -> ScriptedChatModel:
    """A scripted model answering as :func:`session_responder`."""
    return ScriptedChatModel(session_responder(plan, compaction), stream=stream)


def managed(
    model: ScriptedChatModel,
    config: dict[str, Any] | Any,
    *,
    tools: Sequence[Callable] = (fetch,),
    layout: str = "dashscope",
    system_prompt: str = "You are a diligent research agent.",
    max_iters: int = 500,
    name: str = "researcher",
) -> Any:
    """A managed agent of the installed AgentScope on ``model`` with the core ``tools``,
    prompts laid out by the ``layout`` formatter (a 1.x agent holds its formatter, a 2.x model
    formats for itself)."""
    layout_formatter = formatter(layout)
    if hasattr(model, "formatter"):
        model.formatter = layout_formatter
    return installed.ManagedAgent.create(
        model,
        config,
        name=name,
        system_prompt=system_prompt,
        tools=tools,
        formatter=layout_formatter,
        max_iters=max_iters,
    )


# ------------------------------------------------------------------- what the agent holds


def dialog_views(agent: Any) -> list[Message]:
    """The messages compaction saved to ``dialog/``, oldest first, as neutral views."""
    store = agent.manager.dialog_store
    return [store.codec.view(r.msg) for r in store.iter_records(newest_first=False)]


def all_views(agent: Any) -> list[Message]:
    """Everything the agent produced: ``dialog/`` (oldest first), then its context."""
    return dialog_views(agent) + agent.views()


def said(views: Sequence[Message]) -> Iterator[object]:
    """The conversation as a flat sequence: each text (not a framework's reminder), each tool
    call and each tool result, in order; a major's way of grouping them into messages aside."""
    for view in views:
        for part in view.parts:
            if type(part) is Text:
                yield ("text", view.role, part.text)
            elif isinstance(part, ToolResult):
                yield ("result", part.id)
            elif hasattr(part, "arguments"):
                yield ("call", part.id)


def call_ids(views: Sequence[Message]) -> list[str]:
    return [call.id for view in views for call in view.tool_calls]


def result_ids(views: Sequence[Message]) -> list[str]:
    return [result.id for view in views for result in view.tool_results]


def tool_results(views: Sequence[Message]) -> list[ToolResult]:
    return [result for view in views for result in view.tool_results]


def result_text(agent: Any, call_id: str) -> str:
    """The text of the result of ``call_id`` in the agent's context."""
    for result in tool_results(agent.views()):
        if result.id == call_id:
            return result.text
    raise AssertionError(f"no result {call_id} in the context")


def offloaded_files_missing(views: Sequence[Message], workspace: Path) -> list[str]:
    """Notices among the results whose saved file is not in the workspace folder."""
    missing = []
    for result in tool_results(views):
        parts = split_notice(result.text)
        if parts and not (workspace / parts[1].file_path).is_file():
            missing.append(parts[1].file_path)
    return missing


async def framework_round_trip(agent: Any, into: Any, folder: Path) -> None:
    """Save ``agent``'s state the installed AgentScope's own way and load it into ``into``
    (another managed agent): 2.x's ``state.model_dump_json()`` and
    ``AgentState.model_validate_json`` (what ``create_app`` and Redis sessions do), 1.x's own
    ``JSONSession`` (strict UTF-8, unlike the package's ``AtomicJSONSession``)."""
    from agentscope_context_ext.compat import agentscope_major

    if agentscope_major() >= 2:
        from agentscope.state import AgentState

        folder.mkdir(parents=True, exist_ok=True)
        saved = folder / "state.json"
        saved.write_bytes(agent.agent.state.model_dump_json().encode("utf-8"))
        into.agent.state = AgentState.model_validate_json(saved.read_bytes())
        return
    from agentscope.session import JSONSession

    session = JSONSession(save_dir=str(folder))
    await session.save_session_state(session_id="s", agent=agent.agent)
    await session.load_session_state(session_id="s", agent=into.agent)


async def read_file(agent: Any, **arguments: Any) -> str:
    """Call the agent's ``read_file`` tool as the model would; its text."""
    for name, tool in agent.manager.tools():
        if name == "read_file":
            return await tool(**arguments)
    raise AssertionError("the agent has no read_file tool")


# ------------------------------------------------------------ agents in other processes


def note_tool(detail_lines: int) -> Callable:
    """A ``note`` tool whose answer is the note and ``detail_lines`` lines of detail."""

    async def note(text: str) -> str:
        """Write a note.

        Args:
            text (str): The note.
        """
        return f"noted {text}\n" + "detail line\n" * detail_lines

    return note


def note_taking_agent(
    workspace: str, tag: str, steps: int, ids_dir: str | None = None, detail_lines: int = 150
) -> None:
    """One note-taking agent of the installed AgentScope (run in a process of its own):
    ``steps`` calls of ``note`` and a Memory.md fact every 10th step (``note_taker``), then a
    compaction of everything; the ids of what it keeps go to ``<ids_dir>/<tag>.ids.json``."""
    import asyncio
    import json

    from harness_common import note_taker

    async def main() -> None:
        agent = managed(
            ScriptedChatModel(note_taker(tag, steps)),
            {
                "workspace": workspace,
                "max_input_tokens": 8192,
                "notices": False,
                "long_term_memory": {"summarize_on_compaction": False, "consolidation_time": "off"},
            },
            tools=(note_tool(detail_lines),),
            name=tag,
            max_iters=steps + 5,
        )
        await agent.ask(f"{tag}: take notes")
        await agent.manager.compact_now()
        ids = [view.id for view in agent.views()]
        Path(ids_dir or workspace, f"{tag}.ids.json").write_text(json.dumps(ids))

    asyncio.run(main())


def note_results(views: Sequence[Message], tag: str) -> set[str]:
    """Ids of the ``note`` results of agent ``tag`` among ``views``."""
    return {
        result.id
        for result in tool_results(views)
        if result.id.startswith(f"{tag}-") and not result.id.startswith(f"{tag}-m")
    }


def stored_views(workspace: str | Path) -> list[Message]:
    """Every message in the ``dialog/`` of ``workspace``, oldest first, as neutral views."""
    store = installed.open_dialog(workspace)
    return [store.codec.view(r.msg) for r in store.iter_records(newest_first=False)]
