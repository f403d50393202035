"""``agentscope-context serve`` runs exactly the agent file (design §11.3): the file's tools and
ours and no AgentScope built-in unless the file opts in, the file's model settings (options,
stream, compat) on every served call whatever a session carries, and the system prompt and
tool schemas measured at start, a window they leave no room in refused there in one line.

``serve`` runs as a subprocess on loopback, its model a loopback OpenAI-protocol server that
records every request; ``context_middleware_factory(tools=...)`` is also checked in a real
``create_app`` served in process (``served_app.ServedApp``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from llama_like_server import LlamaCppLikeServer
from llm_servers import ModelServer, Reply
from served_app import ServedApp, ServeProcess, run_cli, serve_options, service_missing

from agentscope_context_ext import context_middleware_factory
from agentscope_context_ext.agentscope2._tools import as_tool
from agentscope_context_ext.core.agent_file import ModelSettings

pytestmark = pytest.mark.skipif(service_missing() is not None, reason=str(service_missing()))

START_SECONDS = 90
BOTH = {"string_content": True, "tool_choice_auto": True}


def write_agent_file(folder: Path, model_url: str, **sections: object) -> Path:
    """An agent file in ``folder``: an openai-compatible model at ``model_url``, the explorer
    over ``folder/project`` unless ``tools`` is given, a 16k window, long-term memory off;
    ``model`` entries and other sections as given."""
    project = folder / "project"
    project.mkdir(exist_ok=True)
    (project / "notes.txt").write_text("the notes\n", encoding="utf-8")
    model = {"provider": "openai-compatible", "model": "scripted", "base_url": model_url}
    model.update(sections.pop("model", {}))  # type: ignore[arg-type]
    data = {
        "name": "reader",
        "system_prompt": "You read files.",
        "model": model,
        "tools": {"explorer": {"roots": [str(project)]}},
        "context": {"max_input_tokens": 16384, "long_term_memory": {"enabled": False}},
        **sections,
    }
    path = folder / "agent.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def lister(request: dict) -> Reply:
    """Lists the project once when it has the tool, then says so."""
    if any(message.get("role") == "tool" for message in request["messages"]):
        return Reply(text="Listed the project.")
    names = [tool["function"]["name"] for tool in request.get("tools") or []]
    if "list_dir" in names:
        return Reply(tool_calls=[("call-1", "list_dir", {"path": "."})])
    return Reply(text="I cannot list it.")


def tool_names(request: dict) -> list[str]:
    return [tool["function"]["name"] for tool in request.get("tools") or []]


def system_of(request: dict) -> str:
    content = request["messages"][0]["content"]
    return content if isinstance(content, str) else json.dumps(content)


def one_turn(served: ServeProcess, body: dict | None = None, text: str = "List it.") -> list:
    """A session (``body``, else the one ``serve`` printed), one message; its messages."""
    if body is None:
        session = served.new_session()
    else:
        response = served.client.post("/sessions/", json=body)
        assert response.status_code < 300, response.text
        session = response.json()["session_id"]
    served.chat(session, text)
    return served.replies(
        session, lambda stored: any(m["role"] == "assistant" for m in stored), START_SECONDS
    )


def test_a_served_agent_has_the_files_tools_and_ours_only(tmp_path):
    with ModelServer("openai", lister) as model:
        spec = write_agent_file(tmp_path, model.url)
        served = ServeProcess(serve_options(tmp_path, spec), tmp_path)
        try:
            messages = one_turn(served)
        finally:
            stderr = served.stop()
    assert "Listed the project." in json.dumps(messages[-1])
    calls = [request for request in model.requests if request.get("tools")]
    assert calls, "the model was called with tools"
    for request in calls:
        # the dialog tools come once there is a dialog to read
        assert tool_names(request) == ["list_dir", "grep", "read_file"]
        assert "<workspace>" not in system_of(request)  # the workspace's instructions went too
    reported = next(line for line in served.lines if line.startswith("tools: "))
    # what the first call is shown, as the calls above were
    assert reported.startswith("tools: list_dir, grep, read_file (")
    assert "tokens of schemas); system prompt " in reported and "window 16,384 tokens" in reported
    assert not any("Bash runs" in line for line in served.lines)
    assert "Traceback" not in stderr


def test_agentscope_builtins_are_there_when_the_file_asks_and_serve_says_bash_runs_here(
    tmp_path,
):
    with ModelServer("openai", lister) as model:
        spec = write_agent_file(
            tmp_path,
            model.url,
            tools={"explorer": {"roots": [str(tmp_path / "project")]}, "agentscope_builtins": True},
        )
        served = ServeProcess(serve_options(tmp_path, spec), tmp_path)
        try:
            one_turn(served)
        finally:
            served.stop()
    names = tool_names(next(request for request in model.requests if request.get("tools")))
    assert {"Bash", "Read", "Write", "TaskCreate", "list_dir", "read_file"} <= set(names)
    warning = next(line for line in served.lines if "Bash runs" in line)
    assert "tools.agentscope_builtins" in warning and "on this host" in warning
    reported = next(line for line in served.lines if line.startswith("tools: Bash, "))
    assert "(at least " in reported


def test_the_agent_files_model_settings_reach_every_served_call(tmp_path):
    """stream, options and compat, for the session ``serve`` printed (``parameters: {}``)
    and for one whose client sent parameters of its own: the file's win, the session's other
    parameters stay. The server is strict as llama-cpp-python's (an imitation)."""
    with LlamaCppLikeServer(lister) as model:
        spec = write_agent_file(
            tmp_path,
            model.url,
            model={"stream": False, "options": {"temperature": 0.2}, "compat": BOTH},
        )
        served = ServeProcess(serve_options(tmp_path, spec), tmp_path)
        try:
            printed = one_turn(served)
            first = len(model.requests)
            body = json.loads(json.dumps(served.session_body))
            body["name"] = "a client's own parameters"
            body["chat_model_config"]["parameters"] = {"temperature": 1.5, "top_p": 0.5}
            own = one_turn(served, body)
        finally:
            stderr = served.stop()
    assert "Listed the project." in json.dumps(printed[-1])
    assert "Listed the project." in json.dumps(own[-1])
    assert model.refused == []  # every content a string
    assert len(model.requests) >= 4  # two turns, each a tool call and an answer
    for index, request in enumerate(model.requests):
        assert request.get("stream") is False, request
        assert request.get("temperature") == 0.2, request
        assert ("top_p" in request) == (index >= first), request  # only the second session's
        if request.get("tools"):
            assert request.get("tool_choice") == "auto"
    assert "Traceback" not in stderr


