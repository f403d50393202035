"""B5 - truncation scaling: ``truncate_text_output`` on 1, 10 and 100 MB inputs (ASCII lines,
Chinese lines, one giant line). Target: time(100 MB) / time(10 MB) <= 12 (linear)."""

from __future__ import annotations

from agentscope_context_ext import DEFAULT_MAX_BYTES, truncate_text_output

from ._timing import interleaved_medians

TITLE = "truncation scaling (1, 10, 100 MB)"
MB = 1 << 20
TARGET_RATIO = 12.0


def _make(kind: str, size: int) -> str:
    if kind == "ascii":
        unit = "2026-12-02T10:00:00Z INFO request handled path=/api/v1/items status=200\n"
    elif kind == "chinese":
        unit = "上下文管理让智能体在长时间工作中保持窗口小而有用。\n"
    else:  # one giant line: minified JSON
        unit = '{"id":12345,"name":"item","tags":["a","b"]},'
    per_unit = len(unit.encode("utf-8"))
    return unit * (size // per_unit + 1)


def run(quick: bool = False) -> dict:
    """Measure and return the B5 record for ``bench/results.json``."""
    sizes = (1, 10, 100)
    repeats = 3 if quick else 5
    rows = []
    worst = 0.0
    for kind in ("ascii", "chinese", "giant_line"):
        texts = {f"{mb} MB": _make(kind, mb * MB) for mb in sizes}
        cases = {
            name: (
                lambda t=text: truncate_text_output(
                    t, max_bytes=DEFAULT_MAX_BYTES, file_path="tool_result/x.txt"
                )
            )
            for name, text in texts.items()
        }
        medians = interleaved_medians(cases, repeats)
        ratio_100_10 = medians["100 MB"] / medians["10 MB"]
        ratio_10_1 = medians["10 MB"] / medians["1 MB"]
        worst = max(worst, ratio_100_10)
        rows.append(
            {
                "input": kind,
                "seconds_1mb": round(medians["1 MB"], 5),
                "seconds_10mb": round(medians["10 MB"], 5),
                "seconds_100mb": round(medians["100 MB"], 5),
                "ratio_10mb_1mb": round(ratio_10_1, 2),
                "ratio_100mb_10mb": round(ratio_100_10, 2),
            }
        )
        del texts, cases
    return {
        "id": "B5",
        "what": "truncation scaling",
        "rows": rows,
        "worst_ratio_100mb_10mb": round(worst, 2),
        "target": f"time(100 MB) / time(10 MB) <= {TARGET_RATIO:g}",
        "target_met": worst <= TARGET_RATIO,
    }


def table(record: dict) -> str:
    """Markdown table of a B5 record."""
    lines = [
        "| input | 1 MB (s) | 10 MB (s) | 100 MB (s) | 10/1 | 100/10 |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for row in record["rows"]:
        lines.append(
            f"| {row['input']} | {row['seconds_1mb']:.4f} | {row['seconds_10mb']:.4f} | "
            f"{row['seconds_100mb']:.4f} | {row['ratio_10mb_1mb']:.2f} | {row['ratio_100mb_10mb']:.2f} |"
        )
    return "\n".join(lines)
