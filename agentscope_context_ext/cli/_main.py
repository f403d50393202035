"""The ``agentscope-context`` command line (design §10).

Exit codes: 0 ok, 2 bad input (one-line reason on stderr, no traceback), 1 internal error.

One module on purpose: the parser of every command and the one place that turns a user's mistake
into exit code 2; each command's work is in its own module.
"""

from __future__ import annotations

import argparse
import logging
import re
import signal
import sys
from collections.abc import Sequence
from pathlib import Path

from .. import __version__
from ..adapter import installed
from ..core.config import ContextConfig
from ..core.errors import ConfigError, WorkspaceError
from ..core.workspace import (
    Storage,
    is_storage_url,
    open_storage,
    refuse_other_schemes,
)
from ..replay import TranscriptError
from ._arguments import ArgumentParser, UsageError, dash_query, days
from ._output import EXIT_CLOSED_OUTPUT, discard_stdout, stdout_closed
from ._studio import StudioError, studio, studio_arguments

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_BAD_INPUT = 2


class BadInput(Exception):
    """A user mistake: reported on one line, exit code 2."""


def _workspace_argument(command: argparse.ArgumentParser) -> None:
    command.add_argument(
        "workspace", help="the workspace: a folder, or redis://[user:password@]host:port/db"
    )


def _open_workspace(value: str) -> Storage:
    """An existing workspace: a folder that exists, or a Redis server that answers."""
    refuse_other_schemes(value)
    if not is_storage_url(value) and not Path(value).is_dir():
        raise BadInput(f"{value}: not a workspace directory")
    return open_storage(value)


def _config_argument(command: argparse.ArgumentParser, help: str = "YAML/JSON config file") -> None:
    command.add_argument("--config", type=Path, help=help)


