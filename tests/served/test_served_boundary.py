"""Each served session's file tools see only what is theirs among the service's files (design
§11.4): two users, two sessions of one user, an agent both users run; ``read_file``,
``list_dir``, ``grep``, ``read_dialog`` and ``search_dialog`` tried with relative, absolute,
linked and ``..`` paths (and session names) into another user's and another session's folders.

In process, each turn is what ``create_app`` does (``served_turns.Worker``: a new agent with the
middleware factory's middleware and the tool factory's tools), with ``context_middleware_factory``
as any ``create_app`` gets it and with ``serve``'s own ``build_app`` factories; then
``agentscope-context serve`` itself, driven over HTTP by two users."""

from __future__ import annotations

import json
import re
from pathlib import Path

import httpx
import pytest
from llm_servers import ModelServer, Reply
from served_app import ServeProcess, service_missing

from agentscope_context_ext import agentscope_major

if agentscope_major() < 2:
    pytest.skip("create_app and the 2.x middleware are AgentScope 2.x's", allow_module_level=True)

from agentscope.message import Msg, ToolResultBlock
from served_turns import Worker, config

from agentscope_context_ext import context_middleware_factory
from agentscope_context_ext.core.agent_file import load_agent_file
from agentscope_context_ext.testing import ModelCall, ScriptedChatModel, reply, tool_call

needs_service = pytest.mark.skipif(service_missing() is not None, reason=str(service_missing()))

SECRETS = {"a1": "kiwialice", "sa": "plumalice", "b1": "figbob", "b2": "mangobob", "sb": "limebob"}
"""Each session's word: in its saved output and its dialog, nowhere else."""
SESSIONS = {  # session: (user, agent)
    "a1": ("alice", "agent-a"),
    "sa": ("alice", "agent-s"),
    "b1": ("bob", "agent-b"),
    "b2": ("bob", "agent-b"),
    "sb": ("bob", "agent-s"),
}


def outputs(message: Msg) -> dict[str, str]:
    """The tool results in ``message``, by call id."""
    found = {}
    for block in message.content:
        if isinstance(block, ToolResultBlock):
            output = block.output
            text = (
                output
                if isinstance(output, str)
                else "".join(getattr(b, "text", "") for b in output)
            )
            found[block.id] = text
    return found


class Service:
    """Two users' agents in one workspaces folder, each turn built anew as ``create_app``
    builds it; a probing turn runs the calls the test gives and keeps what they answered."""

    def __init__(self, root: Path, middlewares, tools=None) -> None:
        self.workspaces = root / "ws"
        self.kind = "create_app"
        self.probes: list = []
        self.answers: dict[str, str] = {}

        def script(call: ModelCall):
            if not call.tools:
                return "## Goal\n- read outputs"
            said = ""
            for message in reversed(call.msgs):  # past 2.x's hints, to the turn's last word
                if any(isinstance(b, ToolResultBlock) for b in message.content):
                    self.answers.update(outputs(message))
                    return "done"
                if message.role == "user" and message.get_text_content():
                    said = message.get_text_content()
                    break
            if "probe" in said and self.probes:
                probes, self.probes = self.probes, []
                return reply(None, *probes)
            tag = re.search(r"read (\w+)", said or "")
            return reply(None, tool_call("big_output", tag=tag.group(1) if tag else "none"))

        self.model = ScriptedChatModel(script)
        self.workers = {
            agent: Worker(self.workspaces / agent, middlewares, self.model, tools)
            for agent in {agent for _, agent in SESSIONS.values()}
        }

    def folder(self, session: str) -> Path:
        """The session's folder of ours."""
        return self.workspaces / SESSIONS[session][1] / "sessions" / session / "context_ext"

    async def turn(self, session: str, text: str) -> None:
        user, agent = SESSIONS[session]
        await self.workers[agent].turn(user, agent, session, text)

    async def fill(self, session: str) -> None:
        """Turns reading the session's big outputs until compaction saved a dialog file."""
        for turn in range(12):
            await self.turn(session, f"read {SECRETS[session]}{turn}")
            if list((self.folder(session) / "dialog").glob("*.jsonl")):
                return
        raise AssertionError(f"no dialog saved in session {session}")

    def saved(self, session: str) -> Path:
        """One of the session's saved outputs."""
        return sorted((self.folder(session) / "tool_result").glob("*.txt"))[0]

    async def probe(self, session: str, calls: dict[str, tuple[str, dict]]) -> dict[str, str]:
        """Run ``calls`` (``id: (tool, arguments)``) in one step of a turn of ``session``; what
        each answered."""
        self.probes = [tool_call(name, call_id=key, **args) for key, (name, args) in calls.items()]
        self.answers = {}
        await self.turn(session, "probe")
        assert set(self.answers) == set(calls), self.answers
        return self.answers


