"""Exception classes raised by agentscope-context-ext.

Every error a user can cause by bad input is one of these, with a message that says what to fix.
"""

from __future__ import annotations


class ContextExtError(Exception):
    """Base class of every error raised on purpose by this package."""


class ConfigError(ContextExtError, ValueError):
    """A configuration value, key or file is invalid.

    The message names the offending key (dotted, e.g. ``truncation.recent_n``) and, when the
    configuration came from a file, the file.
    """


class StudioError(ContextExtError, ValueError):
    """A bad AgentScope Studio URL, or a Studio that cannot be reached."""


class TracingError(StudioError):
    """A bad trace receiver URL, or no receiver listening there (``trace_to``)."""


class WorkspaceError(ContextExtError, OSError):
    """The workspace cannot be used (not a directory, not writable, path escapes it)."""


class WorkspaceWriteError(WorkspaceError):
    """Saving to the workspace failed at run time and the prompt would now exceed the window.

    Raised before the model call instead of sending a prompt the provider would reject; every
    message stays in memory, so the call can be retried once the workspace is writable again.

    Attributes:
        path (`str`): What could not be written.
        tokens (`int`): The prompt's tokens.
        max_input_tokens (`int`): The window.
    """

    def __init__(self, message: str, path: str = "", tokens: int = 0, max_input_tokens: int = 0):
        super().__init__(message)
        self.path = path
        self.tokens = tokens
        self.max_input_tokens = max_input_tokens

    def __reduce__(self):  # picklable across processes, like any OSError subclass should be
        return (type(self), (str(self), self.path, self.tokens, self.max_input_tokens))


class ContextOverflowError(ContextExtError):
    """The prompt does not fit the window even with everything that can leave it offloaded.

    Raised before the model call: every tool result is down to its notice and every large user
    message is offloaded, and what cannot be offloaded (the system prompt, the tool schemas, the
    summary, the notices) still takes more than ``max_input_tokens``. Nothing is lost: the
    messages stay in memory and on disk. Shorten the system prompt, offer fewer tools, or use a
    model with a larger window.

    Attributes:
        tokens (`int`): The prompt's tokens.
        max_input_tokens (`int`): The window.
        parts (`dict[str, int]`): What took the room, in tokens: ``system``, ``tools``,
            ``summary`` (the messages in front of the live ones) and ``messages``.
    """

    def __init__(
        self,
        message: str,
        tokens: int = 0,
        max_input_tokens: int = 0,
        parts: dict[str, int] | None = None,
    ):
        super().__init__(message)
        self.tokens = tokens
        self.max_input_tokens = max_input_tokens
        self.parts = dict(parts or {})

    def __reduce__(self):  # picklable across processes, with its figures
        return (type(self), (str(self), self.tokens, self.max_input_tokens, self.parts))
