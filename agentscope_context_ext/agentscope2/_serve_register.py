"""How ``serve`` registers the agent file's model and agent with the running service (design
§11.3): through the service's own HTTP API, so what it makes is what a client would have made
(found by name and brought up to date, else created); and the lines that show a user how to
talk to it.
"""

from __future__ import annotations

import json
from typing import Any

from ..core.agent_file import AgentFile
from ..core.errors import ConfigError

__all__ = ["register_agent", "register_credential", "usage_lines"]


async def register_credential(client: Any, name: str, data: dict[str, Any]) -> str:
    """The id of the credential named ``<agent>-model`` with ``data`` (updated, or created)."""
    title = f"{name}-model"
    listed = await _json(client, "GET", "/credential/")
    for record in listed.get("credentials", []):
        if (record.get("data") or {}).get("name") == title:
            await _json(
                client,
                "PATCH",
                f"/credential/{record['id']}",
                json={"data": {**data, "name": title}},
            )
            return record["id"]
    created = await _json(client, "POST", "/credential/", json={"data": {**data, "name": title}})
    return created["credential_id"]


async def register_agent(client: Any, spec: AgentFile) -> str:
    """The id of the agent named like the agent file's (its system prompt brought up to date)."""
    body = {
        "name": spec.name,
        "system_prompt": spec.system_prompt,
        "chat_config": {"react_config": {"max_iters": spec.max_iters}},
    }
    listed = await _json(client, "GET", "/agent/")
    for record in listed.get("agents", []):
        if (record.get("data") or {}).get("name") == spec.name:
            await _json(client, "PATCH", f"/agent/{record['id']}", json=body)
            return record["id"]
    return (await _json(client, "POST", "/agent/", json=body))["agent_id"]


async def _json(client: Any, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
    response = await client.request(method, path, **kwargs)
    if response.status_code >= 400:
        raise ConfigError(
            f"the service refused {method} {path}: {response.status_code} {response.text[:300]}"
        )
    return response.json() if response.content else {}


def usage_lines(
    url: str,
    user: str,
    agent_id: str,
    model: tuple[str, str, str],
    spec: AgentFile,
) -> list[str]:
    credential_type, credential_id, model_class = model
    session = {
        "agent_id": agent_id,
        "name": "first session",
        "chat_model_config": {
            "type": credential_type,
            "credential_id": credential_id,
            "model": spec.model.model,
            "model_class": model_class,
            "parameters": {},
        },
    }
    header = f"-H 'X-User-ID: {user}' -H 'Content-Type: application/json'"
    chat = {
        "agent_id": agent_id,
        "session_id": "SESSION_ID",
        "input": {"role": "user", "name": "user", "content": [{"type": "text", "text": "Hello"}]},
    }
    return [
        f"serving {spec.name!r} with context management at {url} (user {user}, agent {agent_id})",
        "a session:   curl -s -X POST " + f"{url}/sessions/ {header} -d '{json.dumps(session)}'",
        "its events:  curl -sN "
        + f"'{url}/sessions/SESSION_ID/stream?agent_id={agent_id}' -H 'X-User-ID: {user}'",
        "a message:   curl -s -X POST " + f"{url}/chat/ {header} -d '{json.dumps(chat)}'",
        "stop with Ctrl-C",
    ]