def served_config(root: Path) -> dict:
    """A 16k window that compacts early (extractive, no model call), read_file's root the
    folder holding every workspace (as ``.`` holds serve's old default)."""
    return config(
        compaction={"trigger_ratio": 0.5, "model": "extractive"},
        tools={"allowed_roots": [str(root)]},
    )


def serve_factories(root: Path):
    """``serve``'s own factories (``build_app``): its context middleware and its tools,
    explorer roots ``root``."""
    from agentscope_context_ext.agentscope2._serve import build_app, parse_storage_url

    spec = load_agent_file(
        {
            "name": "reader",
            "model": {"provider": "openai-compatible", "model": "m", "base_url": "http://x:1"},
            # The harness's agents have big_output and the factories' tools, no built-ins of
            # AgentScope's: nothing for serve's tool filter to take, but big_output to keep.
            "tools": {"explorer": {"roots": [str(root)]}, "agentscope_builtins": True},
            "context": served_config(root),
        }
    )
    app = build_app(spec, parse_storage_url(f"sqlite:///{root / 'app.db'}"), root / "ws")
    return app.state.extra_agent_middlewares, app.state.extra_agent_tools


def one_line_refusal(text: str) -> bool:
    return text.startswith("Error:") and "\n" not in text.strip()


@pytest.fixture(params=["create_app", "serve"])
async def service(request, tmp_path) -> Service:
    """Five sessions with saved outputs and dialogs; ``read_file``'s root (and the explorer's,
    for serve) is ``tmp_path``, which holds the workspaces folder."""
    if request.param == "serve":
        if service_missing() is not None:
            pytest.skip(str(service_missing()))
        middlewares, tools = serve_factories(tmp_path)
    else:
        middlewares, tools = context_middleware_factory(served_config(tmp_path)), None
    service = Service(tmp_path, middlewares, tools)
    service.kind = request.param
    for session in SESSIONS:
        await service.fill(session)
    return service


async def test_read_file_reads_only_the_sessions_own_files(service: Service, tmp_path: Path):
    alice, sibling, own = service.saved("a1"), service.saved("b2"), service.saved("b1")
    (tmp_path / "planted").symlink_to(service.folder("a1"), target_is_directory=True)
    # a link in bob's own folder to alice's output: its name is his, the file is not
    (service.folder("b1") / "tool_result" / ("f" * 32 + ".txt")).symlink_to(alice)
    b1 = service.folder("b1")
    answers = await service.probe(
        "b1",
        {
            "abs-user": ("read_file", {"file_path": str(alice)}),
            "abs-session": ("read_file", {"file_path": str(sibling)}),
            "relative": ("read_file", {"file_path": str(alice.relative_to(tmp_path))}),
            "dotdot": (
                "read_file",
                {"file_path": "../../../../agent-a/sessions/a1/context_ext/" + _tail(alice)},
            ),
            "dotdot-abs": (
                "read_file",
                {"file_path": f"{b1}/../../b2/context_ext/{_tail(sibling)}"},
            ),
            "link": ("read_file", {"file_path": str(tmp_path / "planted" / _tail(alice))}),
            "link-relative": ("read_file", {"file_path": "planted/" + _tail(alice)}),
            "link-in-own": ("read_file", {"file_path": "tool_result/" + "f" * 32 + ".txt"}),
            "missing": ("read_file", {"file_path": str(service.folder("a1") / "nothing.txt")}),
            "own": ("read_file", {"file_path": _tail(own), "end_line": 3}),
            "own-abs": ("read_file", {"file_path": str(own), "end_line": 3}),
            # the designed route to another session: the same user's only
            "route-own-user": ("read_file", {"file_path": _tail(sibling), "session": "b2"}),
            "route-other-user": ("read_file", {"file_path": _tail(alice), "session": "a1"}),
        },
    )
    refused = ["abs-user", "abs-session", "relative", "dotdot", "dotdot-abs", "link"]
    refused += ["link-relative", "link-in-own", "missing"]
    for key in refused:
        assert one_line_refusal(answers[key]), (key, answers[key])
        assert "alice" not in answers[key] and "mangobob" not in answers[key], (key, answers[key])
    # a path there is refused alike whether or not the file exists
    assert answers["missing"].endswith(answers["abs-user"].split(" ", 2)[-1])
    assert "figbob" in answers["own"] and "figbob" in answers["own-abs"]
    assert "mangobob" in answers["route-own-user"]
    assert one_line_refusal(answers["route-other-user"])


