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
