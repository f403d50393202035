"""The benchmarks of BENCHMARKS.md. Run with ``python -m bench`` (``--quick`` for a short run)."""