async def test_read_file_of_a_shared_agent_is_each_users_own(service: Service):
    alice = service.saved("sa")
    answers = await service.probe(
        "sb",
        {
            "abs": ("read_file", {"file_path": str(alice)}),
            "dotdot": ("read_file", {"file_path": f"../../sa/context_ext/{_tail(alice)}"}),
            "route": ("read_file", {"file_path": _tail(alice), "session": "sa"}),
        },
    )
    for key, answer in answers.items():
        assert one_line_refusal(answer) and "plumalice" not in answer, (key, answer)


async def test_read_dialog_reads_only_the_users_own_sessions(service: Service):
    alice_day = sorted((service.folder("a1") / "dialog").glob("*.jsonl"))[0]
    planted = service.folder("b1") / "dialog" / "2020-01-01.jsonl"
    planted.symlink_to(alice_day)
    answers = await service.probe(
        "b1",
        {
            "own": ("read_dialog", {}),
            "link": ("read_dialog", {"date": "2020-01-01"}),
            "dotdot-date": ("read_dialog", {"date": f"../../../../agent-a/{alice_day.stem}"}),
            "abs-date": ("read_dialog", {"date": str(alice_day)}),
            "other-user": ("read_dialog", {"session": "a1"}),
            "dotdot-session": ("read_dialog", {"session": "../a1"}),
            "abs-session": ("read_dialog", {"session": str(service.folder("a1"))}),
            "same-user": ("read_dialog", {"session": "b2"}),
        },
    )
    assert "figbob" in answers["own"]
    assert "mangobob" in answers["same-user"]
    for key in ("link", "dotdot-date", "abs-date", "other-user", "dotdot-session", "abs-session"):
        assert one_line_refusal(answers[key]), (key, answers[key])
        assert "kiwialice" not in answers[key], (key, answers[key])
    shared = await service.probe("sb", {"other-user": ("read_dialog", {"session": "sa"})})
    assert one_line_refusal(shared["other-user"]) and "plumalice" not in shared["other-user"]


async def test_search_dialog_never_finds_another_users_sessions(service: Service):
    # alice's output and dialog linked into bob's session, as a tool that writes might
    (service.folder("sb") / "tool_result" / ("e" * 32 + ".txt")).symlink_to(service.saved("sa"))
    alice_day = sorted((service.folder("sa") / "dialog").glob("*.jsonl"))[0]
    (service.folder("sb") / "dialog" / "2020-01-01.jsonl").symlink_to(alice_day)
    calls = {
        f"{word}-{scope}": ("search_dialog", {"query": word + "*", "scope": scope, "limit": 50})
        for word in ("plumalice", "kiwialice", "limebob", "mangobob")
        for scope in ("session", "agent", "user")
    }
    answers = await service.probe("sb", calls)
    for scope in ("session", "agent", "user"):
        for word in ("plumalice", "kiwialice"):
            assert answers[f"{word}-{scope}"].startswith("No saved message"), answers
        assert answers[f"limebob-{scope}"].split()[0].isdigit()  # its own: found
    assert "session sa" not in json.dumps(answers)
    # the same user's other session of the same agent is found, as designed
    answers = await service.probe("b1", calls)
    assert "session b2" in answers["mangobob-agent"] and "session b2" in answers["mangobob-user"]
    assert answers["mangobob-session"].startswith("No saved message")
    for key, answer in answers.items():
        if "alice" in key:
            assert answer.startswith("No saved message"), (key, answer)


