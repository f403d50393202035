"""Never over the window: what runs when compaction could not bring the prompt down (design §4.3).

Compaction keeps the newest message whatever its size, and on AgentScope 2.x the newest
message holds every result of a reasoning step: forty parallel calls, each cut to a quarter of
the window by stage one, are ten windows. So, before every model call and in this order, while
the prompt is still too big:

1. stage two on every tool result, the newest step's included (they are on disk already);
2. tool results down to their notice alone (where the output is, how to read on), oldest
   message first and the largest result of a message first, until the prompt is under the
   compaction trigger;
3. a user's message that takes more than ``max_window_share`` of the window: its largest text
   parts saved together in one file and cut to one head excerpt with one notice, like a tool
   result (the other parts become a placeholder), until the prompt fits the window (the user's
   words are kept whole whenever the call can still be made);
4. then, if it still does not fit, the call is refused before the provider sees it: what is
   left cannot be offloaded (the system prompt, the tool schemas, the summary, the notices).

Nothing is lost on the way: each step saves before it cuts, and a save that fails leaves the
text where it is (the pipeline then refuses with ``WorkspaceWriteError``). A prompt over the
trigger but within the window after all that is reported once per state
(``context_overflow``) and sent.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from ..config import ContextConfig
from ..errors import ContextOverflowError
from ..events import (
    ContextError,
    ContextOverflow,
    EventBus,
    ToolResultRetruncated,
    UserMessageOffloaded,
)
from ..workspace import saved_paths
from ._compaction import cut_item
from ._cut import valid_boundaries
from ._media_placeholders import media_placeholder
from ._port import ContextPort
from ._slots import ResultChange, TextSlot, outcome_data
from ._stage_two import StageTwo
from ._tally import PromptCount
from ._tool_results import PART_PLACEHOLDER, ResultTruncator
from ._window_size import Window

__all__ = ["WindowGuard"]

Count = Callable[..., Awaitable[PromptCount]]


class WindowGuard:
    """The steps after compaction that make a prompt fit, and the refusal when nothing can.

    Args:
        config (`ContextConfig`): ``truncation.enabled``, ``compaction.trigger_ratio``.
        port (`ContextPort`): The memory.
        count (`Callable`): ``await count(sys_prompt, tools)``: the pipeline's exact count.
        truncator (`ResultTruncator`): Cuts a result to its notice, offloads a user's text.
        stage_two (`StageTwo`): Stage two on every result.
        bus (`EventBus`): Events.
        window (`Window`): The window prompts are fitted in.
    """

    def __init__(
        self,
        config: ContextConfig,
        port: ContextPort,
        count: Count,
        truncator: ResultTruncator,
        stage_two: StageTwo,
        bus: EventBus,
        window: Window,
    ) -> None:
        self.config = config
        self.port = port
        self.count = count
        self.truncator = truncator
        self.stage_two = stage_two
        self.bus = bus
        self.window = window
        self._overflow_state: tuple[int, int] | None = None

    async def fit(
        self,
        sys_prompt: str,
        tools: list[dict] | None,
        count: PromptCount,
        above: int | None = None,
    ) -> PromptCount:
        """Steps 1-3 above, each only while the prompt is still too big; the new count.

        Args:
            above (`int | None`): The size the prompt is fitted under: the compaction point
                (past the trigger when prompt caching makes waiting cheaper); default the
                trigger.
        """
        window = self.window.tokens
        trigger = self.window.trigger_tokens if above is None else above
        if count.total <= trigger or not self.config.truncation.enabled:
            return count
        # The newest step's images stay for now (the model asked for them; step 2 takes them
        # only if still needed).
        if await self.stage_two.run(force=True, include_recent=True, keep_recent_media=True):
            count = await self.count(sys_prompt, tools)
        if count.total > trigger:
            count = await self._results_to_notices(sys_prompt, tools, count, trigger)
        if count.total > window:
            count = await self._offload_user_texts(sys_prompt, tools, count, window)
        if count.total > window:
            count = await self._offload_user_media(sys_prompt, tools, count, window)
        return count

    async def check(
        self,
        sys_prompt: str,
        tools: list[dict] | None,
        count: PromptCount,
        above: int | None = None,
    ) -> None:
        """Refuse a prompt over the window (:class:`ContextOverflowError` and an ``error``
        event, before any model call); report one over the trigger (or ``above``, the
        compaction point) once per state."""
        if count.total <= (self.window.trigger_tokens if above is None else above):
            self._overflow_state = None
            return
        if count.estimated:
            count = await self.count(sys_prompt, tools)  # never refuse on a bound
        window = self.window.tokens
        if count.floor > window:  # never on a shift: the call's answer re-checks it (§5.1)
            await self._refuse(count)
        ids = self.port.message_ids()
        state = (count.total, len(ids))
        if self._overflow_state != state:
            self._overflow_state = state
            valid = valid_boundaries([cut_item(self.port.view(m), 0) for m in ids])
            await self.bus.emit(
                ContextOverflow(
                    tokens=count.total,
                    trigger_tokens=self.window.trigger_tokens,
                    max_input_tokens=window,
                    messages=len(ids),
                    compactable=max((i for i in range(len(ids)) if valid[i]), default=0),
                )
            )

    async def _refuse(self, count: PromptCount) -> None:
        window = self.window.tokens
        parts = {
            "system": count.system,
            "tools": count.tools,
            "summary": count.head,
            "messages": count.messages,
        }
        names = {
            "system": "the system prompt",
            "tools": "the tool schemas",
            "summary": "the summary and long-term memory",
            "messages": "the messages (what is left of them cannot be offloaded: the "
            "notices, the assistant's words and tool calls, results of exempt tools)",
        }
        largest = max(parts, key=lambda name: parts[name])
        breakdown = ", ".join(f"{names[name]} {tokens:,}" for name, tokens in parts.items())
        offloaded = (
            "after every tool result and large user message that could be was offloaded"
            if self.config.truncation.enabled
            else "with truncation off"
        )
        message = (
            f"the prompt is {count.floor:,} tokens, over the {window:,}-token window, "
            f"{offloaded}: {breakdown}. Most of it is {names[largest]}, which cannot be "
            "offloaded; nothing was sent and nothing is lost. Shorten the system prompt, offer "
            "fewer tools, or use a model with a larger window (max_input_tokens)."
        )
        await self.bus.emit(
            ContextError(
                reason="context overflow",
                tokens=count.floor,
                max_input_tokens=window,
                largest=largest,
                parts=parts,
            )
        )
        raise ContextOverflowError(message, count.floor, window, parts)

    async def _results_to_notices(
        self, sys_prompt: str, tools: list[dict] | None, count: PromptCount, target: int
    ) -> PromptCount:
        """Results down to their notice alone, oldest message first and the largest result of
        a message first, until the count is at most ``target``."""
        port, truncator = self.port, self.truncator
        for msg_id in port.result_message_ids():
            slots = sorted(port.result_slots(msg_id), key=lambda s: -len(s.text or ""))
            index = 0
            while index < len(slots) and count.total > target:
                # Cut as many as the estimate says are needed, then count exactly.
                needed = count.total - target
                changes: dict[str, ResultChange] = {}
                outcomes = []
                while index < len(slots) and needed > 0:
                    slot = slots[index]
                    index += 1
                    before = slot.text or ""
                    change, outcome = truncator.notice_only(slot)
                    if change is not None:
                        changes[slot.call_id] = change
                        count_text = truncator.counter.count_text
                        needed -= count_text(before) - count_text(change.text)
                    if outcome is not None:
                        outcomes.append(outcome)
                if changes:
                    port.apply(msg_id, slots, changes)
                    count = await self.count(sys_prompt, tools)
                for outcome in outcomes:
                    await self.bus.emit(ToolResultRetruncated(**outcome_data(outcome)))
            if count.total <= target:
                break
        return count

    async def _offload_user_texts(
        self, sys_prompt: str, tools: list[dict] | None, count: PromptCount, target: int
    ) -> PromptCount:
        """The user's messages over the window share cut, oldest message first, until the
        count is at most ``target``: a message's largest text parts saved together in one file,
        with one notice (:meth:`_parts_to_offload`)."""
        port, truncator = self.port, self.truncator
        for msg_id in port.message_ids():
            slots = port.user_text_slots(msg_id)
            if not slots:
                continue
            chosen, tokens = self._parts_to_offload(slots)
            done = truncator.offload_message_texts(chosen, tokens) if chosen else None
            if done is None:
                continue
            changes, outcome = done
            port.apply_texts(msg_id, slots, changes)
            await self.bus.emit(
                UserMessageOffloaded(
                    message_id=msg_id,
                    path=outcome.path,
                    bytes_before=outcome.bytes_before,
                    bytes_after=outcome.bytes_after,
                    tokens_saved=max(0, outcome.tokens_before - outcome.tokens_after),
                )
            )
            count = await self.count(sys_prompt, tools)
            if count.total <= target:
                break
        return count

    async def _offload_user_media(
        self, sys_prompt: str, tools: list[dict] | None, count: PromptCount, target: int
    ) -> PromptCount:
        """The images, audio and video of the user's messages as placeholders naming their
        saved copies, the oldest first, until the count is at most ``target`` (each counts
        ``media_token_cost``: five images of a 4k window's user message are over it)."""
        port, truncator = self.port, self.truncator
        cost = truncator.counter.media_token_cost
        for msg_id in port.message_ids():
            media = port.user_media(msg_id)
            if not media:
                continue
            needed = count.total - target
            placeholders: dict[str, str] = {}
            for key, block in media:
                if needed <= 0:
                    break
                text = media_placeholder(block, key, truncator.store, truncator.faults)
                if isinstance(text, str):
                    placeholders[key] = text
                    needed -= cost
            if not placeholders:
                continue
            port.replace_user_media(msg_id, placeholders)
            await self.bus.emit(
                UserMessageOffloaded(
                    message_id=msg_id,
                    path=", ".join(sorted(saved_paths(" ".join(placeholders.values())))),
                    bytes_before=sum(len(b.data or b.url or "") for _, b in media),
                    bytes_after=sum(len(t) for t in placeholders.values()),
                    tokens_saved=cost * len(placeholders),
                )
            )
            count = await self.count(sys_prompt, tools)
            if count.total <= target:
                break
        return count

    def _parts_to_offload(self, slots: list[TextSlot]) -> tuple[list[TextSlot], int]:
        """Which text parts of a message over the window share to save and cut, in message
        order, and the tokens their excerpt and notice may take.

        The largest parts go first, until what stays of the message takes at most half the
        share: the other half is for the one excerpt and the placeholders. Each part alone may
        fit while all do not (30 parts of 8 KB); 300 parts each cut with a notice of its own
        took 76,772 tokens of notices, where one saved file and one notice fit.
        """
        share = self.truncator.max_result_tokens
        count_text = self.truncator.counter.count_text
        sizes = {slot.key: count_text(slot.text) for slot in slots}
        kept = sum(sizes.values())
        if kept <= share:
            return [], share
        chosen: set[str] = set()
        for slot in sorted(slots, key=lambda s: -sizes[s.key]):
            if kept <= share // 2:
                break
            if slot.record.path or not slot.text:  # cut before: its excerpt stays
                continue
            chosen.add(slot.key)
            kept -= sizes[slot.key]
        placeholders = (len(chosen) - 1) * count_text(PART_PLACEHOLDER) if chosen else 0
        return [slot for slot in slots if slot.key in chosen], share - kept - placeholders
