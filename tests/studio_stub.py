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


class _ThreadingServer(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, *args: object) -> None:
        pass


def start_stub() -> tuple[str, dict]:
    """Start the stub on a free loopback port; returns (url, record of what it received)."""
    received: dict = {"runs": [], "messages": [], "connected": 0, "traces": 0}
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
    from agentscope.agent import ReActAgent
    from agentscope.formatter import DashScopeChatFormatter
    from agentscope.message import Msg, TextBlock
    from agentscope.tool import Toolkit, ToolResponse

    from agentscope_context_ext import enable_context_management
    from agentscope_context_ext.testing import ScriptedChatModel, reply, tool_call

    url, received = start_stub()
    agentscope.init(project="context-ext-test", name="studio-run", studio_url=url)

    async def page(n: int) -> ToolResponse:
        """Return a page.

        Args:
            n (int): Page number.
        """
        return ToolResponse(content=[TextBlock(type="text", text=f"page {n} line\n" * 600)])

    toolkit = Toolkit()
    toolkit.register_tool_function(page)
    script = [reply(f"page {n}", tool_call("page", n=n)) for n in range(14)] + ["done"]
    agent = ReActAgent(
        name="reader",
        sys_prompt="Read pages.",
        model=ScriptedChatModel(script),
        formatter=DashScopeChatFormatter(),
        toolkit=toolkit,
        max_iters=40,
    )
    agent.set_console_output_enabled(False)
    manager = enable_context_management(
        agent,
        {
            "workspace": tempfile.mkdtemp(),
            "max_input_tokens": 8192,
            "compaction": {"model": "extractive"},
            "long_term_memory": {"enabled": False},
        },
    )
    asyncio.run(agent(Msg("user", "read the pages", "user")))
    json.dump(
        {
            **received,
            "compactions": manager.stats.compactions,
            "memory_names": sorted({m.name for m in agent.memory.messages}),
        },
        sys.stdout,
    )


if __name__ == "__main__":
    main()
