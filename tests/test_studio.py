"""AgentScope Studio (SPEC 11): the package works unchanged under ``agentscope.init(studio_url=...)``
and its compaction notices reach Studio as pushed messages. The stub server speaks the endpoints
the AgentScope client calls; it runs in a subprocess because ``agentscope.init`` installs
process-wide hooks."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

STUB = Path(__file__).with_name("studio_stub.py")


def test_compaction_notices_arrive_in_studio() -> None:
    done = subprocess.run(
        [sys.executable, str(STUB)], capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    received = json.loads(done.stdout)
    assert received["runs"] and received["runs"][0]["project"] == "context-ext-test"
    assert received["connected"] >= 1
    assert received["compactions"] >= 1
    pushed = [m["msg"] for m in received["messages"]]
    notices = [m for m in pushed if m["name"] == "context"]
    assert len(notices) == 2 * received["compactions"]
    assert any("compacted:" in m["content"] and "->" in m["content"] for m in notices)
    assert any(m["name"] == "reader" for m in pushed), "the agent's own messages arrive too"
    assert "context" not in received["memory_names"], "notices are never stored in memory"
