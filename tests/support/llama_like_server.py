"""A loopback imitation of llama-cpp-python's OpenAI server, for the cases its real server
(``llama_server.py``, the ``llama`` fixture) cannot be made to show on demand: used by
``agents/test_openai_compat.py`` and ``served/test_serve_agent_file.py``."""

from __future__ import annotations

import json
from typing import Any

from llm_servers import ModelServer


def _template_error(request: dict) -> str | None:
    """What llama-cpp-python's chat template raises on a content that is not a string."""
    for message in request.get("messages", []):
        content = message.get("content")
        if not isinstance(content, str):
            kind = "NoneType" if content is None else type(content).__name__
            return f'can only concatenate str (not "{kind}") to str'
    return None


class LlamaCppLikeServer(ModelServer):
    """The OpenAI protocol as llama-cpp-python's server answers it (an imitation): a content
    that is not a string is HTTP 500 with its error body, and without ``tool_choice: "auto"``
    its model is not shown the tools (so it calls none)."""

    def __init__(self, respond) -> None:
        super().__init__("openai", respond)
        self.refused: list[dict] = []

    def _openai(self, handler: Any, request: dict) -> None:
        problem = _template_error(request)
        if problem:
            self.refused.append(request)
            error = {"message": problem, "type": "internal_server_error", "param": None}
            body = json.dumps({"error": {**error, "code": None}}).encode()
            handler.send_response(500)
            handler.send_header("Content-Type", "application/json")
            handler.send_header("Content-Length", str(len(body)))
            handler.end_headers()
            handler.wfile.write(body)
            return
        if request.get("tool_choice") != "auto":
            request = {key: value for key, value in request.items() if key != "tools"}
        super()._openai(handler, request)
