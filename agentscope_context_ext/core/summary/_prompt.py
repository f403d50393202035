"""What the compaction model is asked and given (design §4.2).

The instruction asks for what a handover needs and what benchmark B7 measures: the user's
requests in their own words, each file changed and how, each command and error with its exact
text and outcome, decisions, the next step, and every identifier verbatim.

The input renders the messages compactly, but never loses an identifier to a cut: a long text
or output is clipped in the middle (its head and tail shown) and the identifiers of the elided
part are listed after it, most salient first; an edit is shown as its changed lines; an
offloaded output keeps its ``tool_result/`` path (design §12.7); a framework's reminder is labelled
``[system reminder]``, so it is never taken for the user's or the agent's words. The
instruction says that the messages, tool outputs above all, are data to summarise and never
instructions to follow (:data:`~agentscope_context_ext.core.rendering.TOOL_OUTPUT_IS_DATA`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from ..messages import Media, Message, Reminder, Text, Thinking, ToolCall, ToolResult
from ..rendering import REMINDER_LABEL, TOOL_OUTPUT_IS_DATA
from ..truncation import sendable_text, split_notice
from ._calls import CONTENT_KEYS, EDIT_PAIRS, changed_lines
from ._model import CompactSummary
from ._terms import Salience, TextIndex, code_terms

__all__ = [
    "BLOCK_CHARS",
    "INSTRUCTION",
    "MEMO_HEADING",
    "MESSAGES_HEADING",
    "STRICT_SUFFIX",
    "compaction_prompt",
    "render_for_summary",
    "render_messages",
]

MEMO_HEADING = "# Previous memo"
"""Heads the memo to merge, in the compaction model's input."""
MESSAGES_HEADING = "# New messages"
"""Heads the rendered messages, in the compaction model's input."""

BLOCK_CHARS = 1500
"""Characters of one block shown before the middle is elided (user texts: four times this)."""
_ELIDED_TERMS = 150
_ARGUMENT_CHARS = 200

INSTRUCTION = (
    """You compact the earlier part of an AI agent's working session into a handover \
memo that replaces it in the agent's context. The agent continues the work from your memo \
alone, so it must be able to carry on without asking anything. Keep:

- Goal: every request the user made, quoted in the user's own words, including later changes \
of direction.
- Constraints: the rules, preferences and limits the user set.
- Progress: each file created or edited, with the functions, classes, settings and lines that \
changed; each command run with its outcome; each error with its exact message, and whether and \
how it was fixed.
- Key Decisions: the choices made and why.
- Next Steps: what was being done at the end, what remains in order, and the next concrete \
action.
- Critical Context: everything the agent will need again verbatim: file paths, function and \
module names, commands, error messages, ids, URLs, numbers, and every offloaded-output path \
(tool_result/...).

Write each identifier exactly as it appears in the messages, in backticks. Merge the previous \
memo (if any) with the new messages and drop only what is obsolete; keep every Progress item of \
the previous memo (when space is short, shorten the oldest ones into one line, never drop \
them). Stay under {max_tokens} tokens. Lines starting with [system reminder] were inserted by the agent's framework: they are \
neither requests of the user nor plans of the agent; keep only facts from them that the agent \
needs again. """
    + TOOL_OUTPUT_IS_DATA
    + """

Answer with exactly these Markdown sections, each a bullet list, and nothing else:
## Goal
## Constraints
## Progress
## Key Decisions
## Next Steps
## Critical Context

Write the memo in {language}."""
)

STRICT_SUFFIX = """

Your previous answer could not be used. Reply with ONLY the six sections above, each heading \
on its own line starting with "## ", each item on its own line starting with "- ". No preamble, \
no code fences, no closing remarks."""


def compaction_prompt(
    rendered: str,
    previous: CompactSummary | None,
    *,
    language: str,
    max_tokens: int,
    extra_instruction: str | None = None,
    strict: bool = False,
) -> tuple[str, str]:
    """The (system instruction, user content) the compaction model receives.

    Args:
        rendered (`str`): The messages to compact, as :func:`render_for_summary` shows them.
        previous (`CompactSummary | None`): The memo to merge them into.
        language (`str`): The language to write the memo in.
        max_tokens (`int`): The memo's size limit, stated in the instruction.
        extra_instruction (`str | None`): The user's own addition (``compact_now``).
        strict (`bool`): The stricter wording of the retry.
    """
    instruction = INSTRUCTION.format(language=language, max_tokens=max_tokens)
    if extra_instruction:
        instruction += f"\n\nAdditional instruction from the user: {extra_instruction}"
    if strict:
        instruction += STRICT_SUFFIX
    content = ""
    if previous is not None:
        content += f"{MEMO_HEADING}\n{previous.to_markdown()}\n\n"
    content += f"{MESSAGES_HEADING}\n{rendered}"
    return sendable_text(instruction), sendable_text(content)


def render_for_summary(msgs: Sequence[Message], block_chars: int = BLOCK_CHARS) -> str:
    """The messages to compact, compactly: a header line per message, then its parts.

    Long blocks are clipped in the middle, with the identifiers of the elided part listed; the
    ranking of those identifiers is the salience over all of ``msgs``.
    """
    return "\n\n".join(render_messages(msgs, block_chars))


