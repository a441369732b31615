"""The pruned DP's lower bounds on a bucket's exact cost, against exact rationals: the power
bound on a short batch's running sum (``_exact.power_cap``) for every residue, and the bounds
the DP reads (``_lower.low_costs``) for every bucket, with and without a working-set term,
under batch sizes and token budgets large enough for the power bound to apply."""

from __future__ import annotations

import importlib
import math
from fractions import Fraction

import numpy as np
import pytest

from analysis import LengthHistogram, StepTimeModel
from analysis.batching import BatchRule
from analysis.optimize import _problem as problem

exact = importlib.import_module("analysis.optimize._exact")
lower = importlib.import_module("analysis.optimize._lower")
budget = importlib.import_module("analysis.optimize._budget")
kernel = importlib.import_module("analysis.optimize._kernel")
cases = importlib.import_module("tests.optimize.test_optimize_exact")


def below_sum(counts: list[int], steps: list[Fraction], size: int) -> Fraction:
    """``T_s = sum_k step_k C(x_k, s) / C(n, s)`` in exact rationals (``x_k`` the samples at or
    below the k-th length; the step from it to the next length)."""
    n = sum(counts)
    x = np.cumsum(counts)[:-1].tolist()
    return sum((st * math.comb(xk, size) for xk, st in zip(x, steps, strict=True)), Fraction(0)) / math.comb(
        n, size
    )


@pytest.mark.parametrize("seed", range(30))
def test_the_power_cap_bounds_the_short_batch_sum_for_every_residue(seed):
    """``T_r <= S power_cap(T_B, S, n, B, r)`` for every ``1 <= r < B`` (steps ``>= 0`` summing
    to ``S``), exactly: the sums in rationals, the cap in floats."""
    rng = np.random.default_rng(7000 + seed)
    m = int(rng.integers(2, 7))
    counts = rng.integers(1, [4, 30, 120][seed % 3], m).tolist()
    steps = [Fraction(int(v)) for v in rng.integers(0, 50, m - 1)]
    steps[int(rng.integers(0, m - 1))] += 1  # S > 0
    n = sum(counts)
    s = sum(steps)
    sizes = sorted({int(b) for b in rng.integers(2, n + 1, 4)} | {n})
    tight = 0
    for b in sizes:
        t_b = below_sum(counts, steps, b)
        for r in range(1, b):
            t_r = below_sum(counts, steps, r)
            cap = exact.power_cap(float(t_b), float(s), float(n), float(b), float(r))
            assert t_r <= Fraction(cap) * s, (b, r)
            tight += float(s) * cap < float(s) - float(t_r) / 2 + float(t_r)  # below (S + T_r) / 2
    assert tight > 0 or n <= 3  # not the trivial cap of 1 everywhere


def model_rules() -> list[tuple[dict, StepTimeModel | None]]:
    model = StepTimeModel(per_step=0.5, per_sample=0.25, per_token=1e-2, attention=1e-3, working_set=2e-3)
    rules = [{"batch_size": 65}, {"batch_size": 300}, {"max_tokens": 12_000}]
    return [(rule, m) for rule in rules for m in (None, model)]


def bucket_cost(lengths, counts, i: int, j: int, rule: dict, model) -> Fraction:
    """The exact objective of bucket ``(i, j]`` (distinct lengths ``i + 1 .. j``, from 1)."""
    lo = 0 if i == 0 else lengths[i - 1]
    return cases.exact_cost(lengths, counts, [lo, lengths[j - 1]], rule, model=model)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize(("rule", "model"), model_rules())
