"""A loopback stand-in for AgentScope Studio: the HTTP and socket.io endpoints the AgentScope
client calls, recording every pushed message. Run as a script, it starts the stub, connects a
managed agent to it with ``agentscope.init(studio_url=...)``, and prints what Studio received as
JSON (the test runs it in a subprocess because ``agentscope.init`` installs process-wide hooks)."""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
import threading
from socketserver import ThreadingMixIn
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

import socketio
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from otlp_receiver import records


class _ThreadingServer(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, *args: object) -> None:
        pass


def start_stub() -> tuple[str, dict]:
    """Start the stub on a free loopback port; returns (url, record of what it received)."""
    received: dict = {
        "runs": [],
        "messages": [],
        "connected": 0,
        "traces": 0,
        "spans": [],
        "services": [],
    }
    sio = socketio.Server(async_mode="threading", cors_allowed_origins="*")

    @sio.on("connect", namespace="/python")
    def connect(sid, environ, auth=None):
        received["connected"] += 1

    def http(environ, start_response):
        path = environ.get("PATH_INFO", "")
        length = int(environ.get("CONTENT_LENGTH") or 0)
        body = environ["wsgi.input"].read(length) if length else b""
        if path == "/trpc/registerRun":
            received["runs"].append(json.loads(body))
        elif path == "/trpc/pushMessage":
            received["messages"].append(json.loads(body))
        elif path == "/v1/traces":
            received["traces"] += 1
            request = ExportTraceServiceRequest()
            request.ParseFromString(body)
            spans = records(request)
            received["spans"] += [span.name for span in spans]
            received["services"] = sorted({*received["services"], *(s.service for s in spans)})
        start_response("200 OK", [("Content-Type", "application/json")])
        return [b"{}"]

    server = make_server(
        "127.0.0.1",
        0,
        socketio.WSGIApp(sio, http),
        server_class=_ThreadingServer,
        handler_class=_QuietHandler,
    )
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{server.server_port}", received


def main() -> None:
    import agentscope
    from agentscope.formatter import DashScopeChatFormatter
    from agentscope.message import Msg
    from harness_common import session_plan
    from installed_harness import is_background_call, scripted_session

    from agentscope_context_ext import enable_context_management

    from agent_harness import make_agent

    url, received = start_stub()
    agentscope.init(project="context-ext-test", name="studio-run", studio_url=url)
    # Results of 30-200 KB, a 16k window: truncation, stage two, compactions and, on each
    # compaction, a Summarizer run in the background.
    plan = session_plan(total_calls=14, sizes_kb=[30, 200, 60, 90])
    model = scripted_session(plan)
    agent = make_agent(model, DashScopeChatFormatter())
    agent.name = "reader"
    manager = enable_context_management(
        agent,
        {
            "workspace": tempfile.mkdtemp(),
            "max_input_tokens": 16384,
            "long_term_memory": {"consolidation_time": "off"},
        },
    )

    async def run() -> None:
        await agent(Msg("user", "read the documents", "user"))
        await manager.drain()  # the Summarizer's runs are over

    asyncio.run(run())
    json.dump(
        {
            **received,
            "compactions": manager.stats.compactions,
            "truncations": manager.stats.truncations,
            "summarizer_calls": sum(map(is_background_call, model.calls)),
            "first_max_bytes": manager.config.truncation.first_max_bytes,
            "memory_names": sorted({m.name for m in agent.memory.messages}),
        },
        sys.stdout,
    )


def main_cli(argv: list[str]) -> None:
    """``studio_stub.py cli COMMAND ...``: run the command with ``--studio-url`` of the stub."""
    from agentscope_context_ext.cli import main as cli_main

    url, received = start_stub()
    code = cli_main([*argv, "--studio-url", url, "--project", "cli-test"])
    from opentelemetry import trace

    trace.get_tracer_provider().force_flush()  # agentscope.init's exporter, before we print
    sys.stdout.flush()
    print("\n" + json.dumps({**received, "exit_code": code}))


if __name__ == "__main__":
    if sys.argv[1:2] == ["cli"]:
        main_cli(sys.argv[2:])
    else:
        main()
