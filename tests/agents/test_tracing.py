"""Traces of what the context manager did (design §9.1), received by a loopback OTLP/HTTP
receiver (``otlp_receiver.py``, what AgentScope Studio's ``/v1/traces`` takes) and decoded with
``opentelemetry-proto``.

A tracer provider is process-wide and cannot be taken back, so every traced run is a process of
its own (``traced_run.py`` or the command line); the test process installs none, and the
bad-input tests fail before one would be installed."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from otlp_receiver import OtlpReceiver, SpanRecord, span_tree

from agentscope_context_ext import TRUNCATION_NOTICE_MARKER, TracingError, trace_to
from agentscope_context_ext.compat import agentscope_major
from agentscope_context_ext.core.events import ToolResultTruncated
from agentscope_context_ext.core.trace_export import traces_endpoint
from agentscope_context_ext.core.tracing import record_span, tracing_enabled

RUN = Path(__file__).parent.parent / "support" / "traced_run.py"
CLI = "import sys; from agentscope_context_ext.cli import main; sys.exit(main(sys.argv[1:]))"
PROJECT = "context-ext-tests"


def traced_run(scenario: str, receiver: OtlpReceiver, out: Path, **env: str) -> dict:
    done = subprocess.run(
        [sys.executable, str(RUN), scenario, receiver.url, str(out)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        env={**os.environ, **env},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def children(spans: list[SpanRecord], parent: SpanRecord) -> list[SpanRecord]:
    return sorted(
        (s for s in spans if s.parent_id == parent.span_id), key=lambda span: span.start_ns
    )


def parent_of(spans: list[SpanRecord], span: SpanRecord) -> SpanRecord | None:
    return next((s for s in spans if s.span_id == span.parent_id), None)


def tool_names(span: SpanRecord) -> list[str]:
    return sorted(t["name"] for t in json.loads(span.attributes["gen_ai.tool.definitions"]))


def tool_result(span: SpanRecord) -> str:
    """What an ``execute_tool`` span says the tool returned (2.x's attribute, or 1.x's)."""
    for key in ("gen_ai.tool.call.result", "agentscope.function.output"):
        if key in span.attributes:
            return str(span.attributes[key])
    raise AssertionError(f"no output on {span.name}: {sorted(span.attributes)}")


@pytest.fixture(scope="module")
def session(tmp_path_factory) -> tuple[list[SpanRecord], dict]:
    with OtlpReceiver() as receiver:
        result = traced_run("session", receiver, tmp_path_factory.mktemp("session"))
        return receiver.spans(), result


def test_a_traced_session_is_one_tree_under_the_agent(session) -> None:
    spans, result = session
    tree = span_tree(spans)
    roots = [s for s in spans if not s.parent_id]
    assert [s.name for s in roots] == ["invoke_agent researcher"], tree
    (root,) = roots
    assert {s.trace_id for s in spans} == {root.trace_id}, "one trace, the Summarizer's too"
    assert {s.service for s in spans} == {PROJECT}
    conversations = {s.conversation for s in spans}
    assert len(conversations) == 1 and None not in conversations, Counter(
        s.conversation for s in spans
    )
    if result["session_id"] is not None:  # 2.x: the agent's session is the conversation
        assert conversations == {result["session_id"]}
    ours = [s for s in spans if s.name.startswith("context.")]
    assert {s.scope for s in ours} == {"agentscope_context_ext"}


def test_every_compaction_is_a_span_with_its_figures(session) -> None:
    spans, result = session
    compactions = [s for s in spans if s.name == "context.compact"]
    assert result["compactions"] >= 2
    assert len(compactions) == result["compactions"], span_tree(spans)
    prefix = "agentscope_context."
    for span in compactions:
        values = span.attributes
        assert parent_of(spans, span).name == "invoke_agent researcher"
        assert values[prefix + "tokens.before"] > values[prefix + "tokens.after"] > 0
        assert values[prefix + "tokens.before"] > values[prefix + "tokens.trigger"]
        assert values[prefix + "messages.compacted"] >= 1
        assert values[prefix + "messages.kept"] >= 1
        assert values[prefix + "summary.source"] == "llm"
        assert "## Goal" in values[prefix + "summary.text"]  # what the model reads instead
        refs = values[prefix + "dialog.refs"]
        assert refs and all(ref.startswith("dialog/") and " lines " in ref for ref in refs)
        assert span.end_ns > span.start_ns and span.status != 2  # 2: ERROR
        # the summary model's call, with its usage, and the Summarizer after it
        inside = children(spans, span)
        chats = [s for s in inside if s.attributes.get("gen_ai.operation.name") == "chat"]
        assert chats, [s.name for s in inside]
        assert all(s.attributes["gen_ai.usage.input_tokens"] > 0 for s in chats)
        summarizers = [s for s in inside if s.name == "context.summarizer"]
        assert len(summarizers) == 1, [s.name for s in inside]
        agent = children(spans, summarizers[0])
        assert [s.name for s in agent] == ["invoke_agent summarizer"]
        assert summarizers[0].attributes[prefix + "attempts"] == 1


def test_every_cut_is_a_span_and_tool_spans_show_the_cut_output(session) -> None:
    spans, result = session
    cuts = [s for s in spans if s.name == "context.truncate"]
    prefix = "agentscope_context."
    by_stage = Counter(s.attributes[prefix + "stage"] for s in cuts)
    assert by_stage[1] == result["truncations"] >= 5
    assert by_stage[2] == result["retruncations"] >= 1
    for cut in cuts:
        assert cut.attributes[prefix + "bytes.before"] > cut.attributes[prefix + "bytes.after"]
        assert cut.attributes["gen_ai.tool.name"] == "fetch"
    tools = {
        s.attributes.get("gen_ai.tool.call.id"): s for s in spans if s.name == "execute_tool fetch"
    }
    assert len(tools) == 24
    for cut in (c for c in cuts if c.attributes[prefix + "stage"] == 1):
        assert cut.attributes[prefix + "saved_path"].startswith("tool_result/")
        tool = tools[cut.attributes["gen_ai.tool.call.id"]]
        text = tool_result(tool)
        # the model got an excerpt of at most 8 KiB and the notice, not the 30-150 KB output
        assert TRUNCATION_NOTICE_MARKER in text and len(text) < 12_000, text[:300]
        assert cut.attributes[prefix + "saved_path"] in text
        if agentscope_major() >= 2:  # 2.x's tool span is current while the tool runs
            assert cut.parent_id == tool.span_id


def test_chat_spans_list_the_tools_the_model_was_sent(session) -> None:
    spans, result = session
    (root,) = [s for s in spans if not s.parent_id]
    chats = [s for s in children(spans, root) if s.name.startswith("chat ")]
    assert [tool_names(s) for s in chats] == result["agent_call_tools"]
    sent = result["agent_call_tools"]
    assert "read_dialog" not in sent[0], "the dialog tools come with the first compaction"
    assert "read_dialog" in sent[-1]


@pytest.mark.agentscope2
def test_a_tracing_middleware_behind_ours_still_shows_the_cut_output(tmp_path: Path) -> None:
    with OtlpReceiver() as receiver:
        result = traced_run("misordered", receiver, tmp_path)
        spans = receiver.spans()
    cuts = [s for s in spans if s.name == "context.truncate"]
    first = [c for c in cuts if c.attributes["agentscope_context.stage"] == 1]
    assert len(first) == result["truncations"] >= 5
    tools = {s.span_id: s for s in spans if s.name == "execute_tool fetch"}
    for cut in first:
        assert cut.parent_id in tools, span_tree(spans)
        assert TRUNCATION_NOTICE_MARKER in tool_result(tools[cut.parent_id])
    (root,) = [s for s in spans if not s.parent_id]
    chats = [s for s in children(spans, root) if s.name.startswith("chat ")]
    assert [tool_names(s) for s in chats] == result["agent_call_tools"]


def test_no_span_leaves_a_run_that_is_not_traced(tmp_path: Path) -> None:
    with OtlpReceiver() as receiver:
        # OpenTelemetry's own variable names a receiver, but nobody installed a provider
        result = traced_run("off", receiver, tmp_path, OTEL_EXPORTER_OTLP_ENDPOINT=receiver.url)
        assert result["compactions"] >= 2
        assert receiver.requests == 0 and receiver.spans() == []


def test_tracing_off_in_this_process_records_nothing() -> None:
    assert not tracing_enabled()
    record_span(
        ToolResultTruncated(
            tool="t",
            call_id="c",
            path="tool_result/x.txt",
            bytes_before=9,
            bytes_after=1,
            tokens_saved=2,
        )
    )


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("", "expected http://HOST:PORT"),
        ("studio:3000", "expected http://HOST:PORT"),
        ("ftp://127.0.0.1:3000", "expected http://HOST:PORT"),
        ("http://", "expected http://HOST:PORT"),
        ("http://127.0.0.1:99999", "out of range"),
    ],
)
def test_a_bad_receiver_url_is_a_clear_error(url: str, expected: str) -> None:
    with pytest.raises(TracingError, match=expected):
        trace_to(url)
    assert not tracing_enabled()


def test_no_receiver_listening_is_a_clear_error() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # bound, not listening: connections are refused
        with pytest.raises(
            TracingError, match=f"cannot reach a trace receiver at http://127.0.0.1:{port}"
        ):
            trace_to(f"http://127.0.0.1:{port}")
    assert not tracing_enabled()


def test_the_endpoint_is_studio_s_v1_traces() -> None:
    assert traces_endpoint("http://127.0.0.1:3000") == "http://127.0.0.1:3000/v1/traces"
    assert traces_endpoint("http://127.0.0.1:3000/") == "http://127.0.0.1:3000/v1/traces"
    assert (
        traces_endpoint("https://otel.example:4318/v1/traces")
        == "https://otel.example:4318/v1/traces"
    )


@pytest.mark.agentscope2
def test_demo_with_studio_url_sends_its_traces(tmp_path: Path) -> None:
    with OtlpReceiver() as receiver:
        done = subprocess.run(
            [
                sys.executable,
                "-c",
                CLI,
                "demo",
                "--out",
                str(tmp_path / "demo"),
                "--studio-url",
                receiver.url,
                "--project",
                "demo-test",
            ],
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        spans = receiver.spans()
    assert done.returncode == 0, done.stderr[-2000:]
    assert f"traces: {receiver.url}/v1/traces (project demo-test)" in done.stdout
    report = json.loads((tmp_path / "demo" / "report.json").read_text())
    names = Counter(s.name for s in spans)
    assert names["invoke_agent explorer"] == 1
    assert names["context.compact"] == report["compactions"] >= 1
    assert names["context.truncate"] == report["truncations"] + report["retruncations"]
    assert sum(n for name, n in names.items() if name.startswith("chat ")) == report["steps"]
    assert {s.service for s in spans} == {"demo-test"}


@pytest.mark.agentscope2
def test_serve_with_studio_url_traces_each_turn_as_its_session(tmp_path: Path) -> None:
    from llm_servers import ModelServer, Reply
    from served_app import ServeProcess, agent_file, serve_options, service_missing

    if service_missing() is not None:
        pytest.skip(str(service_missing()))
    big = tmp_path / "big.txt"
    big.write_text("".join(f"line {i:05d} " + "z" * 70 + "\n" for i in range(2000)))

    def respond(request: dict) -> Reply:
        if any(m.get("role") == "tool" for m in request["messages"]):
            return Reply(text="It has 2000 lines.")
        return Reply(tool_calls=[("call-1", "Read", {"file_path": str(big)})])

    with ModelServer("openai", respond) as model, OtlpReceiver() as receiver:
        spec = agent_file(tmp_path, model.url)
        with spec.open("a", encoding="utf-8") as handle:  # the turn reads with AgentScope's Read
            handle.write("tools: {agentscope_builtins: true}\n")
        options = serve_options(tmp_path, spec)
        served = ServeProcess(
            [*options, "--studio-url", receiver.url, "--project", "served"], tmp_path
        )
        try:
            assert f"traces: {receiver.url}/v1/traces (project served)" in served.lines
            session = served.new_session()
            served.chat(session, "how long is big.txt?")
            served.replies(
                session, lambda stored: any(m["role"] == "assistant" for m in stored), 90
            )
        finally:
            stderr = served.stop()  # Ctrl-C: the last spans are sent on the way out
        spans = receiver.spans()
    assert "Traceback" not in stderr, stderr[-2000:]
    names = Counter(s.name for s in spans)
    assert names["invoke_agent reader"] == 1, span_tree(spans)
    assert names["execute_tool Read"] == 1 and names["context.truncate"] == 1
    turn = [s for s in spans if s.conversation == session]
    assert {s.name for s in turn} >= {
        "invoke_agent reader",
        "context.truncate",
        "execute_tool Read",
    }
    (tool,) = [s for s in spans if s.name == "execute_tool Read"]
    text = tool_result(tool)
    assert TRUNCATION_NOTICE_MARKER in text and len(text) < 60_000
    assert {s.service for s in spans} == {"served"}


def test_a_recovered_length_rejection_is_a_span_of_the_rejected_call(tmp_path: Path) -> None:
    with OtlpReceiver() as receiver:
        result = traced_run("overflow", receiver, tmp_path)
        spans = receiver.spans()
    recoveries = [s for s in spans if s.name == "context.recover"]
    assert len(recoveries) == 1, span_tree(spans)
    (recovery,) = recoveries
    prefix = "agentscope_context."
    assert recovery.attributes[prefix + "provider.tokens"] == 17000
    assert recovery.attributes[prefix + "provider.limit"] == 16384
    assert "maximum context length" in recovery.attributes[prefix + "error"]
    assert recovery.conversation == next(s for s in spans if not s.parent_id).conversation
    assert result["compactions"] >= 1
    # the compaction it made is in the same trace, and the run went on to its end
    assert any(s.name == "context.compact" for s in spans)
    assert len([s for s in spans if s.name == "execute_tool fetch"]) == 24
    # the call sent again after the recovery's compaction offers the dialog it opened
    sent = result["agent_call_tools"]
    assert "read_dialog" not in sent[5] and "read_dialog" in sent[6], sent[:8]


def test_a_refused_prompt_is_an_error_span(tmp_path: Path) -> None:
    with OtlpReceiver() as receiver:
        result = traced_run("refuse", receiver, tmp_path)
        spans = receiver.spans()
    assert result["calls"] == 1 and "the messages" in result["refused"]
    (refusal,) = [s for s in spans if s.name == "context.refuse"]
    assert refusal.status == 2  # ERROR
    assert refusal.attributes["agentscope_context.window"] == 16384
    assert refusal.attributes["agentscope_context.tokens.prompt"] > 16384
    assert refusal.attributes["agentscope_context.largest"] == "messages"
    chats = [s for s in spans if s.name.startswith("chat ")]
    assert len(chats) == 1, "only the call before the result was sent"


EXPORT_CHECKS = Path(__file__).parent.parent / "support" / "export_checks.py"


def export_check(*argv: str) -> dict:
    done = subprocess.run(
        [sys.executable, str(EXPORT_CHECKS), *argv],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_flush_says_when_the_receiver_refused_the_spans() -> None:
    with OtlpReceiver(status=400) as receiver:
        result = export_check("flush", receiver.url)
    assert result["taken"] is False and receiver.requests == 1


def test_flush_gives_up_at_its_timeout_when_the_receiver_does_not_answer() -> None:
    with socket.socket() as sock:  # listening, never accepting: the request hangs
        sock.bind(("127.0.0.1", 0))
        sock.listen(1)
        result = export_check("flush", f"http://127.0.0.1:{sock.getsockname()[1]}")
    assert result["taken"] is False  # before: True, once the exporter itself gave up


def test_tracing_twice_to_one_receiver_sends_each_span_once() -> None:
    with OtlpReceiver() as receiver:
        result = export_check("twice", receiver.url)
        spans = receiver.spans()
    assert result == {"same": True, "project": "one"}
    assert [s.name for s in spans] == ["context.check"]


def test_an_export_closed_while_a_span_is_handed_out_costs_the_others_nothing() -> None:
    with OtlpReceiver() as first, OtlpReceiver() as other:
        result = export_check("close", first.url, other.url)
        assert result == {"first": True, "third": True, "second_closed": True}
        assert [s.name for s in first.spans()] == ["context.check"]
        # the second export (closed) sent nothing; the third, same receiver, sent the span
        assert [s.name for s in other.spans()] == ["context.check"]


@pytest.mark.parametrize(
    ("url", "endpoint"),
    [
        ("http://127.0.0.1:3000?token=abc", "http://127.0.0.1:3000/v1/traces?token=abc"),
        ("http://127.0.0.1:3000/v1/traces?token=abc", "http://127.0.0.1:3000/v1/traces?token=abc"),
        ("http://127.0.0.1:3000/otel/#top", "http://127.0.0.1:3000/otel/v1/traces"),
        ("http://[::1]:3000", "http://[::1]:3000/v1/traces"),
    ],
)
def test_the_endpoint_keeps_the_url_s_path_and_query(url: str, endpoint: str) -> None:
    assert traces_endpoint(url) == endpoint


def test_compact_now_between_replies_names_the_agent_s_conversation(tmp_path: Path) -> None:
    with OtlpReceiver() as receiver:
        traced_run("compact_now", receiver, tmp_path)
        spans = receiver.spans()
    agent = next(s for s in spans if s.name == "invoke_agent researcher")
    between = [s for s in spans if s.name == "context.compact" and s.trace_id != agent.trace_id]
    assert len(between) == 1, span_tree(spans)
    assert between[0].conversation == agent.conversation
    inside = [s for s in spans if s.trace_id == between[0].trace_id]
    assert {s.conversation for s in inside} == {agent.conversation}, Counter(
        (s.name, s.conversation) for s in inside
    )


@pytest.mark.agentscope2
def test_a_studio_that_stops_answering_is_one_warning_line(tmp_path: Path) -> None:
    with socket.socket() as sock:  # it accepts connections, and never answers
        sock.bind(("127.0.0.1", 0))
        sock.listen(50)
        url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        done = subprocess.run(
            [sys.executable, "-c", CLI, "demo", "--out", str(tmp_path), "--studio-url", url],
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stderr.strip().splitlines() == [
        f"warning: AgentScope Studio at {url} did not take the last spans"
    ]
