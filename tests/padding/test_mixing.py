"""The exact mixing (analysis.padding.mixing) against brute force over every shuffle, against an
independent formula, and against simulated epochs within their standard errors."""

from __future__ import annotations

import itertools
import math
import statistics
from fractions import Fraction

import numpy as np
import pytest

from analysis import BatchRule, LengthHistogram, simulate
from analysis.padding.mixing import (
    batch_mixing,
    bucketed_mixing,
    length_variance,
    random_mixing,
    sorted_mixing,
)


def _sample_var(xs: list[int]) -> Fraction:
    if len(xs) < 2:
        return Fraction(0)
    mean = Fraction(sum(xs), len(xs))
    return sum((Fraction(x) - mean) ** 2 for x in xs) / (len(xs) - 1)


def _brute_bucketed(lengths: list[int], edges: list[int], sizes: list[int]) -> Fraction:
    """Sample-weighted mean of batch sample variances over every shuffle of every bucket
    (each bucket shuffled and cut into batches of its size), over S**2, in exact fractions."""
    total = Fraction(0)
    for lo, hi, size in zip(edges[:-1], edges[1:], sizes):
        bucket = [x for x in lengths if lo < x <= hi]
        if not bucket:
            continue
        perms = list(itertools.permutations(bucket))
        acc = Fraction(0)
        for p in perms:
            for s in range(0, len(p), size):
                batch = list(p[s : s + size])
                acc += len(batch) * _sample_var(batch)
        total += acc / len(perms)
    return total / len(lengths) / _sample_var(lengths)


@pytest.mark.parametrize(
    ("lengths", "edges", "size"),
    [
        ([1, 2, 2, 5, 7, 7, 9], [0, 2, 9], 2),
        ([1, 2, 2, 5, 7, 7, 9], [0, 5, 9], 3),
        ([3, 3, 4, 10, 11, 30, 31], [0, 10, 31], 4),
        ([3, 3, 4, 10, 11, 30, 31], [0, 31], 3),  # one bucket: the full shuffle
        ([1, 5, 6, 6, 8, 20], [0, 1, 6, 20], 2),  # a bucket of one sample
    ],
)
def test_bucketed_mixing_is_the_mean_over_every_shuffle(lengths, edges, size):
    hist = LengthHistogram.from_lengths(lengths)
    want = float(_brute_bucketed(lengths, edges, [size] * (len(edges) - 1)))
    assert bucketed_mixing(hist, edges, rule=BatchRule(batch_size=size)) == pytest.approx(want, rel=1e-12)


def test_token_budget_batch_sizes_follow_each_bucket():
    lengths = [2, 2, 3, 4, 8, 9, 10]
    hist = LengthHistogram.from_lengths(lengths)
    edges = [0, 4, 10]  # max_tokens 12: 3 per batch below 4, 1 per batch below 10
    want = float(_brute_bucketed(lengths, edges, [3, 1]))
    assert bucketed_mixing(hist, edges, rule=BatchRule(max_tokens=12)) == pytest.approx(want, rel=1e-12)


def test_random_is_one_but_a_last_batch_of_one():
    hist = LengthHistogram.from_lengths([1, 4, 4, 9, 16, 25, 36, 49])
    assert random_mixing(hist, rule=BatchRule(batch_size=4)) == 1.0
    assert random_mixing(hist, rule=BatchRule(batch_size=7)) == pytest.approx(7 / 8, rel=1e-15)
    assert random_mixing(hist, rule=BatchRule(batch_size=1)) == 0.0


def test_sorted_against_its_batches():
    rng = np.random.default_rng(3)
    lengths = sorted(rng.integers(1, 40, size=203).tolist())
    hist = LengthHistogram.from_lengths(lengths)
    for size in (1, 2, 7, 16, 300):
        batches = [lengths[s : s + size] for s in range(0, len(lengths), size)]
        want = sum(len(b) * _sample_var(b) for b in batches) / len(lengths) / _sample_var(lengths)
        assert sorted_mixing(hist, rule=BatchRule(batch_size=size)) == pytest.approx(
            float(want), rel=1e-12, abs=1e-15
        )


