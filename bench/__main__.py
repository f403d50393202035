"""``python -m bench [--quick] [--only B5 ...]``: run the benchmarks, print Markdown tables and
write ``bench/results.json`` (one object per benchmark id, each with ``target_met``).

A benchmark that could not run (one for the other AgentScope major, B9 without a Redis server)
is reported skipped, with the reason, and ``target_met`` false: a target that was not measured
is not met. One that fails is reported with its error, ``target_met`` false, and the others
still run. The exit status is 0 only when every benchmark ran and met its target."""

from __future__ import annotations

import argparse
import json
import logging
import platform
import sys
import time
import traceback
from importlib import import_module
from pathlib import Path

from ._major import agentscope_major, agentscope_version

BENCHMARKS = {
    "B1": ("b1_hook_overhead", None),
    "B2": ("b2_token_accuracy", None),
    "B3": ("b3_replay_invariants", None),
    "B4": ("b4_prefix_stability", None),
    "B5": ("b5_truncation", None),
    "B6": ("b6_replay_throughput", None),
    "B7": ("b7_summary_fidelity", None),
    "B8": ("b8_own_compression", 2),
    "B9": ("b9_redis_backend", None),
    "B10": ("b10_served_turns", 2),
    "B11": ("b11_history_search", None),
    "history": ("history_search", None),
    "B12": ("b12_real_servers", None),
    "startup": ("cli_startup", None),
    "B13": ("b13_summary_wait", 2),
}
"""Benchmark id -> (module, the AgentScope major it needs, or None for either). A benchmark for
the other major is reported skipped (its module is not even imported: B8 compares against 2.x's
own compression, which 1.x does not have)."""


def status(record: dict) -> str:
    """``met``, ``NOT met``, ``skipped`` or ``failed``: how the summary counts a record."""
    if record.get("error"):
        return "failed"
    if record.get("skipped"):
        return "skipped"
    return "met" if record.get("target_met") is True else "NOT met"


def summary(results: dict[str, dict]) -> str:
    """One line per outcome: which benchmarks met their target, which did not, which were
    skipped (not met: not measured) and which failed."""
    groups: dict[str, list[str]] = {}
    for bench_id, record in results.items():
        groups.setdefault(status(record), []).append(bench_id)
    met = len(groups.get("met", []))
    lines = [f"targets met: {met} of {len(results)}"]
    for name in ("NOT met", "skipped", "failed"):
        if groups.get(name):
            label = "skipped (not measured, not met)" if name == "skipped" else name
            lines.append(f"{label}: {', '.join(groups[name])}")
    return "\n".join(lines)


def _run_one(bench_id: str, quick: bool) -> dict:
    name, major = BENCHMARKS[bench_id]
    if major is not None and major != min(agentscope_major(), 2):
        reason = f"needs AgentScope {major}.x; {agentscope_version()} is installed"
        print(f"## {bench_id}: skipped ({reason})\n", flush=True)
        return {"id": bench_id, "skipped": reason, "target_met": False}
    module = import_module(f".{name}", __package__)
    # AgentScope's formatters log every skipped thinking block of the real transcripts (set
    # after the import: importing AgentScope sets up its logger).
    logging.getLogger("as").setLevel(logging.ERROR)
    print(f"## {bench_id}: {module.TITLE}", flush=True)
    try:
        record = module.run(quick=quick)
    except Exception as exc:  # noqa: BLE001 - one failing benchmark must not hide the others
        traceback.print_exc()
        print(f"\nfailed: {exc!r}\n", flush=True)
        return {"id": bench_id, "error": repr(exc)[:2000], "target_met": False}
    if record.get("skipped"):
        record["target_met"] = False  # whatever the module said: not measured, not met
        print(f"skipped: {record['skipped']}\n", flush=True)
        return record
    print(module.table(record))
    outcome = "met" if record.get("target_met") is True else "NOT met"
    print(f"\ntarget: {record['target']} -> {outcome}\n", flush=True)
    return record


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer repeats (a few minutes)")
    parser.add_argument("--only", nargs="+", choices=sorted(BENCHMARKS), help="run these only")
    parser.add_argument("--out", type=Path, default=Path(__file__).with_name("results.json"))
    args = parser.parse_args(argv)
    results: dict[str, dict] = {}
    started = time.perf_counter()
    for bench_id in args.only or sorted(BENCHMARKS):
        results[bench_id] = _run_one(bench_id, args.quick)
    meta = {
        "agentscope": agentscope_version(),
        "python": platform.python_version(),
        "machine": platform.machine(),
        "quick": args.quick,
        "seconds": round(time.perf_counter() - started, 1),
        "summary": {bench_id: status(record) for bench_id, record in results.items()},
    }
    args.out.write_text(json.dumps({"meta": meta, **results}, indent=2), encoding="utf-8")
    print(summary(results))
    print(f"results: {args.out}")
    return 0 if all(status(r) == "met" for r in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
