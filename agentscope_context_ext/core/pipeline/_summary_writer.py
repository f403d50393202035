"""``SummaryWriter``: turns the oldest messages (and the previous summary) into a new summary
(design §4 step 3, 4.2).

LLM path first: the compaction model (by default the agent's own model; the adapter supplies
the call as ``call_model(instruction, content) -> answer text``) answers with six Markdown
sections, parsed into ``CompactSummary`` and fitted to the summary budget; an unusable answer
is retried once with a stricter instruction. If both attempts fail (error, empty, unparsable, or
the model's own input repeated back), or the first finds no answer within
``compaction.summary_timeout_seconds`` (not retried: the agent would wait twice), the extractive
summary is used. The result is never an error string and never empty.

The call asks for plain text and nothing else: no tools, no tool choice, no structured output.
Providers refuse those in some modes (DeepSeek's thinking mode refuses a forced tool choice;
some OpenAI-compatible servers answer HTTP 400 to ``response_format``), and the sections are
checked here anyway.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..messages import Message
from ..summary import (
    CompactSummary,
    compaction_prompt,
    echoes_input,
    extractive_summary,
    fit_summary,
    parse_summary,
    render_messages,
    summary_language,
)
from ..tokens import TokenCounter
from ..workspace import DialogRef

__all__ = ["CLOSE_GRACE_SECONDS", "CallModel", "SummaryResult", "SummaryWriter", "final_response"]

CallModel = Callable[[str, str], Awaitable[str]]
"""``(system instruction, user content) -> the model's answer text``."""


async def final_response(response: Any) -> Any:
    """A model's answer as one response: a streamed answer's last chunk (AgentScope's models
    accumulate), anything else as it is (``None`` for an empty stream)."""
    if not inspect.isasyncgen(response):
        return response
    last = None
    async for chunk in response:
        last = chunk
    return last


logger = logging.getLogger("agentscope_context_ext")


class SummaryTimeout(TimeoutError):
    """A summary call found no answer within ``compaction.summary_timeout_seconds``."""


CLOSE_GRACE_SECONDS = 10.0
"""How long a summary call cancelled at its timeout may take to close its request."""


@dataclass
class SummaryResult:
    """The summary and how it was obtained."""

    summary: CompactSummary
    """The new summary (merged with the previous one)."""
    attempts: int = 0
    """Model calls made."""
    failures: list[str] = field(default_factory=list)
    """Why model attempts failed (for the event log, never for the summary)."""
    written: bool = False
    """Whether the model wrote ``summary`` (else it was extracted)."""
    answer_tokens: int = 0
    """Tokens of the model's answers (what the summary calls generated)."""


