"""The parser of ``agentscope-context``: every command, its options and its help (the CLI
reference of the docs is generated from it).

Building it imports neither AgentScope nor the core's heavier modules: ``--help`` of any command
answers in a fraction of a second (bench ``startup``); each command imports what it needs when
it runs (``_commands``).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from .. import __version__
from ..compat import agent_class_name
from ._arguments import ArgumentParser, days
from ._studio import studio_arguments

__all__ = ["build_parser"]


def _workspace_argument(command: argparse.ArgumentParser) -> None:
    command.add_argument(
        "workspace", help="the workspace: a folder, or redis://[user:password@]host:port/db"
    )


def _config_argument(command: argparse.ArgumentParser, help: str = "YAML/JSON config file") -> None:
    command.add_argument("--config", type=Path, help=help)


def build_parser(agent: str | None = None) -> argparse.ArgumentParser:
    """The parser of ``agentscope-context`` and every command (what the CLI reference is
    generated from).

    Args:
        agent (`str | None`): What the help calls the agent; ``None``: the installed
            AgentScope's class (``Agent``, 1.x ``ReActAgent``).
    """
    agent = agent or agent_class_name()
    parser = ArgumentParser(
        prog="agentscope-context",
        description="Context management for AgentScope agents: truncation, compaction, memory.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log what happens")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    demo = commands.add_parser(
        "demo",
        help="run the offline demo: a real agent exploring a real folder",
        description=f"A real AgentScope {agent} with read_file, list_dir and grep explores a "
        "folder (by default the installed AgentScope package), driven by a scripted plan, with a window "
        "small enough that truncation, re-truncation and compaction all happen. Offline, no API "
        "key. Writes report.md, report.json and tokens.png.",
    )
    demo.add_argument(
        "--out",
        type=Path,
        default=Path("agentscope-context-demo"),
        help="output folder (default: ./agentscope-context-demo)",
    )
    _config_argument(demo, "YAML/JSON config file (default: the demo's small window)")
    demo.add_argument(
        "--root", type=Path, help="folder to explore (default: the installed AgentScope package)"
    )
    demo.add_argument(
        "--workspace",
        help="workspace to use instead of OUT/workspace: a folder or a redis:// URL",
    )
    studio_arguments(demo)

    cleanup = commands.add_parser(
        "cleanup",
        help="delete saved tool results older than the TTL",
        description="Delete tool_result/ files older than --ttl-days (default: the config's), "
        "except those the latest summary.md or a saved session (sessions/) still names.",
    )
    _workspace_argument(cleanup)
    cleanup.add_argument("--ttl-days", type=days, help="age limit in days (a positive number)")
    _config_argument(cleanup)

    replay = commands.add_parser(
        "replay",
        help="replay a transcript through the hooks and report",
        description="Replay a transcript (AgentScope dialog JSONL, OpenAI message lists such as "
        'tau-bench, OpenAI-format JSONL with one {"messages": [...]} conversation a line, '
        "Claude Code JSONL, SWE-agent .traj) step by step through the same hooks, with "
        "extractive compaction summaries, and report what the model would have seen. A file of "
        "many conversations replays each on its own, in order; the report adds them up.",
    )
    replay.add_argument("transcript", type=Path, help="the transcript file")
    replay.add_argument(
        "--format",
        default="auto",
        choices=["auto", "agentscope", "openai", "claude-code", "swe-agent"],
        help="the transcript's format; auto finds it from the extension and the first record",
    )
    replay.add_argument("--max-input-tokens", type=int, help="the window to replay with")
    _config_argument(replay)
    replay.add_argument(
        "--out", type=Path, default=Path("agentscope-context-replay"), help="output folder"
    )
    replay.add_argument(
        "--workspace",
        help="workspace to replay into instead of OUT/workspace: a folder or a redis:// URL "
        "(each conversation gets its own sub-folder, or its own key prefix)",
    )
    studio_arguments(replay)

    inspect_cmd = commands.add_parser(
        "inspect",
        help="describe a workspace: summary, dialog, saved results, Memory.md",
        description="Show the latest summary, dialog files and line counts, saved tool results "
        "and their age, Memory.md size and sections, daily notes and Summarizer jobs.",
    )
    _workspace_argument(inspect_cmd)
    _config_argument(inspect_cmd, "YAML/JSON config file (for the TTL)")

    search = commands.add_parser(
        "search",
        help="ranked search of saved history: compacted messages and saved outputs",
        description="Search what left the context (dialog/ and the saved tool outputs) with a "
        "full-text index (BM25), best hit first: file and line, and a snippet. WORKSPACE is "
        "one conversation's workspace, a served agent's workspace or store (every session it "
        'lists), or a folder of served agents\' workspaces. Words, "a phrase", prefix*, '
        "identifiers (my_var, a/b.py) and CJK text work.",
    )
    _workspace_argument(search)
    search.add_argument(
        "query",
        help="what to find; one starting with '-' works as it is (search WS -permission), "
        "or after '--' (search WS -- --force)",
    )
    search.add_argument(
        "--scope",
        default="all",
        help="all (default), session (needs --session), agent (needs --agent) or user "
        "(needs --user)",
    )
    search.add_argument("--agent", help="only this agent's sessions")
    search.add_argument("--user", help="only this user's sessions")
    search.add_argument("--session", help="only this session")
    search.add_argument("--limit", type=int, default=10, help="hits to show (default: 10)")
    search.add_argument("--json", action="store_true", help="print the hits as JSON")
    search.add_argument(
        "--rebuild",
        action="store_true",
        help="build the index again from the files first (e.g. after restoring a backup)",
    )

    chat = commands.add_parser(
        "chat",
        help="chat with an agent that has context management (your model: --agent FILE)",
        description=f"An AgentScope {agent} with context management on. With --agent, the agent file "
        "says the model (dashscope, openai, anthropic, ollama or any openai-compatible server), "
        "tools and context settings; without it, DashScopeChatModel when DASHSCOPE_API_KEY is set, "
        "else OpenAIChatModel when OPENAI_API_KEY is set. On a terminal it is interactive; "
        "otherwise every line of stdin is one message. /compact [hint], /context, /history, "
        "/search QUERY and /memory are commands. The conversation is saved after every turn and continued by the next chat "
        "with the same --session.",
    )
    chat.add_argument("--agent", type=Path, help="the agent file (YAML), see configs/agents/")
    chat.add_argument("--model", help="the model name, instead of the agent file's")
    chat.add_argument("--base-url", help="the model's server, instead of the agent file's")
    _config_argument(chat)
    studio_arguments(chat)
    chat.add_argument(
        "--session",
        default="chat",
        help="session id: the conversation to continue (default: chat)",
    )

    serve = commands.add_parser(
        "serve",
        help="serve an agent file's agent with AgentScope 2.x's own service (create_app)",
        description="Start AgentScope 2.x's service (create_app, under uvicorn) with context "
        "management on for every agent it runs: the agent file's model is registered as a "
        "credential and its agent for --user, its tools are given to the agent, its context: "
        "settings apply. Prints the URL and curl lines. SQLite storage by default (one "
        "process); redis://host:port/db for several workers.",
    )
    serve.add_argument("--agent", type=Path, required=True, help="the agent file (YAML)")
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (loopback)")
    serve.add_argument("--port", type=int, default=8000, help="port (0: a free one)")
    serve.add_argument(
        "--storage",
        help="the service's records: sqlite:///FILE or redis://host:port/db (default: "
        "app.db in $XDG_DATA_HOME/agentscope-context/serve, else ~/.local/share/...)",
    )
    serve.add_argument(
        "--workspaces",
        type=Path,
        help="folder of the agents' workspaces, one per agent (default: workspaces/ in the "
        "same folder); hidden from the agents' file tools but for each session's own folder",
    )
    serve.add_argument("--user", default="local", help="the user (X-User-ID) the agent is for")
    studio_arguments(serve)

    consolidate = commands.add_parser(
        "consolidate",
        help="merge the daily notes into Memory.md (for cron)",
        description="Merge memory/YYYY-MM-DD.md notes written since the last consolidation into "
        "Memory.md with a consolidation agent (backup first). Needs DASHSCOPE_API_KEY or "
        "OPENAI_API_KEY unless there is nothing to merge.",
    )
    _workspace_argument(consolidate)
    _config_argument(consolidate)
    consolidate.add_argument(
        "--agent", type=Path, help="use this agent file's model (as its Summarizer does)"
    )
    return parser
