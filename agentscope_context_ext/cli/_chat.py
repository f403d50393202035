"""``agentscope-context chat``: an interactive agent with context management, for trying it."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any, TextIO

from ..adapter import installed
from ..agentfile import ModelUnavailable, build_agent, explain_model_failure
from ..core.agent_file import ModelSettings, load_agent_file
from ..core.config import ContextConfig
from ..core.tools import make_dialog_tools
from ._models import model_from_environment

EXIT_WORDS = {"exit", "quit", "/exit", "/quit"}

SYSTEM_PROMPT = "You are a helpful assistant. Use your tools when they help."


class EmptyAnswer(RuntimeError):
    """The model answered one message or more with nothing (a server once ended a streamed
    tool call empty after HTTP 200; the ``openai-compatible`` model now asks again
    unstreamed, so what is left is the model's own empty answer)."""


def run_chat(
    config: ContextConfig | None,
    session_id: str = "chat",
    agent_file: Path | None = None,
    model_name: str | None = None,
    base_url: str | None = None,
    stdin: TextIO | None = None,
    stdout: TextIO | None = None,
) -> dict:
    """Chat until ``exit`` (or EOF); prints the context stats on the way out and returns them.

    The agent comes from ``agent_file`` (any provider, see :func:`build_agent`; ``model_name``
    and ``base_url`` override its model), else from the environment's DashScope/OpenAI key.
    On a terminal the user types at a prompt; otherwise each line of ``stdin`` is one message,
    so a chat can be scripted. ``/compact [hint]`` (the hint goes to the summary model),
    ``/context``, ``/history``, ``/search QUERY`` and ``/memory`` are commands. The
    agent's state is saved after every turn to ``<workspace>/sessions/<session_id>.json``
    (atomically), or with a Redis workspace on that server, and loaded at start. The agent is
    the installed AgentScope's (its adapter's ``ManagedAgent``).

    Raises:
        `ModelUnavailable`: The model's server cannot be reached (the line names its URL),
            does not speak the provider's API, or answered an HTTP error (one line each).
        `EmptyAnswer`: The agent answered a message with nothing; each such answer is a line on
            stderr as it happens, and the chat goes on to the end first.
    """
    stdin = stdin or sys.stdin
    stdout = stdout or sys.stdout
    settings: ModelSettings | None = None
    if agent_file is not None:
        spec = load_agent_file(agent_file).with_overrides(model_name, base_url)
        settings = spec.model
        chat = installed.ManagedAgent(build_agent(spec))
        config = chat.manager.config
    else:
        config = config or ContextConfig()
        model, formatter = model_from_environment(
            model_name
            or (
                config.compaction.model
                if config.compaction.model not in (None, "extractive")
                else None
            )
        )
        chat = installed.ManagedAgent.create(
            model, config, system_prompt=SYSTEM_PROMPT, formatter=formatter, console=True
        )
    agent = chat.agent
    manager = chat.manager
    last: dict = {}
    manager.subscribe(lambda e: last.update(e.data) if e.type == "compaction_finished" else None)
    interactive = _is_terminal(stdin)
    model_label = _model_label(agent)

    def say(line: str) -> None:
        print(line, file=stdout, flush=True)

    say(
        f"chatting with {model_label} (window {manager.max_input_tokens:,} tokens, workspace "
        f"{config.workspace}, session {session_id}); /compact [hint], /context, /history, "
        "/search QUERY, /memory; exit to leave"
    )
    _, search_dialog = make_dialog_tools(manager.dialog_store)

    async def command(text: str) -> bool:
        name, _, rest = text.partition(" ")
        rest = rest.strip()
        if name == "/compact":
            before = manager.stats.compactions
            count = await manager.compact_now(rest or None)
            done = "compacted on request" if manager.stats.compactions > before else "no compaction"
            say(f"[context] {done}: the next prompt is {count.total:,} tokens")
        elif name == "/history":
            count = await manager.count()
            store = manager.dialog_store
            files = store.files()
            lines = len(store.message_ids())  # each once (a replayed compaction saves twice)
            size = sum(store.storage.size(file) for file in files)
            say(
                f"[context] {count.total:,} of {manager.max_input_tokens:,} tokens in use "
                f"({count.total / manager.max_input_tokens:.0%}); "
                f"{manager.stats.compactions} compaction(s) this chat; dialog: {lines:,} "
                f"message(s) in {len(files)} file(s), {size:,} bytes"
                + (f" ({files[-1][7:17]} to {files[0][7:17]})" if files else "")
            )
        elif name == "/search":
            say(await search_dialog(rest) if rest else "[context] /search QUERY: what to find")
        elif name == "/context":
            count = await manager.count()
            compaction = (
                f"last compaction {last['tokens_before']:,} -> {last['tokens_after']:,} tokens"
                if last
                else "no compaction yet"
            )
            shift = (
                f", the provider's count over ours {count.calibration:+,}"
                if count.calibration
                else ""
            )
            say(
                f"[context] {count.total:,} tokens now (system {count.system:,}, summary and "
                f"memory {count.head:,}, messages {count.messages:,}, tools {count.tools:,}"
                f"{shift}) of a {manager.max_input_tokens:,}-token window; compaction at "
                f"{manager.pipeline.trigger_tokens:,}; {compaction}"
            )
        elif name == "/memory":
            service = manager.long_term_service
            content = service.memory.read().strip() if service is not None else ""
            say(content or "[context] Memory.md is empty (or long-term memory is off)")
        else:
            return False
        return True

    async def turns():
        if not interactive:
            for line in stdin:
                if line.strip():
                    yield line.strip()
            return
        while True:
            try:
                text = await asyncio.to_thread(input, "user: ")
            except (EOFError, KeyboardInterrupt):
                return
            yield text.strip()

    async def loop() -> None:
        await chat.load_session(session_id)
        async for text in turns():
            if text.lower() in EXIT_WORDS:
                break
            if await command(text):
                continue
            try:
                answer = await chat.ask(text)
            except Exception as exc:
                problem = await asyncio.to_thread(explain_model_failure, exc, settings)
                if problem:
                    raise ModelUnavailable(problem) from None
                raise
            await chat.save_session(session_id)
            if not answer.strip():
                # Never a silent empty answer that exits 0 (a streamed tool call once ended
                # empty after HTTP 200 and chat printed "assistant: ").
                empty.append(text)
                print(
                    f"[error] {model_label} answered nothing (an empty answer) to: {text[:80]}",
                    file=sys.stderr,
                    flush=True,
                )
                continue
            if not chat.prints_replies:
                say(f"{agent.name}: {answer}")
        await manager.drain()

    empty: list[str] = []
    asyncio.run(loop())
    stats = manager.stats
    say(
        f"context stats: {stats.truncations} truncation(s), {stats.retruncations} "
        f"re-truncation(s), {stats.compactions} compaction(s), {stats.bytes_offloaded:,} bytes "
        f"offloaded, peak prompt {stats.peak_prompt_tokens:,} tokens"
        + (f", {stats.token_count.describe()}" if stats.token_count is not None else "")
    )
    if empty:
        raise EmptyAnswer(
            f"{model_label} answered {len(empty)} message(s) with nothing (an empty answer), "
            f"the first: {empty[0][:80]}"
        )
    return stats.as_dict()


def _is_terminal(stream: TextIO) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False


def _model_label(agent: Any) -> str:
    """The model's name (1.x ``model_name``, 2.x ``model``)."""
    model = agent.model
    name = getattr(model, "model_name", None) or getattr(model, "model", None)
    return name if isinstance(name, str) else "the model"
