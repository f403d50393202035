"""Never over the window (issue 30), on the installed AgentScope major, with real agents.

Parallel results of one step far over the window, a pasted message larger than the window, a
system prompt larger than the window (handed back to AgentScope), an exempt result larger than
the window (refused), the provider's own length error from a loopback
OpenAI-protocol server, calibration from like calls only, and a caller that gives up while the
summary model does not answer. Every prompt the model receives is counted exactly.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from pathlib import Path
from typing import Any

import pytest
from harness_common import SIX_SECTIONS, make_text
from llm_servers import ModelServer, Reply

from agentscope_context_ext import ContextOverflowError
from agentscope_context_ext.compat import agentscope_major
from agentscope_context_ext.core.truncation import split_notice
from agentscope_context_ext.testing import ModelCall, ScriptedChatModel, reply, tool_call

V2 = agentscope_major() >= 2
KB = 130


def fetch(seed: int, kb: int = KB) -> str:
    """Fetch one document (about 130 KB unless asked).

    Args:
        seed (int): Which document.
        kb (int): Its size in KiB.
    """
    return make_text(kb * 1024, seed)


class Run:
    """One managed agent of the installed major, a scripted (or real) model and its tools."""

    def __init__(
        self,
        workspace: Path | str,
        window: int,
        model: Any,
        *,
        sys_prompt: str = "You work with tools.",
        max_iters: int = 8,
        **config: Any,
    ) -> None:
        settings = {
            "workspace": str(workspace),
            "max_input_tokens": window,
            "notices": False,
            "long_term_memory": {"enabled": False},
            **config,
        }
        self.model = model
        self.window = window
        self.events: list = []
        if V2:
            from agentscope.agent import Agent, ReActConfig
            from agentscope.permission import PermissionBehavior, PermissionDecision
            from agentscope.tool import FunctionTool, Toolkit

            from agentscope_context_ext import ContextMiddleware

            allow = PermissionDecision(behavior=PermissionBehavior.ALLOW, message="test")
            self.context = ContextMiddleware(settings)
            self.agent = Agent(
                name="worker",
                system_prompt=sys_prompt,
                model=model,
                toolkit=Toolkit(tools=[FunctionTool(fetch, permission=allow)]),
                middlewares=[self.context],
                offloader=self.context.offloader,
                react_config=ReActConfig(max_iters=max_iters),
            )
            self.manager = self.context.bind(self.agent)
        else:
            from agentscope.agent import ReActAgent
            from agentscope.formatter import OpenAIChatFormatter
            from agentscope.message import TextBlock
            from agentscope.tool import Toolkit, ToolResponse

            from agentscope_context_ext import enable_context_management

            async def fetch1(seed: int, kb: int = KB) -> ToolResponse:
                """Fetch one document (about 130 KB unless asked).

                Args:
                    seed (int): Which document.
                    kb (int): Its size in KiB.
                """
                return ToolResponse(content=[TextBlock(type="text", text=fetch(seed, kb))])

            fetch1.__name__ = "fetch"
            toolkit = Toolkit()
            toolkit.register_tool_function(fetch1)
            self.agent = ReActAgent(
                name="worker",
                sys_prompt=sys_prompt,
                model=model,
                formatter=OpenAIChatFormatter(),
                toolkit=toolkit,
                max_iters=max_iters,
                parallel_tool_calls=True,
            )
            self.agent.set_console_output_enabled(False)
            self.manager = enable_context_management(self.agent, settings)
        self.manager.subscribe(self.events.append)

    async def say(self, text: str) -> str:
        """One user message; the agent's answer text."""
        if V2:
            from agentscope.message import UserMsg

            answer = await self.agent.reply(UserMsg("user", text))
        else:
            from agentscope.message import Msg

            answer = await self.agent(Msg("user", text, "user"))
        return answer.get_text_content() or ""

    def types(self) -> list[str]:
        return [event.type for event in self.events]


def prompt_tokens(model: ScriptedChatModel) -> list[int]:
    """The exact tokens of every prompt the scripted model received (tools included)."""
    return [model.counter.count_formatted(c.messages, c.tools) for c in model.calls]


