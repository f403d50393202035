"""``python -m bench`` on either AgentScope major: a benchmark that could not run is reported
skipped and never counted as met (its record says ``target_met: false``, the summary lists it,
the exit status is not 0)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:  # bench/ is the repository's, not the package's
    sys.path.insert(0, str(REPO))

from bench.__main__ import BENCHMARKS, status, summary  # noqa: E402
from bench._major import agentscope_major, agentscope_version  # noqa: E402


def _bench(
    tmp_path: Path, *ids: str, env: dict | None = None
) -> tuple[subprocess.CompletedProcess, dict]:
    out = tmp_path / "results.json"
    done = subprocess.run(
        [sys.executable, "-m", "bench", "--only", *ids, "--out", str(out)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    return done, json.loads(out.read_text(encoding="utf-8"))


def test_a_benchmark_for_the_other_major_is_skipped_and_not_met(tmp_path):
    # Its module is not even imported (B8 compares against 2.x's own compression: on 1.x it
    # is the one benchmark of the other major; on 2.x every benchmark runs).
    others = [
        b for b, (_, major) in BENCHMARKS.items() if major not in (None, min(agentscope_major(), 2))
    ]
    if not others:
        pytest.skip("every benchmark runs on this AgentScope major")
    other = others[0]
    done, results = _bench(tmp_path, other)
    assert "Traceback" not in done.stderr, done.stderr
    assert f"## {other}: skipped (needs AgentScope" in done.stdout
    record = results[other]
    assert record["skipped"].endswith(f"{agentscope_version()} is installed")
    assert record["target_met"] is False
    assert results["meta"]["summary"] == {other: "skipped"}
    assert "targets met: 0 of 1" in done.stdout
    assert f"skipped (not measured, not met): {other}" in done.stdout
    assert done.returncode == 1


def test_b9_without_a_redis_server_is_skipped_and_not_met(tmp_path):
    # No ACE_REDIS_URL and no redis-server on the PATH: B9 cannot run.
    env = {k: v for k, v in os.environ.items() if k != "ACE_REDIS_URL"}
    env["PATH"] = str(tmp_path)
    done, results = _bench(tmp_path, "B9", env=env)
    assert "Traceback" not in done.stderr, done.stderr
    record = results["B9"]
    assert "no Redis server" in record["skipped"]
    assert record["target_met"] is False
    assert "skipped (not measured, not met): B9" in done.stdout
    assert done.returncode == 1


def test_a_skipped_or_failed_record_never_counts_as_met():
    results = {
        "B1": {"target_met": True},
        "B2": {"target_met": False},
        "B3": {"skipped": "no data", "target_met": True},  # a module that says so anyway
        "B4": {"error": "RuntimeError()", "target_met": True},
    }
    assert [status(r) for r in results.values()] == ["met", "NOT met", "skipped", "failed"]
    assert summary(results).splitlines() == [
        "targets met: 1 of 4",
        "NOT met: B2",
        "skipped (not measured, not met): B3",
        "failed: B4",
    ]


def test_b12_on_1x_counts_its_chat_rows_and_leaves_serve_out():
    # On 1.x B12's serve scenario is 2.x's (create_app): its row says so and is not counted.
    # Its record once listed it under "skipped", the key of a benchmark that did not run at
    # all, so the 1.x run was reported skipped and its table never printed.
    from bench.b12_real_servers import verdict

    chat = {
        "scenario": "stream",
        "in_target": True,
        "met": True,
        "http_errors": {},
        "silent_empty_answers": 0,
        "empty_answers_reported": 0,
        "cut_streams": 1,
        "compactions": [{"by": "extraction", "why": "unusable answer"}],
    }
    serve = {"scenario": "serve", "skipped": "serve is AgentScope 2.x's", "in_target": False}
    record = {"id": "B12", **verdict([chat, serve])}
    assert record["scenarios_not_run"] == ["serve"]
    assert record["target_met"] is True
    assert status(record) == "met"
    # a scenario of this major that could not run is a target not met, never "skipped"
    unrun = {**serve, "in_target": True, "met": False}
    record = {"id": "B12", **verdict([chat, unrun])}
    assert record["target_met"] is False
    assert status(record) == "NOT met"
