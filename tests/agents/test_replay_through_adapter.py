"""Bugs found while making the storage, dialog, memory and replay tests hold for both majors
(issue 31): each test states what the package should do and is marked ``xfail(strict=True)``
with the reason until the bug is fixed (then it passes, the strict mark fails, and the mark is
removed; the test stays, as a regression test).

Fixed: summary_fidelity searched the dialog with the adapter's search_dialog (a 2.x
``FunctionTool`` takes keyword arguments only and answers no 1.x ``ToolResponse``: TypeError on
2.x); it searches with the core's tool since f6d8983. On 2.x, records_to_msgs dated every message
now, so a replayed transcript was filed in dialog/ under the replay's day; each message keeps
its record's date since the commit after c4f6f8d."""

from __future__ import annotations

from agentscope_context_ext import ContextConfig
from agentscope_context_ext.adapter import installed
from agentscope_context_ext.core.transcripts import Record
from agentscope_context_ext.replay import summary_fidelity


async def test_summary_fidelity_searches_the_dialog_on_the_installed_major() -> None:
    said = [Record("user", f"step {i}: edit `module_{i}.py` " + "pad " * 40) for i in range(60)]
    said += [Record("assistant", "done " + "x " * 50) for _ in range(3)]
    reference = "`module_0.py` `module_1.py` `module_2.py`"
    result = await summary_fidelity("bug", said, reference, ContextConfig(), window=4096)
    assert result.compactions >= 1
    assert result.identifiers == ["module_0.py", "module_1.py", "module_2.py"]
    assert result.missing_from_search == []


def test_records_to_msgs_keeps_each_records_date(tmp_path) -> None:
    records = [
        Record("user", "look at the log", timestamp="2026-11-30 10:00:00"),
        Record("assistant", "The log is long.", timestamp="2026-11-30 10:00:05"),
    ]
    msgs = installed.records_to_msgs(records)
    refs = installed.open_dialog(tmp_path / "workspace").append(msgs)
    assert [ref.file for ref in refs] == ["dialog/2026-11-30.jsonl"]
