"""Benchmark: the padding-mixing frontier on the bundled data.

Run from the repository root::

    .venv/bin/python benchmarks/bench_frontier.py           # everything (about 20 s here)
    .venv/bin/python benchmarks/bench_frontier.py --quick   # the goals and the parts (under a minute)

On ``data/case_lengths.csv`` (902,087 samples, 8,128 distinct lengths), batch size 8, K <= 32,
prints medians (3 runs after a warm-up; CPU seconds with every thread pinned to one core, where
the goals are stated) of:

- ``analysis.frontier`` as it is called by default (exact rows: ``simulate_strategies=False``;
  the Pareto set checked by the Lagrangian bounds of its passes alone, ``floor_checks=0``), and
  its parts: the optimal edges for K = 1..32 (one pruned exact DP pass and the 32 plans), the
  frontier's matrices (every bucket's exact cost and mixing sum between the points of its
  candidate grid, 952 here, built once), one lambda pass over them (every K at once) and the
  plans it evaluates; the DP passes one call runs (each lambda once: the sweep's, the bounds'
  and the lambda = 0 and most-mixing passes that place them) and the pairs (Pareto point, K)
  it leaves open;
- a floor search (``optimize_edges(K=6, min_efficiency=0.9)``) with its passes;
- without ``--quick``: the frontier as the faces run it (``floor_checks=FLOOR_CHECKS``: the
  exact floor search at the pairs the bounds leave open; one run of a few seconds, with the
  median and the most CPU time of one of its floor searches),
  and the whole call with its simulated strategies on two threads (wall and CPU).

Goals (issue 34), printed beside the naive DP's time in the same process (the plain DP of
``analysis.optimize._reference`` over the dense matrix of exact bucket costs, K = 6):
``frontier`` with K <= 32 in <= 1 s on one core, and a floor at K = 6 in <= 1 s.
"""

from __future__ import annotations

import argparse
import importlib
import os
import statistics
import time

import numpy as np
from _common import case_histogram, median_seconds

from analysis import frontier, optimize_edges
from analysis.answers.frontier import FLOOR_CHECKS
from analysis.batching import BatchRule
from analysis.lengths import LengthHistogram
from analysis.optimize import _problem as problem
from analysis.optimize import optimal_plans
from analysis.optimize._reference import reference_dp

RUNS = 3
K = 32
frontier_dp = importlib.import_module("analysis.optimize._frontier")
kernel = importlib.import_module("analysis.optimize._kernel")
plan_module = importlib.import_module("analysis.optimize.plan")


def _counting(module: object, name: str) -> list[object]:
    """Wrap ``module.name`` so that each call is recorded (its first argument after the
    first, or None); returns the list and leaves the wrapper in place."""
    calls: list[object] = []
    original = getattr(module, name)

    def counted(*args, **kwargs):  # type: ignore[no-untyped-def]
        calls.append(args[2] if len(args) > 2 else None)
        return original(*args, **kwargs)

    setattr(module, name, counted)
    return calls


