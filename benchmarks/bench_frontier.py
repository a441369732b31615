"""Benchmark: the padding-mixing frontier on the bundled data.

Run from the repository root::

    .venv/bin/python benchmarks/bench_frontier.py

On ``data/case_lengths.csv`` (902,087 samples, 8,128 distinct lengths), batch size 8, K <= 32,
prints medians (3 runs after a warm-up) of:

- ``analysis.frontier`` whole (with its simulated strategies) and exact only
  (``simulate_strategies=False``): wall time, and the process's CPU time (the optimal edges'
  DP runs on a second thread beside the frontier's passes and the simulations, so on two free
  cores the wall time is below the CPU time), and whole again pinned to one core;
- its parts: the optimal edges for K = 1..32 (one pruned exact DP pass and the 32 plans), the
  frontier's matrices (every bucket's exact cost and mixing sum between the points of its
  candidate grid, 952 here, built once) and one lambda pass over them (every K at once);
- the DP passes one ``frontier`` call runs (one per lambda, plus the lambda = 0 pass that
  places them: no per-K rerun);
- a floor search (``optimize_edges(K=6, min_efficiency=0.9)``) with its passes.

Goals (issue 34), printed last beside the naive DP's time in the same process (the plain DP of
``analysis.optimize._reference`` over the dense matrix of exact bucket costs, K = 6): ``frontier``
with K <= 32 in <= 1 s on one core, and a floor at K = 6 in <= 1 s.
"""

from __future__ import annotations

import importlib
import os
import time

import numpy as np
from _common import case_histogram, median_seconds

from analysis import frontier, optimize_edges
from analysis.batching import BatchRule
from analysis.optimize import _problem as problem
from analysis.optimize import optimal_plans
from analysis.optimize._reference import reference_dp

RUNS = 3
K = 32
frontier_dp = importlib.import_module("analysis.optimize._frontier")
kernel = importlib.import_module("analysis.optimize._kernel")


def _counting_passes() -> list[float]:
    """Wrap the frontier DP's pass so that each call is recorded (its lambda)."""
    calls: list[float] = []
    original = frontier_dp._pass

    def counted(lag, k_max, lam):  # type: ignore[no-untyped-def]
        calls.append(lam)
        return original(lag, k_max, lam)

    setattr(frontier_dp, "_pass", counted)  # noqa: B010 (a module attribute, replaced)
    return calls


def main() -> None:
    hist = case_histogram()
    rule = BatchRule(batch_size=8)
    print(f"data/case_lengths.csv: {hist.n_samples:,} samples, {hist.n_distinct:,} distinct, {rule.text}")

    def whole() -> object:
        return frontier(hist, rule, rng=np.random.default_rng(0), max_buckets=K)

    def exact() -> object:
        return frontier(hist, rule, rng=np.random.default_rng(0), max_buckets=K, simulate_strategies=False)

    prob = problem.build_problem(hist, rule)
    lag = frontier_dp.lagrangian(hist, prob)
    for name, fn in (("every strategy", whole), ("exact rows only", exact)):
        wall = median_seconds(fn, runs=RUNS)
        cpu = median_seconds(fn, runs=RUNS, clock=time.process_time)
        print(f"frontier(), K <= {K}, {name:<16} median {wall:5.2f} s wall, {cpu:5.2f} s CPU (goal: <= 3 s)")
    cores = os.sched_getaffinity(0)
    if len(cores) > 1:  # the same call with every thread on one core
        os.sched_setaffinity(0, {min(cores)})
        one = median_seconds(whole, runs=RUNS)
        os.sched_setaffinity(0, cores)
        print(f"frontier(), K <= {K}, every strategy, one core: median {one:5.2f} s wall (goal: <= 3 s)")
    t_opt = median_seconds(lambda: optimal_plans(hist, range(1, K + 1), rule), runs=RUNS)
    t_lag = median_seconds(lambda: frontier_dp.lagrangian(hist, prob), runs=RUNS)
    t_pass = median_seconds(lambda: frontier_dp._pass(lag, K, 1e8), runs=RUNS)
    print(f"  optimal edges, K = 1..{K} (one exact DP pass + plans)   median {t_opt:5.2f} s")
    print(f"  the frontier's matrices ({lag.points.size:,} points)          median {t_lag:5.2f} s")
    print(f"  one lambda pass over them (every K at once)        median {t_pass:5.3f} s")
    calls = _counting_passes()
    res = frontier(hist, rule, rng=np.random.default_rng(0), max_buckets=K, simulate_strategies=False)
    per_lambda = len(calls) == len(res.lambdas) + 1
    print(
        f"DP passes in one frontier() call: {len(calls)} for {len(res.lambdas)} lambdas "
        f"({'one per lambda and the lambda = 0 pass' if per_lambda else 'NOT one per lambda'}; "
        f"each gives every K = 1..{K})"
    )
    calls.clear()
    t_floor = median_seconds(lambda: optimize_edges(hist, 6, rule, min_efficiency=0.9), runs=RUNS)
    plan = optimize_edges(hist, 6, rule, min_efficiency=0.9)
    assert plan.floor is not None
    print(
        f"optimize_edges(K=6, min_efficiency=0.9): median {t_floor:.2f} s, {plan.floor.passes} passes, "
        f"mixing {plan.mixing:.4f} (bound {plan.floor.bound:.4f}), efficiency {plan.efficiency:.4f}"
    )
    cores = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {min(cores)})  # the goals: one core, CPU seconds
    points = np.r_[0, prob.ends]
    start = time.process_time()
    reference_dp(kernel.cost_matrix(prob, points), 6)
    naive = time.process_time() - start
    one = median_seconds(exact, runs=RUNS, clock=time.process_time)
    floor = median_seconds(lambda: optimize_edges(hist, 6, rule, min_efficiency=0.9), RUNS, time.process_time)
    os.sched_setaffinity(0, cores)
    print(f"goals, one core, CPU seconds (naive DP, K = 6, in this process: {naive:.2f} s):")
    print(f"  frontier(), K <= {K}, exact rows  goal <= 1 s  median {one:5.2f} s ({naive / one:.1f}x)")
    print(f"  floor min_efficiency=0.9, K = 6  goal <= 1 s  median {floor:5.2f} s ({naive / floor:.1f}x)")


if __name__ == "__main__":
    main()