def _parser() -> argparse.ArgumentParser:
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
        description="A real ReActAgent with read_file, list_dir and grep explores a folder (by "
        "default the installed AgentScope package), driven by a scripted plan, with a window "
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
        "tau-bench, Claude Code JSONL, SWE-agent .traj) step by step through the same hooks, "
        "with extractive compaction summaries, and report what the model would have seen.",
    )
    replay.add_argument("transcript", type=Path, help="the transcript file")
    replay.add_argument(
        "--format",
        default="auto",
        choices=["auto", "agentscope", "openai", "claude-code", "swe-agent"],
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
        description="A ReActAgent with context management on. With --agent, the agent file "
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


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``agentscope-context``; returns the exit code (141 when the reader of
    standard output went away, see ``_output``)."""
    try:
        try:
            return _main(argv)
        finally:
            sys.stdout.flush()  # a reader gone shows here when the output fit in the buffer
    except BrokenPipeError as exc:
        if not stdout_closed():
            print(f"agentscope-context: internal error: {exc!r}", file=sys.stderr)
            return EXIT_ERROR
        discard_stdout()
        return EXIT_CLOSED_OUTPUT


def _main(argv: Sequence[str] | None) -> int:
    parser = _parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        try:
            args = parser.parse_args(argv)
        except UsageError as error:
            args = dash_query(parser, argv, error)
    except UsageError as exc:
        print(exc, file=sys.stderr)
        return EXIT_BAD_INPUT
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
    )
    if args.command is None:
        parser.print_help()
        return EXIT_BAD_INPUT
    try:
        if args.command == "demo":
            return _cmd_demo(args)
        if args.command == "cleanup":
            return _cmd_cleanup(args)
        if args.command == "consolidate":
            return _cmd_consolidate(args)
        if args.command == "replay":
            return _cmd_replay(args)
        if args.command == "inspect":
            return _cmd_inspect(args)
        if args.command == "search":
            return _cmd_search(args)
        if args.command == "chat":
            return _cmd_chat(args)
        if args.command == "serve":
            return _cmd_serve(args)
    except (BadInput, ConfigError, WorkspaceError, TranscriptError, StudioError) as exc:
        reason = " ".join(str(exc).split())
        print(f"agentscope-context {args.command}: {reason}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return EXIT_ERROR
    except Exception as exc:
        if isinstance(exc, BrokenPipeError) and stdout_closed():
            raise  # the reader of the output went away: main ends quietly
        logging.getLogger("agentscope_context_ext").debug("internal error", exc_info=True)
        print(
            f"agentscope-context {args.command}: internal error: {exc!r} (run with -v for details)",
            file=sys.stderr,
        )
        if args.verbose:
            raise
        return EXIT_ERROR
    print(f"agentscope-context: unknown command {args.command}", file=sys.stderr)
    return EXIT_BAD_INPUT


def _config(path: Path | None) -> ContextConfig:
    return ContextConfig.from_file(path) if path else ContextConfig()


def _cmd_demo(args: argparse.Namespace) -> int:
    from ..demo import run_demo

    config = ContextConfig.from_file(args.config) if args.config else None
    if args.root is not None and not args.root.is_dir():
        raise BadInput(f"--root {args.root}: not a directory")
    if args.out.exists() and not args.out.is_dir():
        raise BadInput(f"--out {args.out}: exists and is not a directory")
    if args.workspace is not None:
        refuse_other_schemes(args.workspace)  # a folder would be made of it
    with studio(args, "demo"):
        report = run_demo(
            args.out,
            config,
            args.root,
            sys.stdout,
            studio=bool(args.studio_url),
            workspace=args.workspace,
        )
    ok = report["pair_violations"] == 0 and report["offloaded_files_missing"] == 0
    return EXIT_OK if ok else EXIT_ERROR


def _cmd_cleanup(args: argparse.Namespace) -> int:
    from ..core.pipeline import SUMMARY_FILE
    from ..core.workspace import ToolResultStore, saved_paths

    storage = _open_workspace(args.workspace)
    config = _config(args.config)
    ttl = args.ttl_days if args.ttl_days is not None else config.truncation.ttl_days
    # What the latest summary or a saved conversation names stays: the agent may still be told
    # to read it (a chat continues its session with the notices it had).
    summary = (storage.read(SUMMARY_FILE) or b"").decode("utf-8", errors="replace")
    keep = saved_paths(summary)
    for text in installed.saved_session_texts(args.workspace):
        keep |= saved_paths(text)
    removed = ToolResultStore(storage, ttl_days=ttl).cleanup(keep=keep)
    kept = f"; kept {len(keep)} named by {SUMMARY_FILE} or a saved session" if keep else ""
    print(f"removed {len(removed)} tool result file(s) older than {ttl:g} day(s){kept}")
    for path in removed:
        print(f"  {path}")
    return EXIT_OK


def _cmd_consolidate(args: argparse.Namespace) -> int:
    import asyncio

    from ..core.longterm import LongTermMemory, read_state
    from ._models import NoModelError, model_from_environment

    storage = _open_workspace(args.workspace)
    config = _config(args.config)
    settings = config.long_term_memory
    memory = LongTermMemory(storage, backups_kept=settings.backups_kept)
    pending = memory.daily_notes(since=read_state(memory).get("last_note_day"))
    if not pending:
        print("nothing to consolidate: no daily notes since the last consolidation")
        return EXIT_OK
    from ..agentfile import build_model, explain_model_failure

    model_settings = None
    if args.agent is not None:
        from ..core.agent_file import load_agent_file

        model_settings = load_agent_file(args.agent).model
        model, formatter = build_model(model_settings)
    else:
        try:
            model, formatter = model_from_environment(settings.model)
        except NoModelError as exc:
            raise BadInput(str(exc)) from None
    print(f"consolidating {len(pending)} day(s) of notes: {', '.join(pending)}", flush=True)
    try:
        result = asyncio.run(_consolidate(memory, model, formatter, settings.max_bytes))
    except Exception as exc:
        problem = explain_model_failure(exc, model_settings)
        if problem:
            raise BadInput(problem) from None
        raise
    print(
        f"{result.status}: Memory.md is {result.bytes_after:,} bytes"
        + (f", backup {result.backup}" if result.backup else "")
    )
    return EXIT_OK


async def _consolidate(memory, model, formatter, max_bytes: int):
    """The installed AgentScope's consolidation agent."""
    return await installed.consolidate(memory, model, formatter, max_bytes=max_bytes)


def _cmd_replay(args: argparse.Namespace) -> int:
    from ._replay import run_replay

    if args.max_input_tokens is not None and args.max_input_tokens < 1024:
        raise BadInput(f"--max-input-tokens must be at least 1024, got {args.max_input_tokens}")
    if args.out.exists() and not args.out.is_dir():
        raise BadInput(f"--out {args.out}: exists and is not a directory")
    if args.workspace is not None:
        refuse_other_schemes(args.workspace)  # a folder would be made of it
    config = _config(args.config)
    with studio(args, f"replay {args.transcript.name}"):
        total = run_replay(
            args.transcript,
            args.format,
            config,
            args.max_input_tokens,
            args.out,
            show=bool(args.studio_url),
            workspace=args.workspace,
        )
    return (
        EXIT_OK
        if total["pair_violations"] == 0 and total["unexplained_over_window"] == 0
        else EXIT_ERROR
    )


def _cmd_inspect(args: argparse.Namespace) -> int:
    from ._inspect import inspect_workspace

    storage = _open_workspace(args.workspace)
    inspect_workspace(storage, _config(args.config).truncation.ttl_days, sys.stdout)
    return EXIT_OK


def _cmd_search(args: argparse.Namespace) -> int:
    from ._search import SearchError, search_workspace

    refuse_other_schemes(args.workspace)
    try:
        search_workspace(
            args.workspace,
            args.query,
            scope=args.scope,
            agent=args.agent,
            user=args.user,
            session=args.session,
            limit=args.limit,
            as_json=args.json,
            rebuild=args.rebuild,
        )
    except SearchError as exc:
        raise BadInput(str(exc)) from None
    return EXIT_OK


def _cmd_serve(args: argparse.Namespace) -> int:
    import asyncio

    from ..core.agent_file import ServeSettings

    if not args.agent.is_file():
        raise BadInput(f"--agent {args.agent}: no such file")
    if not 0 <= args.port <= 65535:
        raise BadInput(f"--port {args.port}: not a port (0-65535)")
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.@-]{0,127}", args.user):
        raise BadInput(f"--user {args.user!r}: use letters, digits, '.', '_', '@' or '-'")
    places = {"storage": args.storage, "workspaces": args.workspaces}
    settings = ServeSettings(
        agent=args.agent,
        host=args.host,
        port=args.port,
        user=args.user,
        **{name: value for name, value in places.items() if value is not None},
    )
    # SIGTERM stops serve as Ctrl-C does: the server ends its event streams, then "stopped"
    previous = signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        with studio(args, "serve"):
            asyncio.run(installed.serve_agent_file(settings, lambda line: print(line, flush=True)))
    except KeyboardInterrupt:
        print("stopped", file=sys.stderr)
    finally:
        signal.signal(signal.SIGTERM, previous)
    return EXIT_OK