def tool_messages(call: ModelCall) -> dict[str, str]:
    """Call id -> the text of its ``tool`` message in an OpenAI-layout prompt."""
    out = {}
    for message in call.messages:
        if message.get("role") == "tool":
            content = message.get("content")
            if isinstance(content, list):
                content = "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
            out[str(message.get("tool_call_id"))] = str(content)
    return out


def parallel(n: int) -> ScriptedChatModel:
    calls = [tool_call("fetch", f"c{i}", seed=i) for i in range(n)]
    return ScriptedChatModel([reply("fetching", *calls), "done"])


@pytest.mark.parametrize(
    ("n", "window"), [(1, 16384), (5, 16384), (8, 16384), (40, 16384), (40, 131072)]
)
async def test_parallel_results_of_one_step_never_go_over_the_window(workspace, n, window):
    run = Run(workspace, window, parallel(n))
    assert await run.say("fetch them all") == "done"
    assert max(prompt_tokens(run.model)) <= window
    last = tool_messages(run.model.calls[-1])
    assert sorted(last) == sorted(f"c{i}" for i in range(n)), "every call keeps its result"
    for i in range(n):  # each output recoverable byte for byte from its notice
        excerpt, notice = split_notice(last[f"c{i}"])
        assert (workspace / notice.file_path).read_text(encoding="utf-8") == fetch(i)
        assert fetch(i).startswith(excerpt)
    if n >= 8 and window == 16384:
        assert "tool_result_retruncated" in run.types(), "the newest step was cut too"
    assert "context_overflow" not in run.types() and "error" not in run.types()


async def test_parallel_results_on_a_redis_workspace(redis_url):
    run = Run(redis_url, 16384, parallel(40))
    assert await run.say("fetch them all") == "done"
    assert max(prompt_tokens(run.model)) <= 16384
    storage = run.manager.storage
    for call_id, text in tool_messages(run.model.calls[-1]).items():
        _, notice = split_notice(text)
        assert storage.read(notice.file_path).decode("utf-8") == fetch(int(call_id[1:]))


async def test_a_pasted_message_larger_than_the_window_is_offloaded_and_read_back(workspace):
    pasted = "Please find the failing request in this log:\n" + make_text(520 * 1024, 3)
    seen: dict[str, str] = {}

    def script(call: ModelCall) -> Any:
        if call.index == 0:
            user = next(m for m in call.messages if m.get("role") == "user")
            content = user["content"]
            text = content if isinstance(content, str) else content[0]["text"]
            _, notice = split_notice(text)
            seen["path"] = notice.file_path
            return reply(
                "reading on",
                tool_call("read_file", file_path=notice.file_path, start_line=notice.next_line + 1),
            )
        if call.index == 1:
            seen["read"] = tool_messages(call)[call.messages[-2]["tool_calls"][0]["id"]]
        return "found it"

    model = ScriptedChatModel(script)
    run = Run(workspace, 16384, model)
    assert model.counter.count_text(pasted) > 130_000
    assert await run.say(pasted) == "found it"
    assert max(prompt_tokens(model)) <= 16384
    assert run.types().count("user_message_offloaded") == 1
    assert (workspace / seen["path"]).read_text(encoding="utf-8") == pasted
    # read_file reads the saved message back from where the excerpt stopped
    assert seen["read"].splitlines()[0] in pasted and "Error" not in seen["read"][:10]


async def test_an_agent_whose_system_prompt_fills_the_window_is_handed_back(workspace):
    """Its own system prompt is over the trigger: nothing of ours can help, so at first use
    context management detaches, saying so once, and the agent runs as AgentScope runs it
    (never refused in the middle of a reply AgentScope would run)."""
    model = ScriptedChatModel(["hello back", "hello again"])
    run = Run(workspace, 8192, model, sys_prompt="You work. " + make_text(60 * 1024, 9))
    assert await run.say("hello") == "hello back"
    assert len(model.calls) == 1
    (warning,) = run.events
    assert warning.type == "warning" and warning.data["where"] == "window"
    assert "context management is off for agent 'worker'" in warning.data["error"]
    assert await run.say("again") == "hello again" and run.events == [warning], "said once"
    assert not {"read_file", "memory_append"} & {
        name for call in model.calls for name in tool_names(call)
    }


