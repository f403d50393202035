"""ScriptedChatModel: a real ChatModelBase of the installed AgentScope for offline tests (lists,
functions, tool calls, streaming, structured output, usage). It is called as its agent calls it
(a 1.x model gets its formatter's output, a 2.x model the messages, which it formats itself) and
drives a managed agent through the adapter's facade; what is 1.x's alone is marked
``agentscope1``."""

from __future__ import annotations

from typing import Any

import pytest
from agentscope.formatter import OpenAIChatFormatter
from agentscope.model import ChatModelBase
from pydantic import BaseModel

from agentscope_context_ext import get_token_counter
from agentscope_context_ext.adapter import installed
from agentscope_context_ext.core.transcripts import Record
from agentscope_context_ext.testing import ScriptedChatModel, reply, tool_call


async def prompt(text: str) -> list[dict]:
    """What a provider is sent for one user message saying ``text`` (OpenAI's layout)."""
    return await OpenAIChatFormatter().format(installed.records_to_msgs([Record("user", text)]))


async def ask(model: ScriptedChatModel, text: str, **kwargs: Any) -> Any:
    """One call of ``model`` with a user message, as the installed AgentScope's agent makes it:
    a model that formats for itself (2.x) is given the messages, a 1.x model the formatted
    prompt."""
    msgs = installed.records_to_msgs([Record("user", text)])
    if hasattr(model, "formatter"):
        return await model(msgs, **kwargs)
    return await model(await OpenAIChatFormatter().format(msgs), **kwargs)


def answer_text(response: Any) -> str:
    return installed.output_text(response.content)


async def test_list_script_records_prompts_and_usage() -> None:
    model = ScriptedChatModel(["one", "two"], when_exhausted=None)
    assert isinstance(model, ChatModelBase)
    tools = [{"type": "function", "function": {"name": "f", "parameters": {}}}]
    first = await ask(model, "hello", tools=tools, tool_choice="auto")
    assert answer_text(first) == "one"
    messages = await prompt("hello")
    assert first.usage.input_tokens == get_token_counter("qwen").count_formatted(messages, tools)
    assert answer_text(await ask(model, "hello")) == "two"
    with pytest.raises(RuntimeError, match="exhausted"):
        await ask(model, "hello")
    assert model.prompts == [messages, messages, messages]
    assert model.calls[0].tools == tools and model.calls[0].tool_choice == "auto"


async def test_function_script_and_exceptions() -> None:
    async def respond(call):
        if "fail" in call.text:
            return ValueError("scripted failure")
        return f"echo {call.index}"

    model = ScriptedChatModel(respond)
    call = installed.model_call(model)
    assert await call("Answer briefly.", "hi") == "echo 0"
    with pytest.raises(ValueError, match="scripted failure"):
        await call("Answer briefly.", "please fail")


@pytest.mark.agentscope1
async def test_streaming_chunks_are_cumulative() -> None:
    """1.x streams cumulative chunks (2.x increments: test_a_streamed_reply_drives_an_agent)."""
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


@pytest.mark.agentscope1
async def test_structured_output_metadata() -> None:
    """1.x asks for structured output with ``structured_model`` (2.x with a forced tool call)."""

    class Answer(BaseModel):
        value: int

    model = ScriptedChatModel([{"value": 3}, '{"value": 4}'])
    assert (await model([], structured_model=Answer)).metadata == {"value": 3}
    assert (await model([], structured_model=Answer)).metadata == {"value": 4}


async def add(a: int, b: int) -> str:
    """Add two numbers.

    Args:
        a (int): first
        b (int): second
    """
    return str(a + b)


@pytest.mark.parametrize("stream", [False, True])
async def test_drives_an_agent_with_tools(workspace, stream: bool) -> None:
    """A managed agent of the installed AgentScope runs the scripted tool call and gets the
    scripted answer, streamed (in the installed major's way of streaming) or not."""
    model = ScriptedChatModel(
        [reply("adding", tool_call("add", "c1", a=2, b=3)), "It is 5."],
        stream=stream,
        chunk_chars=3,
    )
    agent = installed.ManagedAgent.create(
        model,
        {"workspace": str(workspace), "long_term_memory": {"enabled": False}},
        tools=[add],
        system_prompt="math",
    )
    assert await agent.ask("2+3?") == "It is 5."
    tool_messages = [m for m in model.prompts[1] if m["role"] == "tool"]
    assert [m["content"] for m in tool_messages] == ["5"]
    assert "add" in {t["function"]["name"] for t in model.calls[0].tools}
    assert [(c.name, dict(c.arguments)) for v in agent.views() for c in v.tool_calls] == [
        ("add", {"a": 2, "b": 3})
    ]
    assert [r.text for v in agent.views() for r in v.tool_results] == ["5"]
