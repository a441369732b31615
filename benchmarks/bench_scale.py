"""Optimiser time against the batch rule on the bundled data, beside ``batch_size=8``.

Run from the repository root: ``python benchmarks/bench_scale.py [runs]``.
"""

from __future__ import annotations

import sys

from _common import case_histogram, median_seconds

from analysis.optimize import optimize_edges

RULES = [
    {"batch_size": 8},
    {"batch_size": 10**4},
    {"batch_size": 10**8},
    {"max_tokens": 65_536},
    {"max_tokens": 131_072},
    {"max_tokens": 1_048_576},
    {"max_tokens": 2**24},
]


def main(runs: int = 3) -> None:
    hist = case_histogram()
    base = None
    print(f"optimize_edges(case data, 6 buckets): median of {runs} runs")
    for rule in RULES:
        seconds = median_seconds(lambda rule=rule: optimize_edges(hist, 6, **rule), runs)
        base = seconds if base is None else base
        ((name, value),) = rule.items()
        print(
            f"  {name:<10} {value:>12,}  {seconds:8.3f} s  {seconds / base:6.1f} x batch_size=8", flush=True
        )


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 3)
