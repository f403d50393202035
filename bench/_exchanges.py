"""Reading the exchanges a recording proxy kept between the package and a real model server
(B12): what each request was for, what came back, why it failed, and the server's count of
the prompt against ours.

Works on :class:`recording_proxy.Exchange` records (``tests/support/recording_proxy.py``) and on plain
data only: no model runs here.
"""

from __future__ import annotations

import re
import statistics
from collections import Counter
from typing import Any

from agentscope_context_ext.core.longterm import SUMMARIZER_PROMPT
from agentscope_context_ext.core.summary import INSTRUCTION, echoes_input, parse_summary
from agentscope_context_ext.core.tokens import TokenCounter

ENTITY_RE = re.compile(r"&(?:#\d+|#x[0-9a-fA-F]+|quot|amp|lt|gt|apos);")
"""An HTML entity, as a template that escapes the prompt makes the model write."""

SHAPE = "request shape"
"""The prefix of every error cause that the request's shape caused."""


def kind(request: Any) -> str:
    """``summary`` (a compaction's summary call), ``memory`` (the long-term Summarizer),
    ``agent`` (the agent's own reasoning) or ``other`` (no chat request)."""
    if not isinstance(request, dict) or "messages" not in request:
        return "other"
    system = next(
        (m.get("content") for m in request["messages"] if m.get("role") == "system"), None
    )
    text = _text(system)
    if text.startswith(INSTRUCTION[:60]):
        return "summary"
    if text.startswith(SUMMARIZER_PROMPT[:60]):
        return "memory"
    return "agent"


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


def answer(exchange: Any) -> tuple[str, int, int | None]:
    """``(text, tool calls, output tokens)`` of a response: the text and tool calls of an
    unstreamed one, or those its stream's deltas add up to; output tokens from its ``usage``,
    else (a llama.cpp stream has no usage) the count of its content deltas, one per token."""
    if exchange.streamed:
        text, calls, deltas = [], set(), 0
        usage = None
        for event in exchange.events:
            if not isinstance(event, dict):
                continue
            usage = event.get("usage") or usage
            for choice in event.get("choices") or []:
                delta = choice.get("delta") or {}
                if delta.get("content"):
                    text.append(delta["content"])
                    deltas += 1
                for call in delta.get("tool_calls") or []:
                    calls.add(call.get("index", 0))
        tokens = usage.get("completion_tokens") if usage else (deltas or None)
        return "".join(text), len(calls), tokens
    body = exchange.response() or {}
    choices = body.get("choices") or [{}]
    message = choices[0].get("message") or {}
    usage = body.get("usage") or {}
    return (
        message.get("content") or "",
        len(message.get("tool_calls") or []),
        usage.get("completion_tokens"),
    )


def error_cause(exchange: Any) -> str | None:
    """Why the server refused or failed a request (``None``: it answered). A cause that
    starts with :data:`SHAPE` is one our request's shape caused."""
    if exchange.status == 0:
        return f"no answer: {exchange.error[:80] or 'in flight when the run ended'}"
    if exchange.status < 400:
        return None
    body = exchange.body
    if "Input should be a valid string" in body or "can only concatenate str" in body:
        return f"{SHAPE}: content not a string (HTTP {exchange.status})"
    if "not supported" in body.lower() or "extra_forbidden" in body:
        return f"{SHAPE}: a field the server does not take (HTTP {exchange.status})"
    if "context window" in body or "context length" in body:
        return f"prompt over the server's window (HTTP {exchange.status})"
    return f"server error (HTTP {exchange.status}): {' '.join(body.split())[:80]}"


def cut_stream(exchange: Any) -> bool:
    """A streamed answer with HTTP 200 that no chunk finished (no finish reason) and that the
    client did not close: the server cut it (llama-cpp-python ends a streamed tool call so,
    with nothing sent, and a stream when another request waits for its one slot)."""
    if not exchange.streamed or exchange.status != 200 or exchange.client_closed:
        return False
    return not any(
        choice.get("finish_reason")
        for event in exchange.events
        if isinstance(event, dict)
        for choice in event.get("choices") or []
    )