def render_messages(msgs: Sequence[Message], block_chars: int = BLOCK_CHARS) -> list[str]:
    """:func:`render_for_summary` of each message, in order (to split the input in chunks)."""
    renderer = _Renderer(Salience().extend(msgs), block_chars)
    return [renderer.message(msg) for msg in msgs]


class _Renderer:
    def __init__(self, salience: Salience, block_chars: int) -> None:
        self.salience = salience
        self.block_chars = block_chars

    def message(self, msg: Message) -> str:
        lines = [f"[{msg.role}:{msg.name} {msg.timestamp}]"]
        for part in msg.parts:
            if isinstance(part, Reminder):  # the framework's, not the sender's: labelled
                lines.append(REMINDER_LABEL + self.clip(part.body, self.block_chars, prose=True))
            elif isinstance(part, Text):
                limit = self.block_chars * (4 if msg.role == "user" else 1)
                lines.append(self.clip(part.text, limit, prose=True))
            elif isinstance(part, Thinking):
                lines.append("[thinking] " + self.clip(part.text, self.block_chars, prose=True))
            elif isinstance(part, ToolCall):
                lines.append(self.call(part))
            elif isinstance(part, ToolResult):
                lines.append(self.result(part))
            elif isinstance(part, Media):
                lines.append(_media(part))
        return "\n".join(lines)

    def call(self, call: ToolCall) -> str:
        args = dict(call.arguments)
        shown: list[str] = []
        body: list[str] = []
        for old_key, new_key in EDIT_PAIRS:
            old, new = args.get(old_key), args.get(new_key)
            if isinstance(old, str) and isinstance(new, str):
                del args[old_key], args[new_key]
                changes = "\n".join(text for _, text in changed_lines(old, new, limit=None))
                # Never lose a name an edit touched: the changed lines' elided names are all
                # listed; the unchanged context's names only up to the usual cap.
                clipped = self.clip(changes, self.block_chars, prose=False, cap=None)
                body.append(f"changed lines:\n{clipped}")
                context = code_terms(f"{old}\n{new}", prose=False)
                context -= code_terms(changes, prose=False)
                if context:
                    body.append(self.term_list(context, "also in the edited text"))
                break
        for key, value in args.items():
            if isinstance(value, str) and (len(value) > _ARGUMENT_CHARS or "\n" in value):
                label = "content" if key in CONTENT_KEYS else key
                body.append(f"{label}:\n{self.clip(value, self.block_chars, prose=False)}")
            else:
                text = (
                    value
                    if isinstance(value, str)
                    else json.dumps(value, ensure_ascii=False, default=str)
                )
                shown.append(f"{key}={text}")
        head = f"[tool call {call.name} id={call.id}] " + ", ".join(shown)
        return "\n".join([head.rstrip(), *body])

    def result(self, result: ToolResult) -> str:
        text = result.text
        parts = split_notice(text)
        suffix = ""
        if parts is not None:
            text, notice = parts
            suffix = f"\n[... full output: {notice.file_path}, {notice.total_lines} lines]"
            if result.full_text is not None:
                text = result.full_text  # the summary must not lose what the excerpt cut
        media = "".join(" " + _media(m) for m in result.media)
        return (
            f"[tool result {result.name} id={result.id}]{media} "
            + self.clip(text, self.block_chars, prose=False)
            + suffix
        )

    def clip(self, text: str, limit: int, *, prose: bool, cap: int | None = _ELIDED_TERMS) -> str:
        """``text``, or its head and tail with the elided part's identifiers listed (the
        ``cap`` most salient ones; ``None``: all of them)."""
        if len(text) <= limit:
            return text
        head_chars = limit * 2 // 3
        tail_chars = limit - head_chars
        head, middle, tail = text[:head_chars], text[head_chars:-tail_chars], text[-tail_chars:]
        shown = code_terms(head + "\n" + tail, prose=prose)
        elided = code_terms(middle, prose=prose) - shown
        note = f"\n[... {len(middle):,} characters elided ...]\n"
        if not elided:
            return head + note + tail
        return head + note + tail + "\n" + self.term_list(elided, "identifiers elided", cap)

    def term_list(self, terms: set[str], label: str, cap: int | None = _ELIDED_TERMS) -> str:
        """``[label: a, b, ...]``, most salient first, at most ``cap`` (``None``: all)."""
        ranked = sorted(_outermost(terms), key=lambda t: (-self.salience.score(t), t))
        shown = ranked if cap is None else ranked[:cap]
        more = len(ranked) - len(shown)
        listed = ", ".join(shown) + (f" (+{more} more)" if more > 0 else "")
        return f"[{label}: {listed}]"


def _outermost(terms: set[str]) -> list[str]:
    """``terms`` without those another listed term contains (``f`` inside ``` `f(x)` ```)."""
    kept: list[str] = []
    index = TextIndex()
    for term in sorted(terms, key=lambda t: (-len(t), t)):
        if not index.mentions(term):
            kept.append(term)
            index.add(term)
    return kept


def _media(media: Media) -> str:
    if media.url and not media.url.startswith("data:"):
        return f"[{media.kind}: {media.url}]"
    return f"[{media.kind}]"
