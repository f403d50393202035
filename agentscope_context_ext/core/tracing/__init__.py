"""Spans of what the context manager did, in OpenTelemetry traces (design §9.1).

When an OpenTelemetry SDK ``TracerProvider`` is installed (:func:`trace_to` installs one that
exports to AgentScope Studio or any OTLP receiver; AgentScope 1.x's ``agentscope.init`` installs
one too), each action of the extension is a span, a child of the span that is current when it
happens (the agent's ``invoke_agent`` span, or the ``execute_tool`` span of the tool whose
output is cut), with that span's ``gen_ai.conversation.id``:

- ``context.truncate``: one tool result cut by stage one (``agentscope_context.stage`` 1, as
  it arrives) or stage two (2, as it ages): tool, call id, bytes before and after, the file
  with the full text;
- ``context.compact``: one compaction, its whole duration: tokens before and after, messages
  compacted and kept, the dialog file and lines, the summary's source and text; the summary
  model's ``chat`` span is its child;
- ``context.summarizer``: one run of the long-term memory Summarizer after a compaction;
- ``context.offload`` (a large user message saved), ``context.recover`` (a call the provider
  rejected for its length, compacted and sent again), ``context.refuse`` (a prompt that cannot
  fit, refused), ``context.overflow``, ``context.save_failed``, ``context.memory_write``,
  ``context.consolidate``; a ``warning`` event is a span event on the current span.

Attribute names are the OpenTelemetry GenAI conventions' where one exists (``gen_ai.tool.name``,
``gen_ai.usage.input_tokens``, ...), ours under ``agentscope_context.`` otherwise; no name is
both a value and a prefix of another (Studio nests attributes by their dots).

With no SDK provider installed, nothing here does any work beyond one ``isinstance`` check per
event (events are rare: a cut, a compaction), so tracing off costs nothing measurable (B1).
The spans of the events (``_spans``, the catalogue read as one list beside the events it
mirrors) and the ``chat`` spans of the extension's own model calls (``_chat``).
"""

from ._chat import chat_span, correct_chat_span, flat_tool_definitions, record_chat_answer
from ._spans import (
    ATTRIBUTE_PREFIX,
    COMPACT_SPAN,
    CONVERSATION_ID,
    SCOPE,
    SUMMARY_TEXT,
    context_span,
    conversation_id,
    fail_span,
    in_conversation,
    record_span,
    tracer,
    tracing_enabled,
)

__all__ = [
    "ATTRIBUTE_PREFIX",
    "COMPACT_SPAN",
    "CONVERSATION_ID",
    "SCOPE",
    "SUMMARY_TEXT",
    "chat_span",
    "context_span",
    "conversation_id",
    "correct_chat_span",
    "fail_span",
    "flat_tool_definitions",
    "in_conversation",
    "record_chat_answer",
    "record_span",
    "tracer",
    "tracing_enabled",
]
