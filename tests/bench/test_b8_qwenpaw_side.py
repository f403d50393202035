"""B8's QwenPaw side (``bench/qwenpaw_side.py``): QwenPaw's Scroll context manager, run in its own
venv (``bench/qwenpaw_venv.sh``), replaying a real tau-bench trajectory at a window where it
compacts."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from bench.qwenpaw_side import QwenPawSideError, qwenpaw_python, run_side

WINDOW = 6144
"""B8's tau-bench window: the second trajectory compacts there once, and every turn fits."""


def test_without_a_qwenpaw_python_the_side_is_skipped(tmp_path: Path) -> None:
    assert run_side([], WINDOW, 512, python=str(tmp_path / "no-python")) is None


def test_a_failing_runner_is_a_clear_error() -> None:
    # This venv has no QwenPaw: the runner fails on its import, and the error says so.
    script = {"name": "x", "system": "s", "turns": [["hi", []]], "outputs": {}}
    with pytest.raises(QwenPawSideError, match=r"exited 1; stderr ends:[\s\S]*qwenpaw"):
        run_side([script], WINDOW, 512, python=sys.executable)


def _valid(messages: list[dict]) -> bool:
    """The system prompt first, and every tool call answered by a result right after its
    message (and no result without its call): what a provider accepts."""
    if not messages or messages[0]["role"] != "system":
        return False
    pending: set[str] = set()
    for message in messages[1:]:
        if message["role"] == "tool":
            if message.get("tool_call_id") not in pending:
                return False
            pending.discard(message["tool_call_id"])
            continue
        if pending:
            return False
        pending = {call["id"] for call in message.get("tool_calls") or []}
    return True


def test_scroll_replays_a_tau_bench_trajectory(shared_data: Path) -> None:
    python = qwenpaw_python()
    if python is None:
        why = "no QwenPaw venv (make it with bench/qwenpaw_venv.sh, or set ACE_QWENPAW_PYTHON)"
        if os.environ.get("ACE_REQUIRE_QWENPAW") == "1":  # CI builds it: a skip would hide it
            pytest.fail(why)
        pytest.skip(why)
    from bench.b8_own_compression import _tau_script

    trajectories = json.loads(
        (shared_data / "transcripts" / "tau-bench" / "gpt-4o-airline.json").read_text()
    )
    script = _tau_script(trajectories[1]["traj"])
    (result,) = run_side([("tau-1", script)], WINDOW, 512, python=python)

    calls = result["calls"]
    summaries = [call for call in calls if call["summary"]]
    prompts = [call for call in calls if not call["summary"]]
    # Every turn fitted, so every recorded assistant message was asked for.
    assert result["errors"] == []
    assert len(prompts) >= sum(1 for _, replies in script.turns for blocks in replies if blocks)
    # Scroll evicted and asked for its continuation summary, which passed its validation.
    assert summaries and any(c["evicted"] for c in result["compactions"])
    assert result["summary"].startswith("## Active Task")
    assert "## Open Work" in result["summary"]
    last = json.dumps(prompts[-1]["messages"], ensure_ascii=False)
    assert "[context compressed]" in last and "[archived task state]" in last
    assert all(_valid(call["messages"]) for call in prompts)
    assert result["reachable_by_tools"] == ["recall_history"]
    assert all(
        "recall_history" in [tool["function"]["name"] for tool in call["tools"]] for call in prompts
    )
    # Everything the conversation said stays reachable in Scroll's history.db.
    corpus = "\n".join(result["corpus"])
    assert script.originals and all(text in corpus for text in script.originals)