def test_every_lower_bound_is_at_most_the_exact_cost(seed, rule, model):
    """``low_costs`` of every start (the bounds the backward pass and the forward pass read)
    is at most the exact cost the DP compares it with (``exact_row``'s floats, themselves the
    exact rationals to 1e-12) of every bucket, with the power bound on: buckets
    of hundreds of samples (every residue mod B in reach), a working-set term or none; and
    the power bound raises some bound above the chord's alone (it is computed)."""
    rng = np.random.default_rng(8000 + seed)
    m = int(rng.integers(3, 9))
    lengths = sorted(rng.choice(np.arange(20, 120), m, replace=False).tolist())
    counts = rng.integers(1, 400, m).tolist()
    hist = LengthHistogram.from_counts(lengths, counts)
    objective = "padding" if model is None else "time"
    prob = problem.build_problem(hist, BatchRule(**rule), 1, step_time=model, objective=objective)
    data, short = exact.exact_arrays(prob)
    assert short.power
    bounds = budget.budget_bounds(data, objective=prob.objective) if data.token else kernel._NO_BOUNDS
    m = prob.m
    is_end = np.ones(m + 1, np.bool_)
    low, chord, work = np.empty(m + 1), np.empty(m + 1), np.empty(m + 1)
    costs = kernel.cost_matrix(prob, np.arange(m + 1))  # the exact costs the DP compares with
    raised = 0
    for i in range(m):
        lower.low_costs(i, data, short, bounds, is_end, work, low)
        lower.low_costs(i, data, short._replace(power=False), bounds, is_end, work, chord)
        assert (low >= chord)[i + 1 :].all()
        raised += int((low > chord)[i + 1 :].sum())
        assert (low <= costs[i])[i + 1 :].all()
        for j in range(i + 1, m + 1):
            cost = bucket_cost(lengths, counts, i, j, rule, model)
            assert costs[i, j] == pytest.approx(float(cost), rel=1e-12)
            assert Fraction(low[j]) <= cost * (1 + Fraction(1, 10**12)), (i, j)
    assert raised > 0


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("size", [16, 40, 64])
def test_the_chord_from_the_mean_is_at_most_the_exact_cost_and_raises_bounds(seed, size):
    """Batch sizes 16 to 64 (``C(x, B)`` by the product formula, no power bound): every
    bound of ``low_costs`` is at most the exact cost in rationals, and the chord from the
    bucket's mean ``E_1`` (``fixed_bound``) raises bounds above the chord from its shortest
    length (the bounds with ``power=False``, which reads no mean) on a heavy tail: the
    longest lengths far above the rest, each held by a few samples."""
    rng = np.random.default_rng(8100 + seed)
    m = int(rng.integers(6, 12))
    lengths = sorted(rng.choice(np.arange(20, 200), m - 3, replace=False).tolist()) + [900, 3000, 9000]
    counts = rng.integers(20, 300, m).tolist()
    counts[-3:] = rng.integers(1, 5, 3).tolist()
    hist = LengthHistogram.from_counts(lengths, counts)
    prob = problem.build_problem(hist, BatchRule(batch_size=size), 1)
    data, short = exact.exact_arrays(prob)
    assert short.product and short.power and not short.quad
    is_end = np.ones(m + 1, np.bool_)
    low, chord, work = np.empty(m + 1), np.empty(m + 1), np.empty(m + 1)
    costs = kernel.cost_matrix(prob, np.arange(m + 1))
    raised = 0
    for i in range(m):
        lower.low_costs(i, data, short, kernel._NO_BOUNDS, is_end, work, low)
        lower.low_costs(i, data, short._replace(power=False), kernel._NO_BOUNDS, is_end, work, chord)
        assert (low >= chord)[i + 1 :].all()
        raised += int((low > chord)[i + 1 :].sum())
        for j in range(i + 1, m + 1):
            cost = bucket_cost(lengths, counts, i, j, {"batch_size": size}, None)
            assert costs[i, j] == pytest.approx(float(cost), rel=1e-12)
            assert Fraction(low[j]) <= cost * (1 + Fraction(1, 10**12)), (i, j)
    assert raised > m


