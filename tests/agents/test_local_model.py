"""``provider: openai-compatible`` against a real llama-cpp-python server (``python -m
llama_cpp.server``, SmolLM2-135M-Instruct at temperature 0, ``--chat_format
chatml-function-calling``; the ``llama`` fixture), on either AgentScope major, through a
recording proxy: what B12 found, each a case the real server produces every time.

- a streamed answer that is a tool call ends empty after HTTP 200: asked again unstreamed,
  never an empty answer;
- the output cap goes out as ``max_tokens``, which the server obeys (it ignores
  ``max_completion_tokens``), for the agent's calls and the summary call;
- an agent file with no ``compat`` section speaks the shapes the server takes;
- a text answer to a request with tools comes back empty (the ``chatml-function-calling``
  grammar after ``message:`` allows only a function name or the end): asked again with
  ``tool_choice: none``.

Skipped when this interpreter has no ``llama_cpp`` server or no SmolLM2 GGUF (``bash
bench/llama_venv.sh VENV``); a failure when ``ACE_REQUIRE_LLAMA=1``. The cases the real server
cannot produce on demand (a stream cut short by another request, a call still running at its
timeout, an answer with HTML entities) are in test_model_answers.py against imitations.
"""

from __future__ import annotations

import asyncio
import io
from pathlib import Path

import pytest
import yaml
from recording_proxy import RecordingProxy

from agentscope_context_ext.adapter import installed
from agentscope_context_ext.agentfile import build_model
from agentscope_context_ext.cli import main
from agentscope_context_ext.compat import agentscope_major
from agentscope_context_ext.core.agent_file import ModelSettings


@pytest.fixture
def proxy(llama) -> RecordingProxy:
    with RecordingProxy(llama.base) as recording:
        yield recording


def _project(tmp_path: Path) -> Path:
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "calc.py").write_text(
        'def add(a, b):\n    """Add two numbers."""\n    return a + b\n'
    )
    return folder


def _chat(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, url: str, stream: bool, line: str
) -> int:
    spec = {
        "model": {
            "provider": "openai-compatible",
            "model": "smollm2",
            "base_url": url,
            "stream": stream,
            "options": {"temperature": 0.0, "max_tokens": 48},
        },
        "tools": {"explorer": {"roots": [str(_project(tmp_path))]}},
        "max_iters": 2,
        "context": {
            "workspace": str(tmp_path / "ws"),
            "max_input_tokens": 4096,
            "long_term_memory": {"enabled": False},
        },
    }
    (tmp_path / "agent.yaml").write_text(yaml.safe_dump(spec))
    monkeypatch.setattr("sys.stdin", io.StringIO(line + "\n"))
    return main(["chat", "--agent", str(tmp_path / "agent.yaml")])


def _answers(out: str) -> list[str]:
    return [
        line.removeprefix("assistant:").strip()
        for line in out.splitlines()
        if line.startswith("assistant:")
    ]


