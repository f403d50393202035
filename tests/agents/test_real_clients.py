"""Through the real client stack (issue 16), on the installed AgentScope (1.x or 2.x): an agent
built from an agent file (1.x: a ``ReActAgent``; 2.x: an ``Agent`` with ``ContextMiddleware``)
talks to loopback servers speaking the OpenAI chat-completions protocol (streaming SSE with
tool-call deltas, and non-streaming) and the Ollama chat protocol, through AgentScope's
``OpenAIChatModel`` / ``OllamaChatModel`` and the ``openai`` / ``ollama`` clients; ``chat`` and
``consolidate`` with an agent file. The agent is driven through the adapter's ``ManagedAgent``.
Loopback only, bounded scripts."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
import yaml
from harness_common import (
    COMPACTION_MARKER,
    CONSOLIDATOR_MARKER,
    SUMMARIZER_MARKER,
    USAGE_OFFSET,
    Script,
    agent_file,
    sent_tool_texts,
)
from llm_servers import ModelServer, Reply, system_text

from agentscope_context_ext import ConfigError, LongTermMemory, build_agent
from agentscope_context_ext.adapter import installed
from agentscope_context_ext.cli import main
from agentscope_context_ext.compat import agentscope_major

TOOL = "harness_common:fetch" if agentscope_major() >= 2 else "agent_harness:fetch"
"""The ``fetch`` tool an agent file names, of the installed AgentScope's kind: 2.x wraps a
function returning text, a 1.x toolkit takes a function returning a ``ToolResponse``."""


def managed(spec: dict) -> object:
    """The agent an agent file describes, behind the adapter's facade."""
    return installed.ManagedAgent(build_agent(spec))


@pytest.mark.parametrize(
    ("protocol", "provider", "stream"),
    [
        ("openai", "openai-compatible", True),
        ("openai", "openai-compatible", False),
        ("ollama", "ollama", True),
        ("ollama", "ollama", False),
    ],
)
async def test_an_agent_file_agent_through_the_real_client(
    workspace: Path, protocol: str, provider: str, stream: bool
) -> None:
    script = Script()
    with ModelServer(protocol, script, usage_offset=USAGE_OFFSET) as server:
        # the summary asked at each compaction, through the real client (written ahead:
        # tests/served/test_summary_ahead_served.py)
        sync = {"background_summary": False}
        spec = agent_file(
            provider, server.url, stream, TOOL, workspace=str(workspace), compaction=sync
        )
        agent = managed(spec)
        manager = agent.manager
        final = await agent.ask("collect the documents")
        await manager.drain()
    assert final == "All documents fetched."
    # truncation: what the provider received is the excerpt with its notice
    assert manager.stats.truncations >= 1
    assert any("<<<TRUNCATED>>>" in text for text in sent_tool_texts(server))
    # compaction with the model-written summary, parsed into the six sections
    assert manager.stats.compactions >= 1
    summary = manager.port.summary
    assert summary.source == "llm"
    assert summary.goal and summary.constraints and summary.progress
    assert summary.key_decisions and summary.next_steps and summary.critical_context
    # the Summarizer's tool call went through the real client and wrote Memory.md
    assert script.summarizer_calls >= 1
    assert "User wants every document kept" in LongTermMemory(workspace).read()
    # the provider's reported prompt_tokens reached the count: the gap is reported and judged
    # a count error of a fixed offset (the server's own count of what it received, +USAGE_OFFSET), and
    # calibrate_with_usage shifts our count by it when it is over ours (ours is the floor)
    error = manager.stats.token_count_error
    assert error is not None and abs(error) < 0.05
    last = max(
        i
        for i, r in enumerate(server.requests)
        if COMPACTION_MARKER not in system_text(r) and SUMMARIZER_MARKER not in system_text(r)
    )
    reported = server.requests[last]["_reported_prompt_tokens"]
    verdict = manager.stats.token_count
    assert (verdict.kind, verdict.form) == ("count_error", "offset")
    assert abs(verdict.offset + error * reported) <= 2, "the offset is the last call's gap"
    calibration = manager.pipeline.count.calibration
    assert calibration == max(0, round(verdict.offset))
    assert (await manager.count()).calibration == calibration


@pytest.mark.parametrize("answer", ["", "no sections at all, just prose"])
async def test_a_malformed_summary_answer_falls_back(workspace: Path, answer: str) -> None:
    with ModelServer("openai", Script(summary=answer)) as server:
        spec = agent_file(
            "openai-compatible",
            server.url,
            True,
            TOOL,
            workspace=str(workspace),
            long_term_memory={"enabled": False},
        )
        agent = managed(spec)
        await agent.ask("collect the documents")
    assert agent.manager.stats.compactions >= 1
    assert agent.manager.port.summary.source == "extractive"
    assert any(COMPACTION_MARKER in system_text(r) for r in server.requests), "it was asked"