async def test_an_exempt_result_larger_than_the_window_is_refused_before_the_call(workspace):
    """What is left when everything that can be offloaded was (here a result of a tool in
    ``exempt_tools``) does not fit: the call is refused before the provider sees it."""
    model = parallel(1)
    run = Run(workspace, 8192, model, truncation={"exempt_tools": ["fetch"]})
    with pytest.raises(ContextOverflowError) as raised:
        await run.say("hello")
    error = raised.value
    assert len(model.calls) == 1, "the call after the result was never sent"
    assert error.tokens > error.max_input_tokens == 8192
    assert max(error.parts, key=error.parts.get) == "messages"
    assert "nothing was sent" in str(error)
    assert run.types().count("error") == 1


async def test_images_a_small_window_cannot_hold_are_saved_and_named(workspace):
    """Five images in one user message, each counted ``media_token_cost`` (1,280), on a 4,096
    window: the oldest go out as placeholders naming their saved copies until the prompt fits;
    the call is made, not refused."""
    import base64

    images = [b"\x89PNG\r\n\x1a\n" + bytes([i]) * 300 for i in range(5)]
    encoded = [base64.b64encode(data).decode() for data in images]
    model = ScriptedChatModel(["seen"])
    run = Run(workspace, 4096, model)
    if V2:
        from agentscope.message import Base64Source, DataBlock, TextBlock, UserMsg

        content = [TextBlock(text="look at these")] + [
            DataBlock(source=Base64Source(data=data, media_type="image/png")) for data in encoded
        ]
        await run.agent.reply(UserMsg("user", content))
    else:
        from agentscope.message import Msg

        content = [{"type": "text", "text": "look at these"}] + [
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": d}}
            for d in encoded
        ]
        await run.agent(Msg("user", content, "user"))
    (call,) = model.calls
    assert prompt_tokens(model)[0] <= 4096
    sent = json.dumps(call.messages)
    kept = sum(sent.count(data) for data in encoded)
    assert 0 < kept < 5, "the newest images stay, as many as fit"
    offloaded = [e for e in run.events if e.type == "user_message_offloaded"]
    assert offloaded and "context_overflow" not in run.types()
    for path in offloaded[0].data["path"].split(", "):
        assert (workspace / path).read_bytes() in images  # saved byte for byte
    assert encoded[0] not in sent and "saved copy: tool_result/" in sent


def tool_names(call: ModelCall) -> set[str]:
    return {str((t.get("function") or t).get("name")) for t in call.tools or []}


# -------------------------------------------------------- the provider's own length error


class LengthLimitedServer(ModelServer):
    """An OpenAI-protocol server whose model counts more than we do and has a window: a
    prompt over it is rejected with OpenAI's ``context_length_exceeded`` error."""

    def __init__(self, respond, limit: int, extra: int, always: bool = False) -> None:
        super().__init__("openai", respond, usage_offset=extra)
        self.limit = limit
        self.always = always
        self.rejected = 0

    def _openai(self, handler, request: dict) -> None:
        tokens = self._prompt_tokens(request)
        if self.always or tokens > self.limit:
            self.rejected += bool(request.get("tools"))  # the agent's calls (not summaries)
            body = json.dumps(
                {
                    "error": {
                        "message": f"This model's maximum context length is {self.limit} "
                        f"tokens. However, your messages resulted in {tokens} tokens. Please "
                        "reduce the length of the messages.",
                        "type": "invalid_request_error",
                        "param": "messages",
                        "code": "context_length_exceeded",
                    }
                }
            ).encode()
            handler.send_response(400)
            handler.send_header("Content-Type", "application/json")
            handler.send_header("Content-Length", str(len(body)))
            handler.end_headers()
            handler.wfile.write(body)
            return
        super()._openai(handler, request)


def openai_model(url: str) -> Any:
    if V2:
        from agentscope.credential import OpenAICredential
        from agentscope.model import OpenAIChatModel

        return OpenAIChatModel(
            credential=OpenAICredential(api_key="test", base_url=url),
            model="gpt-4o",
            stream=True,
            context_size=16384,
        )
    from agentscope.model import OpenAIChatModel

    return OpenAIChatModel(
        model_name="gpt-4o", api_key="test", stream=True, client_kwargs={"base_url": url}
    )


