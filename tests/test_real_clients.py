"""Through the real client stack (issue 16): an agent built from an agent file talks to loopback
servers speaking the OpenAI chat-completions protocol (streaming SSE with tool-call deltas, and
non-streaming) and the Ollama chat protocol, through AgentScope's ``OpenAIChatModel`` /
``OllamaChatModel`` and the ``openai`` / ``ollama`` clients. Loopback only, bounded scripts."""

from __future__ import annotations

from pathlib import Path

import pytest
from agentscope.message import Msg
from harness_common import USAGE_OFFSET, Script, agent_file, sent_tool_texts
from llm_servers import ModelServer, Reply, system_text

from agentscope_context_ext import ConfigError, LongTermMemory, build_agent

from agent_harness import COMPACTION_MARKER, SUMMARIZER_MARKER


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
        spec = agent_file(provider, server.url, stream, workspace=str(workspace))
        agent = build_agent(spec)
        manager = agent.context_manager
        final = await agent(Msg("user", "collect the documents", "user"))
        await manager.drain()
    assert final.get_text_content() == "All documents fetched."
    # truncation: what the provider received is the excerpt with its notice
    assert manager.stats.truncations >= 1
    assert any("<<<TRUNCATED>>>" in text for text in sent_tool_texts(server))
    # compaction with the model-written summary, parsed into the six sections
    assert manager.stats.compactions >= 1
    summary = agent.memory.compact_summary
    assert summary.source == "llm"
    assert summary.goal and summary.constraints and summary.progress
    assert summary.key_decisions and summary.next_steps and summary.critical_context
    # the Summarizer's tool call went through the real client and wrote Memory.md
    assert script.summarizer_calls >= 1
    assert "User wants every document kept" in LongTermMemory(workspace).read()
    # the provider's reported prompt_tokens reached the count: the gap is reported, and
    # calibrate_with_usage shifts our count by exactly provider - ours of the last agent call
    error = manager.stats.token_count_error
    assert error is not None and abs(error) < 0.05
    last = max(
        i
        for i, r in enumerate(server.requests)
        if COMPACTION_MARKER not in system_text(r) and SUMMARIZER_MARKER not in system_text(r)
    )
    provider = server.requests[last]["_reported_prompt_tokens"]
    calibration = manager.pipeline.count.calibration
    assert calibration != 0 and abs(calibration + error * provider) <= 2
    assert (await manager.count()).calibration == calibration


@pytest.mark.parametrize("answer", ["", "no sections at all, just prose"])
async def test_a_malformed_summary_answer_falls_back(workspace: Path, answer: str) -> None:
    with ModelServer("openai", Script(summary=answer)) as server:
        spec = agent_file(
            "openai-compatible",
            server.url,
            True,
            workspace=str(workspace),
            long_term_memory={"enabled": False},
        )
        agent = build_agent(spec)
        await agent(Msg("user", "collect the documents", "user"))
    manager = agent.context_manager
    assert manager.stats.compactions >= 1
    assert agent.memory.compact_summary.source == "extractive"
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
        ({**base, "tools": {"functions": ["agent_harness:SIZES_KB"]}}, "is not a function"),
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

    spec = load_agent_file(Path(__file__).parent.parent / "configs" / "agents" / f"{name}.yaml")
    assert spec.model.provider == name
    assert spec.tools.explorer is not None


def test_chat_with_an_agent_file_scripted_from_stdin(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    """One command, one file: notices, the commands and the stats line, through the real
    OpenAI client against a loopback server (streaming)."""
    import io

    import yaml

    from agentscope_context_ext.cli import main

    monkeypatch.chdir(tmp_path)
    with ModelServer("openai", Script(calls=8)) as server:
        spec = agent_file("openai-compatible", "http://127.0.0.1:9/v1", True)
        spec["context"]["long_term_memory"] = {"enabled": True, "consolidation_time": "off"}
        (tmp_path / "agent.yaml").write_text(yaml.safe_dump(spec))
        lines = "collect the documents\n/context\n/compact\n/memory\n"
        monkeypatch.setattr("sys.stdin", io.StringIO(lines))
        # --base-url replaces the file's (dead) server with the running one
        code = main(["chat", "--agent", "agent.yaml", "--base-url", server.url])
    printed = capsys.readouterr().out
    assert code == 0, printed
    assert "[context]" in printed and "compacted:" in printed, "compaction notices"
    assert "tokens now (system" in printed and "compaction at" in printed, "/context"
    assert "compacted on request" in printed, "/compact"
    assert "context stats: " in printed and "truncation(s)" in printed
    assert server.requests, "the real client reached the server"


def test_chat_errors_are_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    import io

    import yaml

    from agentscope_context_ext.cli import main

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    refused = agent_file("openai-compatible", "http://127.0.0.1:9/v1", False)
    refused["model"]["options"] = {"timeout": 5}
    (tmp_path / "refused.yaml").write_text(yaml.safe_dump(refused))
    (tmp_path / "nokey.yaml").write_text(
        yaml.safe_dump({"model": {"provider": "openai", "model": "gpt-4o-mini"}})
    )
    (tmp_path / "bad.yaml").write_text("model: {provider: openai, model: m, colour: red}\n")
    for file, fragment in (
        ("refused.yaml", "cannot reach test-model"),
        ("nokey.yaml", "needs OPENAI_API_KEY to be set"),
        ("bad.yaml", "model.colour: unknown key"),
        ("missing.yaml", "not found"),
    ):
        monkeypatch.setattr("sys.stdin", io.StringIO("hello\n"))
        assert main(["chat", "--agent", file]) == 2, file
        err = capsys.readouterr().err.strip()
        assert fragment in err and "\n" not in err and "Traceback" not in err, (file, err)


def test_consolidate_uses_the_agent_files_model(
    workspace: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    import yaml

    from agentscope_context_ext.cli import main

    from agent_harness import CONSOLIDATOR_MARKER

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
        spec = agent_file("openai-compatible", server.url, False)
        (tmp_path / "agent.yaml").write_text(yaml.safe_dump(spec))
        assert main(["consolidate", str(workspace), "--agent", str(tmp_path / "agent.yaml")]) == 0
    assert "consolidated" in capsys.readouterr().out
    assert "- Editor: helix (since 2026-12-01)" in memory.read() and "vim" not in memory.read()