async def test_list_dir_and_grep_never_enter_another_users_or_sessions_folder(
    service: Service, tmp_path: Path
):
    if service.kind != "serve":
        pytest.skip("list_dir and grep are serve's explorer tools")
    (tmp_path / "project.md").write_text("kiwialice is a word of the project too\n")
    (tmp_path / "planted").symlink_to(service.folder("a1"), target_is_directory=True)
    (tmp_path / "planted.txt").symlink_to(service.saved("a1"))
    ws = service.workspaces
    answers = await service.probe(
        "b1",
        {
            "ls-root": ("list_dir", {"path": "."}),
            "ls-ws": ("list_dir", {"path": "ws"}),
            "ls-agent": ("list_dir", {"path": str(ws / "agent-b" / "sessions")}),
            "ls-user": ("list_dir", {"path": str(service.folder("a1"))}),
            "ls-session": ("list_dir", {"path": "ws/agent-b/sessions/b2"}),
            "ls-dotdot": ("list_dir", {"path": "ws/agent-b/sessions/b1/../../../agent-a"}),
            "ls-link": ("list_dir", {"path": "planted"}),
            "ls-own": ("list_dir", {"path": str(service.folder("b1") / "tool_result")}),
            "grep-root": ("grep", {"pattern": "alice|mangobob|figbob0 00007 ", "path": "."}),
            "grep-ws": ("grep", {"pattern": "alice|mangobob", "path": str(ws)}),
            "grep-user": ("grep", {"pattern": "alice", "path": str(service.folder("a1"))}),
            "grep-file": ("grep", {"pattern": "alice", "path": str(service.saved("a1"))}),
            "grep-dotdot": (
                "grep",
                {"pattern": "mangobob", "path": "ws/agent-b/sessions/b1/../b2"},
            ),
            "grep-link": ("grep", {"pattern": "alice", "path": "planted"}),
            "grep-link-file": ("grep", {"pattern": "alice", "path": "planted.txt"}),
        },
    )
    # what is not hidden stays visible; the workspaces folder only on the way to b1's own
    assert "project.md" in answers["ls-root"] and "ws/" in answers["ls-root"]
    assert "planted" not in answers["ls-root"]  # links into the hidden are hidden too
    assert answers["ls-ws"].splitlines()[1:] == ["agent-b/"]
    assert answers["ls-agent"].splitlines()[1:] == ["b1/"]
    assert ".txt" in answers["ls-own"]
    for key in ("ls-user", "ls-session", "ls-dotdot", "ls-link"):
        assert one_line_refusal(answers[key]), (key, answers[key])
    # grep walks only into b1's own folder: its own word, the project's line, no one else's
    assert "figbob" in answers["grep-root"] and "project.md:1:" in answers["grep-root"]
    hits = [line for line in answers["grep-root"].splitlines()[1:] if "project.md" not in line]
    assert hits and all("/b1/" in line for line in hits), hits
    assert answers["grep-ws"].startswith("0 match(es)")
    for key in ("grep-user", "grep-file", "grep-dotdot", "grep-link", "grep-link-file"):
        assert one_line_refusal(answers[key]) or answers[key].startswith("0 match"), answers[key]
        assert "kiwialice" not in answers[key] and "mangobob" not in answers[key]


async def test_a_store_folder_of_ours_is_hidden_but_for_the_sessions_own(tmp_path: Path):
    """``workspace:`` a folder: every session's files are in it (``agents/<id>/sessions/...``);
    a root holding it shows a session only its own."""
    store = tmp_path / "store"
    factory = context_middleware_factory(served_config(tmp_path) | {"workspace": str(store)})
    service = Service(tmp_path, factory)
    for session in ("a1", "b1"):
        await service.turn(session, f"read {SECRETS[session]}")

    def saved(session: str) -> Path:
        agent = SESSIONS[session][1]
        folder = store / "agents" / agent / "sessions" / session / "context_ext" / "tool_result"
        return next(folder.glob("*.txt"))

    answers = await service.probe(
        "b1",
        {
            "abs": ("read_file", {"file_path": str(saved("a1")), "end_line": 2}),
            "relative": ("read_file", {"file_path": str(saved("a1").relative_to(tmp_path))}),
            "own-abs": ("read_file", {"file_path": str(saved("b1")), "end_line": 2}),
            "own": ("read_file", {"file_path": _tail(saved("b1")), "end_line": 2}),
        },
    )
    assert one_line_refusal(answers["abs"]) and one_line_refusal(answers["relative"])
    assert "figbob" in answers["own-abs"] and "figbob" in answers["own"]


