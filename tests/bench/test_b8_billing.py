"""B8's bill under prompt caching: what a provider's cache serves from the previous prompt (tools
first, then the messages in order, a changed message cached up to where it changes), billed
tokens at a price, and which sides the target compares."""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:  # bench/ is the repository's, not the package's
    sys.path.insert(0, str(REPO))

from agentscope_context_ext import get_token_counter  # noqa: E402
from bench.b8_own_compression import (  # noqa: E402
    ESTIMATE,
    billed,
    cached_prefix_tokens,
    eligible,
    shortfalls,
)

TOOLS = [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}]
SYSTEM = {"role": "system", "content": "You answer questions about flights. " * 20}
ASK = {"role": "user", "content": "Which flights leave Boston tomorrow morning?"}
ANSWER = {"role": "assistant", "content": "Three flights: HAT001, HAT002 and HAT003."}


def test_a_prompt_that_extends_the_previous_one_is_cached_up_to_its_end() -> None:
    counter = get_token_counter("qwen")
    before = [SYSTEM, ASK]
    after = [SYSTEM, ASK, ANSWER, {"role": "user", "content": "And the evening ones?"}]
    cached = cached_prefix_tokens(counter, (before, TOOLS), after, TOOLS)
    assert cached == counter.count_formatted(before, TOOLS)
    assert cached < counter.count_formatted(after, TOOLS)


def test_nothing_is_cached_first_or_after_the_tools_changed() -> None:
    counter = get_token_counter("qwen")
    assert cached_prefix_tokens(counter, None, [SYSTEM, ASK], TOOLS) == 0
    more = [*TOOLS, {"type": "function", "function": {"name": "read_dialog"}}]
    assert cached_prefix_tokens(counter, ([SYSTEM, ASK], TOOLS), [SYSTEM, ASK], more) == 0


def test_a_changed_message_is_cached_up_to_where_it_changes() -> None:
    counter = get_token_counter("qwen")
    summary = {"role": "user", "content": "<context-summary>\nGoal: book HAT001\n"}
    edited = {"role": "user", "content": "<context-summary>\nGoal: cancel HAT002\n"}
    cached = cached_prefix_tokens(counter, ([SYSTEM, summary, ASK], TOOLS), [SYSTEM, edited], TOOLS)
    whole = counter.count_formatted([SYSTEM], TOOLS)
    assert whole < cached < counter.count_formatted([SYSTEM, edited], TOOLS)


def _row(**changes: object) -> dict:
    row = {
        "over_window": 0,
        "orphans": 0,
        "reachable": 1.0,
        "prompt_tokens": 10_000,
        "cached_tokens": 8_000,
        "summary_input_tokens": 500,
        "ids_in_last_prompt": 0.9,
        "fidelity": None,
    }
    row.update(changes)
    row["billed"] = {str(p): billed(row, p) for p in (0.1, 0.5, 1.0)}
    return row


def test_billed_tokens_price_the_cached_prefix_and_add_the_summary_input() -> None:
    row = _row()
    assert row["billed"] == {"0.1": 2_000 + 800 + 500, "0.5": 2_000 + 4_000 + 500, "1.0": 10_500}


def test_only_sides_in_the_window_without_orphans_or_loss_are_compared() -> None:
    assert eligible(_row())
    assert not eligible(_row(over_window=1))
    assert not eligible(_row(reachable=0.99))
    rows = {
        "ours": _row(),
        ESTIMATE: _row(cached_tokens=9_900),  # ours too: never a competitor
        "2.x": _row(prompt_tokens=9_900, over_window=3),  # plain 2.x: the bar, not a competitor
        "lossy": _row(prompt_tokens=100, reachable=0.5),
    }
    assert shortfalls("tau-bench", rows) == []
    rows["cheaper"] = _row(prompt_tokens=9_000)
    assert shortfalls("tau-bench", rows) == [
        "billed at r = 0.1: cheaper cheaper",
        "billed at r = 1.0: cheaper cheaper",
    ]


def test_the_bar_is_one_point_one_times_plain_two_x_at_a_tenth() -> None:
    # ours: 3,300 billed at r = 0.1; plain 2.x 3,100 (1.06x: within) or 2,100 (1.57x: not).
    within = {"ours": _row(), "2.x": _row(prompt_tokens=8_000, cached_tokens=6_000, orphans=1)}
    assert shortfalls("coding", within) == []
    beyond = {"ours": _row(), "2.x": _row(prompt_tokens=7_000, cached_tokens=6_000, orphans=1)}
    assert shortfalls("coding", beyond) == ["billed at r = 0.1: 1.57x plain 2.x (bar 1.10x)"]


def test_ids_and_fidelity_may_not_fall_below_the_restated_figures() -> None:
    rows = {"ours": _row(ids_in_last_prompt=0.4966, fidelity=0.9236), "2.x": _row(orphans=1)}
    assert shortfalls("coding", rows) == []  # 49.7% and 92.4% as shown: not below
    rows["ours"] = _row(ids_in_last_prompt=0.49, fidelity=0.92)
    assert shortfalls("coding", rows) == [
        "ids in the last prompt below 49.7%",
        "fidelity below 92.4%",
    ]
