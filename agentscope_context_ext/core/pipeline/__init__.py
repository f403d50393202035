"""The pre-reasoning pipeline (design §3.2-4.4), independent of the framework: the truncation
stages, the token check, the pair-safe cut, the writer and SaveDialog, over a
:class:`ContextPort` that an adapter implements."""

from ._build import build_pipeline
from ._compaction import SUMMARY_FILE, Compaction, cut_item
from ._cut import CutItem, choose_cut, tool_pairs, valid_boundaries
from ._faults import SaveFault, SaveFaults
from ._offer import DIALOG_TOOL_NAMES, TOOLS_SHARE, ToolOffer, tool_name
from ._pipeline import ContextPipeline, PipelineParts
from ._port import ContextPort, SavedText
from ._prefix_cost import PrefixCost
from ._prompt_counter import PromptCounter
from ._slots import (
    ResultChange,
    ResultSlot,
    TextSlot,
    TruncationOutcome,
    TruncationRecord,
    outcome_data,
)
from ._stage_two import StageTwo
from ._summary_ahead import KeptSummary, SummaryShelf
from ._summary_writer import CallModel, SummaryResult, SummaryWriter, final_response
from ._tally import PromptCount, TokenTally, message_bound
from ._tool_results import ResultTruncator, StreamAllowance
from ._window import WindowGuard
from ._window_size import Window

__all__ = [
    "DIALOG_TOOL_NAMES",
    "SUMMARY_FILE",
    "TOOLS_SHARE",
    "CallModel",
    "Compaction",
    "ContextPipeline",
    "ContextPort",
    "CutItem",
    "KeptSummary",
    "PipelineParts",
    "PrefixCost",
    "PromptCount",
    "PromptCounter",
    "ResultChange",
    "ResultSlot",
    "ResultTruncator",
    "SaveFault",
    "SaveFaults",
    "SavedText",
    "StageTwo",
    "StreamAllowance",
    "SummaryResult",
    "SummaryShelf",
    "SummaryWriter",
    "TextSlot",
    "TokenTally",
    "ToolOffer",
    "TruncationOutcome",
    "TruncationRecord",
    "Window",
    "WindowGuard",
    "build_pipeline",
    "choose_cut",
    "cut_item",
    "final_response",
    "message_bound",
    "outcome_data",
    "tool_name",
    "tool_pairs",
    "valid_boundaries",
]