async def test_hidden_names_the_services_folders(tmp_path: Path):
    """``hidden=`` replaces the default (the folder holding the agent's workspace); the
    agent's own other sessions stay hidden whatever it says."""
    records = tmp_path / "records"
    records.mkdir()
    (records / "all-users.txt").write_text("kiwialice said something\n")
    (tmp_path / "project.md").write_text("a project line\n")
    factory = context_middleware_factory(served_config(tmp_path), hidden=[records])
    service = Service(tmp_path, factory)
    for session in ("b1", "b2"):
        await service.turn(session, f"read {SECRETS[session]}")
    answers = await service.probe(
        "b1",
        {
            "records": ("read_file", {"file_path": str(records / "all-users.txt")}),
            "sibling": ("read_file", {"file_path": str(service.saved("b2")), "end_line": 2}),
            "project": ("read_file", {"file_path": "project.md"}),
            "own": ("read_file", {"file_path": _tail(service.saved("b1")), "end_line": 2}),
        },
    )
    assert one_line_refusal(answers["records"]) and one_line_refusal(answers["sibling"])
    assert "project line" in answers["project"] and "figbob" in answers["own"]


def _tail(path: Path) -> str:
    """``tool_result/<name>`` or ``dialog/<name>`` of a saved file."""
    return f"{path.parent.name}/{path.name}"


# ----------------------------------------------------------------- agentscope-context serve


def text_of(message: dict) -> str:
    content = message.get("content")
    return content if isinstance(content, str) else json.dumps(content)