class SummaryWriter:
    """Summarises messages with a model, falling back to extraction.

    Args:
        call_model (`CallModel | None`): Asks the compaction model; ``None``: extractive only.
        counter (`TokenCounter`): Measures the input (to split it for the model's window) and
            the summary (to fit it in its budget).
        max_input_tokens (`int`): The compaction model's window.
        budget_tokens (`int`): Size of the whole summary message, in tokens.
        language (`str`): ``auto`` or a language name.
        timeout (`float`): Seconds one model call may take
            (``compaction.summary_timeout_seconds``).
    """

    def __init__(
        self,
        call_model: CallModel | None,
        counter: TokenCounter,
        max_input_tokens: int,
        budget_tokens: int,
        language: str = "auto",
        timeout: float = 120.0,
    ) -> None:
        self.call_model = call_model
        self.counter = counter
        self.max_input_tokens = max_input_tokens
        self.budget_tokens = budget_tokens
        self.language = language
        self.timeout = timeout
        # The sections share the budget with the header and the dialog path guide.
        frame = CompactSummary(
            dialog_refs=[DialogRef(file="dialog/2026-01-01.jsonl", first_line=1, last_line=1)]
        ).render()
        self.section_tokens = max(budget_tokens - counter.count_text(frame) - 16, 128)

    async def summarize(
        self,
        msgs: Sequence[Message],
        previous: CompactSummary | None,
        extra_instruction: str | None = None,
    ) -> SummaryResult:
        """Summarise ``msgs`` merged with ``previous``."""
        result = await self.model_summary(msgs, previous, extra_instruction)
        summary = result.summary if result.written else self.extend(msgs, previous)
        result.summary = self.following(summary, previous)
        return result

    async def model_summary(
        self,
        msgs: Sequence[Message],
        previous: CompactSummary | None,
        extra_instruction: str | None = None,
    ) -> SummaryResult:
        """The model's summary of ``msgs`` merged with ``previous`` (``written`` false and an
        empty summary when the model failed or there is none: the caller extracts)."""
        language = summary_language(msgs, self.language)
        result = SummaryResult(summary=CompactSummary())
        if self.call_model is None:
            result.failures.append("no compaction model")
            return result
        summary = await self._model_summary(msgs, previous, language, extra_instruction, result)
        if summary is not None:
            result.summary = summary
            result.written = True
        return result

    def extend(self, msgs: Sequence[Message], previous: CompactSummary | None) -> CompactSummary:
        """The extractive summary of ``msgs`` folded into ``previous`` (no model call)."""
        return extractive_summary(
            msgs,
            previous,
            budget_tokens=self.section_tokens,
            count_tokens=self.counter.count_text,
            language=summary_language(msgs, self.language),
        )

    @staticmethod
    def following(summary: CompactSummary, previous: CompactSummary | None) -> CompactSummary:
        """``summary`` as the successor of ``previous``: one compaction more, its dialog
        references carried (the compaction adds the new ones)."""
        return summary.model_copy(
            update={
                "compactions": previous.compactions + 1 if previous else 1,
                "dialog_refs": list(previous.dialog_refs) if previous else [],
            }
        )

    async def _model_summary(
        self,
        msgs: Sequence[Message],
        previous: CompactSummary | None,
        language: str,
        extra_instruction: str | None,
        result: SummaryResult,
    ) -> CompactSummary | None:
        """The model's summary, chunk by chunk, fitted to the budget; ``None`` if it failed."""
        summary = previous
        for rendered in self._chunks(render_messages(msgs)):
            attempt = await self._summarize_chunk(
                rendered, summary, language, extra_instruction, result
            )
            if attempt is None:
                return None
            summary = attempt
        if summary is None:  # nothing to summarise and no previous summary
            return None
        return fit_summary(
            summary,
            msgs,
            budget_tokens=self.section_tokens,
            count_tokens=self.counter.count_text,
            previous=previous,  # what the model dropped of its progress is carried
            language=language,
        )

    async def _summarize_chunk(
        self,
        rendered: str,
        previous: CompactSummary | None,
        language: str,
        extra_instruction: str | None,
        result: SummaryResult,
    ) -> CompactSummary | None:
        for strict in (False, True):
            instruction, content = compaction_prompt(
                rendered,
                previous,
                language=language,
                max_tokens=self.section_tokens,
                extra_instruction=extra_instruction,
                strict=strict,
            )
            result.attempts += 1
            try:
                answer = await self._ask(instruction, content)
            except SummaryTimeout as exc:
                # No stricter retry: a model too slow for one answer is as slow for the next,
                # and the agent waits for both.
                result.failures.append(f"TimeoutError: {exc}"[:300])
                return None
            except Exception as exc:  # noqa: BLE001 - any model failure: retry, then extract
                result.failures.append(f"{type(exc).__name__}: {exc}"[:300])
                continue
            answer = answer if isinstance(answer, str) else ""
            result.answer_tokens += self.counter.count_text(answer) if answer else 0
            parsed = parse_summary(answer)
            if parsed is None:
                result.failures.append("unusable answer" if answer.strip() else "empty answer")
                continue
            if echoes_input(answer, instruction, content):  # a model that cannot summarise
                result.failures.append("the answer repeats the input")
                continue
            return parsed
        return None

    async def _ask(self, instruction: str, content: str) -> str:
        """The model's answer to one call, within ``timeout`` seconds.

        Raises:
            `SummaryTimeout`: No answer in time. The call was cancelled and waited for (up to
                :data:`CLOSE_GRACE_SECONDS`), so its HTTP request is closed: a server streaming
                the answer stops writing it, and a single-slot local server is free for the
                agent's next call (abandoned summary calls once held one for 702 s). Whatever
                the cancelled call returned is dropped: AgentScope's models answer a
                cancellation with the partial answer, which ``asyncio.wait_for`` would return
                as if it were whole.
        """
        assert self.call_model is not None
        call = asyncio.ensure_future(self.call_model(instruction, content))
        try:
            done, _ = await asyncio.wait({call}, timeout=self.timeout)
        except asyncio.CancelledError:  # the compaction itself was cancelled: close the call
            call.cancel()
            raise
        if call in done:
            return call.result()
        call.cancel()
        done, _ = await asyncio.wait({call}, timeout=CLOSE_GRACE_SECONDS)
        if done and not call.cancelled():
            call.exception()  # retrieved: whatever the cancelled call ended with is not used
        elif not done:
            logger.warning(
                "a summary call did not stop %gs after it was cancelled", CLOSE_GRACE_SECONDS
            )
        raise SummaryTimeout(
            f"no answer within {self.timeout:g} s (compaction.summary_timeout_seconds)"
        )

    def _chunks(self, rendered: Sequence[str]) -> list[str]:
        """The rendered messages joined into chunks that each fit in half the model's window
        (the other half holds the instruction and the running summary). A message larger than
        that alone (on 2.x one message holds every result of a step) is split at line breaks
        first, so no call is sent over the compaction model's window."""
        budget = max(self.max_input_tokens // 2, 1024)
        chunks: list[list[str]] = [[]]
        used = 0
        for whole in rendered:
            for text in self._pieces(whole, budget):
                tokens = self.counter.count_text(text)
                if chunks[-1] and used + tokens > budget:
                    chunks.append([])
                    used = 0
                chunks[-1].append(text)
                used += tokens
        return ["\n\n".join(chunk) for chunk in chunks if chunk]

    def _pieces(self, text: str, budget: int) -> list[str]:
        """``text`` in pieces of at most ``budget`` tokens, cut at line breaks where a line
        fits (else inside the line)."""
        if self.counter.count_text(text) <= budget:
            return [text]
        pieces: list[str] = []
        current: list[str] = []
        used = 0
        for line in text.splitlines(keepends=True):
            tokens = self.counter.count_text(line)
            if tokens > budget:  # one huge line: cut it by characters, in proportion
                step = max(1, len(line) * budget // (tokens + 1))
                parts = [line[i : i + step] for i in range(0, len(line), step)]
            else:
                parts = [line]
            for part in parts:
                size = tokens if len(parts) == 1 else self.counter.count_text(part)
                if current and used + size > budget:
                    pieces.append("".join(current))
                    current, used = [], 0
                current.append(part)
                used += size
        if current:
            pieces.append("".join(current))
        return pieces
