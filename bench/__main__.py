"""``python -m bench [--quick] [--only B5 ...]``: run the benchmarks, print Markdown tables and
write ``bench/results.json`` (one object per benchmark id, each with ``target_met``)."""

from __future__ import annotations

import argparse
import json
import logging
import platform
import sys
import time
from importlib import import_module
from pathlib import Path

from agentscope_context_ext.compat import agentscope_major, agentscope_version

BENCHMARKS = {
    "B1": ("b1_hook_overhead", 1),
    "B2": ("b2_token_accuracy", 1),
    "B3": ("b3_replay_invariants", None),
    "B4": ("b4_prefix_stability", None),
    "B5": ("b5_truncation", None),
    "B6": ("b6_replay_throughput", None),
    "B7": ("b7_summary_fidelity", 1),
    "B8": ("b8_agentscope2", 2),
    "B9": ("b9_redis_backend", 1),
}
"""Benchmark id -> (module, the AgentScope major it needs, or None for either). A benchmark for
the other major is reported skipped (its module is not even imported: B1 imports 1.x's
``ReActAgent``)."""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer repeats (under 2 minutes)")
    parser.add_argument("--only", nargs="+", choices=sorted(BENCHMARKS), help="run these only")
    parser.add_argument("--out", type=Path, default=Path(__file__).with_name("results.json"))
    args = parser.parse_args(argv)
    results: dict[str, dict] = {}
    started = time.perf_counter()
    for bench_id in args.only or sorted(BENCHMARKS):
        name, major = BENCHMARKS[bench_id]
        if major is not None and major != agentscope_major():
            reason = f"needs AgentScope {major}.x; {agentscope_version()} is installed"
            results[bench_id] = {"id": bench_id, "skipped": reason, "target_met": True}
            print(f"## {bench_id}: skipped ({reason})\n", flush=True)
            continue
        module = import_module(f".{name}", __package__)
        # AgentScope's formatters log every skipped thinking block of the real transcripts (set
        # after the import: importing AgentScope sets up its logger).
        logging.getLogger("as").setLevel(logging.ERROR)
        print(f"## {bench_id}: {module.TITLE}", flush=True)
        record = module.run(quick=args.quick)
        results[bench_id] = record
        print(module.table(record))
        if record.get("skipped"):
            print(f"\nskipped: {record['skipped']}\n", flush=True)
            continue
        print(
            f"\ntarget: {record['target']} -> {'met' if record['target_met'] else 'NOT met'}\n",
            flush=True,
        )
    meta = {
        "python": platform.python_version(),
        "machine": platform.machine(),
        "quick": args.quick,
        "seconds": round(time.perf_counter() - started, 1),
    }
    args.out.write_text(json.dumps({"meta": meta, **results}, indent=2), encoding="utf-8")
    print(f"results: {args.out}")
    return 0 if all(r["target_met"] for r in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
