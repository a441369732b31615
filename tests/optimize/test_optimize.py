"""Tests for analysis.optimize: the DP against exhaustive search in exact rational arithmetic,
the baselines against the field's own formulas, constraints, sweeps and argument checks."""

from __future__ import annotations

import importlib
import itertools
import json
import math
import os
import subprocess
import sys
import textwrap
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import analysis.optimize as opt
from analysis import (
    BatchRule,
    LengthHistogram,
    StepTimeModel,
    evaluate_edges,
    optimize_edges,
    sweep_bucket_counts,
)
from analysis.case import CASE_GEOMETRIC_EDGES
from analysis.optimize import _problem as problem
from analysis.optimize import recommend_n_buckets
from analysis.optimize._reference import reference_dp

# the private modules (``analysis.optimize._problem`` is also the name of a function there)
kernel = importlib.import_module("analysis.optimize._kernel")

ratio_tables = importlib.import_module("analysis.optimize._ratios")
costs_module = importlib.import_module("analysis.optimize._costs")
budget = importlib.import_module("analysis.optimize._budget")
exact_module = importlib.import_module("analysis.optimize._exact")
lower_module = importlib.import_module("analysis.optimize._lower")
cells_module = importlib.import_module("analysis.optimize._cells")

BASELINES = ("geometric", "equal_count", "equal_tokens", "greedy")


# ------------------------------------------------------------------ exact reference objective
def exact_objective(lengths, counts, edges, *, batch_size=None, max_tokens=None, pad=1) -> Fraction:
    """The optimiser's objective in exact rationals: the expected padded tokens, each
    bucket's last short batch as it is (:func:`exact_padded`)."""
    return exact_padded(lengths, counts, edges, batch_size=batch_size, max_tokens=max_tokens, pad=pad)


