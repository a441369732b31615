"""Benchmark: the padding-mixing frontier on the bundled data.

Run from the repository root::

    .venv/bin/python benchmarks/bench_frontier.py

On ``data/case_lengths.csv`` (902,087 samples, 8,128 distinct lengths), batch size 8, K <= 32:
prints the median wall time (3 runs after a warm-up) of ``analysis.frontier`` whole (with its
simulated strategies) and exact only (``simulate_strategies=False``), of one padding DP pass
(``sweep_bucket_counts``, K = 1..32) beside one lambda pass of the frontier DP, the DP passes a
``frontier`` call runs (one per lambda: no per-K rerun), and a floor search
(``optimize_edges(K=6, min_efficiency=0.9)``) with its passes.  Goal: ``frontier`` <= 3 s.
"""

from __future__ import annotations

import importlib

import numpy as np
from _common import case_histogram, median_seconds

from analysis import frontier, optimize_edges, sweep_bucket_counts
from analysis.batching import BatchRule
from analysis.optimize import frontier_plans

RUNS = 3
K = 32
frontier_dp = importlib.import_module("analysis.optimize._frontier")


def _counting_passes() -> list[float]:
    """Wrap the frontier DP's pass so that each call is recorded (its lambda)."""
    calls: list[float] = []
    original = frontier_dp._pass

    def counted(lag, k_max, lam):  # type: ignore[no-untyped-def]
        calls.append(lam)
        return original(lag, k_max, lam)

    frontier_dp._pass = counted
    return calls


def main() -> None:
    hist = case_histogram()
    rule = BatchRule(batch_size=8)
    print(f"data/case_lengths.csv: {hist.n_samples:,} samples, {hist.n_distinct:,} distinct, {rule.text}")

    def whole() -> object:
        return frontier(hist, rule, rng=np.random.default_rng(0), n_buckets=K)

    def exact() -> object:
        return frontier(hist, rule, rng=np.random.default_rng(0), n_buckets=K, simulate_strategies=False)

    t_whole = median_seconds(whole, runs=RUNS)
    t_exact = median_seconds(exact, runs=RUNS)
    t_dp = median_seconds(lambda: sweep_bucket_counts(hist, range(1, K + 1), ["optimal"], rule), runs=RUNS)
    t_lam = median_seconds(lambda: frontier_plans(hist, rule, K, [1e8]), runs=RUNS)
    print(f"frontier(), K <= {K}, every strategy     median {t_whole:6.2f} s   (goal <= 3 s)")
    print(f"frontier(), K <= {K}, exact rows only    median {t_exact:6.2f} s")
    print(f"one padding DP pass (K = 1..{K})          median {t_dp:6.2f} s")
    print(f"one lambda pass of the frontier DP + plans median {t_lam:6.2f} s")
    calls = _counting_passes()
    res = frontier(hist, rule, rng=np.random.default_rng(0), n_buckets=K, simulate_strategies=False)
    print(
        f"DP passes in one frontier() call: {len(calls)} for {len(res.lambdas)} lambdas "
        f"({'one per lambda' if len(calls) == len(res.lambdas) else 'NOT one per lambda'}; "
        f"each gives every K = 1..{K})"
    )
    calls.clear()
    t_floor = median_seconds(lambda: optimize_edges(hist, 6, rule, min_efficiency=0.9), runs=1)
    plan = optimize_edges(hist, 6, rule, min_efficiency=0.9)
    assert plan.floor is not None
    print(
        f"optimize_edges(K=6, min_efficiency=0.9): {t_floor:.2f} s, {plan.floor.passes} passes, "
        f"mixing {plan.mixing:.4f} (bound {plan.floor.bound:.4f}), efficiency {plan.efficiency:.4f}"
    )


if __name__ == "__main__":
    main()
