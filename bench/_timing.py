"""Side-by-side timing: interleaved runs (A B A B ...), medians, ratios. No bare absolute times
are judged, only ratios measured in the same run on the same machine."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable


def interleaved_medians(cases: dict[str, Callable[[], object]], repeats: int) -> dict[str, float]:
    """Run every case once per round, ``repeats`` rounds; return each case's median seconds."""
    samples: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(repeats):
        for name, case in cases.items():
            started = time.perf_counter()
            case()
            samples[name].append(time.perf_counter() - started)
    return {name: statistics.median(values) for name, values in samples.items()}
