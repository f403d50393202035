"""``model.compat`` for ``provider: openai-compatible``, on either AgentScope major, through the
real ``openai`` client against a loopback server that imitates llama-cpp-python's OpenAI server:
it answers HTTP 500 to a message whose content is a list of parts or ``null``, and offers the
tools to its model only when ``tool_choice`` is ``"auto"`` (test_local_model.py runs the real
one). With the default shapes (no ``compat`` section, or ``string_content`` and
``tool_choice_auto`` written out) a chat turn with a tool call works end to end; with them
turned off the server's error is one line, exit 2."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
import yaml
from llama_like_server import LlamaCppLikeServer
from llm_servers import Reply

from agentscope_context_ext import ConfigError
from agentscope_context_ext.cli import main
from agentscope_context_ext.compat import agentscope_major
from agentscope_context_ext.core.agent_file import load_agent_file

TOOL = "harness_common:fetch" if agentscope_major() >= 2 else "agent_harness:fetch"
BOTH = {"string_content": True, "tool_choice_auto": True}
OFF = {"string_content": False, "tool_choice_auto": False}


def fetching_model(request: dict) -> Reply:
    """Calls ``fetch`` once when it is shown the tool, then reports."""
    if any(message.get("role") == "tool" for message in request["messages"]):
        return Reply("Fetched the document.")
    if request.get("tools"):
        return Reply("", [("call-1", "fetch", {"size_kb": 1, "seed": 7})])
    return Reply("I have no tool to fetch it with.")


def _chat(tmp_path: Path, monkeypatch, url: str, stream: bool, compat: dict | None) -> int:
    model = {"provider": "openai-compatible", "model": "qwen", "base_url": url, "stream": stream}
    if compat is not None:
        model["compat"] = compat
    spec = {
        "model": model,
        "tools": {"functions": [TOOL]},
        "context": {"workspace": str(tmp_path / "ws"), "max_input_tokens": 16384},
    }
    (tmp_path / "agent.yaml").write_text(yaml.safe_dump(spec))
    monkeypatch.setattr("sys.stdin", io.StringIO("fetch document 7\n"))
    return main(["chat", "--agent", str(tmp_path / "agent.yaml")])


@pytest.mark.parametrize("compat", [BOTH, None], ids=["written-out", "default"])
@pytest.mark.parametrize("stream", [True, False])
def test_with_compat_a_tool_call_works_end_to_end(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys, stream: bool, compat: dict | None
) -> None:
    with LlamaCppLikeServer(fetching_model) as server:
        assert _chat(tmp_path, monkeypatch, server.url, stream, compat) == 0
    assert "Fetched the document." in capsys.readouterr().out
    assert server.refused == []
    assert len(server.requests) == 2, "the tool call, then the answer"
    for request in server.requests:
        assert request["tool_choice"] == "auto" and request["tools"]
        assert all(isinstance(m["content"], str) for m in request["messages"])
    second = server.requests[1]["messages"]
    call = next(m for m in second if m.get("tool_calls"))
    assert call["content"] == "" and call["tool_calls"][0]["function"]["name"] == "fetch"
    result = next(m for m in second if m["role"] == "tool")
    assert result["tool_call_id"] == "call-1" and result["content"].startswith("7:00000 ")
    system = second[0]
    assert system["role"] == "system" and "helpful assistant" in system["content"]


def test_with_compat_off_the_servers_error_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    """(The clients retry an HTTP 500: the openai client twice, 2.x's model three times.)"""
    with LlamaCppLikeServer(fetching_model) as server:
        assert _chat(tmp_path, monkeypatch, server.url, True, OFF) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "internal error" not in err and "Traceback" not in err, err
    assert f"the model server at {server.url} answered HTTP 500: " in err, err
    assert "can only concatenate str (not" in err and "list" in err, err
    assert err.endswith(
        "such as llama-cpp-python's, needs model.compat.string_content: true, the default)"
    ), err
    assert server.refused and all(r in server.requests for r in server.refused)


def test_string_content_alone_gets_no_tool_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    """Without tool_choice "auto" the server's model is not shown the tools: why the second
    key exists."""
    with LlamaCppLikeServer(fetching_model) as server:
        code = _chat(tmp_path, monkeypatch, server.url, False, {"tool_choice_auto": False})
    assert code == 0
    assert "I have no tool to fetch it with." in capsys.readouterr().out
    assert len(server.requests) == 1 and "tool_choice" not in server.requests[0]
    assert server.requests[0]["tools"], "the tools were sent, without a tool choice"


def test_the_compat_section_is_checked() -> None:
    base = {"provider": "openai-compatible", "model": "m", "base_url": "http://127.0.0.1:9/v1"}
    assert load_agent_file({"model": {**base, "compat": BOTH}}).model.compat.tool_choice_auto
    # no section: every key's default, for openai-compatible only
    shapes = load_agent_file({"model": base}).model.openai_compat()
    assert shapes is not None and shapes.string_content and shapes.tool_choice_auto
    assert shapes.max_tokens and not shapes.unescape_html
    openai = {**base, "provider": "openai"}
    assert load_agent_file({"model": openai}).model.openai_compat() is None
    for model, fragment in (
        ({**base, "compat": {"strings": True}}, "model.compat.strings: unknown key"),
        ({**base, "compat": True}, "model.compat: Input should be a valid dictionary"),
        (
            {**base, "provider": "ollama", "compat": BOTH},
            "model.compat: only for provider openai-compatible, not ollama",
        ),
    ):
        with pytest.raises(ConfigError) as raised:
            load_agent_file({"model": model})
        assert fragment in str(raised.value), str(raised.value)


def test_string_content_joins_text_parts_and_keeps_media() -> None:
    from agentscope_context_ext.core.openai_compatible import string_content

    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}
    messages = [
        {"role": "system", "content": [{"type": "text", "text": "Be careful."}]},
        {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c1"}]},
        {"role": "tool", "tool_call_id": "c1", "content": "out"},
        {"role": "user", "content": [{"type": "text", "text": "look"}, image]},
    ]
    before = json.dumps(messages)
    plain = string_content(messages)
    assert [m["content"] for m in plain[:4]] == ["Be careful.", "a\nb", "", "out"]
    assert plain[4]["content"] == messages[4]["content"], "no string can carry the image"
    assert plain[2]["tool_calls"] == [{"id": "c1"}]
    assert json.dumps(messages) == before, "the caller's messages are left as they were"


def test_the_documented_compat_examples_are_valid() -> None:
    """The docs' agent file (docs/agent-files.md) and configs/agents/llama-cpp.yaml are agent
    files with the compat section they show; the llama file waits for its summaries (one slot)."""
    root = Path(__file__).resolve().parents[2]
    page = (root / "docs" / "agent-files.md").read_text(encoding="utf-8")
    block = page.split("```yaml\n# agent.yaml", 1)[1].split("\n", 1)[1].split("```", 1)[0]
    assert load_agent_file(yaml.safe_load(block)).model.compat is not None
    agent = load_agent_file(root / "configs" / "agents" / "llama-cpp.yaml")
    shipped = agent.model.compat
    assert shipped is not None and shipped.string_content and shipped.tool_choice_auto
    assert shipped.max_tokens and shipped.unescape_html
    # a single-slot server: a summary written ahead would hold its slot (docs/compaction.md)
    assert agent.context.compaction.background_summary is False


def test_tool_results_as_user_messages_name_their_call() -> None:
    """llama-cpp-python's chatml-function-calling template drops ``tool`` messages: with
    ``tool_results_as_user`` each result is a user message its model sees."""
    from agentscope_context_ext.core.openai_compatible import tool_results_as_user

    call = {"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}
    messages = [
        {"role": "user", "content": "read it"},
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "def add(a, b): ..."},
        {"role": "tool", "tool_call_id": "c9", "content": [{"type": "text", "text": "x"}]},
    ]
    shaped = tool_results_as_user(messages)
    assert shaped[:2] == messages[:2]
    assert shaped[2] == {
        "role": "user",
        "content": "[tool result: read_file, call c1]\ndef add(a, b): ...",
    }
    assert shaped[3] == {
        "role": "user",
        "content": [
            {"type": "text", "text": "[tool result: tool, call c9]"},
            {"type": "text", "text": "x"},
        ],
    }


def test_with_tool_results_as_user_the_request_has_no_tool_message(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    with LlamaCppLikeServer(fetching_model) as server:
        code = _chat(tmp_path, monkeypatch, server.url, False, {"tool_results_as_user": True})
    assert code == 0
    second = server.requests[1]["messages"]
    assert not [m for m in second if m["role"] == "tool"]
    result = next(m for m in second if m["content"].startswith("[tool result: fetch, call call-1]"))
    assert result["role"] == "user" and "7:00000 " in result["content"]
