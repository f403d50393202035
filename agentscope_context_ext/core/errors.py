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
