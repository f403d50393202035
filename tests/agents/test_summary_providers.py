"""The model-written compaction summary through the real clients of the installed AgentScope
(``OpenAIChatModel`` on 1.x and 2.x, and the ``openai`` client underneath) against loopback
servers that behave like real providers (issue 30):

- a strict server answers HTTP 400 to structured output and to a forced tool choice, as some
  OpenAI-compatible servers and DeepSeek's thinking mode do: the summary must not need either;
- a model that answers garbage twice gives the extractive summary after two attempts;
- a model that echoes its input back (as Gemma 3 270M on llama.cpp did) is not taken for a
  summary, even when the echo holds six valid sections (the previous memo it was given).

Plus the echo check itself on the core's own prompt, without a framework."""

from __future__ import annotations

from pathlib import Path

import pytest
from harness_common import COMPACTION_MARKER, SIX_SECTIONS, Script, agent_file
from llm_servers import ModelServer, Reply, plain_server_rejects, system_text

from agentscope_context_ext import build_agent
from agentscope_context_ext.compat import agentscope_major
from agentscope_context_ext.core.summary import (
    SECTION_TITLES,
    STRICT_SUFFIX,
    CompactSummary,
    compaction_prompt,
    echoes_input,
    parse_summary,
)

TOOL = "harness_common:fetch" if agentscope_major() >= 2 else "agent_harness:fetch"
"""A tool returning large deterministic text (2.x takes a plain string, 1.x a ToolResponse)."""


async def ask(agent, text: str) -> None:
    """One user turn, on whichever AgentScope is installed."""
    if agentscope_major() >= 2:
        from agentscope.message import UserMsg

        await agent.reply(UserMsg("user", text))
    else:
        from agentscope.message import Msg

        await agent(Msg("user", text, "user"))


async def run(server: ModelServer, workspace: Path, stream: bool) -> tuple[list[dict], object]:
    """An agent file's agent on ``server`` collects documents until it compacted a few times;
    returns the ``compaction_finished`` events and the final summary."""
    spec = agent_file(
        "openai-compatible",
        server.url,
        stream,
        TOOL,
        workspace=str(workspace),
        long_term_memory={"enabled": False},
        # what the summary model is sent and answers, asked at each compaction
        compaction={"background_summary": False},
    )
    agent = build_agent(spec)
    manager = agent.context_manager
    finished: list[dict] = []
    manager.subscribe(
        lambda event: finished.append(event.data) if event.type == "compaction_finished" else None
    )
    await ask(agent, "collect the documents")
    return finished, manager.port.summary


def compaction_requests(server: ModelServer) -> list[dict]:
    return [r for r in server.requests if COMPACTION_MARKER in system_text(r)]


def user_content(request: dict) -> str:
    """The user message of a compaction request, as text (a string or a list of text parts)."""
    content = [m for m in request["messages"] if m.get("role") == "user"][-1]["content"]
    if isinstance(content, list):
        return "".join(str(part.get("text", "")) for part in content)
    return str(content)


@pytest.mark.parametrize("stream", [True, False])
async def test_a_strict_server_gets_plain_text_requests_and_writes_the_summary(
    workspace: Path, stream: bool
) -> None:
    with ModelServer("openai", Script(), reject=plain_server_rejects) as server:
        finished, summary = await run(server, workspace, stream)
    assert server.rejected == [], "a request carried response_format or a forced tool_choice"
    assert len(finished) >= 2
    assert all(f["summary_source"] == "llm" and f["model_attempts"] == 1 for f in finished)
    assert summary.source == "llm" and summary.goal and summary.next_steps
    for request in compaction_requests(server):
        assert "tools" not in request and "tool_choice" not in request
        assert "response_format" not in request


def test_the_strict_server_refuses_what_it_should() -> None:
    """The server above is strict for real: it refuses both kinds of request."""
    assert plain_server_rejects({"response_format": {"type": "json_object"}})
    assert plain_server_rejects({"tool_choice": "required"})
    assert plain_server_rejects({"tool_choice": {"type": "function", "function": {"name": "x"}}})
    for accepted in ({}, {"tool_choice": "auto"}, {"tool_choice": "none"}):
        assert plain_server_rejects(accepted) is None


async def test_garbage_twice_gives_the_extractive_summary_after_two_attempts(
    workspace: Path,
) -> None:
    with ModelServer("openai", Script(summary="Sure! The agent fetched documents.")) as server:
        finished, summary = await run(server, workspace, True)
    assert finished and summary.source == "extractive"
    for event in finished:
        assert event["summary_source"] == "extractive"
        assert event["model_attempts"] == 2 and event["model_failures"] == 2
        assert event["model_failure"] == "unusable answer", "why, for the log and the notice"
    requests = compaction_requests(server)
    assert len(requests) == 2 * len(finished)
    # the second attempt of each compaction is the stricter one
    assert [STRICT_SUFFIX.strip() in system_text(r) for r in requests] == [False, True] * len(
        finished
    )


class Echo(Script):
    """A model that writes one summary, then answers every compaction with its own input (the
    user content, or the system instruction and the user content)."""

    def __init__(self, with_instruction: bool) -> None:
        super().__init__()
        self.with_instruction = with_instruction
        self.summaries = 0

    def __call__(self, request: dict) -> Reply:
        if COMPACTION_MARKER not in system_text(request):
            return super().__call__(request)
        self.summaries += 1
        if self.summaries == 1:
            return Reply(SIX_SECTIONS)
        echo = user_content(request)
        if self.with_instruction:
            echo = f"{system_text(request)}\n\n{echo}"
        return Reply(echo)


