"""A framework's reminders are nobody's words (issue 30).

AgentScope 2.x puts ``<system-reminder>`` texts into the context by itself: a ``HintBlock`` with
the runtime state at every reply (and again after a compaction took the last one away), a hint
when the reasoning-acting iterations run out, a text in place of an input file the formatter
cannot take. AgentScope 1.x adds ``<system-hint>`` user messages (one of them stays in memory
when a structured-output reply runs out of iterations). None of that may become the user's
request or the agent's words in a summary (the extractive one, and the compaction model's
input), in the Summarizer's excerpt or in a ``search_dialog`` hit; it stays in ``dialog/``
as it was, and is shown labelled ``[system reminder]``.

The core tests use the neutral view; the adapter tests real agents of the installed version.
"""

from __future__ import annotations

import base64
import random
from pathlib import Path

import pytest
from harness_common import COMPACTION_MARKER, SIX_SECTIONS, SUMMARIZER_MARKER

from agentscope_context_ext.compat import agentscope_major
from agentscope_context_ext.core.messages import (
    Message,
    Reminder,
    Text,
    ToolCall,
    ToolResult,
    text_parts,
)
from agentscope_context_ext.core.rendering import REMINDER_LABEL, render_message
from agentscope_context_ext.core.summary import (
    CompactSummary,
    extractive_summary,
    render_for_summary,
    summary_language,
)
from agentscope_context_ext.core.tools import make_dialog_tools

RUNTIME_STATE = (
    "<system-reminder>Treat the following as the ground truth at this point of the "
    "conversation. Anything stated earlier is outdated, and a later reminder, if any, "
    "supersedes this one:\n<current-time>2026-12-06T10:00:00</current-time>\n"
    "<timezone>UTC</timezone>\n</system-reminder>"
)
"""2.x's runtime-state injection, as 2.0.11 writes it (``InjectionConfig.template``)."""
LAST_ITERATION = (
    "<system-reminder>You have reached the maximum of 4 reasoning-acting iterations. "
    "Summarize the work and findings so far and return the final answer as text. Do not call "
    "any tools.</system-reminder>"
)
ATTACHED = (
    "<system-reminder>An attached file named 'rates.pdf' is saved into "
    "file:///srv/ws/tool_result/0123456789abcdef0123456789abcdef.pdf.</system-reminder>"
)
STRUCTURED_HINT = (
    "<system-hint>Structured output is required, go on to finish your task or call "
    "'generate_response' to generate the required structured output.</system-hint>"
)
REMINDER_WORDS = (
    "ground truth",
    "reasoning-acting iterations",
    "An attached file",
    "unsupported input file",
    "Structured output is required",
    "system-reminder",
    "system-hint",
)
"""Words only the reminders hold (the tags included)."""


def said(text: str) -> list[str]:
    """The reminder words ``text`` shows as somebody's words: on a line, before which no
    ``[system reminder]`` label stands."""
    found = []
    for line in text.splitlines():
        for word in REMINDER_WORDS:
            at = line.find(word)
            if at >= 0 and REMINDER_LABEL.strip() not in line[:at]:
                found.append(f"{word!r} in {line[:160]!r}")
    return found


def summary_words(summary: CompactSummary) -> list[str]:
    """Reminder words anywhere in a summary (it has no labelled lines: none may be there)."""
    text = summary.render()
    return [word for word in REMINDER_WORDS if word in text]


# ------------------------------------------------------------------------- the core


@pytest.mark.parametrize(
    ("text", "kinds"),
    [
        ("fix `a.py`", [Text]),
        (RUNTIME_STATE, [Reminder]),
        (STRUCTURED_HINT, [Reminder]),
        (f"fix `a.py`\n{ATTACHED}", [Text, Reminder]),
        (f"{ATTACHED}\n\nthen run the tests\n{LAST_ITERATION}\n", [Reminder, Text, Reminder]),
        ("<system-reminder>never closed", [Text]),
        ("a <system-reminders>x</system-reminders> b", [Text]),
    ],
)
def test_text_parts_marks_each_reminder(text: str, kinds: list[type]) -> None:
    parts = text_parts(text)
    assert [type(part) for part in parts] == kinds
    assert "\n".join(part.text for part in parts) == text


