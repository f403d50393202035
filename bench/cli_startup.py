"""startup - how fast the command line answers: ``agentscope-context --help``, every command's
``--help`` and ``import agentscope_context_ext``, each a fresh process, side by side with
``python -c pass`` (the interpreter's own start) and with importing the installed adapter
(AgentScope: what every command paid before issue 45). Interleaved rounds, median of 5 (3 with
``--quick``). Target: ``--help`` and every command's ``--help`` under 0.5 s."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from ._timing import interleaved_medians

TITLE = "command line start-up (fresh processes)"
TARGET_SECONDS = 0.5


def _cli() -> list[str]:
    """The console script of this interpreter's environment (as a user runs it), else the same
    entry point through ``python -c``."""
    script = Path(sys.executable).with_name("agentscope-context")
    if script.is_file():
        return [str(script)]
    found = shutil.which("agentscope-context")
    if found:
        return [found]
    return [
        sys.executable,
        "-c",
        "import sys; from agentscope_context_ext.cli import main; sys.exit(main())",
    ]


def _commands() -> list[str]:
    from agentscope_context_ext.cli import build_parser

    subparsers = build_parser()._subparsers._group_actions  # argparse keeps them there
    return [name for action in subparsers for name in action.choices]


def _case(argv: list[str]):
    def run() -> None:
        done = subprocess.run(argv, capture_output=True, timeout=120)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)}: exit {done.returncode}: {done.stderr[-500:]!r}")

    return run


def run(quick: bool = False) -> dict:
    """Measure and return the startup record for ``bench/results.json``."""
    cli = _cli()
    python = sys.executable
    cases = {
        "python -c pass": [python, "-c", "pass"],
        "import agentscope_context_ext": [python, "-c", "import agentscope_context_ext"],
        "agentscope-context --help": [*cli, "--help"],
        **{f"agentscope-context {name} --help": [*cli, name, "--help"] for name in _commands()},
        "import the adapter (AgentScope)": [python, "-c", "import agentscope_context_ext.adapter"],
    }
    repeats = 3 if quick else 5
    medians = interleaved_medians({name: _case(argv) for name, argv in cases.items()}, repeats)
    baseline = medians["python -c pass"]
    rows = [
        {
            "what": name,
            "median_seconds": round(seconds, 3),
            "over_python_seconds": round(seconds - baseline, 3),
        }
        for name, seconds in medians.items()
    ]
    helps = {name: s for name, s in medians.items() if name.endswith("--help")}
    slowest = max(helps, key=helps.get)
    return {
        "id": "startup",
        "what": TITLE,
        "repeats": repeats,
        "rows": rows,
        "slowest_help": slowest,
        "slowest_help_seconds": round(helps[slowest], 3),
        "target": f"--help and every command's --help < {TARGET_SECONDS:g} s (median of {repeats})",
        "target_met": helps[slowest] < TARGET_SECONDS,
    }


def table(record: dict) -> str:
    """Markdown table of a startup record."""
    lines = [
        f"| fresh process (median of {record['repeats']}) | seconds | over `python -c pass` |",
        "|---|---:|---:|",
    ]
    for row in record["rows"]:
        lines.append(
            f"| `{row['what']}` | {row['median_seconds']:.3f} | {row['over_python_seconds']:+.3f} |"
        )
    return "\n".join(lines)