def agent_turns() -> Any:
    """A responder: four steps of two parallel fetches, then an answer (compaction calls get a
    summary)."""
    steps = iter(range(4))

    def respond(request: dict) -> Reply:
        system = "\n".join(
            str(m.get("content")) for m in request["messages"] if m.get("role") == "system"
        )
        if "You compact the earlier part" in system:
            return Reply("## Goal\n- fetch\n## Progress\n- fetched\n## Next Steps\n- more\n")
        step = next(steps, None)
        if step is None:
            return Reply("done")
        return Reply(
            f"step {step}", [(f"s{step}-{k}", "fetch", {"seed": 2 * step + k}) for k in range(2)]
        )

    return respond


async def test_the_providers_length_error_is_recovered_once(workspace):
    # The provider counts 9,000 tokens more than we do (a hidden prompt of its own, say) and
    # rejects over 16,384: our count stays under the window while its count does not, until
    # the gap is learned from its error.
    server = LengthLimitedServer(agent_turns(), limit=16384, extra=9000)
    with server:
        run = Run(workspace, 16384, openai_model(server.url), **{"compaction": {"model": None}})
        assert await run.say("fetch the documents") == "done"
    assert server.rejected == 1
    recovered = [e for e in run.events if e.type == "provider_overflow_recovered"]
    assert len(recovered) == 1
    assert recovered[0].data["provider_tokens"] > 16384
    assert recovered[0].data["shift"] == 9000, "the gap the provider's error states"
    assert recovered[0].data["tokens_after"] <= 16384
    # learned: every later count includes the provider's extra tokens, so the next compaction
    # comes early enough and no later call is rejected
    assert (await run.manager.count()).calibration == 9000


async def test_a_second_length_error_is_raised_as_it_is(workspace):
    # A provider that rejects every call, saying it counts 3,000 tokens more than we do.
    server = LengthLimitedServer(agent_turns(), limit=16384, extra=3000, always=True)
    with server:
        run = Run(workspace, 16384, openai_model(server.url))
        with pytest.raises(Exception, match="maximum context length") as raised:
            await run.say("fetch the documents")
    assert not isinstance(raised.value, ContextOverflowError)
    recovered = run.types().count("provider_overflow_recovered")
    assert recovered >= 1 and server.rejected == 2 * recovered, "one retry per recovery"


# ------------------------------------------------------------------- calibration


async def test_calibration_learns_only_from_like_calls(workspace):
    """A provider that counts 37 tokens more than we do, and leaves the tools out of a call
    that cannot use them (the final call after max_iters): the shift is 37 and the parts of
    the count add up to its total."""

    class ToolChoiceAware(ModelServer):
        def _prompt_tokens(self, request: dict) -> int:
            if request.get("tool_choice") == "none" or not request.get("tools"):
                request = {**request, "tools": None}
            return super()._prompt_tokens(request)

    def respond(request: dict) -> Reply:
        if not request.get("tools") or request.get("tool_choice") == "none":
            return Reply("final answer")
        step = len([m for m in request["messages"] if m.get("tool_calls")])
        return Reply(f"step {step}", [(f"k{step}", "fetch", {"seed": step})])

    with ToolChoiceAware("openai", respond, usage_offset=37) as server:
        run = Run(workspace, 131072, openai_model(server.url), calibrate_with_usage=True)
        if V2:
            run.agent.react_config.max_iters = 2
        else:
            run.agent.max_iters = 2
        await run.say("fetch")
    count = await run.manager.count()
    assert count.calibration == 37
    assert count.system + count.head + count.messages + count.tools + 37 == count.total
    assert run.manager.stats.token_count_error == pytest.approx(-37 / (count.total), abs=2e-3)


# ------------------------------------------------------------------- cancellation