def test_the_chord_sizes_are_powers_of_two_near_the_root_of_b_and_four_times_it_below_b():
    """From 24 to 10**4 (and no chords outside): ``s_1`` the power of two nearest ``sqrt(B)``
    in ``log2``, or the one below where ``4 s_1`` would reach ``B``; ``s_2 = 4 s_1 < B``."""
    hist = LengthHistogram.from_counts([3, 9, 40], [5, 7, 2])
    plain = exact.exact_arrays(problem.build_problem(hist, BatchRule(batch_size=64), 1))[1]
    short = plain._replace(chords=True)
    assert lower.chord_sizes(short, 23.0) == lower.chord_sizes(short, 10_001.0) == (0.0, 0.0)
    for b in range(24, 10_001):
        s1, s2 = lower.chord_sizes(short, float(b))
        e = math.log2(s1)
        assert e == int(e) and s2 == 4 * s1 < b, b
        nearest = abs(e - math.log2(b) / 2) <= 0.5
        assert nearest or (abs(e + 1 - math.log2(b) / 2) <= 0.5 and 8 * s1 >= b), b
    assert [lower.chord_sizes(short, float(b)) for b in (24, 64, 100, 1000, 10_000)] == [
        (4.0, 16.0),
        (8.0, 32.0),
        (8.0, 32.0),
        (32.0, 128.0),
        (128.0, 512.0),
    ]


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("size", [32, 37, 64])
def test_the_chords_sums_bound_their_exact_sums_and_raise_the_bounds(seed, size):
    """Batch sizes 32 to 64 (the product formula, a mean read): the chords' running sums
    ``T_s`` at ``s`` 4 and 16 (8 and 32 above 32; ``chord_sums``) are at least the exact
    ``T_s`` in rationals (0 where the bucket holds fewer than ``s``); each bound of ``low_costs`` is
    ``fixed_bound`` reading them (the same floats), at least the bound without them, and
    higher at many buckets of a heavy tail (the last lengths far above the rest)."""
    rng = np.random.default_rng(8300 + seed)
    m = 14
    lengths = sorted(rng.choice(np.arange(20, 400), m - 4, replace=False).tolist()) + [900, 2000, 5000, 9000]
    counts = rng.integers(3, 40, m).tolist()
    counts[-4:] = rng.integers(1, 4, 4).tolist()
    prob = problem.build_problem(LengthHistogram.from_counts(lengths, counts), BatchRule(batch_size=size), 1)
    data, plain = exact.exact_arrays(prob)
    assert lower.chord_sizes(plain, float(size)) == (0.0, 0.0)  # (none unless asked for)
    short = plain._replace(chords=True)
    sizes = lower.chord_sizes(short, float(size))
    assert sizes == ((4.0, 16.0) if size == 32 else (8.0, 32.0))  # (near sqrt(B), 4 times it, below B)
    is_end = np.ones(m + 1, np.bool_)
    low, t_b = np.empty(m + 1), np.empty(m + 1)
    steps = [Fraction(float(v)) for v in short.base_step]
    raised = 0
    for i in range(m - 1):
        lower.low_costs(i, data, short, kernel._NO_BOUNDS, is_end, t_b, low)  # (t_b: the row's T_B)
        sums = lower.chord_sums(i, data, short, sizes)
        c_i, w = short.cum_float[i], data.weight
        a_i = short.above[i] * lower.row_mean_scale(short, float(size))
        first = (w[i + 1], short.base[i + 1], short.q[i + 1])
        for j in range(i + 2, m + 1):
            for t, s in enumerate(sizes):
                if sum(counts[i:j]) < s:  # (no subset of s: every ratio 0)
                    assert sums[t, j] == 0.0
                    continue
                want = below_sum(counts[i:j], steps[i + 1 : j], int(s))
                assert Fraction(sums[t, j]) >= want, (i, j, s)
            n = short.cum_float[j] - c_i
            mean = lower.mean_low(a_i, short.above[j], n)
            ends = (short.base[j], short.q[j], False, data.per_batch)
            bound = (n, w[j] - t_b[j], mean, float(size), first, *ends)
            chords = (sizes[0], sizes[1], w[j] - sums[0, j], w[j] - sums[1, j])
            assert lower.fixed_bound(*bound, chords) == low[j], (i, j)
            without = lower.fixed_bound(*bound, lower.NO_CHORDS)
            assert low[j] >= without, (i, j)
            raised += int(low[j] > without * (1 + 1e-6))
    assert raised > m


