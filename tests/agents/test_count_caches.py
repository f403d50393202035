"""Caches of counting and change tracking follow what they cache, whatever changed in it: the
tool schemas' count (core only) and, on AgentScope 2.x, how the state's messages split into
reasoning steps."""

from __future__ import annotations

import asyncio
import copy

import pytest

from agentscope_context_ext.compat import agentscope_major
from agentscope_context_ext.core.pipeline import TokenTally
from agentscope_context_ext.core.tokens import TokenCounter, get_token_counter


class EmptyContext:
    """A port with no messages (what TokenTally.count reads of one)."""

    def drain_changes(self) -> tuple[int, set[str], set[str]]:
        return 0, set(), set()

    def message_ids(self) -> list[str]:
        return []

    def head_key(self) -> tuple:
        return ()

    async def count_head(self) -> int:
        return 0

    async def count_system(self, text: str) -> int:
        return 0


def schema(description: str) -> dict:
    return {
        "type": "function",
        "function": {
            "name": "lookup",
            "description": description,
            "parameters": {"type": "object", "properties": {"key": {"type": "string"}}},
        },
    }


def count(tally: TokenTally, tools: list[dict], exact_above: int | None = None) -> int:
    return asyncio.run(tally.count(EmptyContext(), "", tools, exact_above)).tools


def test_a_description_of_the_same_length_in_another_script_is_counted_again() -> None:
    counter = get_token_counter("qwen")
    tally = TokenTally(counter)
    ascii_tools = [schema("a" * 400)]
    chinese_tools = [schema("用" * 400)]
    assert count(tally, ascii_tools) == counter.count_tools(ascii_tools)
    # the same length, the same name and parameters: only the text differs
    assert count(tally, chinese_tools) == counter.count_tools(chinese_tools)
    assert counter.count_tools(chinese_tools) > 3 * counter.count_tools(ascii_tools) // 2


def test_a_schema_edited_in_place_is_counted_again() -> None:
    counter = get_token_counter("qwen")
    tally = TokenTally(counter)
    tools = [schema("short")]
    first = count(tally, tools)
    tools[0]["function"]["description"] = "a much longer description of the lookup tool " * 20
    assert count(tally, tools) == counter.count_tools(copy.deepcopy(tools)) > first
    # and the bound used far below the trigger is never under the exact count
    assert count(TokenTally(counter), tools, exact_above=10**9) >= counter.count_tools(tools)


def test_the_counter_counts_equal_schemas_once_and_edited_ones_again() -> None:
    calls: list[str] = []
    exact = get_token_counter("qwen")

    def encode_count(text: str) -> int:
        calls.append(text)
        return exact.count_text(text)

    counter = TokenCounter("qwen", encode_count, memo_size=0)
    tools = [schema("a" * 400)]
    first = counter.count_tools(tools)
    assert counter.count_tools(copy.deepcopy(tools)) == first  # equal schemas: not rendered
    assert len(calls) == 1
    tools[0]["function"]["description"] = "用" * 400  # edited in place, same length
    assert counter.count_tools(tools) == exact.count_tools(copy.deepcopy(tools)) > first
    assert len(calls) == 2


def test_the_dialog_tools_offer_follows_a_schema_renamed_in_place() -> None:
    from agentscope_context_ext.core.events import ContextStats
    from agentscope_context_ext.core.pipeline import ToolOffer, Window

    class NoDialog:
        summary = None

        def files(self) -> list:
            return []

    offer = ToolOffer(
        ContextStats(), NoDialog(), NoDialog(), get_token_counter("qwen"), Window(131072)
    )
    offer.ours = frozenset({"search_dialog"})  # the name of our tool
    tools = [schema("look things up")]
    assert offer(tools) == tools
    tools[0]["function"]["name"] = "search_dialog"  # now a dialog tool: not offered yet
    assert offer(tools) == []


@pytest.mark.skipif(agentscope_major() < 2, reason="AgentScope 2.x state and blocks")
def test_a_message_whose_blocks_are_replaced_is_split_again() -> None:
    """Same message, same number of blocks, other blocks: the steps are read again (the
    segmentation cache once keyed a message on its block count)."""
    from agentscope.message import AssistantMsg, TextBlock, ToolCallBlock, ToolResultBlock

    from agentscope_context_ext.adapter import installed

    class Holder:
        def __init__(self, msgs: list) -> None:
            from agentscope.state import AgentState

            self.state = AgentState(context=msgs)

    call = ToolCallBlock(id="c1", name="ls", input="{}")
    result = ToolResultBlock(id="c1", name="ls", output="a b c")
    msg = AssistantMsg(name="worker", content=[call, result, TextBlock(text="done")])
    agent = Holder([msg])
    port = installed.StatePort(agent, get_token_counter("qwen"))
    assert len(port.message_ids()) == 2  # the step with its result, then the answer
    msg.content = [TextBlock(text="thinking"), call, result]  # three blocks again
    assert len(port.message_ids()) == 1
    assert [type(part).__name__ for part in port.view(port.message_ids()[0]).parts] == [
        "Text",
        "ToolCall",
        "ToolResult",
    ]


def test_a_message_with_a_counted_excerpt_is_bounded_by_that_count_never_below_it() -> None:
    """Stage one counts the excerpt it keeps; the bound of the message that carries it is then
    that count (plus the notice and the template), not the excerpt's size, and still never
    under the exact count: a new large result is tokenized once, not again before the call."""
    from agentscope_context_ext.core.messages import Message, ToolCall, ToolResult
    from agentscope_context_ext.core.pipeline import message_bound
    from agentscope_context_ext.core.truncation import split_notice, truncate_fresh

    counter = get_token_counter("qwen")
    cost = counter.media_token_cost
    words = " ".join(f"item{i} value={i * 7} ok" for i in range(6000))  # ~120 KB, ~4 B/token
    text = truncate_fresh(words, max_bytes=40_000, file_path="tool_result/" + "a" * 32 + ".txt")
    excerpt, _ = split_notice(text)
    msg = Message(
        id="m1",
        role="assistant",
        parts=(ToolCall("c1", "fetch", {"url": "x"}), ToolResult("c1", "fetch", text)),
    )
    exact = counter.count_view(msg)
    unknown = message_bound(msg, cost, counter.known_count)
    assert unknown >= 40_000  # nothing counted yet: the size bound
    counter.count_text(excerpt)  # what stage one does when it fits the excerpt
    known = message_bound(msg, cost, counter.known_count)
    assert exact <= known < exact + 1000 < unknown  # the notice and template by size only
    # a text that is not the counted one (edited after) falls back to its size
    edited = Message(id="m1", role="assistant", parts=(ToolResult("c1", "fetch", text + "!"),))
    assert message_bound(edited, cost, counter.known_count) >= len(excerpt)