async def test_a_caller_that_gives_up_stops_a_compaction_waiting_for_the_summary(workspace):
    asked = asyncio.Event()
    given_up: list[bool] = []

    async def script(call: ModelCall) -> Any:
        if "You compact the earlier part" in call.text:
            asked.set()
            try:
                await asyncio.Event().wait()  # a summary model that never answers
            except asyncio.CancelledError:
                given_up.append(True)
                raise
        step = len([m for m in call.messages if m.get("tool_calls")])
        return reply(f"step {step}", tool_call("fetch", f"d{step}", seed=step))

    # a compaction that waits for its summary: the synchronous one (one written ahead is not
    # waited for, and outlives an interrupted reply: tests/agents/test_summary_ahead.py)
    compaction = {"model": None, "background_summary": False}
    run = Run(workspace, 16384, ScriptedChatModel(script), compaction=compaction)
    task = asyncio.ensure_future(run.say("fetch"))
    await asyncio.wait_for(asked.wait(), 60)
    task.cancel()
    # The agent ends the reply as interrupted (or lets the cancellation through), and the
    # summary call is cancelled with it. Before, the pipeline was shielded and the reply
    # waited for the summary model's own timeout (two attempts of 120 s); this safety net
    # (30 s, never reached when it works) would fail first.
    done, _ = await asyncio.wait({task}, timeout=30)
    assert task in done and given_up == [True]
    with contextlib.suppress(asyncio.CancelledError):
        task.result()
    dialog = list((workspace / "dialog").glob("*.jsonl"))
    assert dialog, "the messages were saved before the summary was asked for"
    saved = [json.loads(line)["id"] for f in dialog for line in f.read_text().splitlines()]
    if V2:
        live = {m.id for m in run.agent.state.context}
        assert all(any(s.startswith(m) for m in live) for s in saved), "still in the context"
    else:
        live = {m.id for m in run.agent.memory.messages}
        assert set(saved) <= live, "still in memory: nothing was removed"
    assert "compaction_finished" not in run.types()


# ------------------------------------------------------------------- compaction on request


async def test_a_compaction_on_request_says_so_and_reports_the_prompt_the_model_gets(
    workspace, capsys
):
    steps = [reply(f"step {i}", tool_call("fetch", f"r{i}", seed=i)) for i in range(3)]
    model = ScriptedChatModel([*steps, "done", "and now"])
    run = Run(workspace, 131072, model, notices=True)
    if not V2:
        run.agent.set_console_output_enabled(True)
    await run.say("fetch three")
    capsys.readouterr()
    count = await run.manager.compact_now()
    printed = capsys.readouterr().out
    assert run.manager.stats.compactions == 1
    assert "compacting on request" in printed and "compaction trigger" not in printed
    assert "compacted on request" in printed
    # what was reported is the prompt as the model will get it: the dialog tools joined
    assert (await run.manager.count()).total == count.total
    await run.say("next")
    names = {tool["function"]["name"] for tool in model.calls[-1].tools}
    assert {"read_dialog", "search_dialog"} <= names


# ------------------------------------------------------- found by attacking the above


async def test_an_offloaded_message_outlives_the_ttl(workspace):
    pasted = "Keep this log:\n" + make_text(200 * 1024, 5)
    run = Run(workspace, 16384, ScriptedChatModel(["noted"]))
    await run.say(pasted)
    [offloaded] = [e for e in run.events if e.type == "user_message_offloaded"]
    path = offloaded.data["path"]
    for folder in ("tool_result", "message"):  # everything saved, far past its TTL
        for saved in (workspace / folder).glob("*"):
            os.utime(saved, (1, 1))
    await run.manager.pipeline.cleanup()
    assert (workspace / path).read_text(encoding="utf-8") == pasted, "the user's words stay"


async def test_a_rejection_the_prompt_cannot_fix_is_raised_and_teaches_nothing(workspace):
    said = (
        "Error code: 400 - This model's maximum context length is 16384 tokens. However, you "
        "requested 16600 tokens (216 in the messages, 16384 in the completion)."
    )
    model = ScriptedChatModel([RuntimeError(said), "fine"])
    run = Run(workspace, 16384, model)
    with pytest.raises(Exception, match="16384 in the completion"):
        await run.say("hello")
    count = await run.manager.count()
    assert count.calibration == 0 and run.manager.max_input_tokens == 16384
    assert "provider_overflow_recovered" not in run.types()


