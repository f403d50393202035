"""The outcome of a tool call in the extractive summary (issue 43): from the tool's status (the
framework's verdict, or the shape of a tool's report of its own failure), never from words
inside the content it returned. Core cases on neutral messages, then a real agent of the
installed major with a tool that fails and one that reads a module."""

from __future__ import annotations

import pytest

from agentscope_context_ext.core.messages import Message, Text, ToolCall, ToolResult
from agentscope_context_ext.core.summary import extractive_summary

MODULE = '''"""The ``agentscope-context`` command line (design §10).

Exit codes: 0 ok, 2 bad input (one-line reason on stderr, no traceback), 1 internal error.

One module on purpose: the parser of every command and the one place that turns a user's mistake
into exit code 2; each command's work is in its own module.
"""

from __future__ import annotations

import argparse


def main(argv=None) -> int:
    """Entry point."""
    return 0
'''


def exchange(tool: str, arguments: dict, output: str, failed: bool | None = None) -> list:
    return [
        Message("u", "user", "user", "", (Text("Look at the command line."),)),
        Message("a", "assistant", "assistant", "", (Text(""), ToolCall("c1", tool, arguments))),
        Message("r", "system", "system", "", (ToolResult("c1", tool, output, failed=failed),)),
    ]


def progress(msgs: list) -> str:
    return "\n".join(extractive_summary(msgs).progress)


def test_a_read_of_a_module_that_mentions_exit_code_2_is_not_a_failure() -> None:
    """It was "`cli/_main.py` — read; failed: `into exit code 2; ...`"."""
    summary = extractive_summary(exchange("read_file", {"file_path": "cli/_main.py"}, MODULE))
    text = "\n".join(summary.progress + summary.next_steps)
    assert "`cli/_main.py`" in text and "failed" not in text and "Unresolved" not in text
    assert "defines `def main`" in text


@pytest.mark.parametrize(
    "output",
    [
        "Error: file not found: cli/_mian.py",
        "<tool_use_error>File does not exist.</tool_use_error>",
        "FileNotFoundError: [Errno 2] No such file or directory: 'cli/_mian.py'",
        "cat: cli/_mian.py: No such file or directory",
    ],
)
def test_a_read_that_reports_its_own_failure_is_one(output: str) -> None:
    line = progress(exchange("read_file", {"file_path": "cli/_mian.py"}, output))
    assert "failed:" in line and output[:20] in line


def test_the_framework_s_verdict_decides() -> None:
    # 2.x marks a result whose tool raised (state "error"), whatever its text looks like
    failed = exchange("fetch_page", {"url": "https://x.test"}, "upstream said no\n" * 20, True)
    assert "failed" in progress(failed)
    # and "success" is not taken for a verdict: the text still decides
    assert "failed" not in progress(exchange("fetch_page", {"url": "https://x.test"}, MODULE))


def test_a_command_s_output_is_still_its_status() -> None:
    output = "make: *** [html] Error 2\nexit code 2"
    assert "failed: tool `bash` said: `make: *** [html] Error 2`" in progress(
        exchange("bash", {"command": "make html"}, output)
    )


async def test_a_real_agent_s_failed_tool_and_its_read_of_a_module(tmp_path) -> None:
    """On the installed major: a tool that raises is a failure (2.x: its state; 1.x: its
    ``Error:`` text), a read whose content mentions "exit code 2" is not."""
    from agentscope_context_ext import ContextConfig
    from agentscope_context_ext.adapter import installed
    from agentscope_context_ext.testing import ScriptedChatModel, reply, tool_call

    async def read_module(file_path: str) -> str:
        """Read a module.

        Args:
            file_path (str): The module.
        """
        # long enough that a summary replaces it with less
        return MODULE + "".join(f"\n\ndef helper_{i}(x):\n    return x + {i}\n" for i in range(150))

    async def deploy(target: str) -> str:
        """Deploy.

        Args:
            target (str): Where to.
        """
        raise RuntimeError(f"the {target} cluster refused the deploy")

    config = ContextConfig.model_validate(
        {
            "workspace": str(tmp_path / "ws"),
            "max_input_tokens": 32768,
            "notices": False,
            "compaction": {"model": "extractive"},
            "long_term_memory": {"enabled": False},
        }
    )
    script = [
        reply("", tool_call("read_module", "c1", file_path="cli/_main.py")),
        reply("", tool_call("deploy", "c2", target="staging")),
        "done",
    ]
    managed = installed.ManagedAgent.create(
        ScriptedChatModel(script), config, tools=[read_module, deploy]
    )
    await managed.ask("read the module, then deploy")
    await managed.manager.compact_now()
    summary = managed.manager.port.summary
    lines = "\n".join(summary.progress)
    read = next(line for line in lines.splitlines() if "cli/_main.py" in line)
    assert "failed" not in read, read
    deployed = next(line for line in lines.splitlines() if line.startswith("deploy("))
    assert "failed" in deployed and "staging cluster refused" in deployed, deployed