def test_bad_agent_files_are_one_clear_error(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    base = {"model": {"provider": "openai-compatible", "model": "m", "base_url": "http://x:1"}}
    cases = [
        ({**base, "colour": "red"}, "colour: unknown key"),
        ({"model": {"provider": "gpt", "model": "m"}}, "model.provider"),
        ({"model": {"provider": "openai", "model": "m"}}, "needs OPENAI_API_KEY to be set"),
        ({"model": {"provider": "openai-compatible", "model": "m"}}, "needs the server's URL"),
        ({**base, "tools": {"functions": ["os.path"]}}, "package.module:function"),
        ({**base, "tools": {"functions": ["nowhere.at_all:f"]}}, "cannot import"),
        ({**base, "context": {"truncation": {"recent_n": -1}}}, "context.truncation.recent_n"),
        ({**base, "model": {**base["model"], "base_url": "ftp://x"}}, "http(s) URL"),
        ({**base, "tools": {"explorer": {"roots": ["/no/such/folder"]}}}, "is not a folder"),
        ({**base, "tools": {"functions": ["harness_common:SIZES_KB"]}}, "is not a function"),
        ({**base, "context": "no-such-preset.yaml"}, "config file not found"),
    ]
    for data, fragment in cases:
        with pytest.raises(ConfigError) as raised:
            build_agent(data)
        assert fragment in str(raised.value), (fragment, str(raised.value))
    agent_file = tmp_path / "agent.yaml"
    agent_file.write_text("model: [unclosed\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        build_agent(agent_file)


@pytest.mark.parametrize("name", ["dashscope", "openai", "openai-compatible", "ollama"])
def test_the_shipped_agent_files_are_valid(name: str) -> None:
    from agentscope_context_ext.core.agent_file import load_agent_file

    spec = load_agent_file(Path(__file__).parents[2] / "configs" / "agents" / f"{name}.yaml")
    assert spec.model.provider == name
    assert spec.tools.explorer is not None


def test_chat_with_an_agent_file_scripted_from_stdin(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    """One command, one file: the replies, notices, the commands and the stats line, through
    the real OpenAI client against a loopback server (streaming); the next chat continues."""
    monkeypatch.chdir(tmp_path)
    with ModelServer("openai", Script(calls=8)) as server:
        spec = agent_file("openai-compatible", "http://127.0.0.1:9/v1", True, TOOL)
        spec["context"]["long_term_memory"] = {"enabled": True, "consolidation_time": "off"}
        (tmp_path / "agent.yaml").write_text(yaml.safe_dump(spec))
        lines = (
            "collect the documents\n/context\n/history\n/search documents\n"
            "/search\n/compact keep every file name verbatim\n/memory\n"
        )
        monkeypatch.setattr("sys.stdin", io.StringIO(lines))
        # --base-url replaces the file's (dead) server with the running one
        code = main(["chat", "--agent", "agent.yaml", "--base-url", server.url])
        printed = capsys.readouterr().out
        assert code == 0, printed
        assert "researcher: All documents fetched." in printed, "the reply is printed"
        assert "[context]" in printed and "compacted:" in printed, "compaction notices"
        assert "tokens now (system" in printed and "compaction at" in printed, "/context"
        assert "compacted on request" in printed, "/compact"
        assert "tokens in use" in printed and "compaction(s) this chat; dialog:" in printed
        assert "hit(s) in this conversation, best first" in printed, "/search"
        assert "read on: read_dialog(" in printed
        assert "/search QUERY: what to find" in printed, "/search without a query"
        hinted = [r for r in server.requests if "keep every file name verbatim" in str(r)]
        assert hinted and COMPACTION_MARKER in system_text(hinted[0]), "the hint, to the summary"
        assert "context stats: " in printed and "truncation(s)" in printed
        assert server.requests, "the real client reached the server"
        # the conversation was saved in the workspace; the next chat continues from it
        assert (tmp_path / ".agentscope-context" / "sessions" / "chat.json").is_file()
        before = len(server.requests)
        monkeypatch.setattr("sys.stdin", io.StringIO("and now?\n"))
        assert main(["chat", "--agent", "agent.yaml", "--base-url", server.url]) == 0
    # /compact summarised the first chat (the server's six sections): the second one sent it
    # the agent's first call (a summary written ahead may reach the server before it)
    resumed = next(r for r in server.requests[before:] if r.get("tools"))
    assert COMPACTION_MARKER not in system_text(resumed)
    assert "Collect the documents the user asked for" in str(resumed["messages"])


class DroppingToolResults(ModelServer):
    """A server whose chat template leaves tool results out of its prompt_tokens and writes the
    schemas compactly (llama-cpp-python's ``chatml-function-calling``, issue 43). The real one
    is B12's; this one answers in a test."""

    def _prompt_tokens(self, request: dict) -> int:
        kept = [
            {k: v for k, v in m.items() if k in ("role", "content", "tool_calls")}
            for m in request.get("messages", [])
            if m.get("role") != "tool"
        ]
        schemas = json.dumps(request.get("tools") or [], separators=(",", ":"))
        tokens = self._counter.count_formatted(kept) + self._counter.count_text(schemas)
        request["_reported_prompt_tokens"] = tokens
        return tokens


def test_chat_says_template_skew_not_a_count_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    """Issue 43: the closing line said "token count error +146%" against a server whose
    template drops tool results; it says template skew, and nothing was shifted."""
    monkeypatch.chdir(tmp_path)
    with DroppingToolResults("openai", Script(calls=6)) as server:
        spec = agent_file("openai-compatible", server.url, False, TOOL)
        (tmp_path / "agent.yaml").write_text(yaml.safe_dump(spec))
        monkeypatch.setattr("sys.stdin", io.StringIO("collect the documents\n/context\n"))
        assert main(["chat", "--agent", "agent.yaml"]) == 0
    printed = capsys.readouterr().out
    closing = printed.strip().splitlines()[-1]
    assert closing.startswith("context stats: "), printed[-2000:]
    assert "template skew, not a count error" in closing and "drops tool results" in closing
    assert "token count error" not in closing
    assert "the provider's count over ours" not in printed, "/context shows no shift"


def test_chat_errors_are_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    refused = agent_file("openai-compatible", "http://127.0.0.1:9/v1", False, TOOL)
    (tmp_path / "refused.yaml").write_text(yaml.safe_dump(refused))
    (tmp_path / "nokey.yaml").write_text(
        yaml.safe_dump({"model": {"provider": "openai", "model": "gpt-4o-mini"}})
    )
    (tmp_path / "bad.yaml").write_text("model: {provider: openai, model: m, colour: red}\n")
    for file, fragment in (
        ("refused.yaml", "cannot reach the model at http://127.0.0.1:9/v1: connection refused"),
        ("nokey.yaml", "needs OPENAI_API_KEY to be set"),
        ("bad.yaml", "model.colour: unknown key"),
        ("missing.yaml", "not found"),
    ):
        monkeypatch.setattr("sys.stdin", io.StringIO("hello\n"))
        assert main(["chat", "--agent", file]) == 2, file
        err = capsys.readouterr().err.strip()
        assert fragment in err and "\n" not in err and "Traceback" not in err, (file, err)


@pytest.mark.skipif(
    agentscope_major() < 2, reason="1.x passes model.options on to the client as they are"
)
def test_bad_model_options_are_one_clear_error(monkeypatch) -> None:
    """On 2.x ``model.options`` are the model class's ``Parameters``: a name it does not have,
    or a value of the wrong type, is one clear error."""
    base = {"model": {"provider": "openai-compatible", "model": "m", "base_url": "http://x:1"}}
    with pytest.raises(ConfigError, match=r"model\.options\.colour: not a parameter .*temperature"):
        build_agent({**base, "model": {**base["model"], "options": {"colour": "red"}}})
    with pytest.raises(ConfigError, match=r"model\.options"):
        build_agent({**base, "model": {**base["model"], "options": {"temperature": "hot"}}})
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ConfigError, match="needs OPENAI_API_KEY to be set"):
        build_agent({"model": {"provider": "openai", "model": "m"}})


def test_consolidate_uses_the_agent_files_model(
    workspace: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    memory = LongTermMemory(workspace)
    memory.append("Editor: vim")
    memory.add_daily_note("Editor: helix", day="2026-12-01")

    def consolidator(request: dict) -> Reply:
        assert CONSOLIDATOR_MARKER in system_text(request)
        if any(m.get("role") == "tool" for m in request["messages"]):
            return Reply("done")
        content = "# Memory\n\n## Facts\n- Editor: helix (since 2026-12-01)\n"
        return Reply("", [("w1", "memory_write", {"content": content})])

    with ModelServer("openai", consolidator) as server:
        spec = agent_file("openai-compatible", server.url, False, TOOL)
        (tmp_path / "agent.yaml").write_text(yaml.safe_dump(spec))
        assert main(["consolidate", str(workspace), "--agent", str(tmp_path / "agent.yaml")]) == 0
    assert "consolidated" in capsys.readouterr().out
    assert "- Editor: helix (since 2026-12-01)" in memory.read() and "vim" not in memory.read()
    assert SUMMARIZER_MARKER not in str(server.requests)