def _timing_searches(module: object) -> list[float]:
    """Wrap ``module.floor_plans`` to run its asks one at a time, each timed (CPU seconds)."""
    original = module.floor_plans  # type: ignore[attr-defined]
    seconds: list[float] = []

    def timed(hist, rule, asks):  # type: ignore[no-untyped-def]
        out = []
        for ask in asks:
            start = time.process_time()
            out += original(hist, rule, [ask])
            seconds.append(time.process_time() - start)
        return out

    module.floor_plans = timed  # type: ignore[attr-defined]
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="the goals and the parts only")
    quick = parser.parse_args().quick
    hist = case_histogram()
    rule = BatchRule(batch_size=8)
    print(f"data/case_lengths.csv: {hist.n_samples:,} samples, {hist.n_distinct:,} distinct, {rule.text}")

    def exact(checks: int = 0) -> object:
        return frontier(
            hist,
            rule,
            rng=np.random.default_rng(0),
            max_buckets=K,
            simulate_strategies=False,
            floor_checks=checks,
        )

    def whole() -> object:
        return frontier(hist, rule, rng=np.random.default_rng(0), max_buckets=K)

    cores = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {min(cores)})  # one core, CPU seconds: the goals and the parts
    prob = problem.build_problem(hist, rule)
    points = np.r_[0, prob.ends]
    kernel.cost_matrix(prob, points[:8])  # (compiled first: a new numba cache holds none)
    start = time.process_time()
    reference_dp(kernel.cost_matrix(prob, points), 6)
    naive = time.process_time() - start
    cpu = time.process_time
    one = median_seconds(exact, RUNS, cpu)
    floor = median_seconds(lambda: optimize_edges(hist, 6, rule, min_efficiency=0.9), RUNS, cpu)
    lag = frontier_dp.lagrangian(hist, prob)
    t_opt = median_seconds(lambda: optimal_plans(hist, range(1, K + 1), rule), RUNS, cpu)
    t_lag = median_seconds(lambda: frontier_dp.lagrangian(hist, prob), RUNS, cpu)
    t_pass = median_seconds(lambda: frontier_dp._new_pass(lag, K, 1e8), RUNS, cpu)
    edges = optimal_plans(hist, [K], rule)[K].edges
    t_plan = median_seconds(lambda: plan_module.make_plan(hist, prob, edges, "optimal", K), 20, cpu)
    passes = _counting(frontier_dp, "_new_pass")
    plans = _counting(plan_module, "bucketed_estimate")  # once per make_plan
    res = exact()
    print(f"frontier(), K <= {K}, exact rows, floor_checks=0 (the default), one core:")
    print(f"  optimal edges, K = 1..{K} (one exact DP pass + plans)  median {t_opt:5.2f} s CPU")
    print(f"  the frontier's matrices ({lag.points.size:,} points)         median {t_lag:5.2f} s CPU")
    print(f"  one lambda pass over them (every K at once)       median {t_pass:5.3f} s CPU")
    print(f"  one plan evaluated (make_plan, K = {K})            median {t_plan * 1e3:5.1f} ms CPU")
    print(
        f"  in one call: {len(passes)} DP passes (each lambda once: {len(res.lambdas)} of the sweep, the "
        f"bounds' and the two that place them), {len(plans)} plans evaluated (optimal edges included), "
        f"{len(res.frame)} rows; pairs (Pareto point, K) the bounds leave open: {res.unchecked:,}, "
        f"{len(res.unproven)} points named unproven"
    )
    if not quick:
        passes.clear(), plans.clear()
        searches = _timing_searches(importlib.import_module("analysis.answers.frontier"))
        start = time.process_time()
        checked = exact(FLOOR_CHECKS)
        t_checked = time.process_time() - start
        print(
            f"frontier(), K <= {K}, exact rows, floor_checks={FLOOR_CHECKS} (the faces'), one core, one run: "
            f"{t_checked:5.2f} s CPU, {len(passes)} DP passes, {len(plans)} plans evaluated; pairs left open "
            f"{checked.unchecked:,}, {len(checked.unproven)} points named unproven; "
            f"its {len(searches)} floor searches: median {statistics.median(searches):.3f} s, "
            f"most {max(searches):.3f} s CPU each"
        )
    os.sched_setaffinity(0, cores)
    if not quick:  # the whole call, its simulations included, two threads where two cores are free
        wall = median_seconds(whole, runs=RUNS)
        both = median_seconds(whole, runs=RUNS, clock=time.process_time)
        print(f"frontier(), K <= {K}, every strategy: median {wall:5.2f} s wall, {both:5.2f} s CPU")
    plan = optimize_edges(hist, 6, rule, min_efficiency=0.9)
    assert plan.floor is not None
    print(
        f"optimize_edges(K=6, min_efficiency=0.9): {plan.floor.passes} passes, mixing {plan.mixing:.4f} "
        f"(bound {plan.floor.bound:.4f}), efficiency {plan.efficiency:.4f}"
    )
    print(f"goals, one core, CPU seconds (naive DP, K = 6, in this process: {naive:.2f} s):")
    print(f"  frontier(), K <= {K}, exact rows  goal <= 1 s  median {one:5.2f} s ({naive / one:.1f}x)")
    print(f"  floor min_efficiency=0.9, K = 6  goal <= 1 s  median {floor:5.2f} s ({naive / floor:.1f}x)")
    _under_budgets(hist)


def _under_budgets(hist: LengthHistogram) -> None:
    """The same two calls under token budgets (the goals are stated at batch size 8; printed so
    that a budget's cost is seen, not assumed): one core, CPU seconds, median of RUNS."""
    os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    print("under token budgets, one core, CPU seconds (no goal stated; the frontier's matrices dominate):")
    for budget in (16_384, 65_536):
        rule = BatchRule(max_tokens=budget)
        cpu = time.process_time

        def run(r: BatchRule = rule) -> object:
            return frontier(hist, r, rng=np.random.default_rng(0), max_buckets=K, simulate_strategies=False)

        one = median_seconds(run, RUNS, cpu)
        floor = median_seconds(lambda r=rule: optimize_edges(hist, 6, r, min_mixing=0.3), RUNS, cpu)
        prob = problem.build_problem(hist, rule)
        lag = median_seconds(lambda p=prob: frontier_dp.lagrangian(hist, p), RUNS, cpu)
        print(
            f"  max_tokens {budget:,}: frontier(), K <= {K} median {one:5.2f} s (its matrices {lag:5.2f} s); "
            f"floor min_mixing=0.3, K = 6 median {floor:5.2f} s"
        )


if __name__ == "__main__":
    main()
