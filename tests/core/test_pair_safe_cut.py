"""The pair-safe cut (design §4.1, 12.4, 12.5, 12.14), checked exhaustively against a brute-force
oracle and on the named hard cases."""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from agentscope_context_ext.core.pipeline import CutItem, choose_cut, tool_pairs, valid_boundaries


def item(tokens: int = 10, uses: tuple[str, ...] = (), results: tuple[str, ...] = ()) -> CutItem:
    return CutItem(tokens, uses, results)


def test_parallel_calls_in_one_message_stay_with_all_results() -> None:
    items = [
        item(100),  # user
        item(10, uses=("a", "b", "c")),  # parallel calls
        item(500, results=("a",)),
        item(500, results=("b",)),
        item(500, results=("c",)),
        item(10),  # assistant text
    ]
    assert valid_boundaries(items) == [True, True, False, False, False, True, True]
    # A budget that fits only the last two messages: the cut may not split the parallel group.
    assert choose_cut(items, keep_tokens=520) == 5
    assert choose_cut(items, keep_tokens=1600) == 1


def test_several_results_in_one_message() -> None:
    items = [item(5), item(5, uses=("a", "b")), item(900, results=("a", "b")), item(5)]
    assert valid_boundaries(items) == [True, True, False, True, True]
    assert choose_cut(items, keep_tokens=10) == 3


def test_reused_ids_pair_with_the_nearest_earlier_call() -> None:
    items = [
        item(5, uses=("x",)),
        item(5, results=("x",)),
        item(5, uses=("x",)),
        item(5, results=("x",)),
    ]
    assert tool_pairs(items) == [(0, 1), (2, 3)]
    assert valid_boundaries(items) == [True, False, True, False, True]


def test_pending_last_call_is_a_valid_tail() -> None:
    items = [item(50), item(50, results=()), item(10, uses=("p",))]
    assert valid_boundaries(items)[2] is True
    assert choose_cut(items, keep_tokens=10) == 2


def test_newest_message_bigger_than_the_budget_is_kept() -> None:
    items = [item(10), item(10), item(10_000)]
    assert choose_cut(items, keep_tokens=100) == 2


def test_newest_result_bigger_than_budget_keeps_its_call() -> None:
    items = [item(10), item(10, uses=("a",)), item(10_000, results=("a",))]
    assert choose_cut(items, keep_tokens=100) == 1


def test_nothing_to_compact() -> None:
    assert choose_cut([], 100) == 0
    assert choose_cut([item(10)], 0) == 0
    items = [item(5, uses=("a",)), item(5_000, results=("a",))]
    assert choose_cut(items, keep_tokens=10) == 0


def test_orphan_result_does_not_constrain() -> None:
    items = [item(10), item(10, results=("ghost",)), item(10)]
    assert valid_boundaries(items) == [True, True, True, True]


def _brute_force(items: list[CutItem], keep: int) -> int:
    """The same rule, stated directly: the smallest start whose tail fits and splits no pair;
    if none fits, the latest safe start that keeps the newest message."""
    n = len(items)
    if n <= 1:
        return 0
    pairs = tool_pairs(items)

    def safe(i: int) -> bool:
        return not any(call < i <= result for call, result in pairs)

    fitting = [i for i in range(n) if sum(x.tokens for x in items[i:]) <= keep and safe(i)]
    if fitting:
        return min(fitting)
    return max(i for i in range(n) if safe(i))


_ids = st.sampled_from(["a", "b", "c"])
_item = st.builds(
    CutItem,
    tokens=st.integers(0, 200),
    tool_use_ids=st.lists(_ids, max_size=3).map(tuple),
    tool_result_ids=st.lists(_ids, max_size=3).map(tuple),
)


@settings(max_examples=2000, deadline=None)
@given(items=st.lists(_item, max_size=12), keep=st.integers(0, 1500))
def test_choose_cut_matches_the_oracle_and_never_orphans(items: list[CutItem], keep: int) -> None:
    cut = choose_cut(items, keep)
    assert cut == _brute_force(items, keep)
    if len(items) > 1:
        assert cut < len(items), "the newest message is always kept"
    pairs = tool_pairs(items)
    assert not any(call < cut <= result for call, result in pairs)


def test_exhaustive_small_react_shapes() -> None:
    """Every sequence of up to 7 messages built from ReAct shapes, every budget."""
    shapes = {
        "user": item(30),
        "think": item(20),
        "call1": item(15, uses=("t1",)),
        "res1": item(300, results=("t1",)),
        "call2": item(15, uses=("t2", "t3")),
        "res2": item(300, results=("t2",)),
        "res3": item(300, results=("t3",)),
    }
    names = list(shapes)
    checked = 0
    for length in range(1, 6):
        for combo in itertools.product(names, repeat=length):
            items = [shapes[name] for name in combo]
            for keep in (0, 50, 320, 700, 5000):
                cut = choose_cut(items, keep)
                assert cut == _brute_force(items, keep)
                assert not any(c < cut <= r for c, r in tool_pairs(items))
                checked += 1
    assert checked > 50_000
