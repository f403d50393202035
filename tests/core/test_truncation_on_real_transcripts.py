"""The engine on real tool outputs from the shared transcripts: every large output truncated
and read back is byte-identical; Markdown protection is chosen by the real path."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from agentscope_context_ext.core.config import TruncationConfig
from agentscope_context_ext.core.tools import make_read_file
from agentscope_context_ext.core.truncation import split_notice, truncate_fresh
from agentscope_context_ext.core.workspace import ToolResultStore


def _claude_code_tool_outputs(path: Path) -> list[str]:
    outputs = []
    for line in path.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        content = (record.get("message") or {}).get("content")
        if not isinstance(content, list):
            continue
        for block in content:
            if isinstance(block, dict) and block.get("type") == "tool_result":
                value = block.get("content")
                if isinstance(value, list):
                    value = "\n".join(v.get("text", "") for v in value if isinstance(v, dict))
                if isinstance(value, str):
                    outputs.append(value)
    return outputs


def test_real_large_outputs_round_trip(shared_data: Path, workspace: Path) -> None:
    transcript = (
        shared_data / "transcripts" / "claude-code" / "8463c716-a2ea-4c14-9efa-87158ebd9f20.jsonl"
    )
    outputs = sorted(_claude_code_tool_outputs(transcript), key=len, reverse=True)[:20]
    assert outputs and len(outputs[0].encode()) > 3000
    store = ToolResultStore(workspace)
    reader = make_read_file(workspace, TruncationConfig(first_max_bytes=10**9))
    for output in outputs:
        path = store.save(output)
        for limit in (3000, 512):
            excerpt, notice = split_notice(
                truncate_fresh(output, max_bytes=limit, file_path=path)
            ) or (output, None)
            if notice is None:
                assert len(output.encode()) <= limit
                continue
            rest = asyncio.run(
                reader(path, start_line=notice.next_line, start_byte=notice.next_byte)
            )
            assert excerpt + rest == output
