"""B7 with a model-written summary (``python -m bench.b7_summary_fidelity --base-url URL --model
NAME``): the replay's compaction asks a real AgentScope model on a loopback OpenAI-compatible
server with the package's own summary prompt, and the row is scored on that model's answer; a
model that fails is an extractive fallback, never a model score; a dead server is one
``error:`` line and exit status 2."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from llm_servers import ModelServer, Reply

from agentscope_context_ext import ContextConfig
from agentscope_context_ext.agentfile import build_model
from agentscope_context_ext.core.summary import INSTRUCTION, MESSAGES_HEADING
from agentscope_context_ext.core.transcripts import Record
from agentscope_context_ext.replay import (
    claude_code_compactions,
    claude_code_records,
    latest_single_compaction,
    summary_fidelity,
)

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:  # bench/ is the repository's, not the package's
    sys.path.insert(0, str(REPO))

from bench.b7_summary_fidelity import ModelFailed, check_model, model_settings  # noqa: E402

ANSWER = """## Goal
- Fix the handler in `module_0.py`, `module_1.py` and `module_2.py`.
## Progress
- The handler of `module_0.py` calls `rare_helper_0`; the one of `module_1.py` calls `rare_helper_1`.
## Next Steps
- Go on with the next module.
## Critical Context
- `rare_helper_0`, `rare_helper_1`
"""
"""The scripted model's summary: it names modules 0-2 and the helpers 0 and 1, nothing else."""

NAMED = ["module_0.py", "module_1.py", "module_2.py", "rare_helper_0", "rare_helper_1"]
OMITTED = ["rare_helper_2", "rare_helper_3", "rare_helper_4", "rare_helper_5"]
"""Each helper passes by once in one tool output: no summary keeps it unless it is written."""
REFERENCE = "Fixed " + " ".join(f"`module_{i}.py` (`rare_helper_{i}`)" for i in range(6))


def conversation() -> list[Record]:
    """Thirty steps: a request naming a module, a ``grep`` of it, its output naming a helper."""
    records = []
    for i in range(30):
        records.append(
            Record("user", f"Step {i}: fix the handler in `module_{i}.py`. " + "pad " * 30)
        )
        call = {"command": f"grep -n handler src/module_{i}.py"}
        records.append(
            Record(
                "assistant",
                [
                    {"type": "text", "text": "Checking."},
                    {"type": "tool_use", "id": f"t{i}", "name": "Bash", "input": call},
                ],
            )
        )
        output = f"src/module_{i}.py:12: handler calls rare_helper_{i} here\n" + "line\n" * 20
        records.append(
            Record(
                "system",
                [{"type": "tool_result", "id": f"t{i}", "name": "Bash", "output": output}],
            )
        )
        records.append(Record("assistant", f"Done with step {i}."))
    return records


def user_text(request: dict) -> str:
    """The user messages of a chat-completions request (string or block content), joined."""
    parts = []
    for message in request["messages"]:
        if message["role"] != "user":
            continue
        content = message["content"]
        if isinstance(content, str):
            parts.append(content)
        else:
            parts += [str(block.get("text", "")) for block in content]
    return "\n".join(parts)


def instruction_pattern() -> re.Pattern:
    """The package's summary instruction, whatever token limit and language it states."""
    pattern = re.escape(INSTRUCTION)
    pattern = pattern.replace(re.escape("{max_tokens}"), r"\d+")
    pattern = pattern.replace(re.escape("{language}"), r"\w+")
    return re.compile(pattern + r"(\n\n.*)?", re.DOTALL)  # the strict retry adds a suffix


def system_of(request: dict) -> str:
    """The system message's text (string or block content)."""
    parts = []
    for message in request["messages"]:
        if message["role"] == "system":
            content = message["content"]
            parts += [content] if isinstance(content, str) else [b["text"] for b in content]
    return "\n".join(parts)


AT_THE_TRIGGER = ContextConfig(prompt_cache_price=1.0)
"""Compaction at the trigger: the synthetic conversation's compacted part is then known."""