async def test_a_provider_window_smaller_than_configured_becomes_the_window(workspace):
    real = 8192
    sizes: list[int] = []
    steps = iter(range(12))

    def script(call: ModelCall) -> Any:
        tokens = model.counter.count_formatted(call.messages, call.tools)
        if tokens > real:
            return RuntimeError(
                f"<400> InvalidParameter: Range of input length should be [1, {real}]"
            )
        if "You compact the earlier part" in call.text:
            return "## Goal\n- fetch\n## Progress\n- fetched\n"
        sizes.append(tokens)
        step = next(steps, None)
        return (
            "done"
            if step is None
            else reply("next", tool_call("fetch", f"w{step}", seed=step, kb=8))
        )

    model = ScriptedChatModel(script)
    run = Run(workspace, 32768, model, max_iters=20)
    assert await run.say("fetch twelve documents") == "done"
    assert run.manager.max_input_tokens == real, "the provider's window is the window now"
    recovered = [e for e in run.events if e.type == "provider_overflow_recovered"]
    assert len(recovered) == 1 and recovered[0].data["window"] == real
    assert max(sizes) <= real
    notices = [
        e for e in run.events if e.type == "tool_result_retruncated" and e.data["notice_only"]
    ]
    assert not notices, "fitted to the provider's window, not starved below it"


async def test_the_summary_model_is_never_sent_more_than_its_window(workspace):
    def script(call: ModelCall) -> Any:
        if "You compact the earlier part" in call.text:
            return SIX_SECTIONS  # a usable summary: every chunk of the input is sent
        if call.index == 0:
            return reply("fetching", *[tool_call("fetch", f"p{i}", seed=i) for i in range(40)])
        return f"answer {call.index}"

    model = ScriptedChatModel(script)
    run = Run(workspace, 16384, model, **{"compaction": {"model": None}})
    for text in ("fetch them all", "next", "and next"):
        await run.say(text)
    await run.manager.compact_now()  # the step of 40 results, read back whole, is summarised
    summaries = [c for c in model.calls if "You compact the earlier part" in c.text]
    assert summaries, "a compaction asked the model for a summary"
    assert max(model.counter.count_formatted(c.messages, c.tools) for c in summaries) <= 16384


async def test_a_message_in_many_parts_is_offloaded_not_refused(workspace):
    model = ScriptedChatModel(["read it all"])
    run = Run(workspace, 16384, model)
    parts = [make_text(8 * 1024, seed) for seed in range(30)]  # each part fits, all do not
    if V2:
        from agentscope.message import TextBlock, UserMsg

        await run.agent.reply(UserMsg("user", [TextBlock(text=part) for part in parts]))
    else:
        from agentscope.message import Msg, TextBlock

        await run.agent(Msg("user", [TextBlock(type="text", text=p) for p in parts], "user"))
    assert max(prompt_tokens(model)) <= 16384
    offloaded = [e.data["path"] for e in run.events if e.type == "user_message_offloaded"]
    assert offloaded and all((workspace / p).is_file() for p in offloaded)


@pytest.mark.parametrize("ends", ["", "\n"])
async def test_a_message_in_300_parts_goes_to_one_saved_file_with_one_notice(workspace, ends):
    """Each of 300 parts cut with a notice of its own kept 76,772 tokens of notices and the
    reply was refused; one saved file and one notice fit."""
    model = ScriptedChatModel(["read it all"])
    run = Run(workspace, 32768, model)
    parts = [make_text(4 * 1024, seed) + ends for seed in range(300)]
    if V2:
        from agentscope.message import TextBlock, UserMsg

        await run.agent.reply(UserMsg("user", [TextBlock(text=part) for part in parts]))
    else:
        from agentscope.message import Msg, TextBlock

        await run.agent(Msg("user", [TextBlock(type="text", text=p) for p in parts], "user"))
    (tokens,) = prompt_tokens(model)
    assert tokens <= 32768
    offloaded = [e.data["path"] for e in run.events if e.type == "user_message_offloaded"]
    assert len(offloaded) == 1 and offloaded[0].startswith("message/")
    assert len(list((workspace / "message").iterdir())) == 1
    (sent,) = [
        [block["text"] for block in m["content"]]
        for m in model.calls[0].messages
        if isinstance(m.get("content"), list) and len(m["content"]) == len(parts)
    ]
    cut = [i for i, (part, text) in enumerate(zip(parts, sent, strict=True)) if part != text]
    assert len(cut) > 250, "most parts are in the file"
    first, *others = cut
    assert split_notice(sent[first])[1].file_path == offloaded[0]
    assert all(sent[i] == "[…]" for i in others)
    assert sum("<<<TRUNCATED>>>" in text for text in sent) == 1
    # the parts cut, whole and in order, each on lines of its own: read_file reads them back
    chosen = [parts[i] for i in cut]
    whole = "".join(p if p.endswith("\n") else p + "\n" for p in chosen[:-1]) + chosen[-1]
    assert (workspace / offloaded[0]).read_text() == whole


