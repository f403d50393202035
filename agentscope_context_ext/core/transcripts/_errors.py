"""The replay's input error (no AgentScope import: the CLI catches it on either version)."""

__all__ = ["TranscriptError"]


class TranscriptError(ValueError):
    """The file cannot be read as a transcript; the message says why in one line."""
