"""The summary that replaces compacted messages (design §4.2): its model, the extractive summary,
the compaction model's prompt and input, and parsing its answer. Pure: no AgentScope, no I/O."""

from ._calls import changed_lines, classify, definitions, error_line
from ._extractive import DEFAULT_BUDGET_TOKENS, extractive_summary
from ._identifiers import summary_identifiers
from ._model import SECTION_TITLES, CompactSummary, DialogRef, merge_refs
from ._parse import echoes_input, parse_summary, summary_language
from ._prompt import (
    BLOCK_CHARS,
    INSTRUCTION,
    MEMO_HEADING,
    MESSAGES_HEADING,
    STRICT_SUFFIX,
    compaction_prompt,
    render_for_summary,
    render_messages,
)
from ._selection import fit_summary
from ._terms import SOURCE_WEIGHTS, Salience, TextIndex, code_terms, mentions
from ._text import clip_middle, estimate_tokens, sentences
from ._worklog import WorkLog, build_worklog

__all__ = [
    "BLOCK_CHARS",
    "DEFAULT_BUDGET_TOKENS",
    "INSTRUCTION",
    "MEMO_HEADING",
    "MESSAGES_HEADING",
    "SECTION_TITLES",
    "SOURCE_WEIGHTS",
    "STRICT_SUFFIX",
    "CompactSummary",
    "DialogRef",
    "Salience",
    "TextIndex",
    "WorkLog",
    "build_worklog",
    "changed_lines",
    "classify",
    "clip_middle",
    "code_terms",
    "compaction_prompt",
    "definitions",
    "echoes_input",
    "error_line",
    "estimate_tokens",
    "extractive_summary",
    "fit_summary",
    "mentions",
    "merge_refs",
    "parse_summary",
    "render_for_summary",
    "render_messages",
    "sentences",
    "summary_identifiers",
    "summary_language",
]
