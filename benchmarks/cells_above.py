"""How much of the exact DP's triangle of buckets no optimal plan can use (not a timing).

Run from the repository root (seconds: the dense matrices of exact costs)::

    PYTHONPATH=. .venv/bin/python benchmarks/cells_above.py
    PYTHONPATH=. .venv/bin/python benchmarks/cells_above.py --k 6 --rules batch_size=8 max_tokens=16384
    PYTHONPATH=. .venv/bin/python benchmarks/cells_above.py --data data/case_lengths.csv --rules batch_size=8

For each file of ``../shared/data`` (unclipped; or the files of ``--data``: the bundled data's
dense matrix takes half a gigabyte) and each rule: the share of the buckets ``(i, j]``
(every pair of distinct lengths) whose exact cost alone is above the optimum of ``K`` buckets,
so that no plan of ``K`` buckets at least as good holds them, and the share of rows whose costs
never fall as ``j`` grows (where they do not, those buckets are a suffix of each row: a pass
over the ends could stop there).  This is the most that cutting the backward pass's rows at an
upper bound could save: its bounds lie below the exact costs, so they rule out fewer.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
from _common import SHARED_DATA

from analysis.batching import BatchRule
from analysis.loaders import load_lengths
from analysis.optimize._kernel import cost_matrix, solve_kernel
from analysis.optimize._problem import build_problem

_RULES = ("batch_size=8", "batch_size=100", "max_tokens=16384")


def shares(matrix: np.ndarray, optimum: float) -> tuple[float, float]:
    """The share of the upper triangle of ``matrix`` above ``optimum``, and the share of its
    rows that never fall."""
    m = matrix.shape[0] - 1
    above = cells = rising = 0
    for i in range(m):
        row = matrix[i, i + 1 :]
        above += int((row > optimum).sum())
        cells += row.size
        rising += bool(np.all(np.diff(row) >= 0.0))
    return above / cells, rising / m


def rule_of(text: str) -> BatchRule:
    """``batch_size=8`` or ``max_tokens=16384`` as its rule."""
    key, _, value = text.partition("=")
    if key not in ("batch_size", "max_tokens") or not value.isdigit():
        sys.exit(f"cells_above: a rule is batch_size=N or max_tokens=N, got {text!r}")
    return BatchRule(**{key: int(value)})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--k", type=int, default=6, help="buckets (default 6)")
    parser.add_argument("--rules", nargs="+", default=list(_RULES), help="batch_size=N or max_tokens=N")
    parser.add_argument("--data", nargs="+", type=Path, help="lengths files (default: ../shared/data)")
    args = parser.parse_args()
    files = args.data or sorted(SHARED_DATA.glob("*.npy"))
    if not files:
        sys.exit(f"cells_above: no data in {SHARED_DATA}")
    print(f"{'file':<24} {'rule':<18} {'lengths':>8} {'above K=' + str(args.k):>10} {'rows rising':>12}")
    for path in files:
        try:
            hist = load_lengths(path)
        except (OSError, ValueError) as err:
            sys.exit(f"cells_above: {err}")
        for text in args.rules:
            prob = build_problem(hist, rule_of(text))
            best, _ = solve_kernel(prob, args.k, prob.ends)
            matrix = cost_matrix(prob, np.arange(prob.m + 1))
            above, rising = shares(matrix, float(best[args.k, prob.m]))
            print(f"{path.stem[:24]:<24} {text:<18} {prob.m:8d} {above:10.1%} {rising:12.1%}")


if __name__ == "__main__":
    main()
