"""What the pipeline needs of a framework's working memory: the port an adapter implements.

The pipeline never touches a framework message. It works with message ids, neutral views
(:class:`~agentscope_context_ext.core.messages.Message`), tool-result slots and their changes,
and asks the adapter for what only the framework knows: how many tokens a message costs as its
formatter sends it, and how its messages are stored and removed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

from ..messages import Media, Message
from ..summary import CompactSummary
from ._slots import ResultChange, ResultSlot, TextSlot

__all__ = ["ContextPort", "SavedText"]

SavedText = Callable[[str], str | None]
"""``tool_result/...`` path -> the saved full output, for the summary."""


class ContextPort(Protocol):
    """A managed agent's working memory, as the pipeline sees it."""

    summary: CompactSummary | None
    """The current compact summary (``None`` before the first compaction)."""

    def message_ids(self) -> list[str]:
        """Ids of the live messages, oldest first."""
        ...

    def view(self, msg_id: str, saved_text: SavedText | None = None) -> Message:
        """The neutral view of one message (with ``saved_text``: truncated outputs loaded)."""
        ...

    def pending_results(self) -> list[str]:
        """Messages with tool results not through stage one yet, oldest first; clears the list."""
        ...

    def requeue(self, msg_id: str) -> None:
        """Put a message back on the stage-one list (its processing did not complete)."""
        ...

    def result_message_ids(self) -> list[str]:
        """Messages carrying tool results, oldest first."""
        ...

    def result_slots(self, msg_id: str) -> list[ResultSlot]:
        """The tool results of a message, each with its record as the message keeps it."""
        ...

    def apply(
        self, msg_id: str, slots: Sequence[ResultSlot], changes: Mapping[str, ResultChange]
    ) -> None:
        """Write back what the stages did: every slot's record, and the changed outputs (by
        call id); the message counts as changed when an output was."""
        ...

    def user_text_slots(self, msg_id: str) -> list[TextSlot]:
        """The text parts of a user's message (``[]`` for any other message), each with its
        record as the message keeps it."""
        ...

    def apply_texts(
        self, msg_id: str, slots: Sequence[TextSlot], changes: Mapping[str, str]
    ) -> None:
        """Write back the slots' records and replace text parts (by slot key); it counts as
        changed."""
        ...

    def user_media(self, msg_id: str) -> list[tuple[str, Media]]:
        """The images, audio and video of a user's message, each with its key (``[]`` for any
        other message)."""
        ...

    def replace_user_media(self, msg_id: str, placeholders: Mapping[str, str]) -> None:
        """Replace media of a user's message (by key) with placeholder texts; it counts as
        changed."""
        ...

    def one_step(self) -> AbstractContextManager[None]:
        """Around one step of the pipeline: a port may read the framework's messages once per
        step instead of at every call (a ``contextlib.nullcontext()`` when it has no use for
        it)."""
        ...

    def drain_changes(self) -> tuple[int, set[str], set[str]]:
        """(epoch, changed ids, removed ids) since the last call; a new epoch means everything
        was replaced (a clear or a session load) and must be recounted."""
        ...

    @property
    def epoch(self) -> int:
        """The epoch :meth:`drain_changes` would report now, without draining anything: what
        remembers messages by id (stage two's settled results) starts over when it changes."""
        ...

    async def count(self, msg_id: str) -> int:
        """Exact tokens of one message as the framework's formatter sends it."""
        ...

    def bound(self, msg_id: str) -> int:
        """An upper bound of :meth:`count`, without tokenizing; ``KeyError`` when ``msg_id``
        is not a live message (the change log may name other things)."""
        ...

    def head_key(self) -> tuple:
        """Changes whenever the messages in front of the live ones (the summary) change."""
        ...

    async def count_head(self) -> int:
        """Exact tokens of the messages in front of the live ones."""
        ...

    async def count_system(self, text: str) -> int:
        """Exact tokens of a system prompt as sent."""
        ...

    def native(self, msg_ids: Sequence[str]) -> list[Any]:
        """The framework's own messages (what the dialog store's codec saves)."""
        ...

    async def remove(self, msg_ids: Sequence[str]) -> None:
        """Remove messages from memory (after they are on disk)."""
        ...

    def set_summary(self, summary: CompactSummary | None) -> None:
        """Replace the compact summary."""
        ...