@needs_service
def test_serve_keeps_bob_out_of_alices_saved_message(tmp_path):
    """The adversary's case: serve run in a project whose agent file explores ``.``, its
    workspaces in the project (serve's old default); user bob's agent reads the path of user
    alice's saved message, lists and greps the workspaces, and gets nothing of hers."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "agent.yaml").write_text(
        "name: reader\nsystem_prompt: You read files.\n"
        "model: {provider: openai-compatible, model: scripted, base_url: URL, stream: false}\n"
        "tools: {explorer: {roots: ['.']}}\n"
        "context: {max_input_tokens: 16384, long_term_memory: {enabled: false}}\n",
        encoding="utf-8",
    )
    probes: dict[str, tuple[str, dict]] = {}
    seen: dict[str, str] = {}

    def respond(request: dict) -> Reply:
        messages = request.get("messages", [])
        said = " ".join(text_of(m) for m in messages if m.get("role") == "user")
        if not request.get("tools"):
            return Reply(text="## Goal\n- read")
        if "ALICE" in said:
            return Reply(text="noted")
        answers = {m["tool_call_id"]: text_of(m) for m in messages if m.get("role") == "tool"}
        if answers:
            seen.update(answers)
            return Reply(text="done")
        own = re.search(r"message/[0-9a-f]{32}\.txt", said)
        calls = dict(probes, own=("read_file", {"file_path": own.group(0) if own else "x"}))
        return Reply(tool_calls=[(key, name, args) for key, (name, args) in calls.items()])

    secret = "".join(f"kiwialice {i:05d} " + "k" * 60 + "\n" for i in range(1500))
    mine = "".join(f"figbob {i:05d} " + "f" * 60 + "\n" for i in range(1500))
    with ModelServer("openai", respond) as model:
        spec = project / "agent.yaml"
        spec.write_text(spec.read_text().replace("URL", model.url))
        places = ["--storage", "sqlite:///agentscope-context-serve/app.db"]
        places += ["--workspaces", "agentscope-context-serve/workspaces"]
        served = ServeProcess(["--agent", "agent.yaml", "--port", "0", *places], project)
        try:
            alice = served.new_session()
            served.chat(alice, "ALICE: keep this\n" + secret)
            served.replies(alice, lambda stored: any(m["role"] == "assistant" for m in stored), 90)
            ws = project / "agentscope-context-serve" / "workspaces"
            (saved,) = ws.glob(f"*/sessions/{alice}/context_ext/message/*.txt")
            assert "kiwialice" in saved.read_text()
            (project / "planted").symlink_to(saved.parent, target_is_directory=True)
            relative = saved.relative_to(project)
            probes.update(
                {
                    "abs": ("read_file", {"file_path": str(saved), "end_line": 3}),
                    "relative": ("read_file", {"file_path": str(relative), "end_line": 3}),
                    "dotdot": ("read_file", {"file_path": f"planted/../{relative}", "end_line": 3}),
                    "link": ("read_file", {"file_path": f"planted/{saved.name}", "end_line": 3}),
                    "ls": ("list_dir", {"path": str(relative.parent.parent)}),
                    "records": ("read_file", {"file_path": "agentscope-context-serve/app.db"}),
                    "grep": ("grep", {"pattern": "kiwialice", "path": "."}),
                }
            )
            bob = BobClient(served, model.url)
            bob.chat("BOB: my notes\n" + mine)
        finally:
            stderr = served.stop()
    assert set(seen) == {*probes, "own"}, seen
    assert "kiwialice" not in seen["abs"], "bob read alice's saved message"
    assert seen.pop("grep").strip() == "0 match(es) for 'kiwialice'"
    for key in probes.keys() - {"grep"}:
        assert one_line_refusal(seen[key]) and "kiwialice" not in seen[key], (key, seen[key])
    assert "figbob" in seen["own"]  # his own saved message stays readable
    # serve said where the workspaces are, and that they are hidden
    start = "\n".join(served.lines)
    assert "workspaces:  " + str(ws) in start and "inside the current directory: hidden" in start
    assert "Traceback" not in stderr


class BobClient:
    """A second user of a running ``serve``: his own credential, agent and session."""

    def __init__(self, served: ServeProcess, model_url: str) -> None:
        self.served = served
        self.client = httpx.Client(base_url=served.url, headers={"X-User-ID": "bob"}, timeout=30)
        data = {"type": "openai_credential", "api_key": "no-key", "base_url": model_url}
        credential = self._post("/credential/", {"data": {**data, "name": "bob-model"}})
        self.agent = self._post("/agent/", {"name": "reader", "system_prompt": "You read."})
        body = dict(served.session_body, agent_id=self.agent["agent_id"])
        body["chat_model_config"] = dict(
            body["chat_model_config"], credential_id=credential["credential_id"]
        )
        self.session = self._post("/sessions/", body)["session_id"]

    def _post(self, path: str, body: dict) -> dict:
        response = self.client.post(path, json=body)
        assert response.status_code < 300, response.text
        return response.json()

    def chat(self, text: str) -> None:
        """One turn, to its end."""
        agent = self.agent["agent_id"]
        message = {"role": "user", "name": "user", "content": [{"type": "text", "text": text}]}
        self._post("/chat/", {"agent_id": agent, "session_id": self.session, "input": message})
        served, client = self.served, self.served.client
        served.client = self.client  # poll as bob
        served.agent_id, agent_id = agent, served.agent_id
        try:
            served.replies(
                self.session, lambda stored: any(m["role"] == "assistant" for m in stored), 90
            )
        finally:
            served.client, served.agent_id = client, agent_id
            self.client.close()


@needs_service
def test_serve_keeps_its_folders_out_of_the_current_directory(tmp_path, monkeypatch):
    """Without --storage and --workspaces, serve's records and workspaces go to this user's
    data folder, not the project it is started in (where the file tools read); its start lines
    say where."""
    project, data = tmp_path / "project", tmp_path / "data"
    project.mkdir()
    (project / "agent.yaml").write_text(
        "name: reader\n"
        "model: {provider: openai-compatible, model: m, base_url: 'http://127.0.0.1:9/v1'}\n"
        "tools: {explorer: {roots: ['.']}}\n",
        encoding="utf-8",
    )
    monkeypatch.setenv("XDG_DATA_HOME", str(data))
    served = ServeProcess(["--agent", "agent.yaml", "--port", "0"], project)
    try:
        served.new_session()
    finally:
        served.stop()
    folder = data / "agentscope-context" / "serve"
    assert (
        f"records:     {folder / 'app.db'} (outside the agents' file tools' roots)" in served.lines
    )
    assert f"workspaces:  {folder / 'workspaces'} (outside" in "\n".join(served.lines)
    assert (folder / "app.db").is_file()
    assert [p.name for p in project.iterdir()] == ["agent.yaml"]


def test_serves_data_folder_follows_xdg_else_the_home(tmp_path, monkeypatch):
    from agentscope_context_ext.core.agent_file import ServeSettings, serve_data_folder

    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert serve_data_folder() == tmp_path / "xdg" / "agentscope-context" / "serve"
    for ignored in ("", "relative/data"):  # the XDG spec: a relative one is ignored
        monkeypatch.setenv("XDG_DATA_HOME", ignored)
        expected = tmp_path / "home" / ".local" / "share" / "agentscope-context" / "serve"
        assert serve_data_folder() == expected
    settings = ServeSettings(agent=Path("agent.yaml"))
    assert settings.workspaces == expected / "workspaces"
    assert settings.storage == f"sqlite:///{expected / 'app.db'}"
