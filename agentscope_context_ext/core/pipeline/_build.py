"""``build_pipeline``: the parts of one managed agent's pipeline, made and wired once."""

from __future__ import annotations

from ..config import ContextConfig
from ..events import EventBus
from ..tokens import TokenCounter
from ..workspace import DialogStore, ToolResultStore
from ._compaction import Compaction
from ._faults import SaveFaults
from ._offer import ToolOffer
from ._pipeline import ContextPipeline, Notify, PipelineParts
from ._port import ContextPort
from ._prefix_cost import PrefixCost
from ._prompt_counter import PromptCounter
from ._stage_two import StageTwo
from ._summary_writer import CallModel, SummaryWriter
from ._tally import TokenTally
from ._tool_results import ResultTruncator
from ._window import WindowGuard
from ._window_size import Window

__all__ = ["build_pipeline"]


def build_pipeline(
    config: ContextConfig,
    port: ContextPort,
    counter: TokenCounter,
    *,
    dialog_store: DialogStore,
    tool_result_store: ToolResultStore,
    bus: EventBus,
    max_input_tokens: int,
    call_model: CallModel | None = None,
    compaction_window: int | None = None,
    notify: Notify | None = None,
    read_file_name: str | None = "read_file",
) -> ContextPipeline:
    """Assemble the pipeline of one managed agent.

    Args:
        config (`ContextConfig`): The configuration in force.
        port (`ContextPort`): The adapter's memory.
        counter (`TokenCounter`): The vocabulary to count with.
        dialog_store (`DialogStore`): Where compacted messages go.
        tool_result_store (`ToolResultStore`): Where truncated outputs go.
        bus (`EventBus`): Events and stats.
        max_input_tokens (`int`): The window.
        call_model (`CallModel | None`): The compaction model; ``None`` summarises by extraction.
        compaction_window (`int | None`): The compaction model's window (default: the agent's).
        notify (`Callable | None`): Prints a compaction notice.
        read_file_name (`str | None`): The name of this package's ``read_file`` tool
            (``None``: it is off, and a tool of that name is any other tool).
    """
    faults = SaveFaults()
    window = Window(max_input_tokens, config.compaction.trigger_ratio)
    truncator = ResultTruncator(
        config.truncation,
        tool_result_store,
        counter,
        window,
        read_file_name=read_file_name,
        faults=faults,
    )
    tally = TokenTally(counter)
    offer = ToolOffer(bus.stats, port, dialog_store, counter, window)
    count = PromptCounter(config, tally, port, bus, offer, window)
    stage_two = StageTwo(config.truncation, truncator, port, bus)
    writer = SummaryWriter(
        call_model,
        counter,
        max_input_tokens=compaction_window or max_input_tokens,
        budget_tokens=config.compaction.summary_tokens(max_input_tokens),
        language=config.compaction.summary_language,
        timeout=config.compaction.summary_timeout_seconds,
    )
    compaction = Compaction(
        config,
        port,
        tally,
        count,
        writer,
        stage_two,
        dialog_store,
        tool_result_store,
        counter,
        bus,
        window,
        notify,
        faults=faults,
    )
    guard = WindowGuard(config, port, count, truncator, stage_two, bus, window)
    cost = PrefixCost(
        config.prompt_cache_price,
        window,
        config.compaction.keep_recent_ratio,
        can_wait=counter.exact and config.compaction.hook_point == "pre_reasoning",
    )
    parts = PipelineParts(
        config,
        port,
        counter,
        tally,
        count,
        truncator,
        stage_two,
        compaction,
        dialog_store,
        tool_result_store,
        bus,
        window,
        faults,
        guard,
        offer,
        cost,
    )
    return ContextPipeline(parts)