def test_variance_and_one_length():
    hist = LengthHistogram.from_lengths([5, 5, 5])
    assert length_variance(hist) == 0.0
    assert (
        bucketed_mixing(hist, [0, 5], rule=BatchRule(batch_size=2))
        == sorted_mixing(hist, rule=BatchRule(batch_size=2))
        == 1.0
    )
    big = LengthHistogram.from_counts([1, 10**6], [10**12, 10**12])  # exact ints, no overflow
    n = 2 * 10**12
    assert length_variance(big) == pytest.approx((10**6 - 1) ** 2 / 4 * n / (n - 1), rel=1e-15)


def test_batch_mixing_against_statistics():
    rng = np.random.default_rng(0)
    lengths = rng.integers(1, 100, size=60)
    cuts = [0, 1, 5, 17, 18, 40, 60]
    batches = [lengths[a:b] for a, b in zip(cuts[:-1], cuts[1:])]
    var = statistics.variance(lengths.tolist())
    want = sum(len(b) * (statistics.variance(b.tolist()) if len(b) > 1 else 0) for b in batches) / 60 / var
    mix, se = batch_mixing(
        np.array([int((b.astype(np.int64) ** 2).sum()) for b in batches]),
        np.array([len(b) for b in batches]),
        np.array([int(b.sum()) for b in batches]),
        var,
    )
    assert mix == pytest.approx(want, rel=1e-12) and se > 0


@pytest.mark.parametrize("strategy", ["bucketed", "random", "sorted"])
def test_simulated_mixing_within_three_standard_errors(strategy):
    rng = np.random.default_rng(11)
    lengths = np.concatenate([rng.integers(5, 60, 3000), rng.integers(200, 900, 800)])
    hist = LengthHistogram.from_lengths(lengths)
    edges = [0, 40, 300, 600, 899]
    res = simulate(hist, strategy, batch_size=8, rng=np.random.default_rng(5), epochs=6, edges=edges)
    exact = {
        "bucketed": bucketed_mixing(hist, edges, rule=BatchRule(batch_size=8)),
        "random": random_mixing(hist, rule=BatchRule(batch_size=8)),
        "sorted": sorted_mixing(hist, rule=BatchRule(batch_size=8)),
    }[strategy]
    got = float(res.epochs["mixing"].mean())
    se = math.sqrt(float((res.epochs["mixing_se"] ** 2).mean()) / res.n_epochs)
    if strategy == "sorted":  # deterministic batches: the simulation is the exact value
        assert got == pytest.approx(exact, rel=1e-12)
    else:
        assert abs(got - exact) <= 3 * se, (got, exact, se)
        assert se < 0.02


def test_mixing_se_is_zero_where_the_epochs_agree_and_the_spread_over_epochs_otherwise():
    """Packing forms the same bins every epoch: 50 epochs of one mixing once had a
    ``mixing_se`` of the batches' spread; it is 0.  A random strategy's SE is the epochs'
    standard deviation over sqrt(n) (an independent formula), and one epoch keeps the
    batch-level SE."""
    lengths = np.random.default_rng(3).integers(1, 2_000, 3_000)
    hist = LengthHistogram.from_lengths(lengths)
    packed = simulate(hist, "packing", max_tokens=4_096, rng=np.random.default_rng(0), epochs=50)
    assert np.ptp(packed.epochs["mixing"].to_numpy()) < 1e-12 and packed.mixing_se == 0.0  # sums reordered
    shuffled = simulate(hist, "random", batch_size=8, rng=np.random.default_rng(0), epochs=20)
    m = shuffled.epochs["mixing"].to_numpy()
    assert shuffled.mixing_se == pytest.approx(float(np.std(m, ddof=1)) / math.sqrt(20), rel=1e-12)
    assert shuffled.mixing_se > 0
    one = simulate(hist, "random", batch_size=8, rng=np.random.default_rng(0), epochs=1)
    assert one.mixing_se == float(one.epochs["mixing_se"].iloc[0]) > 0