@pytest.mark.parametrize("with_instruction", [False, True])
async def test_a_model_that_echoes_its_input_is_not_taken_for_a_summary(
    workspace: Path, with_instruction: bool
) -> None:
    script = Echo(with_instruction)
    with ModelServer("openai", script) as server:
        finished, summary = await run(server, workspace, True)
    assert len(finished) >= 2
    assert finished[0]["summary_source"] == "llm"
    # the echo of the first memo and the new messages parses as six sections: still refused
    echoed = [user_content(r) for r in compaction_requests(server)[1:]]
    assert any(parse_summary(text) is not None for text in echoed)
    for event in finished[1:]:
        assert event["summary_source"] == "extractive"
        assert event["model_attempts"] == 2 and event["model_failures"] == 2
    assert summary.source == "extractive"
    assert "# New messages" not in summary.render() and "[tool call" not in summary.render()


# ------------------------------------------------------------------ the check, on its own

NEW_MESSAGES = (
    "[user:user 2026-12-06 10:00:00]\nMigrate the billing service to Postgres 16\n\n"
    "[assistant:worker 2026-12-06 10:00:05]\nDumping the schema first.\n"
    "[tool call run id=c1] command=pg_dump --schema-only billing > /srv/dump.sql\n"
    "[tool result run id=c1] pg_dump: dumped 42 tables to /srv/dump.sql"
)
MEMO = parse_summary(SIX_SECTIONS)


@pytest.mark.parametrize("previous", [None, MEMO])
def test_an_echo_of_the_prompt_is_recognised(previous: CompactSummary | None) -> None:
    instruction, content = compaction_prompt(
        NEW_MESSAGES, previous, language="English", max_tokens=800
    )
    assert echoes_input(content, instruction, content)
    assert echoes_input(f"{instruction}\n\n{content}", instruction, content)
    # the messages without the input's headings
    assert echoes_input(NEW_MESSAGES, instruction, content)
    # the instruction alone, as bullets
    echo = "\n".join(f"- {line}" for line in instruction.splitlines() if len(line) > 40)
    assert echoes_input(echo, instruction, content)


def test_a_real_summary_is_not_an_echo() -> None:
    instruction, content = compaction_prompt(NEW_MESSAGES, MEMO, language="English", max_tokens=800)
    # the previous memo kept word for word, merged with the new work, is a summary
    answer = SIX_SECTIONS.replace(
        "## Progress\n",
        "## Progress\n- Dumped the schema of `billing` to `/srv/dump.sql` (42 tables)\n",
    ).replace("## Goal\n", "## Goal\n- Migrate the billing service to Postgres 16\n")
    assert parse_summary(answer) is not None
    assert not echoes_input(answer, instruction, content)
    # the previous memo alone (nothing new worth keeping) is a summary too
    assert not echoes_input(SIX_SECTIONS, instruction, content)


DRAFT = "## Goal\n- a draft goal\n## Progress\n- a draft step\n## Next Steps\n- a draft step\n"


@pytest.mark.parametrize(
    "answer",
    [
        f"```markdown\n{SIX_SECTIONS}```\n",
        f"<think>\nThe memo needs six sections.\n{DRAFT}</think>\n{SIX_SECTIONS}",
        f"{DRAFT}</think>\n\n{SIX_SECTIONS}",  # the opening tag cut off by the server
    ],
)
def test_what_a_provider_wraps_around_the_memo_is_not_part_of_it(answer: str) -> None:
    """Reasoning models served by Ollama or llama.cpp write their thinking into the answer
    text; many models fence the memo."""
    sections = set(SECTION_TITLES)
    expected = parse_summary(SIX_SECTIONS).model_dump(include=sections)
    assert parse_summary(answer).model_dump(include=sections) == expected


SHORT_FIRST_SUMMARY = """## Goal
- Migrate the billing service to Postgres 16
## Constraints
- none stated
## Progress
- Dumped the schema: `pg_dump --schema-only billing > /srv/dump.sql` (42 tables)
## Key Decisions
- Schema first, data later
## Next Steps
- Restore `/srv/dump.sql` on Postgres 16
## Critical Context
- `/srv/dump.sql`
"""


@pytest.mark.parametrize("style", ["##", "###", "bold"])
def test_a_short_first_summary_is_not_an_echo_of_the_headings(style: str) -> None:
    """One bullet per section, the goal in the user's own words (as the instruction asks): its
    section headings were counted as lines copied from the instruction, and the answer was
    rejected as an echo."""
    instruction, content = compaction_prompt(NEW_MESSAGES, None, language="English", max_tokens=800)
    answer = SHORT_FIRST_SUMMARY
    if style == "###":
        answer = answer.replace("## ", "### ")
    elif style == "bold":
        answer = "\n".join(
            f"**{line[3:]}**" if line.startswith("## ") else line for line in answer.splitlines()
        )
    assert parse_summary(answer) is not None
    assert not echoes_input(answer, instruction, content)


def test_the_user_s_words_alone_under_the_headings_are_still_an_echo() -> None:
    """What stays rejected: the headings with the input's lines under them."""
    instruction, content = compaction_prompt(NEW_MESSAGES, None, language="English", max_tokens=800)
    echo = "\n".join(
        f"## {title}\n{line}"
        for title, line in zip(
            ["Goal", "Constraints", "Progress", "Key Decisions", "Next Steps", "Critical Context"],
            NEW_MESSAGES.splitlines(),
            strict=False,
        )
    )
    assert parse_summary(echo) is not None
    assert echoes_input(echo, instruction, content)