async def test_the_scored_summary_is_the_model_s_answer_to_the_package_s_prompt() -> None:
    with ModelServer("openai", lambda request: Reply(ANSWER)) as server:
        model, formatter = build_model(model_settings(server.url, "loopback-summarizer"))
        result = await summary_fidelity(
            "synthetic",
            conversation(),
            REFERENCE,
            AT_THE_TRIGGER,
            window=4096,
            compaction_model=model,
            compaction_formatter=formatter,
        )
        requests = list(server.requests)
    # every compaction asked the model once, with the package's summary prompt: its instruction
    # as the system message, the compacted conversation as the user's
    assert result.compactions >= 1 and len(requests) == result.model_attempts
    assert result.model_failures == 0
    for request in requests:
        assert request["model"] == "loopback-summarizer"
        assert instruction_pattern().fullmatch(system_of(request)), system_of(request)[:300]
    first = user_text(requests[0])
    assert first.startswith(MESSAGES_HEADING)
    assert "Step 0: fix the handler in `module_0.py`." in first
    assert "rare_helper_0" in first and "grep -n handler src/module_0.py" in first
    # the row is scored on that answer: what it names counts, what it omits is missing
    assert result.summary_source == "llm" and result.model_written
    assert "Go on with the next module." in result.summary_text
    assert set(NAMED) <= set(result.identifiers)
    assert not set(NAMED) & set(result.missing_from_summary)
    assert set(OMITTED) <= set(result.missing_from_summary)
    assert result.share(result.missing_from_search) == 1.0
    # the extractive summary of the same replay keeps neither helper the model wrote down
    extractive = await summary_fidelity(
        "synthetic", conversation(), REFERENCE, AT_THE_TRIGGER, window=4096
    )
    assert extractive.summary_source == "extractive" and not extractive.model_written
    assert extractive.model_attempts == 0
    assert {"rare_helper_0", "rare_helper_1"} <= set(extractive.missing_from_summary)


async def test_a_model_that_answers_no_summary_is_a_fallback_not_a_model_score() -> None:
    with ModelServer("openai", lambda request: Reply("Sure! Happy to help.")) as server:
        model, formatter = build_model(model_settings(server.url, "chatty"))
        with pytest.raises(ModelFailed, match="no summary the package can parse"):
            await check_model(model, formatter, model_settings(server.url, "chatty"))
        result = await summary_fidelity(
            "synthetic",
            conversation(),
            REFERENCE,
            ContextConfig(),
            window=4096,
            compaction_model=model,
            compaction_formatter=formatter,
        )
    assert result.compactions >= 1
    # the package fell back to extraction: the row says so, and is no model score
    assert result.summary_source == "extractive" and not result.model_written
    assert result.model_attempts >= 2 and result.model_failures == result.model_attempts
    assert "written by extraction" in result.summary_text


async def test_an_http_error_is_one_line_naming_the_server_s_answer() -> None:
    def reject(request: dict) -> str:
        return f"model {request.get('model')!r} not found"

    with ModelServer("openai", lambda request: Reply(ANSWER), reject=reject) as server:
        settings = model_settings(server.url, "missing-model")
        model, formatter = build_model(settings)
        with pytest.raises(ModelFailed) as failed:
            await check_model(model, formatter, settings)
    message = str(failed.value)
    assert "\n" not in message
    assert server.url in message and "400" in message and "not found" in message


def claude_code_session(folder: Path) -> Path:
    """:func:`conversation` as a Claude Code session file that Claude Code compacted at its
    end, with :data:`REFERENCE` as its summary: ``folder`` is then a shared data folder."""
    lines = []
    for record in conversation():
        if record.role == "system":  # tool results: a user line, as Claude Code writes them
            block = record.content[0]
            result = {"type": "tool_result", "tool_use_id": block["id"], "content": block["output"]}
            lines.append({"type": "user", "message": {"role": "user", "content": [result]}})
        else:
            lines.append(
                {"type": record.role, "message": {"role": record.role, "content": record.content}}
            )
    lines.append({"type": "system", "subtype": "compact_boundary", "compactMetadata": {}})
    summary = {"role": "user", "content": REFERENCE}
    lines.append({"type": "user", "isCompactSummary": True, "message": summary})
    path = folder / "transcripts" / "claude-code" / "synthetic-session.jsonl"
    path.parent.mkdir(parents=True)
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n", encoding="utf-8")
    return path


def bench_b7(*flags: str, data: Path) -> subprocess.CompletedProcess:
    """``python -m bench.b7_summary_fidelity`` on the shared data folder ``data``."""
    return subprocess.run(
        [sys.executable, "-m", "bench.b7_summary_fidelity", "--quick", *flags],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "ACE_SHARED_DATA": str(data)},
    )


def test_the_cli_prints_the_model_s_row_and_the_extractive_one(tmp_path: Path) -> None:
    claude_code_session(tmp_path)
    with ModelServer("openai", lambda request: Reply(ANSWER)) as server:
        done = bench_b7("--base-url", server.url, "--model", "loopback-summarizer", data=tmp_path)
        asked = [user_text(request) for request in server.requests]
    assert "Traceback" not in done.stderr, done.stderr
    # a test summary first, then the one scored compaction: the window was found without it
    assert len(asked) == 2 and "Step 0: fix the handler" in asked[1]
    assert f"asking loopback-summarizer at {server.url}" in done.stderr
    assert "B7 syntheti#1: summary by the model (1 call(s), 0 failed)" in done.stderr
    row = next(line for line in done.stdout.splitlines() if line.startswith("| syntheti#1 "))
    assert row.endswith("| the model (1 call(s)) |")
    # Claude Code's summary names six modules and six helpers; the model wrote down five
    assert "Summaries written by `loopback-summarizer`" in done.stdout
    assert "-> NOT met" in done.stdout and done.returncode == 1
    # without the flags: the extractive B7, its table as ``python -m bench`` prints it
    plain = bench_b7(data=tmp_path)
    assert "Traceback" not in plain.stderr, plain.stderr
    header = next(line for line in plain.stdout.splitlines() if line.startswith("| session "))
    assert header.endswith("| summary tokens (ours / CC) |")
    assert "| syntheti#1 " in plain.stdout and plain.returncode == 1