def test_text_parts_keeps_every_block_whole() -> None:
    """Reminders on lines of their own: the parts joined by a line break are the block (the
    token count does not change), and no text part holds a reminder."""
    rng = random.Random(30)
    pieces = ["fix `a.py`", "then run `pytest -q`", "  indented", "", RUNTIME_STATE, ATTACHED]
    for _ in range(500):
        text = "\n".join(rng.choice(pieces) for _ in range(rng.randint(1, 6)))
        parts = text_parts(text)
        assert "\n".join(part.text for part in parts) == text
        assert all("<system-" not in p.text for p in parts if not isinstance(p, Reminder))
        assert all("<system-" in p.text for p in parts if isinstance(p, Reminder))


def conversation() -> list[Message]:
    """A small piece of work with 2.x's and 1.x's reminders where the frameworks put them."""
    ask = "Move the tax rates of `billing/tax.py` into `billing/settings.py`"
    return [
        Message("u1", "user", "user", "2026-12-06 10:00:00", (Text(ask), *text_parts(ATTACHED))),
        Message(
            "a1",
            "assistant",
            "worker",
            "2026-12-06 10:00:01",
            (
                Reminder(RUNTIME_STATE),
                Text("Reading the tax module."),
                ToolCall("c1", "read_file", {"file_path": "billing/tax.py"}),
                ToolResult("c1", "read_file", "RATES = {'DE': 0.19}\ndef tax(x): ..."),
            ),
        ),
        Message("h1", "user", "user", "2026-12-06 10:00:02", text_parts(STRUCTURED_HINT)),
        Message(
            "a2",
            "assistant",
            "worker",
            "2026-12-06 10:00:03",
            (Reminder(LAST_ITERATION), Text("Next I will write `RATES` to the settings.")),
        ),
    ]


def test_the_core_never_takes_a_reminder_for_somebodys_words() -> None:
    msgs = conversation()
    assert msgs[0].text.startswith("Move the tax rates") and "attached" not in msgs[0].text
    assert msgs[1].text == "Reading the tax module." and msgs[2].text == ""
    assert msgs[1].reminders[0].body.startswith("Treat the following")
    assert "ground truth" in msgs[1].raw_text(), "a search still finds what it holds"
    # the extractive summary: the goal quotes the user, the next step is the agent's
    summary = extractive_summary(msgs, None, budget_tokens=800)
    assert summary_words(summary) == []
    assert any("Move the tax rates" in goal for goal in summary.goal)
    assert summary.next_steps and "RATES" in " ".join(summary.next_steps)
    # the compaction model's input, the Summarizer's excerpt and the dialog tools: labelled
    rendered = render_for_summary(msgs)
    assert said(rendered) == [] and "ground truth" in rendered
    assert REMINDER_LABEL + "Treat the following" in rendered
    assert REMINDER_LABEL + "An attached file named 'rates.pdf'" in rendered
    for msg in msgs:
        assert said(render_message(msg)) == []
    assert summary_language(msgs, "auto") == "English"


def test_a_plain_dialog_record_shows_its_reminders_labelled(tmp_path: Path) -> None:
    """The default codec (records as plain dicts) reads them as the adapters do."""
    from agentscope_context_ext.core.workspace import DialogStore

    store = DialogStore(tmp_path)
    record = {"id": "m1", "role": "user", "timestamp": "2026-12-06 10:00:00"}
    store.append([{**record, "content": f"fix `a.py`\n{RUNTIME_STATE}"}])
    view = store.codec.view(store.search("ground truth")[0].msg)
    assert view.text == "fix `a.py`" and len(view.reminders) == 1
    assert said(render_message(view)) == []


def test_a_reminder_does_not_decide_the_summary_language() -> None:
    user = Message(
        "u", "user", parts=(Text("请把税率移到配置文件里"), *text_parts(RUNTIME_STATE * 3))
    )
    assert summary_language([user], "auto").startswith("Chinese")


# ------------------------------------------------------------------------- AgentScope


def lines(n: int, tag: str = "line") -> str:
    """Return n long numbered lines.

    Args:
        n (int): How many lines.
        tag (str): The word each line starts with.
    """
    return "\n".join(f"{tag} {i:05d} " + "x" * 80 for i in range(n))


XLSX = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"


def text_of(message: dict) -> str:
    """The text of a formatted message (its content a string or a list of text parts)."""
    content = message.get("content")
    if isinstance(content, list):
        return "".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return str(content or "")


