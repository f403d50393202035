"""Through the real client stack on AgentScope 2.x: an agent built from an agent file (a 2.x
``Agent`` with ``ContextMiddleware``) talks to loopback servers speaking the OpenAI
chat-completions and the Ollama chat protocols, through 2.x's ``OpenAIChatModel`` /
``OllamaChatModel`` and the ``openai`` / ``ollama`` clients; ``chat`` and ``consolidate`` with an
agent file. Collected only when AgentScope 2.x is installed (see conftest.py)."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
import yaml
from agentscope.agent import Agent
from agentscope.message import UserMsg
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
from agentscope_context_ext.cli import main

TOOL = "harness_common:fetch"


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
        spec = agent_file(provider, server.url, stream, TOOL, workspace=str(workspace))
        agent = build_agent(spec)
        assert isinstance(agent, Agent)
        manager = agent.context_manager
        final = await agent.reply(UserMsg("user", "collect the documents"))
        await manager.drain()
    assert final.get_text_content() == "All documents fetched."
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
    # the provider's reported prompt tokens reached on_model_call: the gap is reported and
    # calibrate_with_usage learned it
    error = manager.stats.token_count_error
    assert error is not None and abs(error) < 0.1
    assert manager.pipeline.count.calibration != 0


def test_bad_model_options_are_one_clear_error(monkeypatch) -> None:
    base = {"model": {"provider": "openai-compatible", "model": "m", "base_url": "http://x:1"}}
    with pytest.raises(ConfigError, match=r"model\.options\.colour: not a parameter .*temperature"):
        build_agent({**base, "model": {**base["model"], "options": {"colour": "red"}}})
    with pytest.raises(ConfigError, match=r"model\.options"):
        build_agent({**base, "model": {**base["model"], "options": {"temperature": "hot"}}})
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ConfigError, match="needs OPENAI_API_KEY to be set"):
        build_agent({"model": {"provider": "openai", "model": "m"}})


def test_chat_with_an_agent_file_scripted_from_stdin(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    monkeypatch.chdir(tmp_path)
    with ModelServer("openai", Script(calls=8)) as server:
        spec = agent_file("openai-compatible", "http://127.0.0.1:9/v1", True, TOOL)
        spec["context"]["long_term_memory"] = {"enabled": True, "consolidation_time": "off"}
        (tmp_path / "agent.yaml").write_text(yaml.safe_dump(spec))
        lines = "collect the documents\n/context\n/compact\n/memory\n"
        monkeypatch.setattr("sys.stdin", io.StringIO(lines))
        code = main(["chat", "--agent", "agent.yaml", "--base-url", server.url])
        printed = capsys.readouterr().out
        assert code == 0, printed
        assert "researcher: All documents fetched." in printed, "the reply is printed"
        assert "compacted:" in printed and "tokens now (system" in printed
        assert "compacted on request" in printed and "context stats: " in printed
        # the state was saved as 2.x saves it; the next chat continues from it
        assert (tmp_path / ".agentscope-context" / "sessions" / "chat.json").is_file()
        before = len(server.requests)
        monkeypatch.setattr("sys.stdin", io.StringIO("and now?\n"))
        assert main(["chat", "--agent", "agent.yaml", "--base-url", server.url]) == 0
    # /compact summarised the first chat (the server's six sections): the second one sent it
    resumed = server.requests[before]
    assert COMPACTION_MARKER not in system_text(resumed)
    assert "Collect the documents the user asked for" in str(resumed["messages"])


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
