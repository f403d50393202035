"""``python -m bench [--quick] [--only B5 ...]``: run the benchmarks, print Markdown tables and
write ``bench/results.json`` (one object per benchmark id, each with ``target_met``)."""

from __future__ import annotations

import argparse
import json
import logging
import platform
import sys
import time
from pathlib import Path

from . import (
    b1_hook_overhead,
    b2_token_accuracy,
    b3_replay_invariants,
    b4_prefix_stability,
    b5_truncation,
    b6_replay_throughput,
    b7_summary_fidelity,
    b9_redis_backend,
)

BENCHMARKS = {
    "B1": b1_hook_overhead,
    "B2": b2_token_accuracy,
    "B3": b3_replay_invariants,
    "B4": b4_prefix_stability,
    "B5": b5_truncation,
    "B6": b6_replay_throughput,
    "B7": b7_summary_fidelity,
    "B9": b9_redis_backend,
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer repeats (under 2 minutes)")
    parser.add_argument("--only", nargs="+", choices=sorted(BENCHMARKS), help="run these only")
    parser.add_argument("--out", type=Path, default=Path(__file__).with_name("results.json"))
    args = parser.parse_args(argv)
    # AgentScope's formatters log every skipped thinking block of the real transcripts.
    logging.getLogger("as").setLevel(logging.ERROR)
    results: dict[str, dict] = {}
    started = time.perf_counter()
    for bench_id in args.only or sorted(BENCHMARKS):
        module = BENCHMARKS[bench_id]
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