def test_a_session_adds_the_parameters_the_file_leaves_unset():
    from agentscope.model import OpenAIChatModel

    from agentscope_context_ext.agentscope2._agent_file import model_arguments

    settings = ModelSettings(
        provider="openai-compatible",
        model="m",
        base_url="http://127.0.0.1:9/v1",
        stream=False,
        options={"temperature": 0.2},
    )
    session = OpenAIChatModel.Parameters(temperature=1.5, max_tokens=64)
    arguments = model_arguments(settings, OpenAIChatModel, session)
    assert arguments["stream"] is False
    parameters = arguments["parameters"]
    assert (parameters.temperature, parameters.max_tokens, parameters.top_p) == (0.2, 64, None)


def test_a_window_the_prompts_fixed_part_fills_is_refused_at_start_in_one_line(tmp_path):
    spec = write_agent_file(
        tmp_path,
        "http://127.0.0.1:9/v1",
        system_prompt="You read files. " + "Be careful and thorough. " * 300,
        context={"max_input_tokens": 1024, "long_term_memory": {"enabled": False}},
    )
    result = run_cli(*["serve", *serve_options(tmp_path, spec)], cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("agentscope-context serve: agent file ")
    assert "no room is left for the conversation" in line and "1,024-token window" in line
    assert "serving" not in result.stdout


def test_agentscope_builtins_in_an_8k_window_are_refused_at_start(tmp_path):
    """The case of the issue: an 8k window, the explorer, AgentScope's built-ins."""
    spec = write_agent_file(
        tmp_path,
        "http://127.0.0.1:9/v1",
        tools={"explorer": {"roots": [str(tmp_path)]}, "agentscope_builtins": True},
        context={"max_input_tokens": 8192, "long_term_memory": {"enabled": False}},
    )
    result = run_cli(*["serve", *serve_options(tmp_path, spec)], cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert "no room is left for the conversation" in line and "8,192-token window" in line


async def lookup(word: str) -> str:
    """Look a word up.

    Args:
        word (str): The word.
    """
    return f"{word}: a word"


async def lookup_tools(user_id: str, agent_id: str, session_id: str) -> list:
    return [as_tool(lookup)]


@pytest.mark.parametrize("keep", [None, ["lookup"]])
def test_the_factory_keeps_the_services_toolkit_unless_asked(tmp_path, keep):
    """``context_middleware_factory(tools=...)``: other create_app users keep AgentScope's
    toolkit; with ``tools`` the agent has those and ours."""
    factory = context_middleware_factory(
        {"max_input_tokens": 16384, "long_term_memory": {"enabled": False}}, tools=keep
    )
    with (
        ModelServer("openai", lambda request: Reply(text="hello")) as model,
        ServedApp(
            tmp_path / "app", extra_agent_middlewares=factory, extra_agent_tools=lookup_tools
        ) as served,
    ):
        credential = served.create_credential(model.url)
        agent = served.create_agent("reader", "You read files.")
        session = served.create_session(agent, credential)
        served.chat(agent, session, "hello")
    names = tool_names(model.requests[0])
    if keep is None:
        assert {"Bash", "Read", "TaskCreate", "lookup", "read_file"} <= set(names)
        assert "<workspace>" in system_of(model.requests[0])
    else:
        assert names == ["lookup", "read_file"]
        assert "<workspace>" not in system_of(model.requests[0])
