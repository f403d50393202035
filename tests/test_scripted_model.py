"""ScriptedChatModel: a real ChatModelBase for offline tests (lists, functions, tool calls,
streaming, structured output, usage)."""

from __future__ import annotations

import pytest
from agentscope.agent import ReActAgent
from agentscope.formatter import DashScopeChatFormatter
from agentscope.message import Msg
from agentscope.model import ChatModelBase
from agentscope.tool import Toolkit
from pydantic import BaseModel

from agentscope_context_ext import get_token_counter
from agentscope_context_ext.testing import ScriptedChatModel, reply, tool_call


async def test_list_script_records_prompts_and_usage() -> None:
    model = ScriptedChatModel(["one", "two"], when_exhausted=None)
    assert isinstance(model, ChatModelBase)
    messages = [{"role": "user", "content": "hello"}]
    tools = [{"type": "function", "function": {"name": "f", "parameters": {}}}]
    first = await model(messages, tools=tools, tool_choice="auto")
    assert first.content[0]["text"] == "one"
    assert first.usage.input_tokens == get_token_counter("qwen").count_formatted(messages, tools)
    assert (await model(messages)).content[0]["text"] == "two"
    with pytest.raises(RuntimeError, match="exhausted"):
        await model(messages)
    assert model.prompts == [messages, messages, messages]
    assert model.calls[0].tools == tools and model.calls[0].tool_choice == "auto"


async def test_function_script_and_exceptions() -> None:
    async def respond(call):
        if "fail" in call.text:
            return ValueError("scripted failure")
        return f"echo {call.index}"

    model = ScriptedChatModel(respond)
    assert (await model([{"role": "user", "content": "hi"}])).content[0]["text"] == "echo 0"
    with pytest.raises(ValueError, match="scripted failure"):
        await model([{"role": "user", "content": "please fail"}])


async def test_streaming_chunks_are_cumulative() -> None:
    model = ScriptedChatModel(
        [reply("a fairly long answer text", tool_call("f", "c1", x=1))], stream=True, chunk_chars=5
    )
    chunks = [chunk async for chunk in await model([{"role": "user", "content": "q"}])]
    texts = [c.content[0]["text"] for c in chunks]
    assert all(texts[i + 1].startswith(texts[i]) for i in range(len(texts) - 1))
    assert texts[-1] == "a fairly long answer text"
    assert chunks[-1].content[-1]["type"] == "tool_use" and chunks[-1].content[-1]["input"] == {
        "x": 1
    }
    assert len({c.id for c in chunks}) == 1


async def test_structured_output_metadata() -> None:
    class Answer(BaseModel):
        value: int

    model = ScriptedChatModel([{"value": 3}, '{"value": 4}'])
    assert (await model([], structured_model=Answer)).metadata == {"value": 3}
    assert (await model([], structured_model=Answer)).metadata == {"value": 4}


async def test_drives_a_react_agent_with_tools() -> None:
    async def add(a: int, b: int):
        """Add two numbers.

        Args:
            a (int): first
            b (int): second
        """
        from agentscope.message import TextBlock
        from agentscope.tool import ToolResponse

        return ToolResponse(content=[TextBlock(type="text", text=str(a + b))])

    toolkit = Toolkit()
    toolkit.register_tool_function(add)
    model = ScriptedChatModel([reply("adding", tool_call("add", a=2, b=3)), "It is 5."])
    agent = ReActAgent(
        name="a",
        sys_prompt="math",
        model=model,
        formatter=DashScopeChatFormatter(),
        toolkit=toolkit,
    )
    agent.set_console_output_enabled(False)
    answer = await agent(Msg("user", "2+3?", "user"))
    assert answer.get_text_content() == "It is 5."
    tool_messages = [m for m in model.prompts[1] if m["role"] == "tool"]
    assert tool_messages[0]["content"] == "5"
    assert model.calls[0].tools[0]["function"]["name"] == "add"
