"""Tool-result truncation: the pure engine (stage one and two cuts) and its notice format, and
the text every stored or sent text is made of (``sendable_text``: no lone surrogate)."""

from ._engine import (
    DEFAULT_MAX_BYTES,
    REPLACEMENT,
    RETRUNCATE_SLACK_BYTES,
    count_lines,
    encode_text,
    encoded_size,
    notice_only,
    retruncate,
    sendable_text,
    sendable_value,
    truncate_fresh,
    truncate_text_output,
)
from ._notice import TRUNCATION_NOTICE_MARKER, TruncationNotice, attach_notice, split_notice

__all__ = [
    "DEFAULT_MAX_BYTES",
    "REPLACEMENT",
    "RETRUNCATE_SLACK_BYTES",
    "TRUNCATION_NOTICE_MARKER",
    "TruncationNotice",
    "attach_notice",
    "count_lines",
    "encode_text",
    "encoded_size",
    "notice_only",
    "retruncate",
    "sendable_text",
    "sendable_value",
    "split_notice",
    "truncate_fresh",
    "truncate_text_output",
]