def test_a_streamed_tool_call_is_asked_again_unstreamed(
    proxy: RecordingProxy, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    """(It printed ``assistant: `` and exited 0: the stream ended empty after HTTP 200.)"""
    code = _chat(tmp_path, monkeypatch, proxy.url, True, "Read calc.py with read_file.")
    captured = capsys.readouterr()
    # never a silent empty answer: an answer, or (1.x's last word at max_iters is asked
    # without tools, and SmolLM2 says nothing there) an error line and exit 1
    if code == 0:
        answers = _answers(captured.out)
        assert answers and all(answers), captured.out
    else:
        assert code == 1 and "[error] smollm2 answered nothing" in captured.err, captured.err
    first, *rest = [e for e in proxy.since(0) if (e.request or {}).get("tools")]
    assert first.request["stream"] and first.status == 200 and "[DONE]" not in first.body, (
        "the server ends a streamed tool call empty (llama-cpp-python 0.3.36)"
    )
    assert rest and not rest[0].request["stream"], "asked again without streaming"
    assert "tool_calls" in rest[0].body
    assert all(not e.request["stream"] for e in rest), "tool turns go unstreamed from then on"


def test_an_agent_file_without_compat_speaks_the_servers_shapes(
    proxy: RecordingProxy, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    """(AgentScope's own shape, a list of content parts, is HTTP 500 there.)"""
    code = _chat(tmp_path, monkeypatch, proxy.url, False, "Read calc.py with read_file.")
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert all(e.status == 200 for e in proxy.since(0)), [e.body[:200] for e in proxy.since(0)]
    exchanges = proxy.since(0)
    # "auto" where the agent chose none (at its last iteration 2.x chooses "none" itself)
    assert exchanges[0].request["tool_choice"] == "auto"
    for exchange in exchanges:
        messages = exchange.request["messages"]
        assert all(isinstance(m["content"], str) for m in messages)
        assert exchange.request["max_tokens"] == 48
        assert "max_completion_tokens" not in exchange.request


READ_FILE = {
    "type": "function",
    "function": {
        "name": "read_file",
        "description": "Read a text file and return its content.",
        "parameters": {
            "type": "object",
            "properties": {"file_path": {"type": "string"}},
            "required": ["file_path"],
        },
    },
}


async def _ask_with_tools(url: str, text: str) -> tuple[str, int | None]:
    """One call of the built model, as the agent makes it: a system prompt, the user's text,
    the tools offered; the answer's text and input tokens."""
    model, formatter = build_model(_settings(url))
    system = "You are a careful assistant. Read files with your tools before answering."
    if agentscope_major() >= 2:
        from agentscope.message import SystemMsg, TextBlock, UserMsg

        answer = await model([SystemMsg("system", system), UserMsg("user", text)], [READ_FILE])
        said = "".join(b.text for b in answer.content if isinstance(b, TextBlock))
        return said, answer.usage.input_tokens
    from agentscope.message import Msg

    prompt = await formatter.format([Msg("system", system, "system"), Msg("user", text, "user")])
    answer = await model(prompt, [READ_FILE])
    said = "".join(b.get("text", "") for b in answer.content if b.get("type") == "text")
    return said, answer.usage.input_tokens


def test_a_text_answer_with_tools_offered_is_asked_again_without_them(
    proxy: RecordingProxy,
) -> None:
    """(Every text answer of a model offered tools was empty: SmolLM2 answers "Say hello."
    in text, and the server's grammar lets it write nothing.)"""
    text, input_tokens = asyncio.run(_ask_with_tools(proxy.url, "Say hello."))
    first, again = proxy.since(0)
    assert first.request["tool_choice"] == "auto" and first.request["tools"]
    assert first.response()["choices"][0]["message"]["content"] == ""
    assert again.request["tool_choice"] == "none"
    assert text.strip() and text == again.response()["choices"][0]["message"]["content"]
    # the input count is the first request's, tools included (the second left them out)
    assert input_tokens == first.response()["usage"]["prompt_tokens"]
    assert input_tokens > again.response()["usage"]["prompt_tokens"]


def _settings(url: str, **options: object) -> ModelSettings:
    return ModelSettings(
        provider="openai-compatible",
        model="smollm2",
        base_url=url,
        stream=False,
        options={"temperature": 0.0, **options},
    )


def test_the_models_own_output_cap_is_obeyed(proxy: RecordingProxy) -> None:
    """``model.options.max_tokens`` (sent as max_completion_tokens, a cap of 5 gave 110
    tokens)."""
    model, formatter = build_model(_settings(proxy.url, max_tokens=5))
    call = installed.model_call(model, formatter)
    asyncio.run(call("You count.", "Count from 1 to 100, separated by commas."))
    (exchange,) = proxy.since(0)
    assert exchange.request["max_tokens"] == 5
    assert "max_completion_tokens" not in exchange.request
    # the summary call streams: llama.cpp's stream has one content delta per token
    deltas = [
        e
        for e in exchange.events
        if isinstance(e, dict) and e["choices"][0]["delta"].get("content")
    ]
    assert 0 < len(deltas) <= 5


def test_the_summary_calls_output_cap_is_obeyed(proxy: RecordingProxy) -> None:
    """``compaction.summary_output_tokens`` reaches the server as ``max_tokens`` whatever the
    agent's own cap (here none)."""
    model, formatter = build_model(_settings(proxy.url))
    call = installed.model_call(model, formatter, max_tokens=12)
    answer = asyncio.run(call("You count.", "Count from 1 to 100, separated by commas."))
    (exchange,) = proxy.since(0)
    assert exchange.request["max_tokens"] == 12 and exchange.request["stream"] is True
    deltas = [
        e
        for e in exchange.events
        if isinstance(e, dict) and e["choices"][0]["delta"].get("content")
    ]
    assert 0 < len(deltas) <= 12
    assert answer.strip()


SHIPPED = Path(__file__).resolve().parents[2] / "configs" / "agents" / "llama-cpp.yaml"


def test_serve_with_the_shipped_agent_file_runs_a_tool_turn_on_the_real_server(
    proxy: RecordingProxy, tmp_path: Path
) -> None:
    """``agentscope-context serve`` with ``configs/agents/llama-cpp.yaml`` (pointed at the
    server, SmolLM2): a session over HTTP, a tool turn. Every call carries the file's model
    settings, compat included (serve once dropped compat and the parameters), the server
    answers each with 200, and the stored reply has text: no empty answer."""
    from served_app import ServeProcess, serve_options, service_missing

    if service_missing() is not None:
        pytest.skip(str(service_missing()))
    spec = yaml.safe_load(SHIPPED.read_text(encoding="utf-8"))
    spec["model"].update(model="smollm2", base_url=proxy.url)
    spec["model"]["options"] = {"temperature": 0.0, "max_tokens": 48}
    spec["tools"] = {"explorer": {"roots": [str(_project(tmp_path))]}}
    spec["max_iters"] = 2
    spec["context"]["max_input_tokens"] = 4096
    spec["context"]["long_term_memory"] = {"enabled": False}
    (tmp_path / "agent.yaml").write_text(yaml.safe_dump(spec))
    served = ServeProcess(serve_options(tmp_path, tmp_path / "agent.yaml"), tmp_path)
    try:
        session = served.new_session()
        served.chat(session, "Read calc.py with read_file and tell me what add does.")
        stored = served.replies(
            session, lambda messages: bool(messages) and messages[-1]["role"] == "assistant", 900
        )
    finally:
        stderr = served.stop()
    assert "Traceback" not in stderr, stderr
    exchanges = proxy.since(0)
    assert exchanges and all(e.status == 200 for e in exchanges), [e.body[:200] for e in exchanges]
    for exchange in exchanges:
        request = exchange.request
        assert request["max_tokens"] == 48 and "max_completion_tokens" not in request
        assert request["temperature"] == 0.0
        assert all(isinstance(m["content"], str) for m in request["messages"])
        assert not any(m["role"] == "tool" for m in request["messages"])  # tool_results_as_user
    assert exchanges[0].request["tool_choice"] == "auto" and exchanges[0].request["stream"]
    called = [e for e in exchanges if "tool_calls" in e.body]
    assert called, "the model called a tool"
    after = exchanges[exchanges.index(called[0]) + 1 :]
    assert any(
        m["role"] == "user" and m["content"].startswith("[tool result: ")
        for e in after
        for m in e.request["messages"]
    )
    reply = stored[-1]
    text = "".join(b.get("text", "") for b in reply["content"] if b.get("type") == "text")
    assert text.strip(), reply
