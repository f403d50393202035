"""``agentscope-context demo``: the engine at work on a real file, offline.

It takes the largest module of the installed AgentScope package as a "tool result", runs it
through stage one (save the full text to ``tool_result/``, keep an excerpt + notice), follows
the notice with ``read_file`` until the whole file is read back and compares it byte for byte,
then applies stage two and counts tokens at every step with the exact Qwen vocabulary.
Everything it prints is measured in this run.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TextIO

import agentscope

from ..config import ContextConfig
from ..tokens import get_token_counter
from ..tools import make_read_file_tool
from ..truncation import split_notice, truncate_fresh, truncate_text_output
from ..workspace import ToolResultStore


@dataclass
class DemoReport:
    """What the demo measured."""

    source_file: str
    source_bytes: int
    source_lines: int
    source_tokens: int
    estimate_tokens: int
    stage_one_limit: int
    stage_one_bytes: int
    stage_one_tokens: int
    stage_two_limit: int
    stage_two_bytes: int
    stage_two_tokens: int
    saved_path: str
    read_back_calls: int
    read_back_identical: bool
    truncate_seconds: float


def largest_agentscope_module() -> Path:
    """The biggest ``.py`` file of the installed AgentScope package."""
    root = Path(agentscope.__file__).parent
    return max(root.rglob("*.py"), key=lambda p: p.stat().st_size)


def run_demo(out: Path, config: ContextConfig, source: Path | None, stream: TextIO) -> DemoReport:
    """Run the demo, print what happens to ``stream``, write ``report.json`` into ``out``."""
    return asyncio.run(_run(out, config, source, stream))


async def _run(out: Path, config: ContextConfig, source: Path | None, stream: TextIO) -> DemoReport:
    def say(line: str = "") -> None:
        print(line, file=stream, flush=True)

    source = source or largest_agentscope_module()
    original = source.read_bytes().decode("utf-8", errors="replace")
    workspace = out / "workspace"
    counter = get_token_counter(config.tokenizer, model_name="qwen-plus")
    estimate = get_token_counter("estimate")
    store = ToolResultStore(workspace, ttl_days=config.truncation.ttl_days)

    size = len(original.encode("utf-8"))
    lines = original.count("\n") + (0 if original.endswith("\n") else 1)
    # Use the configured stage-one limit; a file smaller than it is cut at half its size so
    # that there is something to show.
    first_limit = config.truncation.first_max_bytes
    if size <= first_limit:
        first_limit = max(size // 2, 1)
    second_limit = min(config.truncation.second_max_bytes, first_limit)

    say(
        f"agentscope-context demo  (AgentScope {agentscope.__version__}, tokenizer: "
        f"{counter.backend})"
    )
    say(f"workspace: {workspace}")
    say()
    say(f"[1/4] tool result: {source}")
    source_tokens = counter.count_text(original)
    say(
        f"      {size:,} bytes, {lines:,} lines, {source_tokens:,} tokens "
        f"(bytes/4 estimate: {estimate.count_text(original):,})"
    )

    started = time.perf_counter()
    saved_path = store.save(original)
    stage_one = truncate_fresh(original, max_bytes=first_limit, file_path=saved_path)
    truncate_seconds = time.perf_counter() - started
    _, notice = split_notice(stage_one) or (None, None)
    assert notice is not None, "stage one must leave a notice"
    say(f"[2/4] stage one at {first_limit:,} bytes: full text saved to {saved_path}")
    say(
        f"      excerpt {notice.excerpt_bytes:,} bytes, "
        f"{counter.count_text(stage_one):,} tokens with the notice; "
        f"continue at line {notice.next_line}"
    )

    read_file = make_read_file_tool(workspace, config.truncation)
    rebuilt, calls = await _read_back(read_file, stage_one)
    identical = rebuilt == original
    say(
        f"[3/4] followed the notice with read_file: {calls} call(s), "
        f"read-back {'byte-identical' if identical else 'DIFFERENT'} to the original"
    )

    stage_two = truncate_text_output(stage_one, max_bytes=second_limit)
    _, notice_two = split_notice(stage_two) or (None, None)
    assert notice_two is not None
    say(
        f"[4/4] stage two at {second_limit:,} bytes: excerpt {notice_two.excerpt_bytes:,} bytes, "
        f"{counter.count_text(stage_two):,} tokens, same file {notice_two.file_path}"
    )

    report = DemoReport(
        source_file=str(source),
        source_bytes=size,
        source_lines=lines,
        source_tokens=source_tokens,
        estimate_tokens=estimate.count_text(original),
        stage_one_limit=first_limit,
        stage_one_bytes=len(stage_one.encode("utf-8")),
        stage_one_tokens=counter.count_text(stage_one),
        stage_two_limit=second_limit,
        stage_two_bytes=len(stage_two.encode("utf-8")),
        stage_two_tokens=counter.count_text(stage_two),
        saved_path=saved_path,
        read_back_calls=calls,
        read_back_identical=identical,
        truncate_seconds=truncate_seconds,
    )
    out.mkdir(parents=True, exist_ok=True)
    (out / "report.json").write_text(json.dumps(asdict(report), indent=2), encoding="utf-8")
    say()
    say("| what                     |   bytes |  tokens |")
    say("|--------------------------|--------:|--------:|")
    say(f"| original tool result     | {size:>7,} | {source_tokens:>7,} |")
    say(
        f"| in context after stage 1 | {report.stage_one_bytes:>7,} | "
        f"{report.stage_one_tokens:>7,} |"
    )
    say(
        f"| in context after stage 2 | {report.stage_two_bytes:>7,} | "
        f"{report.stage_two_tokens:>7,} |"
    )
    say()
    say(f"report: {out / 'report.json'}")
    return report


async def _read_back(read_file, truncated: str) -> tuple[str, int]:
    """Rebuild the full text: the excerpt, then read_file from each notice's position."""
    excerpt, notice = split_notice(truncated)
    parts = [excerpt]
    calls = 0
    while notice is not None:
        response = await read_file(
            notice.file_path, start_line=notice.next_line, start_byte=notice.next_byte
        )
        calls += 1
        text = response.content[0]["text"]
        if text.startswith("Error:"):
            raise RuntimeError(f"read_file failed while reading back: {text}")
        split = split_notice(text)
        if split is None:
            parts.append(text)
            break
        excerpt, notice = split
        parts.append(excerpt)
    return "".join(parts), calls