def summary_verdict(exchange: Any) -> str:
    """What became of one summary call: ``usable``, ``unusable answer``, ``empty answer``,
    ``the answer repeats the input``, ``closed at the timeout`` or its error's cause (the
    package's own parser judges, as the summary writer does)."""
    cause = error_cause(exchange)
    if cause:
        return cause
    if exchange.client_closed:
        return "closed at the timeout"
    text, _, _ = answer(exchange)
    if not text.strip():
        return "empty answer"
    if parse_summary(text) is None:
        return "unusable answer"
    messages = exchange.request.get("messages", [])
    instruction = _text(messages[0].get("content")) if messages else ""
    content = _text(messages[-1].get("content")) if messages else ""
    if echoes_input(text, instruction, content):
        return "the answer repeats the input"
    return "usable"


def count_rows(exchanges: list[Any], counter: TokenCounter) -> list[dict]:
    """Per answered request whose response has ``usage.prompt_tokens``: the server's count
    and ours of the same request (messages and tool schemas, as the pipeline counts them)."""
    rows = []
    for exchange in exchanges:
        body = exchange.response() if not exchange.streamed else None
        usage = (body or {}).get("usage") or {}
        server = usage.get("prompt_tokens")
        if not server or exchange.status != 200:
            continue
        request = exchange.request
        messages = [
            {k: v for k, v in m.items() if k in ("role", "content", "tool_calls", "tool_call_id")}
            for m in request.get("messages", [])
        ]
        ours = counter.count_formatted(messages, request.get("tools") or None)
        rows.append({"kind": kind(request), "ours": ours, "server": server})
    return rows


def server_speed(log: str) -> dict:
    """The server's own prompt and generation speed, tokens a second (medians of what
    llama.cpp printed per request): how loaded the machine was."""
    prompt, generated = [], []
    for match in _SPEED_RE.finditer(log):
        target = prompt if match.group(1) == "prompt eval" else generated
        tokens, rate = int(match.group(2)), float(match.group(3))
        if tokens >= 16 and rate < 1e6:  # a few tokens, or a cached prompt, say nothing
            target.append(rate)
    return {
        "prompt_tokens_per_s": round(statistics.median(prompt), 1) if prompt else None,
        "output_tokens_per_s": round(statistics.median(generated), 1) if generated else None,
    }


_SPEED_RE = re.compile(
    r"(prompt eval|\s{2}eval) time =\s+[\d.]+ ms /\s+(\d+) (?:tokens|runs)\s+\(\s*[\d.]+ ms per token,"
    r"\s+([\d.]+|inf) tokens per second\)"
)


def count_summary(rows: list[dict]) -> dict:
    """Our count over the server's: median, lowest and highest ratio, over ``rows``."""
    if not rows:
        return {"calls": 0}
    ratios = [row["ours"] / row["server"] for row in rows]
    return {
        "calls": len(rows),
        "ratio_median": round(statistics.median(ratios), 3),
        "ratio_min": round(min(ratios), 3),
        "ratio_max": round(max(ratios), 3),
    }


def tally(exchanges: list[Any]) -> dict:
    """The requests of one run: by kind, HTTP errors by cause, streams the server cut short,
    answers with HTML entities, and each summary call's seconds, output tokens and verdict."""
    errors: Counter = Counter()
    kinds: Counter = Counter()
    summaries = []
    cut = 0
    entities = 0
    for exchange in exchanges:
        what = kind(exchange.request)
        kinds[what] += 1
        cause = error_cause(exchange)
        if cause:
            errors[cause] += 1
        if cut_stream(exchange):
            cut += 1
        text, _, tokens = answer(exchange)
        if ENTITY_RE.search(text):
            entities += 1
        if what == "summary":
            summaries.append(
                {
                    "seconds": exchange.seconds,
                    "output_tokens": tokens,
                    "cap": exchange.request.get("max_tokens")
                    or exchange.request.get("max_completion_tokens"),
                    "verdict": summary_verdict(exchange),
                }
            )
    return {
        "requests": dict(kinds),
        "http_errors": dict(errors),
        "shape_errors": sum(n for cause, n in errors.items() if cause.startswith(SHAPE)),
        "cut_streams": cut,
        "answers_with_entities": entities,
        "summary_calls": summaries,
    }
