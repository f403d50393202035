"""What each command of ``agentscope-context`` does, once its arguments are parsed.

Each command imports what it needs when it runs, so none pays for AgentScope before it needs it:
``inspect`` and ``search`` never import it, ``cleanup`` only to read saved sessions. A user's
mistake is a :class:`BadInput` (or a ``ConfigError``/``WorkspaceError``): one line, exit code 2.
"""

from __future__ import annotations

import argparse
import re
import signal
import sys
from pathlib import Path

from ..core.config import ContextConfig
from ..core.workspace import Storage, is_storage_url, open_storage, refuse_other_schemes
from ._arguments import BadInput
from ._output import EXIT_ERROR, EXIT_OK
from ._studio import studio

__all__ = ["COMMANDS"]


def _open_workspace(value: str) -> Storage:
    """An existing workspace: a folder that exists, or a Redis server that answers."""
    refuse_other_schemes(value)
    if not is_storage_url(value) and not Path(value).is_dir():
        raise BadInput(f"{value}: not a workspace directory")
    return open_storage(value)


def _config(path: Path | None) -> ContextConfig:
    return ContextConfig.from_file(path) if path else ContextConfig()


def cmd_demo(args: argparse.Namespace) -> int:
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


def cmd_cleanup(args: argparse.Namespace) -> int:
    from ..adapter import installed  # a saved session is the installed AgentScope's
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


def cmd_consolidate(args: argparse.Namespace) -> int:
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
    from ..adapter import installed

    return await installed.consolidate(memory, model, formatter, max_bytes=max_bytes)


def cmd_replay(args: argparse.Namespace) -> int:
    from ..core.transcripts import TranscriptError
    from ._replay import run_replay

    if args.max_input_tokens is not None and args.max_input_tokens < 1024:
        raise BadInput(f"--max-input-tokens must be at least 1024, got {args.max_input_tokens}")
    if args.out.exists() and not args.out.is_dir():
        raise BadInput(f"--out {args.out}: exists and is not a directory")
    if args.workspace is not None:
        refuse_other_schemes(args.workspace)  # a folder would be made of it
    config = _config(args.config)
    try:
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
    except TranscriptError as exc:
        raise BadInput(str(exc)) from None
    return (
        EXIT_OK
        if total["pair_violations"] == 0 and total["unexplained_over_window"] == 0
        else EXIT_ERROR
    )


def cmd_inspect(args: argparse.Namespace) -> int:
    from ._inspect import inspect_workspace

    storage = _open_workspace(args.workspace)
    inspect_workspace(storage, _config(args.config).truncation.ttl_days, sys.stdout)
    return EXIT_OK


def cmd_search(args: argparse.Namespace) -> int:
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


def cmd_serve(args: argparse.Namespace) -> int:
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
    from ..adapter import installed

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


def cmd_chat(args: argparse.Namespace) -> int:
    from ._chat import EmptyAnswer, run_chat
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
    except EmptyAnswer as exc:  # the server's doing, not the user's: exit 1
        print(f"agentscope-context chat: {exc}", file=sys.stderr)
        return EXIT_ERROR
    return EXIT_OK


COMMANDS = {
    "demo": cmd_demo,
    "cleanup": cmd_cleanup,
    "consolidate": cmd_consolidate,
    "replay": cmd_replay,
    "inspect": cmd_inspect,
    "search": cmd_search,
    "chat": cmd_chat,
    "serve": cmd_serve,
}
"""Command name -> the function that runs it (returns the exit code)."""
