"""The spans of what the context manager did (design §9.1): the tracer, the conversation a
span belongs to, and one span (or span event) per kind of event, as ``tracing`` describes."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from contextvars import ContextVar
from typing import Any

from ..events import (
    CompactionFailed,
    CompactionFinished,
    CompactionStarted,
    Consolidated,
    ContextError,
    ContextEvent,
    ContextOverflow,
    ContextWarning,
    MemoryWritten,
    ProviderOverflowRecovered,
    SaveFailed,
    ToolResultRetruncated,
    ToolResultTruncated,
    UserMessageOffloaded,
)

try:  # AgentScope (both majors) installs the OpenTelemetry API and SDK
    from opentelemetry import trace as otel_trace
    from opentelemetry.sdk.trace import TracerProvider as SdkTracerProvider
    from opentelemetry.trace import Status, StatusCode
except ImportError:  # pragma: no cover - tracing is then simply off
    otel_trace = None  # type: ignore[assignment]
    SdkTracerProvider = None  # type: ignore[assignment,misc]

__all__ = [
    "ATTRIBUTE_PREFIX",
    "COMPACT_SPAN",
    "CONVERSATION_ID",
    "SCOPE",
    "SUMMARY_TEXT",
    "clean_attributes",
    "context_span",
    "conversation_id",
    "fail_span",
    "in_conversation",
    "otel_trace",
    "record_span",
    "tracer",
    "tracing_enabled",
]

SCOPE = "agentscope_context_ext"
"""The instrumentation scope of our spans."""
ATTRIBUTE_PREFIX = "agentscope_context."
"""Our attributes where the GenAI conventions have no name."""
CONVERSATION_ID = "gen_ai.conversation.id"
"""What AgentScope Studio groups traces by."""
COMPACT_SPAN = "context.compact"
SUMMARY_TEXT = ATTRIBUTE_PREFIX + "summary.text"
"""The summary a compaction leaves in the context, on its span."""

_P = ATTRIBUTE_PREFIX


def tracing_enabled() -> bool:
    """An OpenTelemetry SDK ``TracerProvider`` is installed (the test AgentScope 2.x's
    ``TracingMiddleware`` makes too)."""
    if SdkTracerProvider is None:
        return False
    return isinstance(otel_trace.get_tracer_provider(), SdkTracerProvider)


def tracer() -> Any | None:
    """Our tracer when tracing is on, else ``None``."""
    if not tracing_enabled():
        return None
    return otel_trace.get_tracer_provider().get_tracer(SCOPE)


_conversation: ContextVar[str | None] = ContextVar("agentscope_context_conversation", default=None)
"""The conversation of work done outside any agent span (``compact_now`` between replies)."""


def conversation_id(fallback: str | None = None) -> str | None:
    """The ``gen_ai.conversation.id`` of the current span (the agent's), else the one
    :func:`in_conversation` set, else ``fallback``."""
    attributes = getattr(otel_trace.get_current_span(), "attributes", None)
    if isinstance(attributes, Mapping):
        value = attributes.get(CONVERSATION_ID)
        if isinstance(value, str) and value:
            return value
    return _conversation.get() or fallback


@contextlib.contextmanager
def in_conversation(conversation: str | None) -> Iterator[None]:
    """Spans made inside (and in tasks started inside) belong to ``conversation`` when no agent
    span says otherwise."""
    token = _conversation.set(conversation)
    try:
        yield
    finally:
        _conversation.reset(token)


def clean_attributes(attributes: Mapping[str, Any]) -> dict[str, Any]:
    """``attributes`` as OpenTelemetry takes them: ``None`` left out, tuples as lists of one
    type (strings when mixed)."""
    out: dict[str, Any] = {}
    for key, value in attributes.items():
        if value is None:
            continue
        if isinstance(value, (list, tuple)):
            items = list(value)
            if (
                not all(isinstance(item, (str, bool, int, float)) for item in items)
                or len({type(item) for item in items}) > 1
            ):
                items = [str(item) for item in items]
            out[key] = items
        elif isinstance(value, (str, bool, int, float)):
            out[key] = value
        else:
            out[key] = str(value)
    return out


def _span_attributes(attributes: Mapping[str, Any]) -> dict[str, Any]:
    """``attributes`` cleaned, with the conversation the span belongs to."""
    values = clean_attributes(attributes)
    conversation = conversation_id()
    if conversation:
        values[CONVERSATION_ID] = conversation
    return values


@contextlib.contextmanager
def context_span(name: str, attributes: Mapping[str, Any] | None = None) -> Iterator[Any | None]:
    """A span of ours around a block, current inside it (so spans made inside are its
    children); ``None`` when tracing is off. An exception leaving the block marks it failed."""
    traced = tracer()
    if traced is None:
        yield None
        return
    with traced.start_as_current_span(name, attributes=_span_attributes(attributes or {})) as span:
        yield span


def fail_span(span: Any | None, reason: str) -> None:
    """Mark ``span`` (of :func:`context_span`; ``None``: tracing off) as failed."""
    if span is not None:
        span.set_status(Status(StatusCode.ERROR, reason[:300]))


def _instant(name: str, attributes: Mapping[str, Any], error: str | None = None) -> None:
    """A span for something that happened now (a cut, a refusal)."""
    traced = tracer()
    if traced is None:
        return
    span = traced.start_span(name, attributes=_span_attributes(attributes))
    if error is not None:
        fail_span(span, error)
    span.end()


def _truncation(event: ToolResultTruncated | ToolResultRetruncated, stage: int) -> dict:
    return {
        "gen_ai.tool.name": event.tool,
        "gen_ai.tool.call.id": event.call_id,
        _P + "stage": stage,
        _P + "bytes.before": event.bytes_before,
        _P + "bytes.after": event.bytes_after,
        _P + "bytes.offloaded": event.bytes_offloaded,
        _P + "tokens.saved": event.tokens_saved,
        _P + "saved_path": event.path,
        _P + "media_replaced": event.media_replaced or None,
        _P + "notice_only": event.notice_only or None,
    }


def record_span(event: ContextEvent) -> None:
    """The span of one event (subscribe it to a manager's bus).

    Instant actions become spans of their own; the events of a compaction fill in the
    ``context.compact`` span the compaction opened around itself (the listener runs inside it).
    """
    if not tracing_enabled():
        return
    if isinstance(event, ToolResultTruncated):
        _instant("context.truncate", _truncation(event, 1))
    elif isinstance(event, ToolResultRetruncated):
        _instant("context.truncate", _truncation(event, 2))
    elif isinstance(event, (CompactionStarted, CompactionFinished, CompactionFailed)):
        _compaction(event)
    elif isinstance(event, UserMessageOffloaded):
        _instant(
            "context.offload",
            {
                _P + "message_id": event.message_id,
                _P + "bytes.before": event.bytes_before,
                _P + "bytes.after": event.bytes_after,
                _P + "tokens.saved": event.tokens_saved,
                _P + "saved_path": event.path,
            },
        )
    elif isinstance(event, ProviderOverflowRecovered):
        _instant(
            "context.recover",
            {
                _P + "tokens.before": event.tokens_before,
                _P + "tokens.after": event.tokens_after,
                _P + "provider.tokens": event.provider_tokens,
                _P + "provider.limit": event.provider_limit,
                _P + "window": event.window,
                _P + "error": event.error[:500],
            },
        )
    elif isinstance(event, ContextError):
        _instant(
            "context.refuse",
            {
                _P + "reason": event.reason,
                _P + "tokens.prompt": event.tokens,
                _P + "window": event.max_input_tokens,
                _P + "largest": event.largest or None,
                _P + "saved_path": event.path or None,
            },
            error=event.reason,
        )
    elif isinstance(event, ContextOverflow):
        _instant(
            "context.overflow",
            {
                _P + "tokens.prompt": event.tokens,
                _P + "tokens.trigger": event.trigger_tokens,
                _P + "window": event.max_input_tokens,
                _P + "messages.total": event.messages,
                _P + "messages.compactable": event.compactable,
            },
        )
    elif isinstance(event, SaveFailed):
        _instant(
            "context.save_failed",
            {_P + "what": event.what, _P + "saved_path": event.path, _P + "error": event.error},
            error=event.error or event.what,
        )
    elif isinstance(event, MemoryWritten):
        _instant("context.memory_write", {"gen_ai.tool.name": event.tool})
    elif isinstance(event, Consolidated):
        _instant(
            "context.consolidate",
            {
                _P + "status": event.status,
                _P + "notes": list(event.notes),
                _P + "bytes.after": event.bytes,
            },
        )
    elif isinstance(event, ContextWarning):
        span = otel_trace.get_current_span()
        if span.is_recording():
            span.add_event(
                "context.warning",
                clean_attributes({_P + "where": event.where, _P + "error": event.error}),
            )


def _compaction(event: CompactionStarted | CompactionFinished | CompactionFailed) -> None:
    span = otel_trace.get_current_span()
    if not span.is_recording() or getattr(span, "name", None) != COMPACT_SPAN:
        return  # a compaction run outside its span (a caller of the pipeline's own)
    if isinstance(event, CompactionStarted):
        span.set_attributes(
            {
                _P + "tokens.before": event.tokens_before,
                _P + "tokens.trigger": event.trigger_tokens,
                _P + "messages.compacted": event.messages_to_compact,
                _P + "messages.kept": event.messages_kept,
                _P + "forced": event.forced,
            }
        )
    elif isinstance(event, CompactionFinished):
        span.set_attributes(
            clean_attributes(
                {
                    _P + "tokens.after": event.tokens_after,
                    _P + "summary.source": event.summary_source,
                    _P + "summary.model_attempts": event.model_attempts,
                    _P + "summary.model_failures": event.model_failures,
                    _P + "dialog.refs": list(event.dialog_refs),
                }
            )
        )
    else:
        span.set_attributes(
            clean_attributes(
                {
                    _P + "failure.reason": event.reason,
                    _P + "failure.error": event.error or None,
                }
            )
        )
        span.set_status(Status(StatusCode.ERROR, event.reason))