async def test_a_rejection_after_the_answer_began_is_learned(workspace):
    class LateReject(ModelServer):
        def _openai(self, handler, request: dict) -> None:
            tokens = self._prompt_tokens(request)
            if tokens <= 12000 or not request.get("stream"):
                super()._openai(handler, request)
                return
            handler.send_response(200)
            handler.send_header("Content-Type", "text/event-stream")
            handler.end_headers()
            base = {"id": "c", "created": 0, "model": "m", "object": "chat.completion.chunk"}
            first = {"index": 0, "delta": {"role": "assistant", "content": "Let me"}}
            handler.wfile.write(f"data: {json.dumps({**base, 'choices': [first]})}\n\n".encode())
            error = {
                "error": {
                    "message": "This model's maximum context length is 12000 tokens. However, "
                    f"your messages resulted in {tokens} tokens.",
                    "code": "context_length_exceeded",
                }
            }
            handler.wfile.write(f"data: {json.dumps(error)}\n\n".encode())
            handler.wfile.flush()

    with LateReject("openai", agent_turns(), usage_offset=5000) as server:
        run = Run(workspace, 16384, openai_model(server.url))
        with pytest.raises(Exception, match="maximum context length"):
            await run.say("fetch the documents")
        learned = await run.manager.count()
        assert learned.calibration > 0 or run.manager.max_input_tokens <= 12000


@pytest.mark.skipif(not V2, reason="2.x calls a failed model again (ModelConfig.max_retries)")
async def test_one_rejection_is_recovered_once_however_often_2x_retries(workspace):
    from agentscope.agent import ModelConfig

    server = LengthLimitedServer(agent_turns(), limit=16384, extra=3000, always=True)
    with server:
        run = Run(workspace, 16384, openai_model(server.url))
        run.agent.model_config = ModelConfig(max_retries=3)
        with pytest.raises(Exception, match="maximum context length"):
            await run.say("fetch the documents")
    assert run.types().count("provider_overflow_recovered") == 1
    assert server.rejected == 2 + 3, "the call and its retry, then 2.x's own three retries"


async def test_a_provider_that_reports_a_fraction_of_the_prompt_cannot_push_it_over(workspace):
    """Usage without the cached prefix (Anthropic's input_tokens with prompt caching on): a
    calibration that learned all of it would let prompts over the window through."""

    class CachedUsage(ModelServer):
        def _prompt_tokens(self, request: dict) -> int:
            tokens = super()._prompt_tokens(request)
            request["_reported_prompt_tokens"] = tokens
            return max(1, tokens // 10)  # the uncached tail only

    steps = iter(range(10))

    def respond(request: dict) -> Reply:
        if "You compact the earlier part" in str(request["messages"][0].get("content")):
            return Reply(SIX_SECTIONS)
        step = next(steps, None)
        if step is None:
            return Reply("done")
        return Reply(f"step {step}", [(f"u{step}", "fetch", {"seed": step, "kb": 12})])

    with CachedUsage("openai", respond) as server:
        run = Run(
            workspace, 16384, openai_model(server.url), calibrate_with_usage=True, max_iters=20
        )
        await run.say("fetch ten documents")
    sent = [r["_reported_prompt_tokens"] for r in server.requests if r.get("tools")]
    assert max(sent) <= 16384
