"""Transcript replay (design §10, BENCHMARKS B3): every shared transcript at 32k and 128k windows,
importers for each format, and bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentscope_context_ext.cli import main
from agentscope_context_ext.replay import TranscriptError, detect_format, load_transcripts

TRANSCRIPTS = [
    "claude-code/4d5611e5-241a-462a-8d15-5122611a9569.jsonl",
    "claude-code/4d5611e5-241a-462a-8d15-5122611a9569.compact-summary.jsonl",
    "claude-code/8463c716-a2ea-4c14-9efa-87158ebd9f20.jsonl",
    "claude-code/short.jsonl",
    "swe-agent/function_calling_simple.traj",
    "swe-agent/marshmallow-1867.function_calling.traj",
    "tau-bench/gpt-4o-airline.json",
]


def test_every_shared_transcript_is_listed(shared_data: Path) -> None:
    found = {
        p.relative_to(shared_data / "transcripts").as_posix()
        for p in (shared_data / "transcripts").rglob("*")
        if p.is_file() and p.name != "LICENSE"
    }
    assert found == set(TRANSCRIPTS), "a new shared transcript needs a replay test"


@pytest.mark.slow
@pytest.mark.parametrize("window", [32768, 131072])
@pytest.mark.parametrize("name", TRANSCRIPTS)
def test_replay_keeps_every_invariant(
    shared_data: Path, tmp_path: Path, name: str, window: int
) -> None:
    out = tmp_path / "out"
    code = main(
        [
            "replay",
            str(shared_data / "transcripts" / name),
            "--max-input-tokens",
            str(window),
            "--out",
            str(out),
        ]
    )
    report = json.loads((out / "report.json").read_text())
    assert code == 0
    assert report["pair_violations"] == 0
    assert report["over_window"] == 0 or report["unexplained_over_window"] == 0
    assert report["unexplained_over_window"] == 0
    assert report["recoverable"] is True
    assert report["steps"] > 0
    assert (out / "report.md").is_file() and (out / "tokens.png").is_file()


def test_replay_compacts_a_long_session(shared_data: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert (
        main(
            [
                "replay",
                str(
                    shared_data
                    / "transcripts/claude-code/8463c716-a2ea-4c14-9efa-87158ebd9f20.jsonl"
                ),
                "--max-input-tokens",
                "32768",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    report = json.loads((out / "report.json").read_text())
    assert report["compactions"] >= 2 and report["truncations"] >= 1
    assert report["peak_prompt_tokens"] <= 32768
    assert 0 < report["prefix_stability"] <= 1
    assert len(report["per_step_tokens"]) == report["steps"]


def test_formats_are_detected(shared_data: Path) -> None:
    root = shared_data / "transcripts"
    assert detect_format(root / "claude-code/short.jsonl") == "claude-code"
    assert detect_format(root / "swe-agent/function_calling_simple.traj") == "swe-agent"
    assert detect_format(root / "tau-bench/gpt-4o-airline.json") == "openai"
    trajectories = load_transcripts(root / "tau-bench/gpt-4o-airline.json")
    assert len(trajectories) == 200 and trajectories[0].system_prompt.startswith(
        "# Airline Agent Policy"
    )
    first = trajectories[0].messages
    calls = [
        b["id"]
        for m in first
        if isinstance(m.content, list)
        for b in m.content
        if b["type"] == "tool_use"
    ]
    results = [
        b["id"]
        for m in first
        if isinstance(m.content, list)
        for b in m.content
        if b["type"] == "tool_result"
    ]
    assert calls and set(results) <= set(calls), "tool results paired with their calls by id"


def _fine_tuning_line(question: str, answer: str, call_id: str) -> dict:
    """One line of OpenAI-format JSONL (fine-tuning data): a conversation with a tool call."""
    call = {"name": "lookup", "arguments": json.dumps({"q": question})}
    return {
        "messages": [
            {"role": "system", "content": "You answer with the lookup tool."},
            {"role": "user", "content": question},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": call_id, "type": "function", "function": call}],
            },
            {"role": "tool", "tool_call_id": call_id, "content": "x" * 60_000},
            {"role": "assistant", "content": answer},
        ]
    }


def test_openai_jsonl_is_one_conversation_a_line(tmp_path: Path) -> None:
    """It was refused: "not a openai transcript (not JSON: Extra data at line 2)"."""
    path = tmp_path / "train.jsonl"
    lines = [_fine_tuning_line("first?", "One.", "c1"), _fine_tuning_line("second?", "Two.", "c2")]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines) + "\n")
    assert detect_format(path) == "openai"
    for fmt in ("auto", "openai"):
        transcripts = load_transcripts(path, fmt)
        assert [t.name for t in transcripts] == ["train.jsonl#0", "train.jsonl#1"]
        first = transcripts[0]
        assert first.system_prompt == "You answer with the lookup tool."
        assert [m.role for m in first.messages] == ["user", "assistant", "system", "assistant"]
        assert first.messages[1].content[0] == {
            "type": "tool_use",
            "id": "c1",
            "name": "lookup",
            "input": {"q": "first?"},
        }
        assert first.messages[2].content[0]["name"] == "lookup"
        assert transcripts[1].messages[-1].content == [{"type": "text", "text": "Two."}]


@pytest.mark.parametrize("fmt", ["auto", "openai"])
def test_openai_jsonl_replays(tmp_path: Path, capsys: pytest.CaptureFixture, fmt: str) -> None:
    path = tmp_path / "train.jsonl"
    lines = [_fine_tuning_line(f"question {n}?", f"Answer {n}.", f"c{n}") for n in range(3)]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    out = tmp_path / "out"
    assert main(["replay", str(path), "--format", fmt, "--out", str(out)]) == 0
    assert "replaying train.jsonl: 3 conversation(s)" in capsys.readouterr().out
    report = json.loads((out / "report.json").read_text())
    assert report["trajectories"] == 3 and report["recoverable"] is True, report
    assert report["pair_violations"] == 0 and report["truncations"] == 3, report


def test_openai_jsonl_of_one_message_a_line_is_one_conversation(tmp_path: Path) -> None:
    path = tmp_path / "chat.jsonl"
    messages = _fine_tuning_line("only?", "Only.", "c1")["messages"]
    path.write_text("".join(json.dumps(message) + "\n" for message in messages))
    assert detect_format(path) == "openai"
    (transcript,) = load_transcripts(path)
    assert transcript.name == "chat.jsonl" and len(transcript.messages) == 4


def test_a_bad_line_of_openai_jsonl_is_named(tmp_path: Path, capsys) -> None:
    path = tmp_path / "train.jsonl"
    path.write_text(json.dumps(_fine_tuning_line("a?", "A.", "c1")) + "\n{oops\n")
    assert main(["replay", str(path), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.endswith(
        f"{path}: not an openai transcript (line 2 is not JSON: Expecting "
        "property name enclosed in double quotes)"
    ), err


def test_a_long_first_line_is_read_whole_to_find_the_format(tmp_path: Path) -> None:
    """A conversation on one line passes 64 KB easily: the format is still found."""
    path = tmp_path / "train.jsonl"
    line = _fine_tuning_line("a?", "A.", "c1")
    line["messages"][3]["content"] = "y" * 200_000
    path.write_text(json.dumps(line) + "\n" + json.dumps(line) + "\n")
    assert detect_format(path) == "openai" and len(load_transcripts(path)) == 2


@pytest.mark.agentscope1
def test_agentscope_dialog_format_round_trips(tmp_path: Path) -> None:
    from agentscope.message import Msg

    path = tmp_path / "2026-12-02.jsonl"
    msgs = [Msg("user", "hello", "user"), Msg("assistant", "hi", "assistant")]
    path.write_text("".join(json.dumps(m.to_dict()) + "\n" for m in msgs))
    assert detect_format(path) == "agentscope"
    loaded = load_transcripts(path)[0].messages
    assert [m.id for m in loaded] == [m.id for m in msgs]


def test_a_2x_dialog_file_is_read_as_records(tmp_path: Path) -> None:
    # what this package's dialog/ holds on AgentScope 2.x: Msg.model_dump() lines
    reply = {
        "id": "m2",
        "name": "worker",
        "role": "assistant",
        "content": [
            {"type": "text", "text": "Listing.", "id": "b1"},
            {"type": "tool_call", "id": "c1", "name": "ls", "input": '{"path": "."}'},
            {
                "type": "tool_result",
                "id": "c1",
                "name": "ls",
                "output": [{"type": "text", "text": "f.txt"}],
            },
        ],
        "created_at": "2026-12-03 10:00:00.000",
    }
    user = {"id": "m1", "name": "user", "role": "user", "content": "list the files"}
    path = tmp_path / "2026-12-03.jsonl"
    path.write_text(json.dumps(user) + "\n" + json.dumps(reply) + "\n")
    assert detect_format(path) == "agentscope"
    first, second = load_transcripts(path)[0].messages
    assert (first.id, first.role, first.content) == ("m1", "user", "list the files")
    assert [b["type"] for b in second.content] == ["text", "tool_use", "tool_result"]
    assert second.content[1]["input"] == {"path": "."}
    assert second.content[2]["output"] == [{"type": "text", "text": "f.txt"}]
    assert second.id == "m2" and second.timestamp == "2026-12-03 10:00:00.000"


def test_claude_code_merges_streamed_assistant_records(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    records = [
        {"type": "progress", "sessionId": "s"},
        {
            "type": "user",
            "sessionId": "s",
            "message": {"role": "user", "content": "go"},
            "timestamp": "2026-02-10T21:11:59.186Z",
        },
        {
            "type": "assistant",
            "sessionId": "s",
            "message": {
                "id": "m1",
                "role": "assistant",
                "content": [{"type": "text", "text": "a"}],
            },
        },
        {
            "type": "assistant",
            "sessionId": "s",
            "message": {
                "id": "m1",
                "role": "assistant",
                "content": [
                    {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "ls"}}
                ],
            },
        },
        {
            "type": "user",
            "sessionId": "s",
            "message": {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "file.txt"}],
            },
        },
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    msgs = load_transcripts(path)[0].messages
    assert [m.role for m in msgs] == ["user", "assistant", "system"]
    assert [b["type"] for b in msgs[1].content] == ["text", "tool_use"]
    assert msgs[2].content[0]["name"] == "Bash" and msgs[0].timestamp == "2026-02-10 21:11:59.186"


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        (None, "no such file"),
        ("", "empty"),
        ("just some text\nnot a transcript\n", "not a recognised transcript"),
        ('{"foo": 1}\n', "not a recognised transcript"),
        ("[1, 2, 3]", "no conversation"),
    ],
)
def test_bad_files_exit_2_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture, content: str | None, fragment: str
) -> None:
    path = tmp_path / "t.jsonl"
    if content is not None:
        path.write_text(content)
    assert main(["replay", str(path), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert fragment in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    with pytest.raises(TranscriptError):
        load_transcripts(path)


def test_forced_wrong_format_exits_2(
    shared_data: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    path = shared_data / "transcripts/claude-code/short.jsonl"
    assert main(["replay", str(path), "--format", "swe-agent", "--out", str(tmp_path)]) == 2
    assert "not a swe-agent transcript" in capsys.readouterr().err


DEEP = 100_000
HOSTILE = {
    "deep-array": "[" * DEEP,
    "deep-closed-array": "[" * 500 + "]" * 500,
    "deep-object": '{"a":' * DEEP,
    "deep-message": '{"role": "user", "name": "u", "content": ' + "[" * 300 + "]" * 300 + "}\n",
    "deep-second-line": '{"role": "user", "name": "u", "content": "hi"}\n' + "[" * DEEP + "\n",
    "huge-int": '[{"role": "user", "content": "hi", "n": ' + "9" * 50_000 + "}]",
    "huge-int-line": '{"role": "user", "name": "u", "content": "x", "id": ' + "1" * 9999 + "}\n",
}


@pytest.mark.parametrize("fmt", ["auto", "agentscope", "openai", "claude-code", "swe-agent"])
@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_json_exits_2_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture, name: str, fmt: str
) -> None:
    """``replay`` of a file holding ``'[' * 100000`` exited 1 with a RecursionError."""
    path = tmp_path / "t.json"
    path.write_text(HOSTILE[name])
    assert main(["replay", str(path), "--format", fmt, "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert "internal error" not in err and "set_int_max_str_digits" not in err, err


def test_deep_tool_arguments_are_kept_raw_not_a_crash(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "[" * DEEP}}
    path.write_text(
        json.dumps(
            [
                {"role": "user", "content": "go"},
                {"role": "assistant", "content": "", "tool_calls": [call]},
                {"role": "tool", "tool_call_id": "c1", "content": "ok"},
            ]
        )
    )
    (transcript,) = load_transcripts(path)
    use = transcript.messages[1].content[0]
    assert use["input"] == {"raw_arguments": "[" * DEEP}


async def test_a_message_in_many_parts_is_recoverable_after_a_replay(tmp_path: Path) -> None:
    """A user message of 300 parts, cut into one saved file (one notice, the other parts a
    placeholder), is still recoverable byte for byte: each part from its record."""
    from harness_common import make_text

    from agentscope_context_ext import ContextConfig
    from agentscope_context_ext.replay import Record, Transcript, replay_transcript

    parts = [{"type": "text", "text": make_text(4 * 1024, seed)} for seed in range(300)]
    messages = [Record("user", parts), Record("assistant", "Read it all.")]
    result = await replay_transcript(
        Transcript("parts", messages), ContextConfig(), tmp_path / "ws", max_input_tokens=32768
    )
    summary = result.summary()
    assert summary["recoverable"], result.recovery_problems
    assert summary["peak_prompt_tokens"] <= 32768
    assert len(list((tmp_path / "ws" / "message").iterdir())) == 1


def a_2x_dialog(path: Path, steps: int = 6) -> None:
    """A dialog file as this package writes it on AgentScope 2.x (``Msg.model_dump()`` lines):
    each reasoning step's calls and their results in one message, ``read_file`` among them."""
    lines = [{"id": "m0", "name": "user", "role": "user", "content": "read the modules"}]
    for step in range(steps):
        output = "".join(f"def f_{step}_{i}(): pass\n" for i in range(40))
        lines.append(
            {
                "id": f"m{step + 1}",
                "name": "worker",
                "role": "assistant",
                "content": [
                    {"type": "hint", "hint": "<system-reminder>now</system-reminder>", "id": "h"},
                    {"type": "text", "text": f"Reading m{step}.py.", "id": f"t{step}"},
                    {
                        "type": "tool_call",
                        "id": f"c{step}",
                        "name": "read_file",
                        "input": json.dumps({"file_path": f"m{step}.py"}),
                    },
                    {
                        "type": "tool_result",
                        "id": f"c{step}",
                        "name": "read_file",
                        "output": [{"type": "text", "text": output}],
                        "state": "success",
                    },
                    {"type": "text", "text": f"m{step}.py read.", "id": f"d{step}"},
                ],
                "created_at": "2026-12-03 10:00:00.000",
            }
        )
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))


def test_this_package_s_2x_dialog_file_replays_on_either_major(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """2.x refused to play it ("the agent's toolkit already has a tool named 'read_file'"): the
    recorded read_file clashed with ours. 1.x played it with 472 pair violations: a 2.x
    message holds its results after its calls, and 1.x left them in the assistant's message."""
    path = tmp_path / "2026-12-03.jsonl"
    a_2x_dialog(path)
    assert main(["replay", str(path), "--out", str(tmp_path / "out")]) == 0, capsys.readouterr()
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["pair_violations"] == 0 and report["recoverable"] is True, report


@pytest.mark.slow
def test_the_demo_s_own_dialog_file_replays(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """What a new user did: the demo, then ``replay`` of the dialog file it left."""
    assert main(["demo", "--out", str(tmp_path / "demo")]) == 0
    (dialog,) = (tmp_path / "demo" / "workspace" / "dialog").glob("*.jsonl")
    capsys.readouterr()
    assert main(["replay", str(dialog), "--out", str(tmp_path / "out")]) == 0
    printed = capsys.readouterr().out
    assert "| pair_violations | 0 |" in printed and "| recoverable | True |" in printed, printed
