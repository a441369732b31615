"""The optimiser's objective is the exact expected padding (each bucket's last, short batch
as it is), and its DP the exact optimum of it: exhaustive search over every edge set against
an exact rational objective that is itself checked against brute-force enumeration of the
sampler's batches."""

from __future__ import annotations

import importlib
import itertools
import math
from fractions import Fraction

import numpy as np
import pytest

from analysis import (
    BatchRule,
    LengthHistogram,
    StepTimeModel,
    evaluate_edges,
    optimize_edges,
    sweep_bucket_counts,
)
from analysis.optimize import _problem as problem
from analysis.padding.waste import expected_padding
from analysis.timing.epoch import expected_epoch_time

kernel = importlib.import_module("analysis.optimize._kernel")

budget = importlib.import_module("analysis.optimize._budget")
pruned = importlib.import_module("analysis.optimize._pruned")
backward = importlib.import_module("analysis.optimize._backward")

exact = importlib.import_module("analysis.optimize._exact")
lower = importlib.import_module("analysis.optimize._lower")
ratios = importlib.import_module("analysis.optimize._ratios")


def batch_size_of(rule: dict, upper: int, edge_multiple: int = 1, pad: int = 1) -> int:
    """``batch_size``, or ``max_tokens`` over the upper edge (at its multiple) padded to ``pad``."""
    if "batch_size" in rule:
        return rule["batch_size"]
    edge = -(-upper // edge_multiple) * edge_multiple
    return max(1, rule["max_tokens"] // (-(-edge // pad) * pad))


def e_max(values: list[Fraction], counts: list[int], size: int) -> Fraction:
    """E[g(max)] of a uniformly random ``size``-subset (``values`` ascending per distinct
    length): P(max <= v_k) = C(c_k, size) / C(n, size), in exact rationals."""
    n = sum(counts)
    below, prev, out = 0, 0, Fraction(0)
    for v, c in zip(values, counts, strict=True):
        below += c
        now = math.comb(below, size)
        out += v * (now - prev)
        prev = now
    return out / math.comb(n, size)


def exact_cost(lengths, counts, edges, rule, *, pad=1, model=None, edge_multiple=1) -> Fraction:
    """Exact expected objective of an epoch: per bucket ``floor(n / B)`` full batches, each a
    random ``B``-subset, and one batch of ``r = n mod B``, a random ``r``-subset; a batch of
    ``s`` samples padded to ``T`` costs ``s * T`` tokens, or with ``model`` the seconds
    ``per_step + s * (per_token T + attention T**2 + working_set s T**2)`` (no ``per_sample``)."""
    total = Fraction(0)
    for lo, hi in itertools.pairwise(edges):
        inside = [(v, c) for v, c in zip(lengths, counts, strict=True) if lo < v <= hi]
        if not inside:
            continue
        b = batch_size_of(rule, hi, edge_multiple, pad)
        n = sum(c for _, c in inside)
        cs = [c for _, c in inside]
        padded = [-(-v // pad) * pad for v, _ in inside]

        def g(size, padded=padded):
            if model is None:
                return [Fraction(t) for t in padded]
            f = Fraction
            return [
                f(model.per_token) * t + f(model.attention) * t * t + size * f(model.working_set) * t * t
                for t in padded
            ]

        full, r = divmod(n, b)
        if full:
            total += full * b * e_max(g(b), cs, b)
        if r:
            total += r * e_max(g(r), cs, r)
        if model is not None:
            total += Fraction(model.per_step) * -(-n // b)
    return total


def brute_force_padded(samples: list[int], edges: list[int], rule: dict, pad: int = 1) -> Fraction:
    """Expected padded tokens by enumerating every order of each bucket's samples (the
    sampler's within-bucket shuffle) and cutting it into batches, the last one short."""
    total = Fraction(0)
    for lo, hi in itertools.pairwise(edges):
        inside = [v for v in samples if lo < v <= hi]
        if not inside:
            continue
        b = batch_size_of(rule, hi, 1, pad)
        orders = list(itertools.permutations(inside))
        acc = 0
        for order in orders:
            for s in range(0, len(order), b):
                batch = order[s : s + b]
                acc += len(batch) * (-(-max(batch) // pad) * pad)
        total += Fraction(acc, len(orders))
    return total


def all_edge_sets(lengths, k, allowed=None):
    cands = sorted(set(allowed if allowed is not None else lengths[:-1]))
    cands = [e for e in cands if lengths[0] <= e < lengths[-1]]
    for cut in itertools.combinations(cands, k - 1):
        yield [0, *cut, lengths[-1]]


@pytest.mark.parametrize("seed", range(40))
def test_the_exact_objective_is_the_sampler_by_brute_force(seed):
    """The rational objective and ``analysis.padding.waste`` agree with every order of every bucket's
    samples cut into batches (short last batches included), both rules, with padding."""
    rng = np.random.default_rng(seed)
    samples = sorted(rng.integers(1, 12, int(rng.integers(1, 8))).tolist())
    rule = {"batch_size": int(rng.integers(1, 5))} if seed % 2 else {"max_tokens": int(rng.integers(12, 40))}
    pad = [1, 3][seed % 3 == 0]
    hist = LengthHistogram.from_lengths(samples)
    lengths, counts = hist.lengths.tolist(), hist.counts.tolist()
    for k in range(1, min(3, len(lengths)) + 1):
        for edges in all_edge_sets(lengths, k):
            want = brute_force_padded(samples, edges, rule, pad)
            assert exact_cost(lengths, counts, edges, rule, pad=pad) == want
            est = expected_padding(hist, edges, rule=BatchRule(pad_to_multiple_of=pad, **rule))
            assert float(est.padded_tokens) == pytest.approx(float(want), rel=1e-12)


def test_the_issue_case():
    """Lengths 1, 1, 2, 3, batch size 2, two buckets: [0, 2, 3] (91.3 %), not [0, 1, 3]."""
    hist = LengthHistogram.from_lengths([1, 1, 2, 3])
    plan = optimize_edges(hist, 2, batch_size=2)
    assert plan.edges == [0, 2, 3]
    assert plan.efficiency == pytest.approx(7 / (7 + 2 / 3), rel=1e-14)
    assert evaluate_edges(hist, [0, 1, 3], batch_size=2).efficiency == 0.875
    assert plan.objective == pytest.approx(plan.padded_tokens, rel=1e-14)


def random_case(rng, max_distinct=8, max_len=40, max_count=12):
    m = int(rng.integers(1, max_distinct + 1))
    lengths = sorted(rng.choice(np.arange(1, max_len), m, replace=False).tolist())
    counts = rng.integers(1, max_count + 1, m).tolist()
    return lengths, counts


def assert_exhaustive(lengths, counts, rule, *, pad=1, model=None, edge_multiple=1, k_max=4):
    """The DP's plan for every K attains the exhaustive minimum of the exact objective and its
    ``objective`` is that minimum; a sweep gives the same."""
    hist = LengthHistogram.from_counts(lengths, counts)
    allowed = None
    if edge_multiple > 1:
        allowed = sorted({-(-v // edge_multiple) * edge_multiple for v in lengths})
    ks = list(range(1, min(k_max, len(lengths)) + 1))
    # the padding objective (a token budget's default counts steps: tests/optimize/test_budget.py)
    kw = {"step_time": model} if model is not None else {"objective": "padding"}
    sweep = sweep_bucket_counts(
        hist, ks, ["optimal"], pad_to_multiple_of=pad, edge_multiple=edge_multiple, **kw, **rule
    )
    for k in ks:
        sets = list(all_edge_sets(lengths, k, allowed))
        if edge_multiple > 1:
            sets = [e[:-1] + [-(-lengths[-1] // edge_multiple) * edge_multiple] for e in sets]
            sets = [e for e in sets if all(a < b for a, b in itertools.pairwise(e))]
        if not sets:
            continue
        best = min(
            exact_cost(lengths, counts, e, rule, pad=pad, model=model, edge_multiple=edge_multiple)
            for e in sets
        )
        plan = optimize_edges(hist, k, pad_to_multiple_of=pad, edge_multiple=edge_multiple, **kw, **rule)
        got = exact_cost(lengths, counts, plan.edges, rule, pad=pad, model=model, edge_multiple=edge_multiple)
        assert float(abs(got - best)) <= 1e-12 * float(best), (k, plan.edges)
        assert plan.objective == pytest.approx(float(best), rel=1e-12)
        row = sweep[sweep["n_buckets"] == k].iloc[0]
        assert row["edges"] == plan.edges


@pytest.mark.parametrize("seed", range(60))
def test_the_optimum_is_the_exhaustive_minimum_of_the_exact_padding(seed):
    rng = np.random.default_rng(1000 + seed)
    lengths, counts = random_case(rng)
    if seed % 2:
        rule = {"batch_size": int(rng.choice([1, 2, 3, 4, 5, 7, 9]))}
    else:
        rule = {"max_tokens": int(rng.integers(10, 160))}
    pad = [1, 4, 1][seed % 3]
    assert_exhaustive(lengths, counts, rule, pad=pad)


@pytest.mark.parametrize("seed", range(12))
def test_edge_multiple(seed):
    rng = np.random.default_rng(2000 + seed)
    lengths, counts = random_case(rng, max_len=60)
    rule = {"batch_size": int(rng.integers(2, 6))} if seed % 2 else {"max_tokens": int(rng.integers(60, 200))}
    assert_exhaustive(lengths, counts, rule, edge_multiple=int(rng.choice([4, 8])))


@pytest.mark.parametrize("seed", range(16))
def test_the_time_objective_prices_short_batches_at_their_size(seed):
    """With a step-time model (per-step seconds and a working-set term) the short batch's
    seconds are at its real size r: exhaustive over every edge set, both rules; and the
    plan's objective is ``expected_epoch_time`` less its ``per_sample`` term."""
    rng = np.random.default_rng(3000 + seed)
    lengths, counts = random_case(rng)
    model = StepTimeModel(per_step=0.5, per_sample=0.25, per_token=1e-2, attention=1e-3, working_set=2e-3)
    rule = {"batch_size": int(rng.integers(2, 7))} if seed % 2 else {"max_tokens": int(rng.integers(40, 160))}
    assert_exhaustive(lengths, counts, rule, model=model, pad=[1, 2][seed % 4 == 0])
    hist = LengthHistogram.from_counts(lengths, counts)
    plan = optimize_edges(hist, min(2, len(lengths)), step_time=model, **rule)
    secs = expected_epoch_time(hist, model, rule=BatchRule(**rule), edges=plan.edges)
    assert plan.objective == pytest.approx(secs - model.per_sample * hist.n_samples, rel=1e-12)


@pytest.mark.parametrize("seed", range(8))
def test_many_samples_per_bucket(seed):
    """Buckets of hundreds of samples (large residues, long sums): still the exhaustive optimum."""
    rng = np.random.default_rng(4000 + seed)
    lengths, counts = random_case(rng, max_distinct=7, max_len=300, max_count=200)
    rule = (
        {"batch_size": int(rng.choice([3, 8, 70]))}
        if seed % 2
        else {"max_tokens": int(rng.integers(300, 30000))}
    )
    assert_exhaustive(lengths, counts, rule)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize(
    "rule", [BatchRule(batch_size=8), BatchRule(batch_size=100), BatchRule(max_tokens=4000)]
)
def test_the_pruned_dp_is_the_dense_exact_dp_bit_for_bit(seed, rule, monkeypatch):
    """The pruned DP costs exactly only the buckets its bounds keep; its optimum for every K
    up to 8 is the dense DP's over every exact bucket cost: the same float, the same ends."""
    rng = np.random.default_rng(5000 + seed)
    n = int(rng.integers(50, 400))
    lengths = np.sort(rng.choice(np.arange(1, 3000), n, replace=False))
    counts = np.where(rng.random(n) < 0.3, 1, rng.integers(1, 60, n))
    hist = LengthHistogram.from_counts(lengths, counts)
    monkeypatch.setattr(budget, "BOUND_STRIDE", [1, 8, 32][seed % 3])
    monkeypatch.setattr(budget, "BOUND_ROWS", 10**9)  # (the stride as set)
    prob = problem.build_problem(hist, rule, 1)
    dense_best, dense_arg = kernel.solve_kernel(prob, 8, prob.ends, dense=True)
    best, arg = kernel.solve_kernel(prob, 8, prob.ends)
    for k in range(1, 9):
        assert best[k, prob.m] == dense_best[k, prob.m]
        assert kernel.backtrack(arg, k, prob.m) == kernel.backtrack(dense_arg, k, prob.m)


@pytest.mark.parametrize("seed", range(11))
@pytest.mark.parametrize("gap", [-1.0, np.inf])
def test_the_pruned_dp_with_the_chords_is_the_dense_exact_dp_bit_for_bit(seed, gap, monkeypatch):
    """Batch sizes 24 to 3,000 (by the product formula to 64, then not) on heavy tails (a few
    samples per length, some lengths far above the rest; 30 times as many above 1,000),
    padding and a step time without a working-set term (a cost per step, a weight quadratic in
    the length), the bounds with the chords (``gap`` -1: always, asserted) and without (inf):
    the optimum for every K up to 8 is the dense DP's, the same float, the same ends."""
    rng = np.random.default_rng(5100 + seed)
    n = int(rng.integers(60, 300))
    lengths = np.sort(rng.choice(np.arange(1, 3000), n, replace=False))
    lengths[-3:] = [9000, 20000, 40000]
    size = [32, 48, 64, 100, 1000, 37, 64, 1000, 24, 2000, 3000][seed]
    counts = np.where(rng.random(n) < 0.6, 1, rng.integers(1, 6, n)) * (30 if size > 1000 else 1)
    hist = LengthHistogram.from_counts(lengths, counts)
    asked = []
    loose = pruned._loose
    monkeypatch.setattr(pruned, "_CHORD_GAP", gap)
    monkeypatch.setattr(pruned, "_loose", lambda *a: asked.append(loose(*a)) or asked[-1])
    model = StepTimeModel(per_step=0.5, per_token=1e-2, attention=1e-5) if seed >= 6 else None
    rule = BatchRule(batch_size=size)
    prob = problem.build_problem(hist, rule, 1, step_time=model)
    dense_best, dense_arg = kernel.solve_kernel(prob, 8, prob.ends, dense=True)
    best, arg = kernel.solve_kernel(prob, 8, prob.ends)
    assert asked == [gap < 0.0]
    for k in range(1, 9):
        assert best[k, prob.m] == dense_best[k, prob.m]
        assert kernel.backtrack(arg, k, prob.m) == kernel.backtrack(dense_arg, k, prob.m)


@pytest.mark.parametrize("seed", range(4))
def test_step_twos_refined_plan_is_a_plan_costed_exactly_and_bounds_the_optimum(seed):
    """The local search of step 2 (a fixed B above the product formula's) returns the exact
    objective of the plan it leaves in ``edges`` (the dense matrix's sum over its buckets),
    no more than the plan it was given, and the optimum is at most it; it stops where no edge
    lowers the estimate by a move to the next end on either side (``_moves``, here checked
    against the matrix: a local minimum of the finest step)."""
    rng = np.random.default_rng(7000 + seed)
    n = int(rng.integers(80, 300))
    lengths = np.sort(rng.choice(np.arange(1, 3000), n, replace=False))
    hist = LengthHistogram.from_counts(lengths, rng.integers(1, 80, n))
    prob = problem.build_problem(hist, BatchRule(batch_size=100), 1)
    data, short = importlib.import_module("analysis.optimize._exact").exact_arrays(prob)
    rows, is_end = kernel._rows(prob, 5, prob.ends)
    matrix = kernel.cost_matrix(prob, np.r_[0, prob.ends])
    index = {int(e): a for a, e in enumerate(np.r_[0, prob.ends])}
    dense_best, _ = kernel.solve_kernel(prob, 5, prob.ends, dense=True)
    for k in range(2, 6):
        edges = np.r_[0, np.sort(rng.choice(prob.ends[:-1], k - 1, replace=False)), prob.m]
        given = sum(matrix[index[int(a)], index[int(b)]] for a, b in itertools.pairwise(edges))
        total = pruned._refine(edges, data, short, is_end)
        assert total == pytest.approx(
            sum(matrix[index[int(a)], index[int(b)]] for a, b in itertools.pairwise(edges)), rel=1e-12
        )
        assert dense_best[k, prob.m] <= total * (1 + 1e-12) and total <= given * (1 + 1e-12)
        assert np.all(np.diff(edges) > 0) and edges[0] == 0 and edges[-1] == prob.m
        for t in range(1, k):
            a, x, c = (index[int(e)] for e in edges[t - 1 : t + 2])
            here = matrix[a, x] + matrix[x, c]
            assert min(matrix[a, y] + matrix[y, c] for y in (x - 1, x + 1)) >= here * (1 - 1e-12)


@pytest.mark.parametrize("seed", range(4))
def test_the_cut_cost_is_the_exact_cost_to_the_last_bits(seed):
    """``cut_cost`` (step 2's estimate: every running sum from where its terms pass 2**-70)
    is the DP's exact cost of every bucket to 1e-14, with and without a working-set term,
    for batch sizes whose residues are carried and whose are not."""
    rng = np.random.default_rng(7100 + seed)
    n = int(rng.integers(40, 120))
    lengths = np.sort(rng.choice(np.arange(1, 3000), n, replace=False))
    hist = LengthHistogram.from_counts(lengths, rng.integers(1, 200, n))
    model = [None, StepTimeModel(per_step=0.5, per_token=1e-2, attention=1e-3, working_set=2e-3)][seed % 2]
    objective = "padding" if model is None else "time"
    rule = BatchRule(batch_size=[8, 40, 100, 700][seed])
    prob = problem.build_problem(hist, rule, 1, step_time=model, objective=objective)
    data, short = exact.exact_arrays(prob)
    matrix = kernel.cost_matrix(prob, np.arange(prob.m + 1))
    for i in range(prob.m):
        for j in range(i + 1, prob.m + 1):
            assert exact.cut_cost(i, j, data, short) == pytest.approx(matrix[i, j], rel=1e-14, abs=0), (i, j)


def test_a_bucket_count_whose_tables_would_not_fit_is_refused_before_allocating():
    """86,000 distinct lengths and 10,000 buckets would need ~26 GiB of DP tables: one line
    naming the need and the limit, at once (nothing allocated), from both entry points."""
    hist = LengthHistogram.from_counts(np.arange(1, 86_001), np.ones(86_000, np.int64))
    msg = r"n_buckets = 10,000 on 86,000 distinct lengths needs 25\.6 GiB .* 2 GiB limit: at most 779 buckets"
    with pytest.raises(ValueError, match=msg):
        optimize_edges(hist, 10_000, batch_size=8)
    with pytest.raises(ValueError, match=msg):
        sweep_bucket_counts(hist, [1, 10_000], ["optimal"], batch_size=8)
    assert optimize_edges(hist, 10_000, batch_size=8, method="equal_count").n_buckets <= 10_000


@pytest.mark.parametrize("seed", range(12))
def test_the_one_pass_row_is_the_carried_row_bit_for_bit(seed):
    """A fixed ``B <= 16`` read without a table (``small_row``: every subset size's ratio a
    prefix product of the same ``B`` quotients) gives the floats of the row that carries each
    residue's sum on its own (``carried_row``), for every start and random ends asked for,
    with and without a working-set term and a per-step time."""
    rng = np.random.default_rng(9000 + seed)
    n = int(rng.integers(5, 200))
    lengths = np.sort(rng.choice(np.arange(1, 3000), n, replace=False))
    counts = np.where(rng.random(n) < 0.3, 1, rng.integers(1, 60, n))
    hist = LengthHistogram.from_counts(lengths, counts)
    model = [None, StepTimeModel(per_step=0.5, per_token=1e-2, attention=1e-3, working_set=2e-3)][seed % 2]
    objective = "padding" if model is None else "time"
    rule = BatchRule(batch_size=int(rng.integers(1, 17)))
    prob = problem.build_problem(hist, rule, 1, step_time=model, objective=objective)
    data, short = exact.exact_arrays(prob)
    assert not data.comb.size and short.quad == (model is not None)
    m = prob.m
    for i in range(m):
        need = rng.random(m + 1) < rng.choice([0.05, 0.5, 1.0])
        fast, carried = np.empty(m + 1), np.empty(m + 1)
        exact.small_row(i, data, short, need, fast, np.zeros(m + 1), np.zeros(m + 1))
        exact.carried_row(i, data, short, need, carried, np.zeros(m + 1), np.zeros(m + 1))
        assert np.array_equal(fast[i + 1 :], carried[i + 1 :]), (i, rule)
        assert np.isfinite(fast[i + 1 :]).sum() == need[i + 1 :].sum()


@pytest.mark.parametrize("batch_size", [8, 48])
@pytest.mark.parametrize("seed", range(3))
def test_the_pruned_dp_reading_only_the_near_ends_is_the_dense_dp_bit_for_bit(seed, batch_size):
    """Smooth histograms of many samples at batch sizes 8 and 48 (``tau`` six times larger
    there): every upper bound lies within ``tau / 2`` of ``back`` (asserted), so the forward
    pass reads the rows of bounds only up to the backward pass's near ends and the last
    bucket's tighter bound; its optimum for every K up to 8 is still the dense DP's: the same
    float, the same ends, asked for all of them at once or for each alone."""
    rng = np.random.default_rng(8000 + seed)
    n = int(rng.integers(150, 300))
    lengths = np.arange(20, 20 + n)
    density = np.exp(-0.5 * ((np.log(lengths) - np.log(rng.uniform(60, 150))) / 0.6) ** 2)
    counts = rng.poisson(3000 * density / density.max()) + 1
    rule = BatchRule(batch_size=batch_size)
    prob = problem.build_problem(LengthHistogram.from_counts(lengths, counts), rule, 1)
    data, short = exact.exact_arrays(prob)
    rows, is_end = kernel._rows(prob, 8, prob.ends)
    last = np.empty((9, prob.m + 1), np.int64)
    near = (pruned._tau(data, short, rows, is_end), last, np.empty(prob.m + 1))
    back = backward.product_backward(data, short, rows, is_end, 8, near)
    every = np.ones(9, np.bool_)
    upper = pruned._uppers(
        data, short, kernel._NO_BOUNDS, rows, is_end, back, exact.carried_rows(data), every
    )
    assert pruned._near(back, upper, rows, near).size  # (the near ends are read)
    dense_best, dense_arg = kernel.solve_kernel(prob, 8, prob.ends, dense=True)
    best, arg = kernel.solve_kernel(prob, 8, prob.ends)
    for k in range(1, 9):
        assert best[k, prob.m] == dense_best[k, prob.m]
        assert kernel.backtrack(arg, k, prob.m) == kernel.backtrack(dense_arg, k, prob.m)
        one_best, one_arg = kernel.solve_kernel(prob, 8, prob.ends, wanted=[k])  # (near ends: K alone)
        assert one_best[k, prob.m] == dense_best[k, prob.m]
        assert kernel.backtrack(one_arg, k, prob.m) == kernel.backtrack(dense_arg, k, prob.m)


@pytest.mark.parametrize("k", [1, 2, 3])
def test_a_bucket_of_hundreds_of_millions_of_samples_keeps_its_plan(k: int) -> None:
    """Found by the property test: 2.2e8 samples of one length, batch size 18.  The DP's own
    exact cost of the last bucket was 1.1e-8 low (its ratios for 18 samples the difference of
    two ``log(b! / a!)``); the last bucket's chord bound, below the true cost, was above it and
    pruned the only plan.  The ratios now keep a few ulps of themselves (and the chord's
    margin grows with the bucket's samples): the pruned DP is the dense one."""
    hist = LengthHistogram.from_counts([1, 2, 3, 4, 42_747], [1, 1, 1, 215_242_067, 171])
    prob = problem.build_problem(hist, BatchRule(batch_size=18), 1)
    pruned = kernel.solve_kernel(prob, k, prob.ends)
    dense = kernel.solve_kernel(prob, k, prob.ends, dense=True)
    assert np.isfinite(pruned[0][k, prob.m]) and pruned[0][k, prob.m] == dense[0][k, prob.m]
    assert kernel.backtrack(pruned[1], k, prob.m) == kernel.backtrack(dense[1], k, prob.m)


@pytest.mark.parametrize(
    ("a", "b", "size"),
    [
        (215_242_070, 215_242_241, 18),  # the property test's: 171 samples above 2.2e8
        (21_920_784_888, 21_933_421_214, 17),  # 1.3e7 above 2.2e10
        (10**10, 10**10 + 1, 40),
        (10**10, 10**10 + 5_000, 64),
        (10**9, 10**9 + 40, 10_000),  # few samples between, a large subset
        (10**12, 10**12 + 3_000, 300),  # Stirling's series, the ratio near 1
        (10**6, 10**6 + 20_000, 5_000),  # and far from it (e**-100)
        (4_000, 4_100, 3_000),
    ],
)
def test_a_ratio_of_binomials_keeps_a_few_ulps_of_itself(a: int, b: int, size: int) -> None:
    """``C(a, s) / C(b, s)`` for subsets above 16, against exact integers: within ``1e-14``
    of itself (the difference of two ``log(b! / a!)`` near ``d log b`` kept ``1e-7`` of it at
    ``1e10`` samples, and a bucket's cost ``w - T_B`` reads the ratio ``T_B / E_B`` times
    over)."""
    true = Fraction(math.comb(a, size), math.comb(b, size))
    hi, lo = ratios.log_fact_table(1 << 10)
    got = exact.short_ratio(a, b, size, hi, lo)
    assert abs(Fraction(got) - true) <= Fraction(1, 10**14) * true


@pytest.mark.parametrize(
    ("lengths", "counts", "batch_size", "rel"),
    [
        ([1, 2, 3, 4, 91_633], [1, 1, 1, 215_242_067, 171], 18, 1e-11),  # the property test's
        ([1, 2, 3, 12], [1, 1, 21_920_784_885, 12_636_326], 17, 1e-11),  # the property test's
        ([1, 10**9], [10**10, 1], 8, 1e-7),  # E_B near 2.8 beside a sum T_B near 1e9
        ([1, 10**9], [10**10, 1], 18, 1e-7),
        ([1, 2, 10**9], [10**10, 5, 1], 20, 1e-7),
        ([1, 10**9], [10**11, 3], 12, 1e-7),
    ],
)
def test_billions_of_samples_cost_exactly_and_keep_their_plan(lengths, counts, batch_size, rel) -> None:
    """One bucket of billions of samples: its exact cost is the exact rational one to
    ``rel`` (the ratios above 16 were ``1e-7`` off: ``-2e-8`` and ``-1.1e-7`` on the property
    test's cases; where ``w - T_B`` reads ``T_B`` 4e8 times over, a few ulps of each ratio
    leave ``4e-8`` of it), every bound on it is at most the DP's own cost (the product
    formula's bounds were ``3e-7`` above it there), and the pruned DP is the dense one, not
    "no plan"."""
    hist = LengthHistogram.from_counts(lengths, counts)
    rule = BatchRule(batch_size=batch_size)
    prob = problem.build_problem(hist, rule, 1)
    data, short = exact.exact_arrays(prob)
    m = prob.m
    every = np.ones(m + 1, np.bool_)
    cost, low = np.empty(m + 1), np.empty(m + 1)
    exact.exact_row(0, data, short, every, cost, np.zeros(m + 1), np.zeros(m + 1), True)  # (the DP's types)
    lower.low_costs(0, data, short, kernel._NO_BOUNDS, every, np.zeros(m + 1), low)
    true = exact_cost(lengths, counts, [0, lengths[-1]], {"batch_size": batch_size})
    assert abs(Fraction(cost[m]) - true) <= Fraction(rel) * true
    assert (low[1:] <= cost[1:]).all()
    pruned_best, pruned_arg = kernel.solve_kernel(prob, 1, prob.ends)
    dense_best, _ = kernel.solve_kernel(prob, 1, prob.ends, dense=True)
    assert pruned_best[1, m] == dense_best[1, m] == cost[m]
    assert kernel.backtrack(pruned_arg, 1, m) == [m]
    assert optimize_edges(hist, 1, rule).edges[-1] == lengths[-1]


def _residue_sum(i, j, r, data, short):
    """``T_r(i, j)`` over ``base`` and ``q``, one cell alone: from the row's start where
    ``r <= 64``, else from the first end whose count passes ``n 2**(-70/r)``, each step
    ``(t + step) * short_ratio`` (what ``carried_row`` carries side by side)."""
    cum = data.cum
    ci, n = int(cum[i]), int(cum[j] - cum[i])
    first = i + 1
    if r > 64:
        cut = ci + n * 2.0 ** (-70.0 / r)
        first = i + 1 + int(np.searchsorted(cum[i + 1 : j], cut, side="right"))
    t = t2 = 0.0
    for k in range(first, j):
        below, above = int(cum[k] - ci), int(cum[k + 1] - ci)
        if below < r:
            t = t2 = 0.0
            continue
        ratio = exact.short_ratio(below, above, r, short.hi, short.lo)
        t = (t + short.base_step[k]) * ratio
        t2 = (t2 + short.q_step[k]) * ratio
    return t, t2


@pytest.mark.parametrize("seed", range(6))
def test_the_carried_row_is_each_cell_summed_alone_bit_for_bit(seed):
    """``carried_row`` advances every residue up to 64 in one pass (each size's ratio from
    shared prefix products) and walks the larger ones side by side (shared denominators, one
    ratio per residue and end): each cost is the float of its own cell's sum taken alone, for
    batch sizes across the product, quotient and table ranges and token budgets, with and
    without a working-set term (the sample counts reach past the table of ``log x!``)."""
    rng = np.random.default_rng(9100 + seed)
    n = int(rng.integers(30, 60))
    lengths = np.sort(rng.choice(np.arange(1, 4000), n, replace=False))
    counts = np.where(rng.random(n) < 0.4, rng.integers(1, 9, n), rng.integers(1, 9000, n))
    hist = LengthHistogram.from_counts(lengths, counts)
    model = [None, StepTimeModel(per_step=0.5, per_token=1e-2, attention=1e-3, working_set=2e-3)][seed % 2]
    objective = "padding" if model is None else "time"
    rules = [
        {"batch_size": int(rng.integers(17, 65))},
        {"batch_size": int(rng.integers(66, 70))},
        {"batch_size": int(rng.integers(90, 2000))},
    ]
    rules.append({"max_tokens": int(rng.integers(4000, 200_000))})
    seen = set()
    for kw in rules:
        prob = problem.build_problem(hist, BatchRule(**kw), 1, step_time=model, objective=objective)
        data, short = exact.exact_arrays(prob)
        m, cum = prob.m, data.cum
        for i in range(m):
            need = rng.random(m + 1) < 0.8
            out, tb, t2b = np.empty(m + 1), np.zeros(m + 1), np.zeros(m + 1)
            exact.carried_row(i, data, short, need, out, tb, t2b)
            ends = [j for j in range(i + 1, m + 1) if need[j] and (cum[j] - cum[i]) >= data.size[j]]
            ends = [j for j in ends if (cum[j] - cum[i]) % data.size[j] > 64]
            long = np.full((2, len(ends)), np.nan)
            exact.long_residue_sums(i, data, short, need, long[0], long[1])
            for j in np.flatnonzero(need[i + 1 :]) + i + 1:
                nj, b = int(cum[j] - cum[i]), int(data.size[j])
                r = nj % b if nj >= b else 0
                t, t2 = _residue_sum(i, j, r, data, short) if r else (0.0, 0.0)
                seen.add(0 if r <= 16 else 1 if r <= 64 else 2)
                if r > 64:  # the sums themselves (a cost may round an ulp of them away)
                    c = ends.index(j)
                    assert (long[0, c], long[1, c]) == (t, t2), (kw, i, j, r)
                w, w2, base, q = data.weight[j], data.weight2[j], short.base[j], short.q[j]
                if nj < b:
                    want = nj * (base + nj * q)
                else:
                    want = (nj // b) * b * ((w - tb[j]) + b * (w2 - t2b[j]))
                    want = want + r * ((base - t) + r * (q - t2)) if r else want
                if data.per_batch != 0.0:
                    want += data.per_batch * ((nj + b - 1) // b)
                assert out[j] == want, (kw, i, j, r)
    assert seen == {0, 1, 2}  # residues in every range: the chain, the quotients, side by side


@pytest.mark.parametrize("seed", range(4))
def test_every_residues_ratio_of_one_pass_is_short_ratio_bit_for_bit(seed):
    """``step_ratios`` forms every size's ``C(a, s) / C(b, s)`` (``s <= 64``) from prefix
    products shared across sizes, yet each is the float ``short_ratio`` computes alone, for
    ends of 0 to 200 samples (the chain, the product and both kinds of quotients); of the
    sizes it is given, only the first ``count`` (those still live), and none above them."""
    rng = np.random.default_rng(9200 + seed)
    work = np.empty((5, 65))
    for _ in range(300):
        a = int(rng.integers(1, 10**6)) if rng.random() < 0.8 else int(rng.integers(1, 80))
        b = a + int(rng.choice([rng.integers(0, 9), rng.integers(9, 64), rng.integers(64, 200)]))
        sizes = np.flatnonzero(rng.random(65) < rng.choice([0.1, 0.5, 1.0]))
        sizes = sizes[(sizes >= 1) & (sizes <= a)]
        if not sizes.size:
            continue
        work[:] = np.nan
        count = int(rng.integers(1, sizes.size + 1))  # (the sizes still live: a prefix)
        exact.step_ratios(a, b, sizes, count, work)
        for s in sizes[:count]:
            assert work[0, s] == exact.short_ratio(a, b, int(s), np.zeros(0), np.zeros(0)), (a, b, s)
        assert np.isnan(work[0, sizes[count:][sizes[count:] > max(16, sizes[count - 1])]]).all()


@pytest.mark.parametrize(
    "rule",
    [BatchRule(batch_size=1), BatchRule(batch_size=16), BatchRule(batch_size=17), BatchRule(batch_size=1_000)]
    + [BatchRule(max_tokens=512), BatchRule(max_tokens=512, pad_to_multiple_of=8)],
)
def test_rows_compiled_without_carried_row_are_the_same_floats(rule):
    """``carried_rows`` is None exactly where every row takes ``small_row`` (one fixed
    ``B <= 16``), and there ``exact_row`` compiled without ``carried_row`` gives, bit for bit,
    the floats of the one that chooses row by row."""
    hist = LengthHistogram.from_counts(np.arange(1, 121) * 3, 1 + np.arange(120) % 7 * 5)
    prob = problem.build_problem(hist, rule, 1)
    data, short = exact.exact_arrays(prob)
    carried = exact.carried_rows(data)
    assert (carried is None) == (rule.batch_size is not None and rule.batch_size <= 16)
    m = prob.m
    need = np.ones(m + 1, np.bool_)
    for i in range(m):
        want, got = np.empty(m + 1), np.empty(m + 1)
        exact.exact_row(i, data, short, need, want, np.zeros(m + 1), np.zeros(m + 1), True)  # row by row
        exact.exact_row(i, data, short, need, got, np.zeros(m + 1), np.zeros(m + 1), carried)
        assert got[i + 1 :].tobytes() == want[i + 1 :].tobytes()


def test_a_batch_whose_binomial_passes_e600_takes_the_product_formula_and_the_dense_optimum():
    """Batch size 64 over 900,000 samples: ``log C(N, 64)`` is about 672, below the limit of
    700 (float64 reaches e**709), so ``C(x, B)`` comes from the product formula, and the pruned
    DP's optimum for every K up to 6 is the dense DP's: the same float, the same ends."""
    lengths = np.arange(1, 201) * 7
    counts = np.full(200, 4_500)
    prob = problem.build_problem(LengthHistogram.from_counts(lengths, counts), BatchRule(batch_size=64), 1)
    data, short = exact.exact_arrays(prob)
    assert short.product and 600 < ratios._log_comb_top(int(prob.cum[-1]), 64) < 700
    dense_best, dense_arg = kernel.solve_kernel(prob, 6, prob.ends, dense=True)
    best, arg = kernel.solve_kernel(prob, 6, prob.ends)
    for k in range(1, 7):
        assert best[k, prob.m] == dense_best[k, prob.m]
        assert kernel.backtrack(arg, k, prob.m) == kernel.backtrack(dense_arg, k, prob.m)
