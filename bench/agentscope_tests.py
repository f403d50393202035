"""AgentScope's own agent tests, without and with ``ContextMiddleware`` in every ``Agent``.

Usage::

    ACE_AGENTSCOPE_SRC=~/src/agentscope python -m bench.agentscope_tests [--out FILE] [FILE ...]

``ACE_AGENTSCOPE_SRC`` (or ``--src``) is a checkout of agentscope-ai/agentscope (its ``tests/``
is read in place, never copied); the tests run against the AgentScope installed in this
Python. By default the files are the agent tests: every ``tests/*_test.py`` that imports
``agentscope.agent`` or builds an ``Agent(``. Each runs twice, once as it is and once with the
middleware added the way a user adds it (``bench/agentscope_inject.py``), and the two outcomes
are compared test by test.

The tests that assert AgentScope's own compression (its summary call, its summary template,
its split of the context) cannot pass with a middleware that replaces that compression; they
are listed in :data:`OWN_COMPRESSION` with what stands in for each (a test of ours), and
reported apart. Every other test that passes without the middleware must pass with it:
the exit status is 1 when one does not.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent

OWN_COMPRESSION = {
    "compress_context_test.py::": (
        "2.x's compress_context: its summary call, template and split; ours is the pipeline "
        "(tests/agentscope2/test_agentscope2_compat.py pins the equivalents)"
    ),
    "middleware_test.py::TestMiddleware::test_on_compress_context": (
        "asserts that 2.x's _compress_context_impl runs under on_compress_context; ours runs "
        "the pipeline there instead"
    ),
}
"""Test-id prefixes that assert 2.x's own compression, with what stands in for them."""

_AGENT_USE = re.compile(r"from agentscope\.agent import|(?<![A-Za-z_])Agent\(")


def agent_test_files(tests: Path) -> list[Path]:
    """The test files of AgentScope's ``tests/`` that drive its ``Agent``."""
    return sorted(
        path
        for path in tests.glob("*_test.py")
        if _AGENT_USE.search(path.read_text(encoding="utf-8", errors="replace"))
    )


def _needs_block_end_text_dropped(src: Path) -> bool:
    """Whether the snapshot predates ``TextBlockEndEvent.text`` (its tests expect no key)."""
    event = src / "src" / "agentscope" / "event" / "_event.py"
    if not event.is_file():
        return True
    text = event.read_text(encoding="utf-8", errors="replace")
    block = text.split("class TextBlockEndEvent", 1)[-1].split("\nclass ", 1)[0]
    return "text:" not in block


def run(src: Path, files: list[Path], inject: bool, drop_text: bool) -> dict[str, str]:
    """One pytest run over ``files``: test id -> ``passed``/``failed``/``skipped``."""
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "junit.xml"
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(
                [str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])]
            ),
            "ACE_INJECT": "1" if inject else "0",
            "ACE_DROP_NONE_BLOCK_END_TEXT": "1" if drop_text else "0",
        }
        command = [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-p",
            "bench.agentscope_inject",
            "-o",
            "asyncio_mode=strict",
            "-o",
            "asyncio_default_fixture_loop_scope=function",
            "--continue-on-collection-errors",
            "--rootdir",
            str(src / "tests"),
            "-c",
            os.devnull,
            f"--junitxml={report}",
            *map(str, files),
        ]
        subprocess.run(command, cwd=src / "tests", env=env, stdout=subprocess.DEVNULL, check=False)
        if not report.is_file():
            raise SystemExit(f"pytest wrote no report for {src / 'tests'}")
        return _outcomes(report)


def _outcomes(report: Path) -> dict[str, str]:
    outcomes: dict[str, str] = {}
    for case in ET.parse(report).iter("testcase"):
        module = case.get("classname", "").split(".")[0]
        name = f"{module}.py::{case.get('classname', '').split('.')[-1]}::{case.get('name')}"
        tags = {child.tag for child in case}
        if tags & {"failure", "error"}:
            outcomes[name] = "failed"
        elif "skipped" in tags:
            outcomes[name] = "skipped"
        else:
            outcomes[name] = "passed"
    return outcomes


def compare(plain: dict[str, str], injected: dict[str, str]) -> dict:
    """The two runs side by side: counts, and the tests that pass without and fail with."""
    broken = sorted(t for t, o in plain.items() if o == "passed" and injected.get(t) != "passed")
    own = [t for t in broken if any(t.startswith(prefix) for prefix in OWN_COMPRESSION)]
    return {
        "tests": len(plain),
        "passed_without": sum(o == "passed" for o in plain.values()),
        "passed_with": sum(o == "passed" for o in injected.values()),
        "pass_to_fail": [t for t in broken if t not in own],
        "pass_to_fail_own_compression": own,
        "fail_to_pass": sorted(
            t for t, o in plain.items() if o != "passed" and injected.get(t) == "passed"
        ),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.agentscope_tests", description=__doc__)
    parser.add_argument("files", nargs="*", help="test files (default: the agent tests)")
    parser.add_argument("--src", default=os.environ.get("ACE_AGENTSCOPE_SRC"))
    parser.add_argument("--out", help="write the comparison as JSON here")
    args = parser.parse_args(argv)
    if not args.src or not (Path(args.src) / "tests").is_dir():
        print(
            "agentscope_tests: set ACE_AGENTSCOPE_SRC (or --src) to a checkout of "
            "agentscope-ai/agentscope with its tests/",
            file=sys.stderr,
        )
        return 2
    src = Path(args.src).resolve()
    files = [Path(f).resolve() for f in args.files] or agent_test_files(src / "tests")
    drop_text = _needs_block_end_text_dropped(src)
    print(f"{len(files)} test files from {src / 'tests'}", flush=True)
    plain = run(src, files, inject=False, drop_text=drop_text)
    print(
        f"without the middleware: {sum(o == 'passed' for o in plain.values())} passed", flush=True
    )
    injected = run(src, files, inject=True, drop_text=drop_text)
    result = compare(plain, injected)
    print(
        f"with the middleware: {result['passed_with']} passed\n\n"
        "| tests | pass without | pass with | pass -> fail | of which 2.x's own compression |"
        "\n|---:|---:|---:|---:|---:|\n"
        f"| {result['tests']} | {result['passed_without']} | {result['passed_with']} "
        f"| {len(result['pass_to_fail'])} | {len(result['pass_to_fail_own_compression'])} |"
    )
    for test in result["pass_to_fail"]:
        print(f"pass -> fail: {test}")
    for test in result["pass_to_fail_own_compression"]:
        print(f"pass -> fail (2.x's own compression): {test}")
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return 1 if result["pass_to_fail"] else 0


if __name__ == "__main__":
    sys.exit(main())
