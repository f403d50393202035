"""``python -m bench`` on either AgentScope major: a benchmark for the other one is skipped."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from agentscope_context_ext.compat import agentscope_major, agentscope_version

REPO = Path(__file__).resolve().parent.parent


def test_a_benchmark_for_the_other_major_is_reported_skipped(tmp_path):
    # B1 imports 1.x's ReActAgent at module level, B8 needs 2.x's Agent: on the other major
    # neither may be imported, let alone run.
    other = "B1" if agentscope_major() >= 2 else "B8"
    out = tmp_path / "results.json"
    done = subprocess.run(
        [sys.executable, "-m", "bench", "--only", other, "--out", str(out)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    assert f"## {other}: skipped (needs AgentScope" in done.stdout
    record = json.loads(out.read_text(encoding="utf-8"))[other]
    assert record["skipped"].endswith(f"{agentscope_version()} is installed")
