"""One bucket's order statistics shared between its padding and its objective: the same numbers."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from analysis.padding import order_stats
from analysis.padding.order_stats import (
    bucket_waste,
    expected_batch_sum,
    expected_excess,
    inner_log_probs,
    log_prob_max_at_most,
    padded_values,
    share_log_probs,
)


def _bits(values: np.ndarray) -> np.ndarray:
    return np.asarray(values, dtype=float).view(np.int64)


@pytest.mark.parametrize("seed", range(6))
def test_shared_sizes_are_the_separate_calls_bit_for_bit(seed: int) -> None:
    rng = np.random.default_rng(seed)
    counts = rng.integers(1, 40, size=int(rng.integers(2, 300)))
    cum = np.cumsum(counts)
    n = int(cum[-1])
    batch = int(rng.integers(2, 65))
    sizes = (1, *sorted({int(rng.integers(2, batch + 1)), batch}))
    shared: dict[int, np.ndarray] = {}
    share_log_probs(cum, sizes, shared)
    for size in sizes:
        inner = cum[:-1]
        expected = log_prob_max_at_most(inner[inner >= size], n, size)
        assert np.array_equal(_bits(shared[size]), _bits(expected))
        assert np.array_equal(_bits(inner_log_probs(cum, size)), _bits(expected))


def test_shared_log_probs_are_the_exact_binomial_ratios() -> None:
    counts = np.array([3, 1, 4, 1, 5, 9, 2, 6])
    cum = np.cumsum(counts)
    n = int(cum[-1])
    shared: dict[int, np.ndarray] = {}
    share_log_probs(cum, (1, 3, 7), shared)
    for size in (1, 3, 7):
        rows = [int(c) for c in cum[:-1] if c >= size]
        exact = [math.log(Fraction(math.comb(c, size), math.comb(n, size))) for c in rows]
        np.testing.assert_allclose(shared[size], exact, rtol=1e-14)


@pytest.mark.parametrize("size", [65, 300, 5000])
def test_the_rows_near_the_top_are_the_exact_binomial_ratios_for_a_large_size(size: int) -> None:
    """Above 64 a row at most 64 samples below the top (one running sum over the terms) is
    ``log(C(c, size) / C(n, size))`` in rationals to ``1e-13`` of itself, and of the running sum
    of its own terms, in order, bit for bit (what a row alone gives)."""
    n = 3 * size + 17
    cum = np.array([n - 64, n - 40, n - 17, n - 3, n - 1, n])
    got = log_prob_max_at_most(cum, n, size)
    for c, value in zip(cum.tolist(), got.tolist(), strict=True):
        exact = math.log(Fraction(math.comb(c, size), math.comb(n, size))) if c < n else 0.0
        assert value == pytest.approx(exact, rel=1e-13, abs=1e-300)
        alone = 0.0
        for i in range(n - c):
            alone += float(np.log1p(-size / (n - i)))
        assert value == alone


@pytest.mark.parametrize("size", [65, 300, 1000])
def test_the_stirling_rows_are_each_terms_own_call_and_the_exact_ratios(size: int) -> None:
    """Rows neither near the top nor far above ``size`` (Stirling's series) are, bit for bit,
    the series with each function called on its own argument (the form the rows once took,
    one row at a time), and ``log(C(c, size) / C(n, size))`` in rationals to ``1e-12``."""
    n = 5 * size + 101
    cum = np.unique(np.linspace(size + 16, 6 * size - 1, 40).astype(np.int64))
    cum = cum[(cum <= n - 65) & (cum < 6 * size)]
    got = log_prob_max_at_most(cum, n, size)
    nf = float(n)
    for c, value in zip(cum.tolist(), got.tolist(), strict=True):
        a, d = np.array([float(c)]), np.array([float(n - c)])
        b = a - size
        alone = (
            -a * order_stats._log1pmx(d / a)
            + b * order_stats._log1pmx(d / b)
            + d * np.log1p(-size / nf)
            - 0.5 * (np.log1p(d / a) - np.log1p(d / b))
            + order_stats._stirlerr(a)
            - order_stats._stirlerr(a + d)
            - order_stats._stirlerr(b)
            + order_stats._stirlerr(b + d)
        )
        assert _bits(np.array([value]))[0] == _bits(alone)[0], c
        exact = math.log(math.comb(c, size)) - math.log(math.comb(n, size))  # (exact integers)
        assert value == pytest.approx(exact, rel=1e-12)


@pytest.mark.parametrize("batch_size", [2, 5, 8, 64])
def test_waste_and_objective_with_shared_statistics_are_unchanged(batch_size: int) -> None:
    rng = np.random.default_rng(batch_size)
    lengths = np.unique(rng.integers(1, 500, size=80))
    counts = rng.integers(1, 30, size=lengths.size)
    cum = np.cumsum(counts)
    g = padded_values(lengths, 8)
    shared: dict[int, np.ndarray] = {}
    assert bucket_waste(lengths, counts, batch_size, 8, shared=shared) == bucket_waste(
        lengths, counts, batch_size, 8
    )
    assert batch_size in shared and 1 in shared
    assert expected_batch_sum(g, cum, batch_size, shared=shared) == expected_batch_sum(g, cum, batch_size)
    assert expected_excess(g, cum, batch_size, shared) == expected_excess(g, cum, batch_size)


def _every_midpoint_term(d: np.ndarray, n: float, size: int) -> np.ndarray:
    """The midpoint series with all nine of its terms subtracted (the sum the skipped terms
    must leave as it is), each power sum by its own call of :func:`order_stats._power_sums`
    (the module takes all of a row's at once: the same floats)."""
    x0 = n - (size - 1) / 2.0
    main = np.log1p(-d / x0)
    out = size * main
    for k in range(2, 19, 2):
        w = order_stats._power_sums(size, x0, [k])[0]
        if w == 0.0:
            break
        out = out - (w / k) * np.expm1(-k * main)
    return out


@pytest.mark.parametrize("seed", range(4))
def test_the_midpoint_series_skips_only_terms_that_change_no_float(seed: int) -> None:
    """The terms whose share of every element is below half an ulp are skipped: the sums are
    the nine-term series' bit for bit, from rows at the series' edge (``c = 6 size``) to the
    top (``d = 0``), for batch sizes on both sides of the direct power sums; and some terms
    are skipped (else the check would be idle)."""
    rng = np.random.default_rng(seed)
    skipped = 0
    for size in (65, 1_000, 4_096, 5_000, 100_000):
        n = float(rng.integers(7 * size, 4_000 * size))
        d = np.unique(np.r_[0.0, n - 6.0 * size, rng.integers(0, int(n - 6 * size), 300).astype(float)])
        got = order_stats._midpoint_log_sum(d, n, size)
        assert np.array_equal(_bits(got), _bits(_every_midpoint_term(d, n, size)))
        steepest = -float(np.log1p(-d / (n - (size - 1) / 2.0)).min())
        widest = (size - 1) / (2.0 * (n - (size - 1) / 2.0))
        shares = [order_stats._share(size * widest**k, k, size, steepest) for k in range(2, 19, 2)]
        skipped += sum(share < order_stats._NEGLIGIBLE for share in shares)
    assert skipped >= 10


@pytest.mark.parametrize("size", [65, 66, 127, 1_000, 4_096])
def test_the_power_sums_are_the_exact_sums_of_the_whole_batch(size: int) -> None:
    """Twice the upper half's sum is the sum over every offset ``(i - (size-1)/2) / x0``, as
    exact rationals, within 16 ulps, for every even ``k`` the series takes (measured over 60
    buckets: at most 11 ulps, the whole array's sums 12; ``x0`` from a bucket of 6 to 300
    batches)."""
    rng = np.random.default_rng(size)
    for x0 in (6.0 * size, float(rng.integers(6 * size, 300 * size)) - (size - 1) / 2.0):
        ks = list(range(2, 19, 2))
        got = order_stats._power_sums(size, x0, ks)
        centre, scale = Fraction(size - 1, 2), Fraction(x0)
        for k, w in zip(ks, got, strict=True):
            exact = sum(((i - centre) / scale) ** k for i in range(size))
            assert abs(Fraction(w) - exact) <= 16 * 2.0**-53 * exact, (k, w, float(exact))


def _buckets_of_every_form(rng: np.random.Generator) -> list[tuple[np.ndarray, int, int]]:
    """Buckets ``(rows, n, size)`` whose rows reach every form of :func:`log_prob_max_at_most`:
    the product form (``size <= 64``), and above 64 the rows near the top, the midpoint series,
    Stirling's series and plain gammaln differences (and a row at the top, ``c = n``)."""
    out = []
    for size in (7, 64, 65, 131, 1_000, 5_000):
        n = int(rng.integers(8 * size, 40 * size))
        cum = np.unique(np.r_[size, size + 3, size + 20, rng.integers(size, n - 65, 30), n - 64, n - 1, n])
        out.append((cum, n, size))
    return out


@pytest.mark.parametrize("seed", range(3))
def test_several_buckets_at_once_are_each_bucket_alone_bit_for_bit(seed: int) -> None:
    """:func:`order_stats.log_probs` of several buckets side by side gives each bucket's rows
    the floats of its own call, whatever its neighbours (sizes from 7 to 5,000, every form)."""
    buckets = _buckets_of_every_form(np.random.default_rng(seed))
    order = np.random.default_rng(seed + 10).permutation(len(buckets))
    buckets = [buckets[i] for i in order]
    together = order_stats.log_probs(*zip(*buckets, strict=True))
    for (rows, n, size), got in zip(buckets, together, strict=True):
        alone = log_prob_max_at_most(rows, n, size)
        assert np.array_equal(_bits(got), _bits(alone))
        np.testing.assert_allclose(got, [_exact_log_ratio(c, n, size) for c in rows.tolist()], rtol=1e-11)


def _exact_log_ratio(c: int, n: int, size: int) -> float:
    """``log(C(c, size) / C(n, size))`` from exact integers: the ratio in rationals where it
    is a float, else the difference of the two logarithms (then thousands: no cancellation)."""
    top, bottom = math.comb(c, size), math.comb(n, size)
    if top * 2**1000 > bottom:
        return math.log(Fraction(top, bottom))
    return math.log(top) - math.log(bottom)


@pytest.mark.parametrize(
    "rule", [{"batch_size": 100}, {"max_tokens": 4_000}, {"max_tokens": 4_000, "pad_to_multiple_of": 8}]
)
def test_a_plans_buckets_priced_together_are_each_bucket_priced_alone(rule: dict[str, int]) -> None:
    """:func:`~analysis.padding.waste.bucketed_estimate` fills every bucket's order statistics
    in one call (:func:`order_stats.fill_log_probs`): each bucket's expected padding is
    :func:`bucket_waste`'s of that bucket alone, bit for bit (batch sizes above 64, with and
    without a short batch)."""
    from analysis import BatchRule, LengthHistogram
    from analysis.padding.waste import bucketed_estimate

    rng = np.random.default_rng(5)
    lengths = np.unique(rng.integers(5, 400, size=150))
    hist = LengthHistogram.from_counts(lengths, rng.integers(1, 60, size=lengths.size))
    edges = [0, 40, 90, 150, 260, 400]
    batch_rule = BatchRule(**rule)
    est = bucketed_estimate(hist, edges, batch_rule)
    assert max(est.batch_sizes) > 64
    for lo_edge, hi_edge, size, got in zip(
        edges[:-1], edges[1:], est.batch_sizes, est.bucket_waste_tokens, strict=True
    ):
        inside = (hist.lengths > lo_edge) & (hist.lengths <= hi_edge)
        exact, excess = bucket_waste(
            hist.lengths[inside], hist.counts[inside], size, batch_rule.pad_to_multiple_of
        )
        assert got == (exact + excess if excess else exact)