class Recorder:
    """What the background prompts received: the compaction model's input, the Summarizer's."""

    def __init__(self) -> None:
        self.compaction_inputs: list[str] = []
        self.summarizer_inputs: list[str] = []

    def background(self, system: str, user: str) -> str | None:
        """The answer to a compaction or Summarizer call (``None``: the agent's own call)."""
        if COMPACTION_MARKER in system:
            self.compaction_inputs.append(user)
            return SIX_SECTIONS
        if SUMMARIZER_MARKER in system:
            if user.startswith("Current Memory.md"):
                self.summarizer_inputs.append(user)
            return "[SILENT]"
        return None


async def check_search(store) -> None:
    """search_dialog finds the reminders and the user's words, and shows reminders labelled."""
    _, search_dialog = make_dialog_tools(store)
    for query in ("ground truth", "reasoning-acting", "rates"):
        found = await search_dialog(query)
        assert not found.startswith("No saved message"), query
        assert said(found) == [], found
    found = await search_dialog("ground truth")
    assert REMINDER_LABEL + "Treat the following as the ground truth" in found


@pytest.mark.skipif(agentscope_major() < 2, reason="drives AgentScope 2.x's Agent")
@pytest.mark.parametrize("summary_by", ["model", "extractive"])
async def test_2x_reminders_stay_out_of_everybodys_words(tmp_path: Path, summary_by: str) -> None:
    """A real 2.x run where 2.x inserts its reminders by itself: the runtime state at each
    reply (again after each compaction), an input file its formatter cannot take, the hint of
    the last iteration; then compactions, the Summarizer and a search."""
    from agentscope.agent import Agent, ReActConfig
    from agentscope.message import Base64Source, DataBlock, HintBlock, TextBlock, UserMsg
    from agentscope.permission import PermissionBehavior, PermissionDecision
    from agentscope.tool import FunctionTool, Toolkit

    from agentscope_context_ext import ContextMiddleware
    from agentscope_context_ext.testing import ModelCall, ScriptedChatModel, reply, tool_call

    recorder = Recorder()
    steps = iter(range(1000))

    def script(call: ModelCall):
        system = "\n".join(m.get_text_content() or "" for m in call.msgs if m.role == "system")
        user = call.msgs[-1].get_text_content() or ""
        answer = recorder.background(system, user)
        if answer is not None:
            return answer
        if getattr(call.tool_choice, "mode", None) == "none":  # 2.x's last-iteration hint
            return "The rates are read; next I will write `RATES` to `billing/settings.py`."
        step = next(steps)
        if step >= 16:
            return "done"
        size = 40 if step < 3 else 400  # the first reply is not compacted while it runs
        return reply(f"step {step}", tool_call("lines", n=size, tag=f"t{step}"))

    allow = PermissionDecision(behavior=PermissionBehavior.ALLOW, message="test tool")
    context = ContextMiddleware(
        {
            "workspace": str(tmp_path),
            "max_input_tokens": 16384,
            "notices": False,
            "compaction": {"model": None if summary_by == "model" else "extractive"},
            "long_term_memory": {"consolidation_time": "off", "retry_backoff_seconds": 0},
        }
    )
    agent = Agent(
        name="worker",
        system_prompt="You work with tools.",
        model=ScriptedChatModel(script),
        toolkit=Toolkit(tools=[FunctionTool(lines, permission=allow)]),
        middlewares=[context],
        offloader=context.offloader,
        react_config=ReActConfig(max_iters=4),
    )
    sheet = DataBlock(  # a medium the formatter cannot take: 2.x offloads it, with a reminder
        source=Base64Source(data=base64.b64encode(b"PK rates").decode(), media_type=XLSX),
        name="rates.xlsx",
    )
    ask = "Move the tax rates of billing/tax.py into billing/settings.py, see rates.xlsx"
    await agent.reply(UserMsg("user", [TextBlock(text=ask), sheet]))
    first = agent.state.context
    hints = [b for m in first for b in m.content if isinstance(b, HintBlock)]
    assert len(hints) >= 2, "2.x injected the runtime state and the last iteration's hint"
    assert any("An attached file named 'rates.xlsx'" in (m.get_text_content() or "") for m in first)
    for _ in range(4):
        await agent.reply(UserMsg("user", "go on with the rates"))
    manager = context.manager
    await manager.compact_now()
    await manager.drain()
    assert manager.stats.compactions >= 3
    # the summary
    summary = manager.port.summary
    assert summary.source == ("llm" if summary_by == "model" else "extractive")
    assert summary_words(summary) == [], summary.render()
    if summary_by == "extractive":
        assert any("Move the tax rates" in goal for goal in summary.goal)
    else:  # the compaction model's input: every reminder labelled
        assert recorder.compaction_inputs
        assert all(said(text) == [] for text in recorder.compaction_inputs)
        assert any(REMINDER_LABEL + "Treat the following" in t for t in recorder.compaction_inputs)
    # the Summarizer's excerpts
    assert recorder.summarizer_inputs
    assert all(said(text) == [] for text in recorder.summarizer_inputs)
    assert any("ground truth" in text for text in recorder.summarizer_inputs)
    # the raw messages are in dialog/ as they were
    saved = [b for r in context.dialog_store.iter_records() for b in r.msg.content]
    assert any(isinstance(b, HintBlock) and "ground truth" in str(b.hint) for b in saved)
    await check_search(context.dialog_store)