def test_agent_sends_the_agent_file_s_model_compat_and_summary_limits(tmp_path: Path) -> None:
    """``--agent FILE``: the model as the agent file has it (its compat shapes, options) and
    its summary call's limits; ``--base-url`` could not send ``compat`` (a llama-cpp-python
    server then answered every summary call with HTTP 500)."""
    claude_code_session(tmp_path)
    agent = {
        "model": {
            "provider": "openai-compatible",
            "model": "agent-file-summarizer",
            "base_url": "",
            "options": {"temperature": 0.1},
            "compat": {"unescape_html": True},
        },
        "context": {"compaction": {"summary_output_tokens": 777}},
    }
    entity_answer = ANSWER.replace("Go on with", "Go on with `it&#39;s`; go on with")
    with ModelServer("openai", lambda request: Reply(entity_answer)) as server:
        agent["model"]["base_url"] = server.url
        (tmp_path / "agent.yaml").write_text(json.dumps(agent))
        done = bench_b7("--agent", str(tmp_path / "agent.yaml"), data=tmp_path)
        requests = list(server.requests)
    assert "Traceback" not in done.stderr, done.stderr
    assert len(requests) == 2, done.stderr
    for request in requests:
        assert request["model"] == "agent-file-summarizer" and request["temperature"] == 0.1
        assert all(isinstance(m["content"], str) for m in request["messages"])
        assert request["max_tokens"] == 777 and "max_completion_tokens" not in request
    assert "B7 syntheti#1: summary by the model (1 call(s), 0 failed)" in done.stderr
    assert "Summaries written by `agent-file-summarizer`" in done.stdout


def test_agent_is_not_given_with_base_url() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "bench.b7_summary_fidelity", "--agent", "a.yaml", "--model", "m"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 2
    assert "--agent says the model: not with --base-url, --model or --api-key" in done.stderr


def test_a_dead_server_is_one_error_line_and_exit_status_2() -> None:
    with socket.socket() as probe:  # a loopback port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    done = subprocess.run(
        [sys.executable, "-m", "bench.b7_summary_fidelity", "--base-url", url, "--model", "m"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and url in errors[0], done.stderr
    assert done.stdout == ""


def test_base_url_without_model_is_a_usage_error() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "bench.b7_summary_fidelity", "--base-url", "http://127.0.0.1:9/v1"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 2
    assert "--base-url and --model go together" in done.stderr


async def test_claude_code_s_own_summary_as_the_model_s_answer_scores_high(
    shared_data: Path,
) -> None:
    """On a real session (the window bisected coarsely): answering with Claude Code's own
    summary, the model's summary keeps nearly all of its names."""
    path = (
        shared_data / "transcripts" / "claude-code" / "8463c716-a2ea-4c14-9efa-87158ebd9f20.jsonl"
    )
    (point,) = claude_code_compactions(path)
    lines = [line.strip() for line in point.summary.splitlines() if line.strip()]
    answer = (
        "## Goal\n- Continue the session's work.\n## Progress\n"
        + "\n".join(f"- {line}" for line in lines if not line.startswith("```"))
        + "\n## Next Steps\n- Continue where it ends.\n"
    )
    messages = claude_code_records(path, until_line=point.line)
    window = await latest_single_compaction(messages, ContextConfig(), precision=0.1)
    with ModelServer("openai", lambda request: Reply(answer)) as server:
        model, formatter = build_model(model_settings(server.url, "claude-code-echo"))
        result = await summary_fidelity(
            "8463c716#1",
            messages,
            point.summary,
            # a budget that holds Claude Code's whole summary, whatever the window
            ContextConfig.model_validate({"compaction": {"max_summary_tokens": 6000}}),
            window=window,
            compaction_model=model,
            compaction_formatter=formatter,
        )
        asked = [user_text(request) for request in server.requests]
    assert result.compactions == 1 and result.model_written
    assert len(asked) == result.model_attempts and result.model_failures == 0
    assert all(text.startswith(MESSAGES_HEADING) for text in asked)
    assert len(result.identifiers) >= 40
    assert "- Continue the session's work." in result.summary_text
    assert result.share(result.missing_from_summary) >= 0.9, result.missing_from_summary
