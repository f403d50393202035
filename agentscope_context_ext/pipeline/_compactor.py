"""``Compactor``: turns the oldest messages (and the previous summary) into a new summary
(SPEC 4 step 3, 4.2).

LLM path first: the compaction model (by default the agent's own model and formatter) answers
with six Markdown sections, parsed into ``CompactSummary``; an unusable answer is retried once
with a stricter instruction. If both attempts fail (error, timeout, empty, unparsable) the
extractive summary is used. The result is never an error string and never empty.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field

from agentscope.formatter import FormatterBase
from agentscope.message import Msg
from agentscope.model import ChatModelBase

from ..memory import CompactSummary
from ..tokens import TokenCounter
from ._summary_text import (
    ensure_critical,
    extractive_summary,
    parse_summary,
    render_for_summary,
    summary_language,
)

logger = logging.getLogger("agentscope_context_ext")

INSTRUCTION = """You compact the earlier part of an AI agent's working conversation into a memo \
that replaces it in the agent's context. The agent will continue the task from your memo alone, \
so keep every fact it needs: the user's goal and constraints in their own words, what was done \
and with what outcome (including failures and why), decisions and their reasons, what remains, \
and every identifier, file path, URL, number and offloaded-file path (tool_result/...) that may \
be needed again. Merge the previous memo (if any) with the new messages; drop only what is \
obsolete.

Answer with exactly these Markdown sections, each a bullet list, and nothing else:
## Goal
## Constraints
## Progress
## Key Decisions
## Next Steps
## Critical Context

Write the memo in {language}."""

STRICT_SUFFIX = """

Your previous answer could not be used. Reply with ONLY the six sections above, each heading \
on its own line starting with "## ", each item on its own line starting with "- ". No preamble, \
no code fences, no closing remarks."""


@dataclass
class CompactionResult:
    """The summary and how it was obtained."""

    summary: CompactSummary
    """The new summary (merged with the previous one)."""
    attempts: int = 0
    """Model calls made."""
    failures: list[str] = field(default_factory=list)
    """Why model attempts failed (for the event log, never for the summary)."""


class Compactor:
    """Summarises messages with a model, falling back to extraction.

    Args:
        model (`ChatModelBase | None`): The compaction model; ``None`` means extractive only.
        formatter (`FormatterBase | None`): Formats the compaction prompt for ``model``.
        counter (`TokenCounter`): Measures the input, to split it for the model's window.
        max_input_tokens (`int`): The compaction model's window.
        language (`str`): ``auto`` or a language name.
        timeout (`float`): Seconds one model call may take.
    """

    def __init__(
        self,
        model: ChatModelBase | None,
        formatter: FormatterBase | None,
        counter: TokenCounter,
        max_input_tokens: int,
        language: str = "auto",
        timeout: float = 120.0,
    ) -> None:
        self.model = model
        self.formatter = formatter
        self.counter = counter
        self.max_input_tokens = max_input_tokens
        self.language = language
        self.timeout = timeout

    async def summarize(
        self,
        msgs: Sequence[Msg],
        previous: CompactSummary | None,
        extra_instruction: str | None = None,
    ) -> CompactionResult:
        """Summarise ``msgs`` merged with ``previous``."""
        result = CompactionResult(summary=ensure_critical(extractive_summary(msgs, previous), msgs))
        if self.model is None or self.formatter is None:
            result.failures.append("no compaction model")
            return result
        language = summary_language(msgs, self.language)
        summary = previous
        for chunk in self._chunks(msgs):
            attempt = await self._summarize_chunk(
                chunk, summary, language, extra_instruction, result
            )
            if attempt is None:
                result.summary = ensure_critical(extractive_summary(msgs, previous), msgs)
                return result
            summary = attempt
        assert summary is not None
        result.summary = ensure_critical(summary, msgs)
        return result

    async def _summarize_chunk(
        self,
        msgs: Sequence[Msg],
        previous: CompactSummary | None,
        language: str,
        extra_instruction: str | None,
        result: CompactionResult,
    ) -> CompactSummary | None:
        instruction = INSTRUCTION.format(language=language)
        if extra_instruction:
            instruction += f"\n\nAdditional instruction from the user: {extra_instruction}"
        content = ""
        if previous is not None:
            content += f"# Previous memo\n{previous.to_markdown()}\n\n"
        content += f"# New messages\n{render_for_summary(msgs)}"
        for strict in (False, True):
            result.attempts += 1
            try:
                answer = await asyncio.wait_for(
                    self._call(instruction + (STRICT_SUFFIX if strict else ""), content),
                    timeout=self.timeout,
                )
            except Exception as exc:  # noqa: BLE001 - any model failure: retry, then extract
                result.failures.append(f"{type(exc).__name__}: {exc}"[:300])
                continue
            parsed = parse_summary(answer)
            if parsed is None:
                result.failures.append("unusable answer" if answer.strip() else "empty answer")
                continue
            return parsed.model_copy(
                update={
                    "compactions": (previous.compactions + 1) if previous else 1,
                    "dialog_refs": list(previous.dialog_refs) if previous else [],
                }
            )
        return None

    async def _call(self, instruction: str, content: str) -> str:
        prompt = await self.formatter.format(
            [Msg("system", instruction, "system"), Msg("user", content, "user")]
        )
        response = await self.model(prompt)
        if inspect.isasyncgen(response):
            last = None
            async for chunk in response:
                last = chunk
            response = last
        if response is None:
            return ""
        texts = [
            str(block.get("text", ""))
            for block in (response.content or [])
            if isinstance(block, dict) and block.get("type") == "text"
        ]
        return "\n".join(texts)

    def _chunks(self, msgs: Sequence[Msg]) -> list[list[Msg]]:
        """Split ``msgs`` so that each chunk's rendering fits in half the model's window."""
        budget = max(self.max_input_tokens // 2, 1024)
        chunks: list[list[Msg]] = [[]]
        used = 0
        for msg in msgs:
            tokens = self.counter.count_text(render_for_summary([msg]))
            if chunks[-1] and used + tokens > budget:
                chunks.append([])
                used = 0
            chunks[-1].append(msg)
            used += tokens
        return [chunk for chunk in chunks if chunk]