@pytest.mark.parametrize("size", [4, 8, 16, 32, 64, 128, 256, 512])
def test_the_chords_ratio_is_at_least_the_ratio_and_close_far_above_its_size(size):
    """``chord_ratio`` (over more than two samples Jensen's bound by squarings) is at least
    ``C(a, s) / C(b, s)`` in rationals from ``a = s`` (where it is far above) to ``a`` of
    millions, over 1 to 10**4 samples, within ``s**3 d / (6 a**3)`` of it where ``a >= 8 s``
    (and the margin ``power_grow``), and 0 below ``s`` (and where the power underflows: a
    ratio below ``2**-1000``, far under the bounds' margin)."""
    close = 0
    for a in [size, size + 1, size + 5, 2 * size, 8 * size, 50 * size, 10**5, 3 * 10**6]:
        for d in [1, 2, 3, 4, 17, 200, 10**4]:
            b = a + d
            got = lower.chord_ratio(float(a), float(b), float(size))
            want = Fraction(math.comb(a, size), math.comb(b, size))
            assert Fraction(got) >= want - Fraction(2) ** -1000, (a, d)  # (0 where it underflows)
            if a >= 8 * size and want > 0:
                slack = size**3 * d / (6 * a**3) + lower.power_grow(float(size)) - 1 + 1e-14
                assert got <= float(want) * (1 + slack) + 1e-300, (a, d)
                close += 1
    assert close >= 20
    assert lower.chord_ratio(float(size - 1), float(size + 40), float(size)) == 0.0


def test_the_mean_read_from_the_sums_above_is_at_most_the_mean():
    """``mean_low`` from the sums of ``base`` above each end (``Short.above``, from the top) is
    at most each bucket's mean in rationals, also where the bucket is a sliver below a tail
    holding almost all of the sum (the two sums nearly cancel), and within 1e-9 of it where
    the bucket holds a tenth of the sum above its start."""
    rng = np.random.default_rng(8200)
    m = 400
    lengths = np.unique(rng.integers(1, 10**6, 3 * m))[:m]
    counts = rng.integers(1, 50, lengths.size)
    counts[-20:] = rng.integers(10**4, 10**5, 20)  # (the tail holds almost all of the sum)
    hist = LengthHistogram.from_counts(lengths, counts)
    prob = problem.build_problem(hist, BatchRule(batch_size=32), 1)
    data, short = exact.exact_arrays(prob)
    m = prob.m
    scale = lower.mean_scale(short)
    assert 0.0 < scale < 1.0
    cum = prob.cum.tolist()
    base = [Fraction(float(v)) for v in short.base]
    above = [Fraction(0)] * (m + 1)  # exact
    for k in range(m - 1, -1, -1):
        above[k] = above[k + 1] + (cum[k + 1] - cum[k]) * base[k + 1]
    close = 0
    for i in rng.integers(0, m - 1, 60).tolist():
        for j in rng.integers(i + 1, m + 1, 20).tolist():
            n = cum[j] - cum[i]
            want = (above[i] - above[j]) / n
            got = lower.mean_low(float(short.above[i]) * scale, float(short.above[j]), float(n))
            assert Fraction(got) <= want, (i, j)
            if above[i] - above[j] >= above[i] / 10:
                assert float(want) - got <= 1e-9 * float(want), (i, j)
                close += 1
    assert close > 50


