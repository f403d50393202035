"""Helpers for tests that drive a real ReActAgent with the scripted model."""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Sequence

from agentscope.agent import ReActAgent
from agentscope.formatter import DashScopeChatFormatter, FormatterBase, OpenAIChatFormatter
from agentscope.message import Msg, TextBlock
from agentscope.tool import Toolkit, ToolResponse
from harness_common import (
    COMPACTION_MARKER,
    CONSOLIDATOR_MARKER,
    SUMMARIZER_MARKER,
    make_text,
)

from agentscope_context_ext.testing import ModelCall, ScriptedChatModel, reply, tool_call

_PATH_RE = re.compile(r"(?:tool_result|dialog)/[\w.\-]+")


async def fetch(size_kb: int, seed: int) -> ToolResponse:
    """Fetch a document of the given size.

    Args:
        size_kb (int): Size of the document in KiB.
        seed (int): Which document.
    """
    return ToolResponse(content=[TextBlock(type="text", text=make_text(size_kb * 1024, seed))])


def _system_text(call: ModelCall) -> str:
    return "\n".join(str(m.get("content")) for m in call.messages if m.get("role") == "system")


def is_compaction_call(call: ModelCall) -> bool:
    return COMPACTION_MARKER in _system_text(call)


def is_background_call(call: ModelCall) -> bool:
    """A call of the Summarizer or the consolidation agent (long-term memory)."""
    text = _system_text(call)
    return SUMMARIZER_MARKER in text or CONSOLIDATOR_MARKER in text


def is_agent_call(call: ModelCall) -> bool:
    return not is_compaction_call(call) and not is_background_call(call)


def model_summary(call: ModelCall) -> str:
    """What a diligent compaction model answers: six sections, keeping offload paths."""
    paths = sorted(set(_PATH_RE.findall(call.text)))
    critical = "\n".join(f"- {p}" for p in paths[:30]) or "- (none)"
    return (
        "## Goal\n- Collect and analyse the documents the user asked for\n"
        "## Constraints\n- Keep every document recoverable\n"
        "## Progress\n- Fetched documents with the fetch tool\n"
        "## Key Decisions\n- Work through the documents in order\n"
        "## Next Steps\n- Continue fetching\n"
        f"## Critical Context\n{critical}\n"
    )


def session_plan(
    total_calls: int, sizes_kb: Sequence[int], seed: int = 7
) -> list[list[tuple[int, int]]]:
    """Steps of (size_kb, seed) calls; about every third step makes 2-3 parallel calls."""
    rng = random.Random(seed)
    steps: list[list[tuple[int, int]]] = []
    made = 0
    while made < total_calls:
        width = rng.choice([1, 1, 2, 3]) if len(steps) % 3 == 2 else 1
        width = min(width, total_calls - made)
        steps.append([(sizes_kb[(made + k) % len(sizes_kb)], made + k) for k in range(width)])
        made += width
    return steps


def scripted_session(
    plan: list[list[tuple[int, int]]],
    compaction: Callable[[ModelCall], object] = model_summary,
    stream: bool = False,
) -> ScriptedChatModel:
    """A model that follows ``plan`` (one step per agent call) and answers compaction calls."""
    state = {"step": 0}

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

    return ScriptedChatModel(respond, stream=stream)


def make_agent(
    model: ScriptedChatModel,
    formatter: FormatterBase,
    sys_prompt: str = "You are a diligent research agent.",
) -> ReActAgent:
    toolkit = Toolkit()
    toolkit.register_tool_function(fetch)
    agent = ReActAgent(
        name="researcher",
        sys_prompt=sys_prompt,
        model=model,
        formatter=formatter,
        toolkit=toolkit,
        max_iters=500,
        parallel_tool_calls=True,
    )
    agent.set_console_output_enabled(False)
    return agent


def prompt_orphans(messages: list[dict]) -> list[str]:
    """Orphan tool calls/results in a formatted (OpenAI/DashScope layout) prompt."""
    problems = []
    open_calls: dict[str, int] = {}
    for message in messages:
        if message.get("role") == "tool":
            call_id = str(message.get("tool_call_id"))
            if open_calls.get(call_id, 0) == 0:
                problems.append(f"result without call: {call_id}")
            else:
                open_calls[call_id] -= 1
        for call in message.get("tool_calls") or []:
            open_calls[str(call.get("id"))] = open_calls.get(str(call.get("id")), 0) + 1
    problems += [f"call without result: {cid}" for cid, n in open_calls.items() if n > 0]
    return problems


def strip_volatile(prompts: list[list[dict]]) -> list[str]:
    """Prompts with the one part that differs between two runs by construction (the summary's
    wall-clock timestamp) replaced by a placeholder. Saved-result paths are content hashes and
    stay as they are."""
    text = repr(prompts)
    text = re.sub(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:\.\d+)?", "TIME", text)
    return [text]


def tool_ids(msg: Msg, kind: str) -> list[str]:
    if not isinstance(msg.content, list):
        return []
    return [str(b.get("id")) for b in msg.content if isinstance(b, dict) and b.get("type") == kind]


FORMATTERS = [DashScopeChatFormatter, OpenAIChatFormatter]
SIZES_KB = [1, 4, 200, 12, 2, 60, 1, 30, 150, 8, 3, 90]
BIG = make_text(200 * 1024, seed=1)


def result_text(msg: Msg) -> str:
    """The text of the first tool result of ``msg``."""
    output = msg.content[0]["output"]
    return output if isinstance(output, str) else "".join(b.get("text", "") for b in output)


def tool_messages(call: ModelCall) -> list[dict]:
    """The ``tool`` messages of a formatted prompt."""
    return [m for m in call.messages if m.get("role") == "tool"]


def tool_message_text(message: dict) -> str:
    """The text of one formatted ``tool`` message."""
    content = message.get("content")
    if isinstance(content, list):
        return "".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return str(content)