def _cmd_chat(args: argparse.Namespace) -> int:
    from ._chat import EmptyAnswer, ModelUnreachable, run_chat
    from ._models import MODEL_ENV_VARS, NoModelError

    if args.agent is not None and args.config is not None:
        raise BadInput("--agent and --config: the agent file has its own context: section")
    if args.agent is None and args.base_url:
        raise BadInput("--base-url needs --agent (the agent file says the provider)")
    config = None if args.agent is not None else _config(args.config)
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}", args.session):
        raise BadInput(
            f"--session {args.session!r}: use letters, digits, '.', '_' or '-' (at most 64)"
        )
    # On 1.x the user then types in Studio's page, as with agentscope.init; on 2.x, here.
    try:
        with studio(args, f"chat {args.session}"):
            run_chat(
                config,
                session_id=args.session,
                agent_file=args.agent,
                model_name=args.model,
                base_url=args.base_url,
            )
    except NoModelError:
        raise BadInput(
            f"chat needs a model: --agent FILE, or set {' or '.join(MODEL_ENV_VARS)}"
        ) from None
    except ModelUnreachable as exc:
        raise BadInput(str(exc)) from None
    except EmptyAnswer as exc:  # the server's doing, not the user's: exit 1
        print(f"agentscope-context chat: {exc}", file=sys.stderr)
        return EXIT_ERROR
    return EXIT_OK