@pytest.mark.parametrize("size", [65, 300, 2000])
def test_the_ratio_bounds_are_at_least_the_ratios_and_close(size):
    """``ratio_bounds`` (what the bounds read for a batch size with no table of ``C(x, B)``):
    at least ``C(x_{j-1}, B) / C(x_j, B)`` for every end, in rationals, and within 1e-5 of it
    where the bucket holds at least ``8 B`` samples below the end and the end at most a
    hundredth of them (``B / x`` and the step small: the series and Jensen's gap vanish), and
    within ``2e-11`` where the end holds at most ``FEW_STEPS`` samples (the product itself)."""
    rng = np.random.default_rng(size)
    m = 300
    counts = np.where(rng.random(m) < 0.2, rng.integers(1, 3000, m), rng.integers(1, 60, m))
    hist = LengthHistogram.from_counts(np.arange(1, m + 1), counts)
    prob = problem.build_problem(hist, BatchRule(batch_size=size), 1)
    data, short = exact.exact_arrays(prob)
    assert not data.comb.size and not short.product  # (the rows these ratios serve)
    ratio = np.zeros(m + 1)
    close, err, few, few_err = 0, 0.0, 0, 0.0
    for i in (0, 7, 40):
        x = (prob.cum - prob.cum[i]).tolist()
        j0 = next(j for j in range(i + 2, m + 1) if x[j - 1] >= size)
        exact.ratio_bounds(i, j0, data, short, ratio)
        for j in range(j0, m + 1):
            want = Fraction(math.comb(x[j - 1], size), math.comb(x[j], size))
            assert Fraction(ratio[j]) >= want, (i, j)
            if x[j - 1] >= 8 * size and x[j] - x[j - 1] <= x[j - 1] // 100:
                err = max(err, ratio[j] / float(want) - 1)
                close += 1
            if x[j] - x[j - 1] <= exact.FEW_STEPS:
                few_err = max(few_err, float(Fraction(ratio[j]) / want - 1))
                few += 1
    assert close > 100 and few > 20
    assert err <= 1e-5
    assert few_err <= 2e-11


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("model", [None, "time"])
@pytest.mark.parametrize("size", [100, 700])
def test_the_residue_bound_is_at_most_the_exact_cost_and_tighter(seed, model, size):
    """``residue_bound`` (the forward pass's bound on a bucket whose short batch holds more
    than ``POWER_ABOVE`` samples) is at most the exact rational cost and the DP's floats of
    every such bucket, with and without a working-set term, and above the row's bounds
    (chord and power bound) for most of them (where the short batch is a small part of a
    batch: the case it is for)."""
    rng = np.random.default_rng(9000 + seed)
    m = 16
    lengths = sorted(rng.choice(np.arange(20, 400), m, replace=False).tolist())
    counts = rng.integers(1, 8 * size // m, m).tolist()
    hist = LengthHistogram.from_counts(lengths, counts)
    step_time = model_rules()[1][1] if model else None
    prob = problem.build_problem(
        hist, BatchRule(batch_size=size), 1, step_time=step_time, objective="time" if model else "padding"
    )
    data, short = exact.exact_arrays(prob)
    assert short.power and not short.product and short.quad == bool(model)
    is_end = np.ones(m + 1, np.bool_)
    low, t_b, work = np.empty(m + 1), np.empty(m + 1), np.empty(m + 1)
    costs = kernel.cost_matrix(prob, np.arange(m + 1))
    checked = tighter = 0
    for i in range(m - 1):
        lower.low_costs(i, data, short, kernel._NO_BOUNDS, is_end, t_b, low)  # t_b: the row's T_B bounds
        for j in range(i + 2, m + 1):
            n = int(prob.cum[j] - prob.cum[i])
            if n < size or n % size <= exact.POWER_ABOVE:
                continue
            bound = lower.residue_bound(i, j, t_b[j], data, short, work)
            cost = bucket_cost(lengths, counts, i, j, {"batch_size": size}, step_time)
            assert bound <= costs[i, j] and Fraction(bound) <= cost, (i, j)
            checked += 1
            tighter += bound > low[j]
    assert checked >= 10
    assert tighter >= checked // 2
