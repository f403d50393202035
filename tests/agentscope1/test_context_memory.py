"""ContextMemory (design §2.1): the MemoryBase contract as InMemoryMemory implements it, the summary
message, and state round-trips through a real JSONSession."""

from __future__ import annotations

from pathlib import Path

import pytest
from agentscope.memory import InMemoryMemory
from agentscope.message import Msg
from agentscope.session import JSONSession

from agentscope_context_ext import CompactSummary, ContextMemory, DialogRef


def msgs(n: int) -> list[Msg]:
    return [
        Msg("user" if i % 2 == 0 else "assistant", f"m{i}", "user" if i % 2 == 0 else "assistant")
        for i in range(n)
    ]


@pytest.fixture(params=[InMemoryMemory, ContextMemory])
def memory_class(request: pytest.FixtureRequest) -> type:
    return request.param


async def test_contract_behaves_like_in_memory_memory() -> None:
    """Run the same script of calls on both and compare every answer."""
    items = msgs(6)
    answers = []
    for cls in (InMemoryMemory, ContextMemory):
        memory = cls()
        log = []
        await memory.add(items[:3])
        await memory.add(items[2])  # duplicate: ignored
        await memory.add(items[3], marks="hint")
        await memory.add(items[4:], marks=["a", "b"])
        await memory.add(None)
        log.append(await memory.size())
        log.append([m.content for m in await memory.get_memory(mark="a")])
        log.append([m.content for m in await memory.get_memory(exclude_mark="hint")])
        log.append([m.content for m in await memory.get_memory(mark="a", exclude_mark="b")])
        log.append(await memory.update_messages_mark("c", old_mark="a"))
        log.append(await memory.update_messages_mark("z", msg_ids=[items[0].id]))
        log.append(await memory.update_messages_mark(None, old_mark="z"))
        log.append([m.content for m in await memory.get_memory(mark="c")])
        log.append(await memory.delete_by_mark("hint"))
        log.append(await memory.delete_by_mark(["b", "nope"]))
        log.append(await memory.delete([items[0].id, "missing"]))
        log.append([m.content for m in await memory.get_memory()])
        await memory.add(items[1], allow_duplicates=True)
        log.append(await memory.size())
        await memory.clear()
        log.append(await memory.size())
        answers.append(log)
    assert answers[0] == answers[1]


async def test_type_errors_match(memory_class: type) -> None:
    memory = memory_class()
    with pytest.raises(TypeError):
        await memory.get_memory(mark=3)
    with pytest.raises(TypeError):
        await memory.add(msgs(1), marks=[1])


async def test_stored_messages_are_private_copies() -> None:
    memory = ContextMemory()
    original = Msg("user", "hello", "user")
    await memory.add(original)
    original.content = "changed by the caller"
    assert (await memory.get_memory())[0].content == "hello"


async def test_summary_comes_first_with_a_stable_id() -> None:
    memory = ContextMemory()
    await memory.add(msgs(2))
    summary = CompactSummary(
        goal=["g"],
        progress=["p"],
        dialog_refs=[DialogRef(file="dialog/2026-12-02.jsonl", first_line=1, last_line=4)],
    )
    memory.set_summary(summary)
    first = await memory.get_memory()
    second = await memory.get_memory()
    assert first[0].id == second[0].id and first[0] is second[0]
    assert first[0].role == "user"
    assert "dialog/2026-12-02.jsonl lines 1-4" in first[0].content
    assert [m.content for m in first[1:]] == ["m0", "m1"]
    assert await memory.get_memory(prepend_summary=False) == first[1:]
    assert await memory.size() == 2
    memory.set_summary(summary.model_copy(update={"compactions": 2}))
    assert (await memory.get_memory())[0].id != first[0].id


async def test_state_round_trips_through_json_session(tmp_path: Path) -> None:
    memory = ContextMemory()
    await memory.add(msgs(3))
    await memory.add(Msg("user", "hinted", "user"), marks="hint")
    memory.set_summary(
        CompactSummary(
            goal=["ship it"],
            source="extractive",
            dialog_refs=[DialogRef(file="dialog/2026-12-02.jsonl", first_line=1, last_line=9)],
        )
    )
    session = JSONSession(save_dir=str(tmp_path))
    await session.save_session_state(session_id="s1", memory=memory)

    restored = ContextMemory()
    await session.load_session_state(session_id="s1", memory=restored)
    assert restored.compact_summary == memory.compact_summary
    assert [m.to_dict() for m in await restored.get_memory()] == [
        m.to_dict() for m in await memory.get_memory()
    ]
    hinted = (await memory.get_memory(mark="hint", prepend_summary=False))[0]
    assert restored.marks_of(hinted.id) == ["hint"]


async def test_loads_an_in_memory_memory_state() -> None:
    old = InMemoryMemory()
    await old.add(msgs(2), marks="x")
    memory = ContextMemory()
    memory.load_state_dict(old.state_dict())
    assert [m.content for m in await memory.get_memory(mark="x")] == ["m0", "m1"]


async def test_change_log_and_pending_results() -> None:
    memory = ContextMemory()
    epoch, _, _ = memory.drain_changes()
    plain = Msg("user", "q", "user")
    result = Msg(
        "system", [{"type": "tool_result", "id": "c", "name": "t", "output": "o"}], "system"
    )
    await memory.add([plain, result])
    same_epoch, changed, removed = memory.drain_changes()
    assert same_epoch == epoch and changed == {plain.id, result.id} and removed == set()
    assert [m.id for m in memory.pending_results()] == [result.id]
    assert memory.pending_results() == []
    await memory.delete([plain.id])
    assert memory.drain_changes()[2] == {plain.id}
    await memory.clear()
    assert memory.drain_changes()[0] != epoch
