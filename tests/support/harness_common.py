"""Test helpers that need no AgentScope: the markers of the package's background prompts,
deterministic tool output, the scripted model behind the loopback model servers, and the
note-taking agent the concurrency tests run in several processes."""

from __future__ import annotations

import errno
import multiprocessing
import os
import random
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from llm_servers import Reply, system_text

COMPACTION_MARKER = "You compact the earlier part"
SUMMARIZER_MARKER = "You maintain Memory.md"
CONSOLIDATOR_MARKER = "You consolidate Memory.md"


def make_text(size_bytes: int, seed: int) -> str:
    """Deterministic log-like text of about ``size_bytes`` bytes."""
    rng = random.Random(seed)
    words = [
        "alpha",
        "beta",
        "gamma",
        "delta",
        "error",
        "ok",
        "GET",
        "/api/items",
        "200",
        "503",
        "用户",
        "数据",
    ]
    lines = []
    size = 0
    i = 0
    while size < size_bytes:
        line = f"{seed}:{i:05d} " + " ".join(rng.choice(words) for _ in range(12)) + "\n"
        lines.append(line)
        size += len(line.encode())
        i += 1
    return "".join(lines)


SIZES_KB = [1, 4, 200, 12, 2, 60, 1, 30, 150, 8, 3, 90]
"""Document sizes of a long session: small ones, and some far over stage one's limit."""
BIG = make_text(200 * 1024, seed=1)
"""A 200 KB tool output."""


def session_plan(
    total_calls: int, sizes_kb: Sequence[int], seed: int = 7
) -> list[list[tuple[int, int]]]:
    """Steps of (size_kb, seed) calls; about every third step makes 2-3 parallel calls."""
    rng = random.Random(seed)
    steps: list[list[tuple[int, int]]] = []
    made = 0
    while made < total_calls:
        width = rng.choice([1, 1, 2, 3]) if len(steps) % 3 == 2 else 1
        width = min(width, total_calls - made)
        steps.append([(sizes_kb[(made + k) % len(sizes_kb)], made + k) for k in range(width)])
        made += width
    return steps


_PATH_RE = re.compile(r"(?:tool_result|dialog)/[\w.\-]+")


def model_summary(call: Any) -> str:
    """What a diligent compaction model answers to ``call`` (anything with the prompt's
    ``text``): six sections, keeping offload paths."""
    paths = sorted(set(_PATH_RE.findall(call.text)))
    critical = "\n".join(f"- {p}" for p in paths[:30]) or "- (none)"
    return (
        "## Goal\n- Collect and analyse the documents the user asked for\n"
        "## Constraints\n- Keep every document recoverable\n"
        "## Progress\n- Fetched documents with the fetch tool\n"
        "## Key Decisions\n- Work through the documents in order\n"
        "## Next Steps\n- Continue fetching\n"
        f"## Critical Context\n{critical}\n"
    )


def prompt_orphans(messages: list[dict]) -> list[str]:
    """Orphan tool calls/results in a formatted (OpenAI/DashScope layout) prompt."""
    problems = []
    open_calls: dict[str, int] = {}
    for message in messages:
        if message.get("role") == "tool":
            call_id = str(message.get("tool_call_id"))
            if open_calls.get(call_id, 0) == 0:
                problems.append(f"result without call: {call_id}")
            else:
                open_calls[call_id] -= 1
        for call in message.get("tool_calls") or []:
            open_calls[str(call.get("id"))] = open_calls.get(str(call.get("id")), 0) + 1
    problems += [f"call without result: {cid}" for cid, n in open_calls.items() if n > 0]
    return problems


def strip_volatile(prompts: list[list[dict]]) -> list[str]:
    """Prompts with the one part that differs between two runs by construction (the summary's
    wall-clock timestamp) replaced by a placeholder. Saved-result paths are content hashes and
    stay as they are."""
    text = repr(prompts)
    text = re.sub(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:\.\d+)?", "TIME", text)
    return [text]


def tool_messages(call: Any) -> list[dict]:
    """The ``tool`` messages of a formatted prompt (a scripted model's call)."""
    return [m for m in call.messages if m.get("role") == "tool"]


def tool_message_text(message: dict) -> str:
    """The text of one formatted ``tool`` message."""
    content = message.get("content")
    if isinstance(content, list):
        return "".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return str(content)


async def fetch(size_kb: int, seed: int) -> str:
    """Fetch a document of the given size.

    Args:
        size_kb (int): Size of the document in KiB.
        seed (int): Which document.
    """
    return make_text(size_kb * 1024, seed)


SIX_SECTIONS = (
    "## Goal\n- Collect the documents the user asked for\n"
    "## Constraints\n- Keep every document recoverable\n"
    "## Progress\n- Fetched the documents with fetch\n"
    "## Key Decisions\n- Work through the documents in order\n"
    "## Next Steps\n- Continue fetching\n"
    "## Critical Context\n- tool_result/ holds the full outputs\n"
)
USAGE_OFFSET = 137
"""The servers report their count of the request plus this: what calibrate_with_usage must
learn. Well over the agreement band: an Ollama request's own count is some tens of tokens
under ours (its tool layout), and that skew must not cancel the offset out."""


