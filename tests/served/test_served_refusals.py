"""A refusal of ours in a served turn is said on the reply's stream (design §11.3): a
``context_ext.error`` event with the one-line message, and the reply's end (stored with the
reply) saying it, not AgentScope's "The reply failed with an unknown error."; an expected
failure (ours, or the model's server down) is one line on serve's terminal, no traceback.

A real ``create_app`` served by uvicorn on loopback (``served_app.ServedApp``), or
``agentscope-context serve`` as a subprocess; the model a loopback OpenAI-protocol server."""

from __future__ import annotations

import contextlib
import logging

import pytest
from crashing_server import CrashingServer, dead_url
from llm_servers import ModelServer, Reply
from served_app import (
    ServedApp,
    ServeProcess,
    agent_file,
    reply_end,
    serve_options,
    service_missing,
)

from agentscope_context_ext import context_middleware_factory

pytestmark = pytest.mark.skipif(service_missing() is not None, reason=str(service_missing()))

UNKNOWN = "The reply failed with an unknown error."


class Records(logging.Handler):
    """What AgentScope's service logs (its logger ``as`` does not propagate)."""

    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture
def service_log():
    handler = Records()
    logger = logging.getLogger("as")
    logger.addHandler(handler)
    yield handler.records
    logger.removeHandler(handler)


def errors_of(events: list[dict]) -> list[dict]:
    return [
        e.get("value") or {}
        for e in events
        if e.get("type") == "CUSTOM" and e.get("name") == "context_ext.error"
    ]


async def build_log() -> str:
    """Print the whole build log."""
    return "".join(f"step {i:05d}: compiled module_{i}.o\n" for i in range(20000))


async def log_tools(user_id: str, agent_id: str, session_id: str) -> list:
    from agentscope_context_ext.agentscope2 import as_tool

    return [as_tool(build_log)]


def test_an_overflow_in_a_served_turn_is_said_on_the_stream(tmp_path, service_log):
    """A result of an exempt tool (never cut) over the window: nothing is left to offload, so
    the call after it is refused, and the turn says why."""
    factory = context_middleware_factory(
        {
            "max_input_tokens": 16384,
            "long_term_memory": {"enabled": False},
            "truncation": {"exempt_tools": ["build_log"]},
        }
    )

    def respond(request: dict) -> Reply:
        return Reply(tool_calls=[("c1", "build_log", {})])

    with (
        ModelServer("openai", respond) as model,
        ServedApp(
            tmp_path / "app", extra_agent_middlewares=factory, extra_agent_tools=log_tools
        ) as served,
    ):
        credential = served.create_credential(model.url)
        agent = served.create_agent("reader", "You read build logs.")
        session = served.create_session(agent, credential)
        events = served.chat(agent, session, "why did the build fail?")
        stored = served.messages(agent, session)["messages"]
    assert len(model.requests) == 1  # the call after the result was refused before the model
    (error,) = errors_of(events)
    message = error["message"]
    assert error["error"] == "ContextOverflowError" and "\n" not in message
    assert "over the 16,384-token window" in message and "the messages" in message
    assert error["parts"]["messages"] > 16384  # the pipeline's own figures in the same event
    end = reply_end(events)
    assert end["finished_reason"] == "error"
    assert end["error"] == {"type": "invalid_request", "message": message}
    assert stored[-1]["role"] == "assistant" and stored[-1]["error"]["message"] == message
    assert UNKNOWN not in str(events)
    assert not [record for record in service_log if record.exc_info]


def test_a_workspace_that_cannot_be_written_is_said_on_the_stream(tmp_path, service_log):
    factory = context_middleware_factory(
        {"max_input_tokens": 16384, "long_term_memory": {"enabled": False}}
    )
    with (
        ModelServer("openai", lambda request: Reply(text="hello")) as model,
        ServedApp(tmp_path / "app", extra_agent_middlewares=factory) as served,
    ):
        credential = served.create_credential(model.url)
        agent = served.create_agent("reader", "You read files.")
        session = served.create_session(agent, credential)
        # a file where the session's folder must be: nothing can be saved for this session
        blocked = served.agent_workdir(agent) / "sessions" / session
        blocked.parent.mkdir(parents=True, exist_ok=True)
        blocked.write_text("in the way", encoding="utf-8")
        events = served.chat(agent, session, "hello")
        stored = served.messages(agent, session)["messages"]
    assert model.requests == []
    (error,) = errors_of(events)
    assert error["error"] == "WorkspaceError" and str(blocked) in error["message"]
    assert next(e["type"] for e in events) == "REPLY_START"
    end = reply_end(events)
    assert end["finished_reason"] == "error" and end["error"]["message"] == error["message"]
    assert stored[-1]["error"]["message"] == error["message"]
    assert not [record for record in service_log if record.exc_info]


@pytest.mark.parametrize("crash", [False, True], ids=["not-running", "crashing"])
def test_a_model_server_that_is_down_is_one_line_naming_its_url(tmp_path, crash):
    """Not running, or its process crashing mid-answer: the reply's end (stored with it)
    says ``cannot reach the model at URL: ...`` with the agent file's URL, and serve's
    terminal says it once, no traceback. Before, the client got the service's "Could not reach
    the model service — network error or timeout." and the terminal the error's class only."""
    with contextlib.ExitStack() as stack:
        url = stack.enter_context(CrashingServer("before")).url if crash else dead_url()
        spec = agent_file(tmp_path, url)
        served = ServeProcess(serve_options(tmp_path, spec), tmp_path)
        try:
            session = served.new_session()
            served.chat(session, "hello")
            stored = served.replies(
                session, lambda messages: any(m["role"] == "assistant" for m in messages), 120
            )
        finally:
            stderr = served.stop()
    error = stored[-1]["error"]
    assert error["type"] == "connection"
    assert error["message"].startswith(f"cannot reach the model at {url}: "), error
    if not crash:
        assert error["message"].endswith(": connection refused"), error
    assert "Traceback" not in stderr
    (line,) = [line for line in stderr.splitlines() if "cannot reach the model" in line]
    assert f"reply failed: {error['message']}" in line


@pytest.mark.parametrize("when", ["before", "mid-stream"])
async def test_serves_model_names_its_url_when_the_server_crashes(when):
    """The served model's own call, streamed: a crash before the answer or in the middle of
    its stream is ``ModelUnreachable`` with the agent file's URL (what ends the turn above)."""
    from agentscope.message import UserMsg

    from agentscope_context_ext.agentscope2._served_model import served_model
    from agentscope_context_ext.core.agent_file import ModelSettings, ModelUnreachable

    with CrashingServer(when) as server:  # type: ignore[arg-type]
        settings = ModelSettings(
            provider="openai-compatible", model="m", base_url=server.url, stream=True
        )
        model = served_model(settings)
        model.max_retries = 0
        with pytest.raises(ModelUnreachable) as raised:
            response = await model([UserMsg("user", "hello")])
            async for _ in response:
                pass
    assert str(raised.value).startswith(f"cannot reach the model at {server.url}: ")
    assert raised.value.__cause__ is not None  # the client's error stays underneath
