"""The scripted plan of the demo: an exploration a real agent would make of a code base,
decided step by step from what the tools returned (real files, real outputs)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ..core.truncation import split_notice
from ..testing import ModelCall, reply, tool_call

GREPS = [
    r"^class \w+",
    r"^\s+async def \w+",
    r"register_instance_hook|register_state",
    r"^from \.\.? ?import|^from \.\w+ import",
    r"def __call__",
    r"raise \w+Error",
    r"TODO|FIXME",
    r"logger\.(warning|error)",
]


def exploration_plan(root: Path, files_to_read: int = 30) -> Callable[[ModelCall], object]:
    """A responder for ``ScriptedChatModel``: list, grep, read the largest modules (some in
    parallel), follow a few truncation notices with ``read_file``, then answer."""
    modules = sorted(
        (p for p in root.rglob("*.py") if "__pycache__" not in p.parts),
        key=lambda p: p.stat().st_size,
        reverse=True,
    )
    reads = [p.relative_to(root).as_posix() for p in modules[:files_to_read]]
    steps: list[list[tuple[str, dict]]] = [
        [("list_dir", {"path": "."})],
        [("grep", {"pattern": GREPS[0]})],
    ]
    for index in range(0, len(reads), 3):
        group = reads[index : index + (2 if index % 2 else 1)]
        steps.append([("read_file", {"file_path": path}) for path in group])
        if index // 3 + 1 < len(GREPS):
            steps.append([("grep", {"pattern": GREPS[index // 3 + 1]})])
    remaining = [
        path for path in reads if all(path != c[1].get("file_path") for s in steps for c in s)
    ]
    for path in remaining:
        steps.append([("read_file", {"file_path": path})])
    state = {"step": 0, "followed": 0}

    def respond(call: ModelCall) -> object:
        # Follow a truncation notice of the latest results now and then, as a reader would.
        latest = _latest_tool_texts(call)
        if state["followed"] < 4 and state["step"] % 3 == 2:
            for text in latest:
                parts = split_notice(text)
                if parts and parts[1].file_path.endswith(".py"):
                    state["followed"] += 1
                    notice = parts[1]
                    return reply(
                        f"Reading on in {notice.file_path} from line {notice.next_line}.",
                        tool_call(
                            "read_file",
                            file_path=notice.file_path,
                            start_line=notice.next_line,
                            start_byte=notice.next_byte,
                        ),
                    )
        if state["step"] >= len(steps):
            return (
                f"I explored {root.name}: listed it, ran {len(GREPS)} searches and read the {len(reads)} largest "
                f"modules ({', '.join(Path(r).name for r in reads[:4])}, ...), following "
                f"{state['followed']} truncation notices with read_file."
            )
        calls = steps[state["step"]]
        state["step"] += 1
        names = ", ".join(f"{name}({next(iter(args.values()))})" for name, args in calls)
        return reply(f"Next: {names}.", *[tool_call(name, **args) for name, args in calls])

    return respond


def _latest_tool_texts(call: ModelCall) -> list[str]:
    texts = []
    for message in reversed(call.messages):
        if message.get("role") != "tool":
            break
        content = message.get("content")
        texts.append(
            content
            if isinstance(content, str)
            else "".join(str(p.get("text", "")) for p in content or [] if isinstance(p, dict))
        )
    return texts