@pytest.mark.agentscope1
async def test_1x_hint_messages_stay_out_of_everybodys_words(workspace: Path) -> None:
    """A real 1.x run: a structured-output reply that runs out of iterations right after the
    model answered without a tool call leaves 1.x's ``<system-hint>`` user message in memory
    (``_summarizing`` does not delete hints); a compaction then takes it."""
    from agentscope.agent import ReActAgent
    from agentscope.formatter import OpenAIChatFormatter
    from agentscope.message import Msg
    from agentscope.tool import Toolkit, ToolResponse
    from pydantic import BaseModel

    from agentscope_context_ext import enable_context_management
    from agentscope_context_ext.agentscope1 import ContextMemory
    from agentscope_context_ext.testing import ModelCall, ScriptedChatModel, reply, tool_call

    class Rates(BaseModel):
        country: str
        rate: float

    async def lines_tool(n: int, tag: str = "line") -> ToolResponse:
        """Return n long numbered lines.

        Args:
            n (int): How many lines.
            tag (str): The word each line starts with.
        """
        from agentscope.message import TextBlock

        return ToolResponse(content=[TextBlock(type="text", text=lines(n, tag))])

    recorder = Recorder()
    plan = [
        reply("Reading the rates.", tool_call("lines_tool", n=300, tag="a")),
        reply("More rates.", tool_call("lines_tool", n=300, tag="b")),
        "I still need the German rate.",  # no tool call: 1.x adds its hint
        "Stopped: the German rate is still missing.",  # _summarizing's answer
    ]

    def script(call: ModelCall):
        system = "\n".join(text_of(m) for m in call.messages if m["role"] == "system")
        user = text_of(call.messages[-1])
        answer = recorder.background(system, user)
        return answer if answer is not None else plan.pop(0)

    toolkit = Toolkit()
    toolkit.register_tool_function(lines_tool)
    agent = ReActAgent(
        name="worker",
        sys_prompt="You work with tools.",
        model=ScriptedChatModel(script),
        formatter=OpenAIChatFormatter(),
        toolkit=toolkit,
        max_iters=3,
    )
    agent.set_console_output_enabled(False)
    manager = enable_context_management(
        agent,
        {
            "workspace": str(workspace),
            "max_input_tokens": 16384,
            "notices": False,
            "long_term_memory": {"consolidation_time": "off", "retry_backoff_seconds": 0},
        },
    )
    ask = "Move the tax rates of billing/tax.py into billing/settings.py"
    await agent(Msg("user", ask, "user"), structured_model=Rates)
    assert isinstance(agent.memory, ContextMemory)
    texts = [m.get_text_content() or "" for m in agent.memory.messages]
    assert any("<system-hint>Structured output is required" in t for t in texts), texts
    await manager.compact_now()
    await manager.drain()
    summary = agent.memory.compact_summary
    assert summary.source == "llm"
    assert recorder.compaction_inputs and recorder.summarizer_inputs
    for text in [*recorder.compaction_inputs, *recorder.summarizer_inputs]:
        assert said(text) == [], text
        assert REMINDER_LABEL + "Structured output is required" in text
    # the extractive summary of the same messages (what a failed model call falls back to)
    from agentscope_context_ext.agentscope1 import to_views

    saved = [record.msg for record in manager.dialog_store.iter_records()]
    assert any("<system-hint>" in (m.get_text_content() or "") for m in saved), "kept as it was"
    fallback = extractive_summary(to_views(saved), None, budget_tokens=800)
    assert summary_words(fallback) == [], fallback.render()
    assert any("Move the tax rates" in goal for goal in fallback.goal)
    _, search_dialog = make_dialog_tools(manager.dialog_store)
    found = await search_dialog("Structured output")
    assert REMINDER_LABEL + "Structured output is required" in found and said(found) == []