class Script:
    """The scripted model behind a server: fetch calls, a summary, the Summarizer's tool call."""

    def __init__(self, calls: int = 12, summary: str = SIX_SECTIONS) -> None:
        self.calls = calls
        self.summary = summary
        self.step = 0
        self.summarizer_calls = 0

    def __call__(self, request: dict) -> Reply:
        system = system_text(request)
        if COMPACTION_MARKER in system:
            return Reply(self.summary)
        if SUMMARIZER_MARKER in system:
            self.summarizer_calls += 1
            answered = any(m.get("role") == "tool" for m in request["messages"])
            if answered:
                return Reply("[SILENT]")
            arguments = {"text": "User wants every document kept", "section": "Personal"}
            return Reply("", [(f"mem-{self.summarizer_calls}", "memory_append", arguments)])
        step = self.step
        self.step += 1
        if step >= self.calls:
            return Reply("All documents fetched.")
        size = (30, 150, 60)[step % 3]
        return Reply(f"step {step}", [(f"call-{step}", "fetch", {"size_kb": size, "seed": step})])


def agent_file(
    provider: str, url: str, stream: bool, tool: str = "agent_harness:fetch", **context
) -> dict:
    """An agent file for the loopback server at ``url``."""
    return {
        "name": "researcher",
        "system_prompt": "You are a diligent research agent.",
        "model": {"provider": provider, "model": "test-model", "base_url": url, "stream": stream},
        "tools": {"functions": [tool]},
        "max_iters": 100,
        "context": {
            "max_input_tokens": 16384,
            "calibrate_with_usage": True,
            "long_term_memory": {"consolidation_time": "off", "retry_backoff_seconds": 0},
            **context,
        },
    }


def sent_tool_texts(server) -> list[str]:
    """The tool results the server was sent, as text."""
    texts = []
    for request in server.requests:
        for message in request["messages"]:
            if message.get("role") == "tool":
                content = message.get("content")
                if isinstance(content, list):
                    content = "".join(str(p.get("text", "")) for p in content)
                texts.append(str(content))
    return texts


def note_taker(tag: str, steps: int) -> Callable[[Any], Any]:
    """The scripted model of a note-taking agent (``ScriptedChatModel(note_taker(...))``, on
    either AgentScope version): ``steps`` calls of a ``note`` tool with ids ``<tag>-<step>``,
    a Memory.md fact ``<tag> fact <step>`` every 10th step (ids ``<tag>-m<step>``), then
    "done"; a compaction request is answered with a small summary."""
    from agentscope_context_ext.testing import reply, tool_call

    count = 0

    def respond(call: Any) -> Any:
        nonlocal count
        system = "\n".join(
            str(m.get("content")) for m in call.messages if m.get("role") == "system"
        )
        if COMPACTION_MARKER in system:
            return "## Goal\n- notes\n## Progress\n- many\n## Next Steps\n- more\n"
        step, count = count, count + 1
        if step >= steps:
            return "done"
        calls = [tool_call("note", f"{tag}-{step}", text=f"{tag}-{step}")]
        if step % 10 == 0:
            fact = {"text": f"{tag} fact {step}", "section": "Facts"}
            calls.append(tool_call("memory_append", f"{tag}-m{step}", **fact))
        return reply(f"{tag} step {step}", *calls)

    return respond


def run_in_processes(target: Callable[..., None], args: Sequence[tuple], timeout: float) -> None:
    """Run ``target(*a)`` for each ``a`` in its own spawned process, all at once, and fail
    unless every one exits 0 within ``timeout`` seconds."""
    spawn = multiprocessing.get_context("spawn")
    procs = [spawn.Process(target=target, args=a) for a in args]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(timeout)
        assert proc.exitcode == 0, (target.__name__, proc.exitcode)


def disk_full(*args: Any, **kwargs: Any) -> None:
    """Stands in for a write call (monkeypatched) on a disk with no space left."""
    raise OSError(errno.ENOSPC, "No space left on device")


async def expire_everything_and_clean(manager: Any, workspace: Path) -> set[str]:
    """Age every saved result past its TTL and run the cleanup; check that it removed exactly
    the results nothing live names (the context and the summary keep theirs, a name on a saved
    dialog line alone does not). Returns the removed paths; ``manager`` is either version's."""
    saved = {f"tool_result/{p.name}" for p in (workspace / "tool_result").iterdir()}
    named = manager.pipeline.referenced_results()
    assert named and named < saved, "some results are named only by dialog lines"
    for path in saved:
        os.utime(workspace / path, (1, 1))
    removed = set(await manager.pipeline.cleanup())
    assert removed == saved - named
    assert all((workspace / path).is_file() for path in named)
    return removed
