"""Experiment (issue 10): two ways to make token budgets as fast as a fixed batch size, measured.

Under a token budget the batch size ``B`` follows a bucket's edge, so the kernel restarts
every start's running sum where ``B`` changes; those restarts dominate its time.

1. **Pruning.**  Could the DP skip the cells that cannot win?  On every ``stride``-th distinct
   length of the bundled data, from the kernel's exact cost matrix, this counts the cells
   ``(i, j)`` within ``delta`` of the best at some layer ``k <= K``
   (``D[k-1][i] + cost(i, j) <= (1 + delta) D[k][j]``).  No bound-based pruning can skip
   those, whatever its bounds.
2. **Tables.**  Segment by segment of constant ``B``, one table of ``C(x, B)`` (where
   ``C(N, B)`` fits float64) turns a restart into a sum over the table and a cell into a
   table ratio, with no ``exp``.  This times that cost pass (restarts from the first length,
   no cutoff) and checks its costs against the kernel's.

Neither is what landed.  Pruning by forward bounds alone leaves too many cells; the kernel
now prunes with bounds from both ends (``_solve_pruned`` in ``analysis/optimize/_budget.py``):
restart-free lower bounds on every bucket, a backward DP over them, and exact costs only
for the buckets that can still be on an optimal plan.

Run from the repository root: ``python benchmarks/experiment_token_budget.py`` (under a minute).
"""

from __future__ import annotations

import importlib
import time

import numba
import numpy as np
from _common import case_histogram

from analysis import BatchRule
from analysis.optimize import _problem as problem

kernel = importlib.import_module("analysis.optimize._kernel")

ratios = importlib.import_module("analysis.optimize._ratios")
K = 6


def near_best_share(max_tokens: int, stride: int, deltas: tuple[float, ...]) -> list[float]:
    """Share of the cells that need a running sum (``n >= B``) within each ``delta`` of the
    best at some layer."""
    prob = problem.build_problem(case_histogram(), BatchRule(max_tokens=max_tokens), 1)
    points = np.r_[0, np.arange(stride, prob.m, stride), prob.m]
    cost = kernel.cost_matrix(prob, points)
    best = np.full((K + 1, points.size), np.inf)
    best[0, 0] = 0.0
    for k in range(1, K + 1):
        best[k] = np.min(best[k - 1][:, None] + cost, axis=0)
    cum = prob.cum[points]
    needs_sum = (cum[None, :] - cum[:, None] >= prob.size[points][None, :]) & np.isfinite(cost)
    shares = []
    for delta in deltas:
        near = np.zeros_like(needs_sum)
        for k in range(1, K + 1):
            with np.errstate(invalid="ignore"):
                near |= best[k - 1][:, None] + cost <= (1 + delta) * best[k][None, :]
        shares.append(float((near & needs_sum).sum() / needs_sum.sum()))
    return shares


@numba.njit(cache=False)
def _table(n_max: int, size: int, out: np.ndarray) -> None:  # pragma: no cover - compiled
    """``C(x, size)`` for ``x = 0..n_max`` by the recurrence in ``x``."""
    out[: min(size, n_max + 1)] = 0.0
    if size <= n_max:
        out[size] = 1.0
        for x in range(size + 1, n_max + 1):
            out[x] = out[x - 1] * x / (x - size)


@numba.njit(cache=False)
def _table_costs(
    cum: np.ndarray, weight: np.ndarray, step: np.ndarray, size: np.ndarray, lo: np.ndarray, hi: np.ndarray
) -> tuple[int, np.ndarray]:  # pragma: no cover - compiled
    """Every bucket cost of the segments ``[lo, hi)`` (restart sums over the table, then table
    ratios); returns the restart terms and each segment's first-end costs by start."""
    n_max = cum[cum.size - 1]
    tab = np.empty(n_max + 1)
    first = np.full((lo.size, cum.size), np.nan)
    terms = 0
    for s in range(lo.size):
        j0, j1, b = lo[s], hi[s], size[lo[s]]
        _table(n_max, b, tab)
        for i in range(j1 - 1):
            ci = cum[i]
            t = 0.0
            j_next = i + 2
            if i + 1 < j0:  # a restart at the segment's first end
                n = cum[j0] - ci
                if n >= b:
                    r = 0.0
                    for k in range(i + 1, j0):
                        r += step[k] * tab[cum[k] - ci]
                    terms += j0 - i - 1
                    t = r / tab[n]
                    first[s, i] = n * (weight[j0] - t)
                else:
                    first[s, i] = n * weight[j0]
                j_next = j0 + 1
            for j in range(j_next, j1):
                n = cum[j] - ci
                below = cum[j - 1] - ci
                t = (t + step[j - 1]) * (tab[below] / tab[n]) if n >= b and below >= b else 0.0
    return terms, first


def table_pass(max_tokens: int, runs: int = 3) -> None:
    prob = problem.build_problem(case_histogram(), BatchRule(max_tokens=max_tokens), 1)
    starts = np.flatnonzero(np.r_[True, prob.size[2:] != prob.size[1:-1]]) + 1  # segments' first ends
    ends = np.r_[starts[1:], prob.m + 1]
    n = int(prob.cum[-1])
    fits = np.array([ratios._log_comb_top(n, int(prob.size[j])) <= ratios._LINEAR_LOG_LIMIT for j in starts])
    lo, hi = starts[fits], ends[fits]
    args = (prob.cum, prob.weight, prob.step, prob.size, lo, hi)
    _table_costs(*args)  # compile
    seconds = []
    for _ in range(runs):
        begin = time.perf_counter()
        terms, first = _table_costs(*args)
        seconds.append(time.perf_counter() - begin)
    worst = 0.0
    for s in range(0, lo.size, max(1, lo.size // 4)):  # a few segments' restarts against the kernel
        rows = np.flatnonzero(np.isfinite(first[s]))[::97]
        points = np.unique(np.r_[rows, lo[s]])
        want = kernel.cost_matrix(prob, points)[:-1, -1]
        worst = max(worst, float(np.max(np.abs(first[s, points[:-1]] / want - 1))))
    print(
        f"  max_tokens {max_tokens:>9,}: {fits.sum()} of {fits.size} segments take a table; their restarts "
        f"{terms / 1e6:.0f} M terms, cost pass {np.median(seconds):.2f} s (median of {runs}); "
        f"largest relative difference from the kernel {worst:.1e}"
    )


def main() -> None:
    deltas = (0.01, 0.05)
    print(f"1. cells within delta of the best at some layer (K = {K}, every 8th distinct length):")
    for max_tokens in (65_536, 1_048_576):
        shares = near_best_share(max_tokens, 8, deltas)
        text = ", ".join(f"{d:.0%}: {s:.0%}" for d, s in zip(deltas, shares, strict=True))
        print(f"  max_tokens {max_tokens:>9,}: {text}")
    print("2. per-segment tables of C(x, B):")
    for max_tokens in (65_536, 131_072, 1_048_576):
        table_pass(max_tokens)


if __name__ == "__main__":
    main()
