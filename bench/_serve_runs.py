"""Running one B12 ``serve`` scenario: ``agentscope-context serve`` with the same agent file as
the ``chat`` scenarios (``configs/agents/llama-cpp.yaml`` pointed at the recording proxy), on
loopback, driven over HTTP as a client does: the session ``serve`` printed is created, and each
of the scenario's lines is one turn (``POST /chat/``, then the session's SSE stream read from
the replay cursor taken before it, up to the turn's ``REPLY_END``). Its row has the same
columns as a ``chat`` scenario's (:func:`_chat_runs.scenario_row`): what the stream carried
(answers, the package's notices, errors) and what the proxy saw."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import httpx
import yaml

from ._chat_runs import Ran, Scenario, Setup, agent_file, scenario_row

ENDED = ("completed", "exceed_max_iters")
"""How a turn that answered ends (``ReplyFinishedReason``): done, or out of reasoning steps
(AgentScope then has the model answer without tools, as ``chat`` does)."""

TURN_READ_SECONDS = 120.0
"""The longest silence of a turn's stream before it counts as stuck: the service sends a
heartbeat every 30 s, so only a dead server is silent this long."""


def _turn(client: httpx.Client, agent: str, session: str, text: str, deadline: float) -> dict:
    """One turn over HTTP: its answer text, the package's notices, its error events and how
    the reply ended (``finished_reason``; ``"no REPLY_END"`` when the stream never said)."""
    stored = client.get(
        f"/sessions/{session}/messages", params={"agent_id": agent, "limit": 1}
    ).json()
    params = {"agent_id": agent}
    if stored.get("event_cursor"):
        params["after"] = stored["event_cursor"]  # this turn's events only, replayed if early
    message = {"role": "user", "name": "user", "content": [{"type": "text", "text": text}]}
    posted = client.post(
        "/chat/", json={"agent_id": agent, "session_id": session, "input": message}
    )
    if posted.status_code != 200:
        return {
            "text": "",
            "notices": [],
            "errors": [f"POST /chat/ {posted.status_code}: " + posted.text[:200]],
            "finished": "refused",
            "types": [],
        }
    events: list[dict] = []
    started: set[str] = set()
    finished = "no REPLY_END"
    with client.stream("GET", f"/sessions/{session}/stream", params=params) as stream:
        for line in stream.iter_lines():
            if time.monotonic() > deadline:
                finished = "timed out"
                break
            if not line.startswith("data:"):
                continue  # blank separators and heartbeats
            event = json.loads(line[len("data:") :].strip())
            events.append(event)
            if event.get("type") == "REPLY_START":
                started.add(event.get("reply_id"))
            elif event.get("type") == "REPLY_END" and event.get("reply_id") in started:
                finished = str(event.get("finished_reason"))
                break
    custom = [e for e in events if e.get("type") == "CUSTOM"]
    streamed = "".join(e.get("delta", "") for e in events if e.get("type") == "TEXT_BLOCK_DELTA")
    return {
        "text": streamed,
        "notices": [
            str((e.get("value") or {}).get("text", ""))
            for e in custom
            if e.get("name") == "context_ext.notice"
        ],
        "errors": [
            json.dumps(e, ensure_ascii=False)[:300]
            for e in events
            if "ERROR" in str(e.get("type"))
            or str(e.get("name", "")).endswith(("refused", "error"))
        ],
        "finished": finished,
        "types": sorted({str(e.get("type")) for e in events}),
    }


def _wait_idle(client: httpx.Client, agent: str, session: str, deadline: float) -> str | None:
    """Until the session's run has ended (reply and state stored): the next turn's cursor is
    then past this one's events. The text of the reply stored last (``None``: no reply is
    stored, or the run did not end in time). Another process: polled against the deadline."""
    while time.monotonic() < deadline:
        stored = client.get(
            f"/sessions/{session}/messages", params={"agent_id": agent, "limit": 1}
        ).json()
        if not stored.get("is_running"):
            last = (stored.get("messages") or [None])[-1] or {}
            if last.get("role") != "assistant":
                return None
            return "".join(
                str(block.get("text", ""))
                for block in last.get("content") or []
                if isinstance(block, dict) and block.get("type") == "text"
            )
        time.sleep(0.2)
    return None


def run_serve_scenario(
    setup: Setup, scenario: Scenario, folder: Path, proxy: Any, timeout: float
) -> dict:
    """``serve`` with the scenario's agent file, one session, one turn per line; its row."""
    from served_app import ServedAppError, ServeProcess, serve_options

    base = folder / scenario.name
    workspace = base / "workspace"
    workspace.mkdir(parents=True)
    agent_path = base / "agent.yaml"
    agent_path.write_text(yaml.safe_dump(agent_file(setup, scenario, workspace), sort_keys=False))
    first = proxy.count()
    started = time.perf_counter()
    deadline = time.monotonic() + timeout
    turns: list[dict] = []
    code, stderr, out = -1, "", ""
    try:
        served = ServeProcess(serve_options(base, agent_path), folder)
    except ServedAppError as exc:
        stderr = str(exc)
        served = None
    if served is not None:
        out = "\n".join(served.lines)
        try:
            read = httpx.Timeout(30.0, read=TURN_READ_SECONDS)
            with httpx.Client(
                base_url=served.url, headers={"X-User-ID": served.user}, timeout=read
            ) as client:
                session = served.new_session()
                for text in scenario.inputs:
                    turn = _turn(client, served.agent_id, session, text, deadline)
                    stored = _wait_idle(client, served.agent_id, session, deadline)
                    # the stored reply is the answer (a text the stream did not carry as
                    # deltas, e.g. the answer after the last reasoning step, counts too)
                    turn["text"] = stored if stored is not None else turn["text"]
                    turns.append(turn)
                    if turns[-1]["finished"] not in ENDED:
                        break
        except (httpx.HTTPError, ServedAppError, ValueError) as exc:
            turns.append(
                {
                    "text": "",
                    "notices": [],
                    "errors": [f"{type(exc).__name__}: {exc}"],
                    "finished": "client error",
                    "types": [],
                }
            )
        finally:
            stderr = served.stop()
            code = served.process.returncode
    seconds = time.perf_counter() - started
    (base / "serve.out").write_text(
        out
        + "\n--- turns ---\n"
        + "\n".join(json.dumps(t, ensure_ascii=False) for t in turns)
        + "\n--- stderr ---\n"
        + stderr
    )
    ended_well = (
        bool(turns)
        and len(turns) == len(scenario.inputs)
        and all(t["finished"] in ENDED for t in turns)
    )
    # serve's own exit is 0 on Ctrl-C; the row's "exit" says how the session went instead
    exit_code = 0 if ended_well and code == 0 else (code if code not in (0, None) else 1)
    errors = [e for t in turns for e in t["errors"]]
    return scenario_row(
        setup,
        scenario,
        proxy.since(first),
        Ran(
            exit=exit_code,
            seconds=seconds,
            answers=[t["text"] for t in turns if not t["errors"]],
            notices="\n".join(n for t in turns for n in t["notices"]),
            reported_empty=sum(1 for e in errors if "answered nothing" in e or "empty" in e),
            last_error=(errors[-1] if errors else "")
            or next((t["finished"] for t in turns if t["finished"] not in ENDED), "")
            or next((line for line in reversed(stderr.splitlines()) if line.strip()), ""),
            traceback="Traceback" in stderr,
        ),
        [workspace, base / "ws"],
    )