def full_batch_objective(lengths, counts, edges, *, batch_size=None, max_tokens=None, pad=1) -> Fraction:
    """The full-batch objective (each bucket's last short batch counted as a full one;
    ``full_batch_matrix``'s costs) in exact rationals:
    n * sum_v g(v) P(max = v) with P(max <= v) = C(c(v), B) / C(n, B), or n * g(longest)."""
    total = Fraction(0)
    for lo, hi in zip(edges[:-1], edges[1:], strict=False):
        inside = [(v, c) for v, c in zip(lengths, counts, strict=False) if lo < v <= hi]
        if not inside:
            continue
        b = batch_size if batch_size is not None else max(1, max_tokens // (-(-hi // pad) * pad))

        def g(v):
            return Fraction(-(-v // pad) * pad)

        n = sum(c for _, c in inside)
        if n < b:
            total += n * g(inside[-1][0])
            continue
        below, prev, expect = 0, 0, Fraction(0)
        for v, c in inside:
            below += c
            now = math.comb(below, b)
            expect += g(v) * (now - prev)
            prev = now
        total += n * expect / math.comb(n, b)
    return total


def exact_padded(lengths, counts, edges, *, batch_size=None, max_tokens=None, pad=1) -> Fraction:
    """Expected padded tokens of an epoch in exact rationals: per bucket, floor(n / B) full
    batches of E[g(max of B)] and r = n mod B samples of E[g(max of r)] (C(c(v), .) / C(n, .))."""
    total = Fraction(0)
    for lo, hi in zip(edges[:-1], edges[1:], strict=False):
        inside = [(v, c) for v, c in zip(lengths, counts, strict=False) if lo < v <= hi]
        if not inside:
            continue
        b = batch_size if batch_size is not None else max(1, max_tokens // (-(-hi // pad) * pad))
        n = sum(c for _, c in inside)

        def e_max(size, inside=inside, n=n):
            below, prev, expect = 0, 0, Fraction(0)
            for v, c in inside:
                below += c
                now = math.comb(below, size)
                expect += (-(-v // pad) * pad) * (now - prev)
                prev = now
            return expect / math.comb(n, size)

        full, rest = divmod(n, b)
        if full:
            total += full * b * e_max(b)
        if rest:
            total += rest * e_max(rest)
    return total


def all_edge_sets(lengths, k, top, allowed=None):
    """Every placement of k buckets with edges at observed lengths (or ``allowed`` values)."""
    cands = sorted(set(allowed if allowed is not None else lengths[:-1]))
    cands = [e for e in cands if lengths[0] <= e < lengths[-1]]
    for cut in itertools.combinations(cands, k - 1):
        yield [0, *cut, top]


def assert_optimal_as_exhaustive_search(lengths, counts, **batch) -> None:
    """``optimize_edges`` reaches the exhaustive optimum for every K up to 4 (rel 1e-12)."""
    hist = LengthHistogram.from_counts(lengths, counts)
    for k in range(1, min(4, len(lengths)) + 1):
        best = min(
            exact_objective(lengths, counts, e, **batch) for e in all_edge_sets(lengths, k, lengths[-1])
        )
        plan = optimize_edges(hist, k, **padding(batch))
        got = exact_objective(lengths, counts, plan.edges, **batch)
        assert float(abs(got - best) / best) <= 1e-12


def padding(batch: dict) -> dict:
    """``batch`` with the padding objective (a token budget's default is the steps one)."""
    return {**batch, "objective": "padding"} if "max_tokens" in batch else batch


def random_hist(rng, max_distinct=8, max_len=40, max_count=12):
    m = int(rng.integers(1, max_distinct + 1))
    lengths = sorted(rng.choice(np.arange(1, max_len), m, replace=False).tolist())
    counts = rng.integers(1, max_count + 1, m).tolist()
    return lengths, counts


def rule(case: int, rng) -> dict:
    if case % 2 == 0:
        return {"batch_size": int(rng.integers(1, 7))}
    return {"max_tokens": int(rng.integers(10, 120))}


# -------------------------------------------------------------------- the optimum is optimal
@pytest.mark.parametrize("seed", range(24))
def test_optimal_equals_exhaustive_search(seed):
    rng = np.random.default_rng(seed)
    lengths, counts = random_hist(rng)
    hist = LengthHistogram.from_counts(lengths, counts)
    batch = rule(seed, rng)
    pad = [1, 4][seed % 3 == 0]
    for k in range(1, min(4, len(lengths)) + 1):
        best = min(
            exact_objective(lengths, counts, e, pad=pad, **batch)
            for e in all_edge_sets(lengths, k, lengths[-1])
        )
        plan = optimize_edges(hist, k, pad_to_multiple_of=pad, **padding(batch))
        got = exact_objective(lengths, counts, plan.edges, pad=pad, **batch)
        assert plan.n_buckets == k
        assert float(abs(got - best) / best) <= 1e-12
        assert plan.objective == pytest.approx(float(best), rel=1e-12)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("ratios", ["log_table", "stirling"])
def test_log_ratios_give_the_same_optimum(seed, ratios, monkeypatch):
    """Force the ratios C(a, B) / C(b, B) from the double-double table of log x! (or from
    Stirling's series, no table at all): still the exhaustive optimum."""
    monkeypatch.setattr(ratio_tables, "_LINEAR_LOG_LIMIT", -1.0)
    if ratios == "stirling":
        monkeypatch.setattr(ratio_tables, "_TABLE_MAX", 3)
    rng = np.random.default_rng(100 + seed)
    lengths, counts = random_hist(rng, max_distinct=9)
    assert_optimal_as_exhaustive_search(lengths, counts, **rule(seed, rng))


@pytest.mark.parametrize("seed", range(4))
def test_the_three_ways_to_ratios_agree_on_every_dp_cell(seed, monkeypatch):
    """The product formula, the log x! table and Stirling's series give the same exact DP
    tables (every bucket costed: to 1e-12 relative) and plans of the optimal objective (exact
    rationals), on 90 distinct lengths."""
    rng = np.random.default_rng(300 + seed)
    lengths = np.sort(rng.choice(np.arange(1, 400), 90, replace=False))
    counts = np.where(rng.random(90) < 0.4, 1, rng.integers(1, 40, 90))
    hist = LengthHistogram.from_counts(lengths, counts)
    prob = problem.build_problem(hist, BatchRule(batch_size=int(rng.integers(1, 12))), 1)
    assert ratio_tables.comb_applies(prob)  # C(x, B) by the product formula
    best, arg = kernel.solve_kernel(prob, 4, prob.ends, dense=True)
    for table_max in (ratio_tables._TABLE_MAX, 3):
        monkeypatch.setattr(ratio_tables, "_LINEAR_LOG_LIMIT", -1.0)
        monkeypatch.setattr(ratio_tables, "_TABLE_MAX", table_max)
        assert ratio_tables.build_ratio_tables(prob)[0].size == 0
        got_best, got_arg = kernel.solve_kernel(prob, 4, prob.ends, dense=True)
        finite = np.isfinite(best)
        assert np.array_equal(np.isfinite(got_best), finite)
        # Stirling's series for log(b!/a!) (huge histograms only) is good to ~1e-11
        np.testing.assert_allclose(got_best[finite], best[finite], rtol=1e-12 if table_max > 3 else 1e-10)
        for k in range(1, 5):  # each path's plan has the optimal objective (ties may differ)
            edges = [0, *(int(prob.upper[j]) for j in kernel.backtrack(got_arg, k, prob.m))]
            got = float(
                exact_objective(lengths.tolist(), counts.tolist(), edges, batch_size=prob.rule.batch_size)
            )
            assert got == pytest.approx(best[k, prob.m], rel=1e-12)


@pytest.mark.parametrize("seed", range(3))
def test_token_budget_costs_equal_exact_rationals_on_many_lengths(seed):
    """Under a token budget each change of B restarts every start's running sum from where its
    terms fall below 2**-70: on 160 lengths with counts up to 400 (buckets of thousands of
    samples, B from 2 to 300, so the restarts do skip terms) every bucket cost of the kernel
    equals the exact rational objective (math.comb) to 1e-10: each ratio C(a, B) / C(b, B)
    sums b - a rounded logarithms (or multiplies b - a factors), ~(b - a) 2**-53 each."""
    rng = np.random.default_rng(900 + seed)
    lengths = np.sort(rng.choice(np.arange(2, 600), 160, replace=False))
    counts = rng.integers(1, 400, lengths.size)
    hist = LengthHistogram.from_counts(lengths, counts)
    rule = BatchRule(max_tokens=int(rng.integers(600, 1200)))
    prob = problem.build_problem(hist, rule, 1)
    points = np.r_[0, np.sort(rng.choice(np.arange(1, prob.m), 11, replace=False)), prob.m]
    mat = kernel.full_batch_matrix(prob, points)
    ls, cs = lengths.tolist(), counts.tolist()
    for a, b in itertools.combinations(range(points.size), 2):
        lo = 0 if points[a] == 0 else ls[points[a] - 1]
        hi = ls[points[b] - 1]
        inside = [(v, c) for v, c in zip(ls, cs) if lo < v <= hi]
        want = full_batch_objective(
            [v for v, _ in inside], [c for _, c in inside], [0, hi], max_tokens=rule.max_tokens
        )
        assert mat[a, b] == pytest.approx(float(want), rel=1e-10)


def test_the_threaded_dp_runs_from_two_python_threads_at_once():
    """numba's workqueue threading layer (the one every machine has) aborts the process when
    two Python threads enter parallel code together, as when the explorer optimises in the
    background while a cell optimises too: a token budget's table of bounds (on every thread)
    takes a lock.  Run in a process of its own with that layer forced, on a table large enough
    to run on threads; three threads get the same tables as one call."""
    code = textwrap.dedent(
        """
        import importlib, threading
        import numpy as np
        from analysis import BatchRule, LengthHistogram
        kernel = importlib.import_module("analysis.optimize._kernel")
        from analysis.optimize import _problem as problem
        hist = LengthHistogram.from_lengths(np.random.default_rng(5).integers(1, 3_000, 40_000))
        prob = problem.build_problem(hist, BatchRule(max_tokens=8_192), 1)
        from analysis.optimize import _budget, _exact
        data, _ = _exact.exact_arrays(prob)
        starts = _budget.table_starts(data, _budget.BOUND_STRIDE)  # large enough for threads
        assert _budget.filled_cells(starts, prob.m) >= _budget.THREADED_CELLS
        want = kernel.solve_kernel(prob, 6, prob.ends)
        got = []
        solve = lambda: got.append(kernel.solve_kernel(prob, 6, prob.ends))
        threads = [threading.Thread(target=solve) for _ in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(got) == 3
        assert all(np.array_equal(b, want[0]) and np.array_equal(a, want[1]) for b, a in got)
        import numba
        print(numba.threading_layer())
        """
    )
    env = {**os.environ, "NUMBA_THREADING_LAYER": "workqueue", "NUMBA_NUM_THREADS": "2"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["workqueue"]


@pytest.mark.parametrize(
    ("batch", "n_lengths", "stride"),
    [
        ({"batch_size": 8}, 400, 1),  # C(x, B) by the product formula
        ({"batch_size": 1}, 300, 1),  # no padding at all: every cell ties
        ({"batch_size": 3}, 500, 7),  # candidate ends only (every 7th)
        ({"batch_size": 100}, 300, 1),  # ratios from log x!
        ({"max_tokens": 4_000}, 350, 1),  # B follows the end: restarts
        ({"max_tokens": 4_000, "step_time": True}, 300, 1),  # time, with a working set
    ],
)
def test_exact_dp_equals_the_plain_dp_over_the_cost_matrix(batch, n_lengths, stride):
    """The kernel's exact DP gives the tables of the plain DP (``_reference``) over the same
    bucket costs: with every bucket costed (``dense``) the same floats in every reachable cell
    and the same (smallest) start on every tie; pruned, the same optimum and path for every
    bucket count."""
    batch = dict(batch)
    model = StepTimeModel(per_step=0.1, per_token=1e-3, attention=1e-6, working_set=1e-9)
    step_time = model if batch.pop("step_time", False) else None
    rng = np.random.default_rng(n_lengths)
    lengths = np.sort(rng.choice(np.arange(1, 6_000), n_lengths, replace=False))
    counts = rng.integers(1, 30, n_lengths)
    if "batch_size" in batch and batch["batch_size"] == 1:
        counts[:] = 1
    hist = LengthHistogram.from_counts(lengths, counts)
    prob = problem.build_problem(hist, BatchRule(**batch), 1, step_time)
    assert prob.weight2.any() == (step_time is not None and "max_tokens" in batch)
    ends = prob.ends[stride - 1 :: stride] if stride > 1 else prob.ends
    ends = np.unique(np.r_[ends, prob.m])
    points = np.r_[0, ends]
    k_max = 5
    best, arg = kernel.solve_kernel(prob, k_max, ends, dense=True)
    pruned_best, pruned_arg = kernel.solve_kernel(prob, k_max, ends)
    ref_best, ref_arg = reference_dp(kernel.cost_matrix(prob, points), k_max)
    for k in range(1, k_max + 1):
        got = best[k, points]
        want = ref_best[k]
        reach = np.isfinite(want)
        assert np.array_equal(np.isfinite(got), reach)
        assert np.array_equal(got[reach], want[reach])
        assert np.array_equal(arg[k, points][reach], points[ref_arg[k][reach]])
        assert pruned_best[k, prob.m] == want[-1]
        assert kernel.backtrack(pruned_arg, k, prob.m) == kernel.backtrack(arg, k, prob.m)
        one_best, one_arg = kernel.solve_kernel(prob, k_max, ends, wanted=[k])  # this count alone
        assert one_best[k, prob.m] == want[-1]
        assert kernel.backtrack(one_arg, k, prob.m) == kernel.backtrack(arg, k, prob.m)


@pytest.mark.parametrize(
    ("batch", "seed"), [({"batch_size": 1000}, 0), ({"batch_size": 64}, 1), ({"max_tokens": 2**15}, 2)]
)
def test_a_dp_asked_for_one_bucket_count_follows_fewer_plans_and_gives_its_dense_optimum(batch, seed):
    """Heavy-tailed lengths (a log-normal body and a tail to 16k tokens, as a chat corpus), the
    short batches far from full ones: asked for K = 6 alone, the pruned DP gives the dense
    DP's optimum and plan for it, and costs fewer buckets than asked for every count up to 6
    (where the bounds are loose for two to four buckets, those counts widen every row)."""
    rng = np.random.default_rng(seed)
    samples = np.clip(rng.lognormal(np.log(600), 1.1, 30_000), 1, 16_000).astype(np.int64)
    samples = -(-samples // 16) * 16  # (at most 1,000 distinct lengths: the dense DP in a second)
    prob = problem.build_problem(LengthHistogram.from_lengths(samples), BatchRule(**batch))
    dense_best, dense_arg = kernel.solve_kernel(prob, 6, prob.ends, dense=True)
    every_best, _ = kernel.solve_kernel(prob, 6, prob.ends)
    best, arg = kernel.solve_kernel(prob, 6, prob.ends, wanted=[6])
    assert best[6, prob.m] == dense_best[6, prob.m]
    assert kernel.backtrack(arg, 6, prob.m) == kernel.backtrack(dense_arg, 6, prob.m)
    # cells reached (finite) in the layers below 6: fewer plans followed
    assert np.isfinite(best[1:6]).sum() < np.isfinite(every_best[1:6]).sum()


@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_any_bucket_counts_asked_for_get_the_dense_optimum_under_any_rule(data):
    """Property over random heavy-tailed histograms (2 to 120 lengths up to 40,000, many of one
    sample), every kind of rule (batch sizes 1 to 5,000 on both sides of the product formula
    and the power bound, token budgets with and without ``pad_to_multiple_of``) and any subset
    of the bucket counts up to 8: each count asked for gets the dense DP's optimum and plan."""
    m = data.draw(st.integers(2, 120))
    lengths = sorted(data.draw(st.sets(st.integers(1, 40_000), min_size=m, max_size=m)))
    counts = data.draw(st.lists(st.sampled_from([1, 1, 2, 7, 30, 400, 3_000]), min_size=m, max_size=m))
    rule = data.draw(
        st.sampled_from(
            [BatchRule(batch_size=b) for b in (1, 2, 8, 16, 64, 65, 1_000, 5_000)]
            + [
                BatchRule(max_tokens=lengths[-1] * 3),
                BatchRule(max_tokens=-(-lengths[-1] * 9 // 64) * 64, pad_to_multiple_of=64),
            ]
        )
    )
    prob = problem.build_problem(LengthHistogram.from_counts(lengths, counts), rule)
    k_max = min(8, prob.ends.size)
    wanted = sorted(data.draw(st.sets(st.integers(1, k_max), min_size=1, max_size=3)))
    dense_best, dense_arg = kernel.solve_kernel(prob, k_max, prob.ends, dense=True)
    best, arg = kernel.solve_kernel(prob, k_max, prob.ends, wanted=wanted)
    for k in wanted:
        assert best[k, prob.m] == dense_best[k, prob.m]
        assert kernel.backtrack(arg, k, prob.m) == kernel.backtrack(dense_arg, k, prob.m)


# --------------------------------------------------- token budgets: the pruned DP's bounds
def _token_problem(seed: int, n_lengths: int, time: bool, multiple: int = 1, factor: float | None = None):
    """Random lengths with counts from 1 to 400 and a budget of 2 to ~300 longest samples
    (``factor`` times the longest where given: below 2, batches of one)."""
    rng = np.random.default_rng(seed)
    lengths = np.sort(rng.choice(np.arange(1, 9_000), n_lengths, replace=False))
    counts = np.where(rng.random(n_lengths) < 0.3, 1, rng.integers(1, 400, n_lengths))
    hist = LengthHistogram.from_counts(lengths, counts)
    max_tokens = int(lengths[-1] * (rng.choice([2, 7, 40, 300]) if factor is None else factor))
    model = StepTimeModel(per_step=0.05, per_token=1e-3, attention=1e-7, working_set=1e-11) if time else None
    return problem.build_problem(hist, BatchRule(max_tokens=max_tokens), multiple, model)


@pytest.mark.parametrize(
    ("seed", "n_lengths", "time", "multiple", "stride", "factor"),
    [
        (0, 400, False, 1, 4, None),
        (1, 700, False, 1, 32, None),
        (2, 500, True, 1, 8, None),  # seconds, per step and a working set: the second sum
        (3, 600, False, 8, 16, None),  # edges at multiples of 8
        (4, 300, True, 1, 1, None),
        (5, 600, False, 1, 32, 0.6),  # batches of one, some samples over the budget
        (6, 500, True, 1, 16, 1.5),
    ],
)
def test_pruned_bounds_never_exceed_a_bucket_cost(seed, n_lengths, time, multiple, stride, factor):
    """The bounds the pruned DP rules buckets out with (``budget_row``, what ``low_costs``
    gives under a token budget): for every start ``i`` and end ``j``, the bound from the
    table's row at or below ``i`` (sums under batch sizes lowered to rungs) is at most the
    kernel's exact cost of ``(i, j]``, and below a full batch it is that cost, in batches of
    one that cost less its margins; they are also close (within 2 % on buckets of many
    batches), or nothing would be pruned.  The table is the same on every thread as on one."""
    prob = _token_problem(seed, n_lengths, time, multiple, factor)
    data, short = exact_module.exact_arrays(prob)
    two = bool(prob.weight2.any())
    assert two == time
    rung = budget._rungs(prob.size, budget.rung_factor(data, prob.objective))
    starts = budget.table_starts(data, stride)
    t_up, t2_up = budget._bound_table(data, rung, starts, two, threaded=False)
    assert t2_up.shape[0] == (t_up.shape[0] if two else 0)
    threaded = budget._bound_table(data, rung, starts, two, threaded=True)  # rows dealt in turn
    assert np.array_equal(threaded[0], t_up) and np.array_equal(threaded[1], t2_up)
    points = np.arange(prob.m + 1)
    exact = kernel.cost_matrix(prob, points)
    is_end = np.ones(prob.m + 1, np.bool_)  # every end, as the matrix has them
    low = np.empty(prob.m + 1)
    count, batch = prob.cum.astype(float), prob.size.astype(float)
    row_of = budget.row_index(starts, prob.m)
    bounds = budget.BudgetBounds(count, batch, t_up, t2_up, stride, *budget._mass(data), row_of)
    built = budget.budget_bounds(data, stride, objective=prob.objective)  # what the pruned DP builds
    assert built.stride == stride and all(np.array_equal(a, b) for a, b in zip(built[:4], bounds[:4]))
    assert np.array_equal(built.row_of, bounds.row_of)
    assert (prob.size == 1).any() == (factor is not None)
    close = []
    for i in range(prob.m):
        lower_module.budget_row(i, data, short, bounds, is_end, low, low[:0])
        row = exact[i, i + 1 :]
        bound = low[i + 1 :]
        assert np.array_equal(np.isfinite(bound), np.isfinite(row))
        finite = np.isfinite(row)
        assert np.all(bound[finite] <= row[finite])
        n = prob.cum[i + 1 :] - prob.cum[i]
        short_batch = finite & (n < prob.size[i + 1 :])
        assert np.array_equal(bound[short_batch], row[short_batch])
        ones = finite & (prob.size[i + 1 :] == 1)
        margin = budget.SLACK * n * (prob.weight + prob.weight2)[i + 1 :] + bounds.mass_err
        assert np.all(bound[ones] >= row[ones] * (1 - 2e-9) - 2 * margin[ones])
        many = finite & (n >= 8 * prob.size[i + 1 :]) & (prob.size[i + 1 :] != 1)
        close.extend((bound[many] / row[many]).tolist())
    assert factor is not None or (close and min(close) > 0.98)  # (a few draws: the stride shows)


@pytest.mark.parametrize(
    ("seed", "n_lengths", "time", "multiple", "stride", "every", "factor"),
    [
        (10, 500, False, 1, 32, 1, None),
        (11, 900, False, 1, 8, 1, None),
        (12, 600, True, 1, 16, 1, None),
        (13, 700, False, 4, 32, 1, None),
        (14, 800, False, 1, 16, 3, None),  # candidate ends only (every 3rd), as the grid search asks
        (15, 400, True, 1, 2, 1, None),
        (16, 700, False, 1, 32, 1, 0.6),  # batches of one (the sums of weights), some over the budget
        (17, 500, True, 1, 16, 1, 1.5),
    ],
)
def test_pruned_token_dp_gives_the_dense_optimum_bit_for_bit(
    seed, n_lengths, time, multiple, stride, every, factor, monkeypatch
):
    """The pruned DP computes exact costs only for buckets its bounds cannot rule out of every
    optimal plan; for every bucket count up to 8 its optimum is the dense DP's, the same
    float, and its plan the same ends (the same smallest start on ties)."""
    prob = _token_problem(seed, n_lengths, time, multiple, factor)
    ends = np.unique(np.r_[prob.ends[every - 1 :: every], prob.m])
    monkeypatch.setattr(budget, "BOUND_STRIDE", stride)
    monkeypatch.setattr(budget, "BOUND_ROWS", 10**9)  # (the stride as set, however many rows)
    dense_best, dense_arg = kernel.solve_kernel(prob, 8, ends, dense=True)
    best, arg = kernel.solve_kernel(prob, 8, ends)
    for k in range(1, 9):
        assert best[k, prob.m] == dense_best[k, prob.m]
        assert kernel.backtrack(arg, k, prob.m) == kernel.backtrack(dense_arg, k, prob.m)


@pytest.mark.parametrize("seed", range(3))
def test_pruned_token_dp_on_sparse_data_gives_the_dense_optimum(seed):
    """Data of few samples per length (a heavy tail's: 1 to 3 each) take the steps objective's
    finer rungs (``rung_factor``) and the table's closer rows near the top; the pruned DP still
    gives the dense optimum, the same float and plan, for every bucket count up to 8."""
    rng = np.random.default_rng(900 + seed)
    lengths = np.unique(rng.integers(20, 6_000, 700))
    hist = LengthHistogram.from_counts(lengths, rng.integers(1, 4, lengths.size))
    rule = BatchRule(max_tokens=int(rng.choice([8_192, 65_536])))
    prob = problem.build_problem(hist, rule, 1, None, problem.resolve_objective(rule, None, None))
    data, _ = exact_module.exact_arrays(prob)
    assert prob.objective == "steps" and budget.rung_factor(data, "steps") == budget._RUNG_COARSE
    dense_best, dense_arg = kernel.solve_kernel(prob, 8, prob.ends, dense=True)
    best, arg = kernel.solve_kernel(prob, 8, prob.ends)
    for k in range(1, 9):
        assert best[k, prob.m] == dense_best[k, prob.m]
        assert kernel.backtrack(arg, k, prob.m) == kernel.backtrack(dense_arg, k, prob.m)


@pytest.mark.parametrize(("m", "stride"), [(1, 32), (5, 1), (33, 32), (326, 32), (8_128, 127), (70_000, 32)])
def test_bound_table_rows_close_in_near_the_top(m, stride):
    """The table's rows (``row_starts``) run from 0 up, ``stride`` apart where at least
    ``TOP_SHARE`` strides of lengths lie above, else at most a ``TOP_SHARE``-th of those
    apart, every start of the top ``TOP_SHARE`` a row; ``row_index`` gives each start the row
    at or below it, the nearest."""
    starts = budget.row_starts(m, stride)
    gaps, above = np.diff(np.r_[starts, m]), m - starts
    assert starts[0] == 0 and (gaps >= 1).all()
    assert np.array_equal(gaps[:-1], np.maximum(1, np.minimum(stride, above[:-1] // budget.TOP_SHARE)))
    assert set(range(max(0, m - budget.TOP_SHARE), m)) <= set(starts.tolist())
    row_of, at = budget.row_index(starts, m), np.arange(m + 1)
    assert (starts[row_of] <= at).all() and (np.r_[starts, m + 1][row_of + 1] > at).all()


def test_bound_table_keeps_to_its_bytes(monkeypatch):
    """Where the closer rows near the top would pass ``BOUND_BYTES``, the table takes every
    ``stride``-th start alone (as within it), and its bounds still give the dense optimum."""
    prob = _token_problem(1, 700, False, 1, None)
    data, _ = exact_module.exact_arrays(prob)
    closer = budget.budget_bounds(data, 32, objective=prob.objective)
    assert closer.t_up.shape[0] == budget.row_starts(prob.m, 32).size > (prob.m - 1) // 32 + 1
    monkeypatch.setattr(budget, "BOUND_BYTES", closer.t_up.nbytes - 1)
    capped = budget.budget_bounds(data, 32, objective=prob.objective)
    assert capped.t_up.shape[0] == (prob.m - 1) // 32 + 1
    assert np.array_equal(capped.row_of, np.arange(prob.m + 1) // 32)
    dense_best, _ = kernel.solve_kernel(prob, 6, prob.ends, dense=True)
    assert kernel.solve_kernel(prob, 6, prob.ends)[0][6, prob.m] == dense_best[6, prob.m]


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_pruned_token_dp_equals_the_dense_dp_on_random_histograms(data):
    """Property over random histograms (2 to 80 lengths up to 10**6, counts up to 10**7, so
    beyond the log x! table too; budgets from one longest sample to 10**5 of them; bound
    rows 1 to 16 starts apart): with pruning forced, every optimum up to 6 buckets and its
    plan are the dense DP's."""
    m = data.draw(st.integers(2, 80))
    lengths = sorted(data.draw(st.sets(st.integers(1, 10**6), min_size=m, max_size=m)))
    counts = data.draw(st.lists(st.integers(1, 10**7), min_size=m, max_size=m))
    max_tokens = lengths[-1] * data.draw(st.integers(1, 10**5))
    prob = problem.build_problem(
        LengthHistogram.from_counts(lengths, counts), BatchRule(max_tokens=max_tokens)
    )
    saved = budget.BOUND_STRIDE, budget.BOUND_ROWS
    budget.BOUND_STRIDE, budget.BOUND_ROWS = data.draw(st.sampled_from([1, 2, 16])), 10**9
    try:
        best, arg = kernel.solve_kernel(prob, 6, prob.ends)
    finally:
        budget.BOUND_STRIDE, budget.BOUND_ROWS = saved
    dense_best, dense_arg = kernel.solve_kernel(prob, 6, prob.ends, dense=True)
    for k in range(1, min(6, m) + 1):
        assert best[k, prob.m] == dense_best[k, prob.m]
        assert kernel.backtrack(arg, k, prob.m) == kernel.backtrack(dense_arg, k, prob.m)


@pytest.mark.parametrize("seed", range(12))
def test_pruned_token_dp_equals_exhaustive_search(seed, monkeypatch):
    """The pruned DP on small histograms (with every start a bound row, and one in 3): still
    the exhaustive optimum of a token budget for every K up to 4."""
    monkeypatch.setattr(budget, "BOUND_STRIDE", 1 + 2 * (seed % 2))
    monkeypatch.setattr(budget, "BOUND_ROWS", 10**9)
    rng = np.random.default_rng(500 + seed)
    lengths, counts = random_hist(rng, max_distinct=9, max_count=30)
    assert_optimal_as_exhaustive_search(lengths, counts, max_tokens=int(rng.integers(10, 200)))


def test_large_batch_uses_log_space_and_matches_small_block_linear(monkeypatch):
    """B = 200 on ~20k samples overflows float64 binomials: the log path must agree with
    the exact objective of the edges it returns and beat every baseline."""
    rng = np.random.default_rng(7)
    hist = LengthHistogram.from_lengths(rng.integers(10, 400, 20_000))
    plan = optimize_edges(hist, 3, batch_size=200)
    assert (
        ratio_tables.build_ratio_tables(problem.build_problem(hist, BatchRule(batch_size=200)))[0].size == 0
    )
    for method in BASELINES:
        other = optimize_edges(hist, 3, batch_size=200, method=method)
        assert plan.objective <= other.objective * (1 + 1e-12)


# ------------------------------------------------------------------------------ properties
@pytest.mark.parametrize("seed", range(8))
def test_optimal_never_worse_than_a_baseline(seed):
    rng = np.random.default_rng(200 + seed)
    lengths = rng.integers(5, 300, int(rng.integers(200, 2000)))
    hist = LengthHistogram.from_lengths(lengths)
    batch = rule(seed, rng)
    for k in (1, 2, 4, 7):
        best = optimize_edges(hist, k, **batch).objective
        for method in BASELINES:
            assert best <= optimize_edges(hist, k, method=method, **batch).objective * (1 + 1e-12)


@pytest.mark.parametrize("seed", range(4))
def test_padded_tokens_never_increase_with_k(seed):
    rng = np.random.default_rng(300 + seed)
    hist = LengthHistogram.from_lengths(rng.lognormal(5, 0.7, 3000).astype(int) + 1)
    batch = rule(seed, rng)
    sweep = sweep_bucket_counts(hist, range(1, 13), ["optimal"], **padding(batch))
    assert (np.diff(sweep["padded_tokens"]) <= 1e-9 * sweep["padded_tokens"][1:]).all()
    assert (np.diff(sweep["objective"]) <= 1e-9 * sweep["objective"][1:]).all()


@pytest.mark.parametrize("seed", range(4))
def test_plan_reports_the_exact_expectation(seed):
    rng = np.random.default_rng(4 + seed)
    lengths, counts = random_hist(rng, max_distinct=12, max_len=90, max_count=30)
    hist = LengthHistogram.from_counts(lengths, counts)
    k = min(3, len(lengths))
    for batch in ({"batch_size": 5}, {"max_tokens": 200}):
        plan = optimize_edges(hist, k, pad_to_multiple_of=8, **batch)
        want = exact_padded(lengths, counts, plan.edges, pad=8, **batch)
        assert plan.padded_tokens == pytest.approx(float(want), rel=1e-12)
        assert plan.efficiency == pytest.approx(float(hist.total_tokens / want), rel=1e-12)
        assert plan.waste_tokens == pytest.approx(float(want - hist.total_tokens), rel=1e-9, abs=1e-9)
        assert plan.useful_tokens == hist.total_tokens
        assert plan.to_frame()["samples"].sum() == hist.n_samples
        assert plan.rule == BatchRule(**batch, pad_to_multiple_of=8)
        assert plan.n_buckets == len(plan.edges) - 1 == k
    assert plan.batch_sizes == [max(1, 200 // (-(-e // 8) * 8)) for e in plan.edges[1:]]  # padded edges


def test_evaluate_edges_reports_the_exact_expectation():
    lengths, counts = [3, 4, 9, 10, 17, 30], [5, 2, 7, 1, 4, 3]
    hist = LengthHistogram.from_counts(lengths, counts)
    plan = evaluate_edges(hist, [0, 9, 40], max_tokens=60, pad_to_multiple_of=4, objective="padding")
    assert plan.method == "given" and plan.n_buckets_requested == 2 and plan.exact
    assert plan.batch_sizes == [5, 1]  # 60 // 12 (the edge 9 padded to a multiple of 4), 60 // 40
    want = exact_padded(lengths, counts, [0, 9, 40], max_tokens=60, pad=4)
    assert plan.padded_tokens == pytest.approx(float(want), rel=1e-12)
    assert plan.objective == pytest.approx(
        float(exact_objective(lengths, counts, [0, 9, 40], max_tokens=60, pad=4)), rel=1e-12
    )


def test_objective_is_padding_up_to_partial_batches():
    """With every bucket a multiple of B the objective is the expected padded tokens."""
    hist = LengthHistogram.from_counts([3, 5, 6, 11, 12], [8, 16, 8, 8, 24])
    plan = optimize_edges(hist, 2, batch_size=8)
    assert plan.objective == pytest.approx(plan.padded_tokens, rel=1e-13)


def test_to_dict_is_json_ready():
    hist = LengthHistogram.from_counts([1, 2, 3, 9, 10], [5, 5, 5, 5, 5])
    d = optimize_edges(hist, 2, batch_size=4).to_dict()
    assert json.loads(json.dumps(d)) == d
    assert d["edges"] == [0, 3, 10] and d["batch_size"] == 4 and d["max_tokens"] is None
    assert all(type(e) is int for e in d["edges"])


# ------------------------------------------------------------------------------ constraints
@pytest.mark.parametrize("seed", range(6))
def test_edge_multiple(seed):
    rng = np.random.default_rng(400 + seed)
    lengths, counts = random_hist(rng, max_distinct=10, max_len=60)
    hist = LengthHistogram.from_counts(lengths, counts)
    em = 8
    top = -(-lengths[-1] // em) * em
    # edges sit at observed lengths rounded up (in token mode the edge sets the batch size:
    # the bucket's longest length rounded up is the largest batch that fits)
    allowed = sorted({-(-v // em) * em for v in lengths} - {top})
    batch = rule(seed, rng)
    for k in range(1, min(4, len(allowed) + 1) + 1):
        plan = optimize_edges(hist, k, edge_multiple=em, **padding(batch))
        assert all(e % em == 0 for e in plan.edges) and plan.edges[-1] == top
        best = min(
            exact_objective(lengths, counts, e, **batch) for e in all_edge_sets(lengths, k, top, allowed)
        )
        got = exact_objective(lengths, counts, plan.edges, **batch)
        assert float(abs(got - best) / best) <= 1e-12
    with pytest.raises(ValueError, match="possible edges"):
        optimize_edges(hist, len(allowed) + 2, edge_multiple=em, **batch)


# ------------------------------------------------------------------------------- baselines
def test_equal_count_is_fairseqs_percentile_rule():
    rng = np.random.default_rng(6)
    sizes = rng.integers(1, 300, 997)
    hist = LengthHistogram.from_lengths(sizes)
    for k in (1, 2, 3, 5, 8, 13):
        buckets = np.unique(np.percentile(sizes, np.linspace(0, 100, k + 1), method="lower")[1:])
        plan = optimize_edges(hist, k, batch_size=4, method="equal_count")
        assert plan.edges == [0, *buckets.tolist()]


def lhotse_bins(sizes, num_buckets):
    """Lhotse's estimate_duration_buckets loop, on plain numbers (exact integers)."""
    sizes = np.sort(sizes)
    total = int(sizes.sum())
    bins, tot = [], 0
    for size in sizes.tolist():
        if tot * num_buckets > total:
            bins.append(size)
            tot = 0
        tot += size
    return bins


def test_equal_tokens_is_lhotses_rule():
    rng = np.random.default_rng(8)
    sizes = rng.integers(20, 900, 3000)
    hist = LengthHistogram.from_lengths(sizes)
    for k in (2, 3, 6, 10):
        bins = lhotse_bins(sizes, k)
        plan = optimize_edges(hist, k, batch_size=4, method="equal_tokens")
        assert plan.edges == [0, *sorted({b - 1 for b in bins}), int(sizes.max())]
        # the same buckets as Lhotse's bisect_right(bins, length)
        ours = np.searchsorted(plan.edges[1:-1], sizes, side="left")
        theirs = np.searchsorted(bins, sizes, side="right")
        assert (np.unique(theirs, return_inverse=True)[1] == ours).all()


def test_equal_tokens_splits_a_heavy_length():
    hist = LengthHistogram.from_counts([5, 100], [1, 1000])
    assert optimize_edges(hist, 2, batch_size=4, method="equal_tokens").edges == [0, 99, 100]


def test_geometric_reproduces_the_cases_start():
    hist = LengthHistogram.from_counts([66, 100, 200, 500, 1000, 2000, 8192], [1] * 7)
    plan = optimize_edges(hist, 6, batch_size=8, method="geometric")
    assert tuple(plan.edges) == CASE_GEOMETRIC_EDGES


def test_geometric_collapses_repeated_edges():
    hist = LengthHistogram.from_counts(range(10, 21), [4] * 11)
    plan = optimize_edges(hist, 11, batch_size=2, method="geometric")
    # floor(10 * 2 ** (t / 11)) repeats 12 at t = 3, 4 (and more): fewer buckets
    assert plan.n_buckets_requested == 11 and plan.n_buckets < 11
    assert plan.edges[0] == 0 and plan.edges[-1] == 20


def test_greedy_is_a_local_optimum_no_worse_than_its_start():
    rng = np.random.default_rng(9)
    hist = LengthHistogram.from_lengths(rng.lognormal(6, 0.8, 20_000).astype(int) + 1)
    plan = optimize_edges(hist, 5, batch_size=8, method="greedy")
    start = optimize_edges(hist, 5, batch_size=8, method="geometric")
    assert plan.objective <= start.objective
    cands = set(hist.quantile(np.linspace(0, 1, 292)[1:-1]).tolist())
    edges = plan.edges
    for t in range(1, len(edges) - 1):
        for c in cands:
            if edges[t - 1] < c < edges[t + 1] and c != edges[t]:
                moved = evaluate_edges(hist, [*edges[:t], c, *edges[t + 1 :]], batch_size=8)
                assert moved.objective >= plan.objective * (1 - 1e-12)


# ------------------------------------------------------------------ sweep and recommendation
def test_sweep_matches_single_runs():
    rng = np.random.default_rng(10)
    hist = LengthHistogram.from_lengths(rng.integers(1, 200, 2000))
    sweep = sweep_bucket_counts(hist, n_buckets=[1, 3, 5], batch_size=4)
    assert list(sweep.columns[:5]) == ["n_buckets", "method", "efficiency", "padded_tokens", "edges"]
    assert len(sweep) == 3 * len(opt.METHODS)
    for row in sweep.itertuples():
        plan = optimize_edges(hist, row.n_buckets, batch_size=4, method=row.method)
        assert row.edges == plan.edges and row.efficiency == plan.efficiency


def test_recommend_n_buckets():
    sweep = pd.DataFrame({"n_buckets": [1, 2, 3], "method": ["optimal"] * 3, "efficiency": [0.5, 0.6, 0.65]})
    assert recommend_n_buckets(sweep, 0.01) == 3
    assert recommend_n_buckets(sweep, 0.06) == 2
    assert recommend_n_buckets(sweep, 0.2) == 1
    with pytest.raises(ValueError, match="no rows"):
        recommend_n_buckets(sweep, method="greedy")
    with pytest.raises(ValueError, match="min_gain"):
        recommend_n_buckets(sweep, -1)


# ------------------------------------------------------------------- long-context candidates
def test_candidate_grid_with_refinement_is_close_to_exact():
    rng = np.random.default_rng(11)
    hist = LengthHistogram.from_lengths(rng.lognormal(7, 1.0, 30_000).astype(int) + 1)
    exact = optimize_edges(hist, 6, batch_size=8, candidates=None)
    grid = optimize_edges(hist, 6, batch_size=8, candidates=64)
    assert exact.exact and not grid.exact
    assert exact.objective <= grid.objective <= exact.objective * (1 + 1e-3)
    assert optimize_edges(hist, 6, batch_size=8, candidates="auto").edges == exact.edges


@pytest.mark.parametrize("seed", range(12))
def test_the_candidate_searchs_gap_bounds_its_distance_to_the_exact_optimum(seed):
    """The gap a candidate search reports is a proof, not an estimate: on random data, with
    either batch rule, padding to a multiple or not, and grids from 6 to 40 candidates, the
    plan's objective is never more than ``gap`` above the exact DP's; ``exact`` (gap 0)
    plans are optimal."""
    rng = np.random.default_rng(1000 + seed)
    lengths = rng.lognormal(5, 0.8, int(rng.integers(2_000, 8_000))).astype(int) + 1
    hist = LengthHistogram.from_lengths(lengths)
    rule = BatchRule(batch_size=int(rng.integers(1, 40))) if seed % 2 else BatchRule(max_tokens=4_096)
    rule = BatchRule(rule.batch_size, rule.max_tokens, [1, 8][seed % 3 == 0])
    k = int(rng.integers(2, 7))
    exact = optimize_edges(hist, k, rule, candidates=None)
    grid = optimize_edges(hist, k, rule, candidates=int(rng.integers(6, 41)))
    assert 0 <= grid.gap < 1 and grid.exact == (grid.gap == 0)
    assert (grid.objective - exact.objective) / grid.objective <= grid.gap + 1e-12
    if grid.exact:
        assert grid.objective == pytest.approx(exact.objective, rel=1e-12)


@pytest.mark.parametrize("seed", range(8))
def test_the_dp_over_cells_bounds_the_optimum_from_below_and_meets_it_on_single_starts(seed):
    """The proof's DP over cells: with random cells, its value for every K is at most the
    exact optimum (and not far below it); with a cell per possible start it is the exact
    optimum to the last bit (the same costs, added in the same order)."""
    rng = np.random.default_rng(3000 + seed)
    lengths = rng.lognormal(5, 0.9, 3_000).astype(int) + 1
    hist = LengthHistogram.from_lengths(lengths)
    rule = BatchRule(batch_size=int(rng.integers(1, 30))) if seed % 2 else BatchRule(max_tokens=2_048)
    prob = problem.build_problem(hist, rule, [1, 8][seed % 4 == 0])
    best, _ = kernel.solve_kernel(prob, 6, prob.ends)
    starts = np.r_[0, prob.ends[:-1]]
    cells = np.unique(np.r_[0, rng.choice(starts, 40), prob.m])
    bound, _ = cells_module.cell_dp(prob, cells, 6)
    for k in range(1, 7):
        assert bound[k, -1] <= best[k, prob.m] * (1 + 1e-12)
        assert bound[k, -1] >= best[k, prob.m] * 0.5
    fine, _ = cells_module.cell_dp(prob, np.r_[starts, prob.m], 6)
    np.testing.assert_array_equal(fine[1:, -1], best[1:, prob.m])


@pytest.mark.parametrize("seed", range(6))
def test_a_bucket_costs_at_least_a_smaller_one_plus_the_padded_length_of_the_samples_added(seed):
    """The fact the candidate search's proof rests on, in exact rationals, for both batch
    rules: adding samples below a bucket's shortest raises its full-batch objective
    ``n E[g(max of B)]`` by at least their padded lengths (not the exact cost: a sample added
    can split off a cheap short batch, ``test_adding_a_sample_can_lower_the_exact_cost``).
    (Above its longest only under a fixed batch size: a
    token budget's ``B`` falls as the longest grows, and the proof does not use it.)"""
    rng = np.random.default_rng(2000 + seed)
    lengths, counts = random_hist(rng, max_distinct=9, max_len=60, max_count=9)
    batch = rule(seed, rng)
    pad = [1, 4][seed % 2]
    for i, r, j in itertools.combinations(range(len(lengths) + 1), 3):
        for lo, mid, hi in ((i, r, j), (i, j - 1, j)) if j - 1 > i else ((i, r, j),):
            if not lo < mid < hi:
                continue

            def objective(a, b):
                edges = [0 if a == 0 else lengths[a - 1], lengths[b - 1]]
                return full_batch_objective(lengths, counts, edges, pad=pad, **batch)

            def mass(a, b):
                return sum(c * (-(-v // pad) * pad) for v, c in zip(lengths[a:b], counts[a:b], strict=True))

            assert objective(lo, hi) >= objective(mid, hi) + mass(lo, mid)  # shorter samples below
            if "batch_size" in batch:
                assert objective(lo, hi) >= objective(lo, mid) + mass(mid, hi)  # longer samples above


def test_adding_a_sample_can_lower_the_exact_cost():
    """Lengths 2, 3, 4, 4, 16, batch size 5: one batch, 5 * 16 = 80 tokens; add a 1 and the
    bucket is a full batch (E[max] = 16 * 5/6 + 4/6 = 14) and a batch of one (the mean, 5):
    75 < 80 + 1, which is why the candidate search's proof bounds the full-batch cost."""
    assert exact_objective([2, 3, 4, 16], [1, 1, 2, 1], [0, 16], batch_size=5) == 80
    assert exact_objective([1, 2, 3, 4, 16], [1, 1, 1, 2, 1], [0, 16], batch_size=5) == 75
    assert full_batch_objective([1, 2, 3, 4, 16], [1, 1, 1, 2, 1], [0, 16], batch_size=5) == 84


# --------------------------------------------------------------------------- bad arguments
@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"n_buckets": 0, "batch_size": 4}, "at least 1"),
        ({"n_buckets": 6, "batch_size": 4}, "exceeds the 5 distinct lengths"),
        ({"n_buckets": 2.5, "batch_size": 4}, "positive integer"),
        ({"n_buckets": 2}, "neither"),
        ({"n_buckets": 2, "batch_size": 4, "max_tokens": 64}, "both"),
        ({"n_buckets": 2, "batch_size": 4, "method": "kmeans"}, "unknown method 'kmeans'"),
        ({"n_buckets": 2, "batch_size": 0}, "batch_size"),
        ({"n_buckets": 2, "batch_size": 4, "edge_multiple": 0}, "edge_multiple"),
        ({"n_buckets": 2, "batch_size": 4, "rule": BatchRule(batch_size=4)}, "not both"),
        ({"n_buckets": 2, "rule": {"batch_size": 4}}, "rule must be a BatchRule"),
        ({"n_buckets": 2, "batch_size": 4, "candidates": "some"}, "candidates"),
    ],
)
def test_bad_arguments(kwargs, match):
    hist = LengthHistogram.from_counts([1, 2, 3, 9, 10], [5, 5, 5, 5, 5])
    n = kwargs.pop("n_buckets")
    with pytest.raises(ValueError, match=match):
        optimize_edges(hist, n, **kwargs)


def test_bad_sweep_arguments():
    hist = LengthHistogram.from_counts([1, 2, 3], [5, 5, 5])
    with pytest.raises(ValueError, match="unknown method"):
        sweep_bucket_counts(hist, [1], ["best"], batch_size=2)
    with pytest.raises(ValueError, match="exceeds"):
        sweep_bucket_counts(hist, [1, 4], batch_size=2)
    with pytest.raises(ValueError, match="empty"):
        sweep_bucket_counts(hist, [], batch_size=2)
    with pytest.raises(ValueError, match="LengthHistogram"):
        optimize_edges([1, 2, 3], 1, batch_size=2)
