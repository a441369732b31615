"""The exact expected padding model (analysis.waste) against brute force, exact rational
arithmetic, an independent hypergeometric formula and a Monte-Carlo bucketed shuffle."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import hypergeom

from analysis.case import CASE_BATCH_SIZE, CASE_EDGES
from analysis.lengths import LengthHistogram
from analysis.waste import (
    WasteEstimate,
    bucket_batch_sizes,
    bucket_index,
    expected_batch_max,
    expected_bucket_padded_tokens,
    expected_efficiency,
    expected_padding,
)

# ----------------------------------------------------------------------------- references


def rounded(v: int, m: int) -> int:
    return -(-v // m) * m


def brute_force_bucket(samples: list[int], batch_size: int, m: int = 1, a: Fraction = Fraction(0)
                       ) -> Fraction:
    """E[sum over batches of size * (L + a L^2)], L = rounded longest, over ALL orderings."""
    total = Fraction(0)
    count = 0
    for order in itertools.permutations(samples):
        for start in range(0, len(order), batch_size):
            batch = order[start:start + batch_size]
            longest = rounded(max(batch), m)
            total += len(batch) * (longest + a * longest * longest)
        count += 1
    return total / count


def exact_batch_max(lengths: list[int], counts: list[int], size: int, m: int = 1,
                    power: int = 1) -> Fraction:
    """E[rounded max ** power] of a random size-subset, with math.comb and Fractions."""
    n = sum(counts)
    cum, prev, num = 0, 0, 0
    for v, c in zip(lengths, counts):
        cum += c
        cur = math.comb(cum, size)
        num += rounded(v, m) ** power * (cur - prev)
        prev = cur
    return Fraction(num, math.comb(n, size))


def exact_bucket(lengths: list[int], counts: list[int], batch_size: int, m: int = 1) -> Fraction:
    n = sum(counts)
    full, rest = divmod(n, batch_size)
    out = Fraction(0)
    if full:
        out += full * batch_size * exact_batch_max(lengths, counts, batch_size, m)
    if rest:
        out += rest * exact_batch_max(lengths, counts, rest, m)
    return out


def exact_padding(hist: LengthHistogram, edges, batch_sizes, m: int = 1) -> Fraction:
    which = bucket_index(hist.lengths, edges)
    total = Fraction(0)
    for i, size in enumerate(batch_sizes):
        sel = which == i
        if sel.any():
            total += exact_bucket(hist.lengths[sel].tolist(), hist.counts[sel].tolist(), size, m)
    return total


def close(got: float, want: Fraction | float, rel: float = 1e-12) -> bool:
    return abs(got - float(want)) <= rel * abs(float(want))


def simulate_padded(samples: np.ndarray, edges, batch_sizes, rng: np.random.Generator,
                    m: int = 1) -> int:
    """One epoch of a bucketed shuffle: shuffle within each bucket, cut batches in order."""
    which = bucket_index(samples, edges)
    padded = 0
    for i, size in enumerate(batch_sizes):
        bucket = rng.permutation(samples[which == i])
        for start in range(0, bucket.size, size):
            batch = bucket[start:start + size]
            padded += batch.size * rounded(int(batch.max()), m)
    return padded


# ----------------------------------------------------------------------------- brute force


@pytest.mark.parametrize("samples, batch_size", [
    ([1, 1, 3], 2),
    ([5, 2, 9, 2, 7], 2),
    ([5, 2, 9, 2, 7], 3),
    ([4, 4, 4, 1, 8, 8, 2], 2),
    ([4, 4, 4, 1, 8, 8, 2], 3),
    ([10, 3, 3, 6, 1, 12, 7], 3),
    ([3, 1, 2, 6, 5, 4], 4),
    ([7, 7], 3),  # only a partial batch
    ([9], 1),
])
def test_one_bucket_equals_all_orderings(samples, batch_size):
    hist = LengthHistogram.from_lengths(samples)
    est = expected_padding(hist, [0, hist.max], batch_size=batch_size)
    want = brute_force_bucket(samples, batch_size)
    assert close(est.padded_tokens, want)
    assert est.useful_tokens == sum(samples)
    assert est.n_batches == -(-len(samples) // batch_size)
    assert close(est.efficiency, Fraction(sum(samples)) / want)
    assert close(est.waste_tokens, want - sum(samples))


def test_two_buckets_equal_independent_orderings():
    samples = [1, 2, 2, 4, 5, 6, 6, 7, 9, 9, 12]
    edges = [0, 5, 12]
    est = expected_padding(samples, edges, batch_size=3)
    low = [s for s in samples if s <= 5]
    high = [s for s in samples if s > 5]
    want = brute_force_bucket(low, 3) + brute_force_bucket(high, 3)
    assert close(est.padded_tokens, want)
    assert est.n_batches == 2 + 2
    frame = est.to_frame()
    assert frame["samples"].tolist() == [5, 6]
    assert close(frame["expected padded tokens"].iloc[0], brute_force_bucket(low, 3))


@pytest.mark.parametrize("m", [2, 4, 8])
@pytest.mark.parametrize("samples, batch_size", [([5, 2, 9, 2, 7, 3], 2), ([1, 3, 6, 11, 13, 2, 5], 3)])
def test_pad_to_multiple_of_equals_all_orderings(samples, batch_size, m):
    est = expected_padding(samples, [0, max(samples)], batch_size=batch_size, pad_to_multiple_of=m)
    assert close(est.padded_tokens, brute_force_bucket(samples, batch_size, m))


def test_attention_cost_equals_all_orderings():
    samples = [5, 2, 9, 2, 7, 3, 12]
    a = Fraction(1, 8)
    est = expected_padding(samples, [0, 4, 12], batch_size=2, attention_weight=0.125,
                           pad_to_multiple_of=2)
    low, high = [s for s in samples if s <= 4], [s for s in samples if s > 4]
    want = brute_force_bucket(low, 2, 2, a) + brute_force_bucket(high, 2, 2, a)
    assert close(est.expected_cost, want)
    assert close(est.padded_tokens, brute_force_bucket(low, 2, 2) + brute_force_bucket(high, 2, 2))
    assert "expected cost" in est.to_frame().columns
    plain = expected_padding(samples, [0, 4, 12], batch_size=2)
    assert plain.expected_cost == plain.padded_tokens
    assert "expected cost" not in plain.to_frame().columns


# ----------------------------------------------------------------------------- exact arithmetic


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("batch_size", [1, 2, 8, 63, 64, 65, 200, 1000])
def test_expected_batch_max_equals_exact_comb(seed, batch_size):
    rng = np.random.default_rng(seed)
    k = int(rng.integers(2, 40))
    lengths = np.sort(rng.choice(np.arange(1, 9000), k, replace=False))
    counts = rng.integers(1, [30, 300, 3000, 30000][seed], k)
    counts[-1] = 1  # a lone longest sample: P(max < top) close to 1 for small batches
    n = int(counts.sum())
    if batch_size > n:
        batch_size = n
    for power in (1, 2):
        got = expected_batch_max(lengths, counts, batch_size, power=power)
        assert close(got, exact_batch_max(lengths.tolist(), counts.tolist(), batch_size, power=power))


@pytest.mark.parametrize("batch_size", [8, 65, 200, 3000])
def test_expected_batch_max_on_a_large_bucket_equals_exact_comb(batch_size):
    # 10**7 samples: every way of computing P(max <= v) (product, midpoint series, Stirling)
    rng = np.random.default_rng(batch_size)
    lengths = np.sort(rng.choice(np.arange(1, 9000), 25, replace=False))
    counts = rng.multinomial(10**7 - 3, np.full(25, 1 / 25)) + np.eye(25, dtype=np.int64)[-1] * 3
    got = expected_batch_max(lengths, counts, batch_size, power=2)
    assert close(got, exact_batch_max(lengths.tolist(), counts.tolist(), batch_size, power=2))


@pytest.mark.parametrize("batch_size", [1, 3, 8, 100])
def test_expected_bucket_padded_tokens_equals_exact_comb(batch_size):
    lengths, counts = [7, 30, 31, 90, 400], [40, 3, 9, 17, 2]
    for m in (1, 8):
        got = expected_bucket_padded_tokens(lengths, counts, batch_size, pad_to_multiple_of=m)
        assert close(got, exact_bucket(lengths, counts, batch_size, m))
    assert expected_bucket_padded_tokens([5, 6], [1, 1], 2, power=2) == 2 * 36


@pytest.mark.parametrize("size_from_top", [0, 1, 2, 17, 100])
def test_expected_batch_max_when_batch_is_nearly_the_bucket(size_from_top):
    # c_<=v close to n and B close to n: the ratio C(c, B) / C(n, B) is tiny or exactly 0.
    lengths, counts = [10, 20, 30, 40], [500, 300, 150, 50]
    size = 1000 - size_from_top
    got = expected_batch_max(lengths, counts, size, pad_to_multiple_of=16)
    assert close(got, exact_batch_max(lengths, counts, size, 16))


@pytest.mark.parametrize("edges", [CASE_EDGES, (0, 1500, 8192), (0, 8192)])
@pytest.mark.parametrize("rule", [{"batch_size": 8}, {"batch_size": 3}, {"max_tokens": 40_000}])
def test_medium_histogram_equals_exact_comb(edges, rule):
    rng = np.random.default_rng(42)
    samples = np.clip(rng.lognormal(np.log(1500), 0.9, 3000).round(), 65, 8192).astype(np.int64)
    hist = LengthHistogram.from_lengths(samples)
    est = expected_padding(hist, edges, **rule)
    sizes = bucket_batch_sizes(edges, **rule)
    assert est.batch_sizes == sizes
    assert close(est.padded_tokens, exact_padding(hist, edges, sizes))
    assert est.useful_tokens == int(samples.sum())


def test_one_bucket_is_the_random_shuffle_hypergeometric():
    # independent formula: P(max <= v) = hypergeometric P(all B draws among the c(v) shorter)
    rng = np.random.default_rng(7)
    samples = rng.integers(16, 4000, 20_001)
    hist = LengthHistogram.from_lengths(samples)
    batch_size = 8
    n = hist.n_samples
    cum = np.cumsum(hist.counts)

    def e_max(size):
        cdf = hypergeom(n, cum, size).pmf(size)
        return float(np.dot(hist.lengths, np.diff(cdf, prepend=0.0)))

    want = n // batch_size * batch_size * e_max(batch_size) + n % batch_size * e_max(n % batch_size)
    est = expected_padding(hist, [0, hist.max], batch_size=batch_size)
    assert est.padded_tokens == pytest.approx(want, rel=1e-9)


@settings(max_examples=40, deadline=None)
@given(
    data=st.lists(st.tuples(st.integers(1, 60), st.integers(1, 12)), min_size=1, max_size=12),
    batch_size=st.integers(1, 9),
    m=st.sampled_from([1, 1, 3, 8]),
    cut=st.integers(1, 59),
)
def test_random_histograms_equal_exact_comb(data, batch_size, m, cut):
    hist = LengthHistogram.from_counts([v for v, _ in data], [c for _, c in data])
    edges = [0, cut, 60] if cut < hist.max else [0, hist.max]
    est = expected_padding(hist, edges, batch_size=batch_size, pad_to_multiple_of=m)
    want = exact_padding(hist, edges, [batch_size] * (len(edges) - 1), m)
    assert close(est.padded_tokens, want)
    assert est.padded_tokens >= est.useful_tokens * (1 - 1e-12)


# ----------------------------------------------------------------------------- edge cases


def test_bucket_per_distinct_length_is_sorted_and_waste_free():
    rng = np.random.default_rng(3)
    samples = rng.integers(65, 8192, 50_000)
    hist = LengthHistogram.from_lengths(samples)
    edges = [0, *hist.lengths.tolist()]
    est = expected_padding(hist, edges, batch_size=8)
    assert est.efficiency == 1.0
    assert est.padded_tokens == est.useful_tokens == int(samples.sum())
    assert est.n_batches == sum(-(-c // 8) for c in hist.counts.tolist())
    # with rounding, each sample pads to its own rounded length (a uniform bucket's batches)
    padded = expected_padding(hist, edges, batch_size=8, pad_to_multiple_of=64).padded_tokens
    assert close(padded, sum(c * rounded(v, 64) for v, c in zip(hist.lengths.tolist(),
                                                                 hist.counts.tolist())))


def test_max_tokens_batch_sizes_per_bucket():
    samples = [100, 300, 300, 700, 900, 1000, 1000, 1000, 2000, 2500]
    edges = [0, 500, 1000, 4000]
    est = expected_padding(samples, edges, max_tokens=2000)
    assert est.batch_sizes == [4, 2, 1] == bucket_batch_sizes(edges, max_tokens=2000)
    hist = LengthHistogram.from_lengths(samples)
    assert close(est.padded_tokens, exact_padding(hist, edges, [4, 2, 1]))
    assert est.n_batches == 1 + 3 + 2
    # a batch of one is its own longest: no padding in the last bucket
    assert est.to_frame()["efficiency"].iloc[2] == 1.0


def test_empty_bucket_row():
    est = expected_padding([1, 2, 9, 9], [0, 2, 5, 9], batch_size=2)
    frame = est.to_frame()
    assert frame["samples"].tolist() == [2, 0, 2]
    assert frame.loc[1, "batches"] == 0 and frame.loc[1, "expected padded tokens"] == 0.0
    assert np.isnan(frame.loc[1, "efficiency"])
    assert frame["tokens"].sum() == est.useful_tokens
    assert frame["expected padded tokens"].sum() == pytest.approx(est.padded_tokens)
    assert est.n_buckets == 3
    assert est.edges == [0, 2, 5, 9]


def test_expected_efficiency_shortcut():
    samples = [5, 2, 9, 2, 7, 3, 12]
    assert expected_efficiency(samples, [0, 4, 12], batch_size=2) == \
        expected_padding(samples, [0, 4, 12], batch_size=2).efficiency


def test_result_is_frozen():
    est = expected_padding([1, 2, 3], [0, 3], batch_size=2)
    assert isinstance(est, WasteEstimate)
    with pytest.raises(AttributeError):
        est.padded_tokens = 0.0  # type: ignore[misc]


@pytest.mark.parametrize("kwargs, message", [
    ({"edges": [0, 5]}, "below the longest length 9"),
    ({"edges": [1, 9]}, "below the shortest length 1"),
    ({"edges": [0, 5, 5, 9]}, "strictly increasing"),
    ({"edges": [0]}, "at least 2 values"),
    ({"edges": [0, 9], "batch_size": 0}, "batch_size must be a positive integer"),
    ({"edges": [0, 9], "batch_size": 2.5}, "batch_size must be a positive integer"),
    ({"edges": [0, 9], "batch_size": 2, "max_tokens": 100}, "got both"),
    ({"edges": [0, 9], "batch_size": None}, "got neither"),
    ({"edges": [0, 9], "pad_to_multiple_of": 0}, "pad_to_multiple_of must be a positive integer"),
    ({"edges": [0, 9], "pad_to_multiple_of": 1.5}, "pad_to_multiple_of must be a positive integer"),
    ({"edges": [0, 9], "attention_weight": -1.0}, "attention_weight must be"),
    ({"edges": [0, 9], "attention_weight": float("nan")}, "attention_weight must be"),
])
def test_bad_input_raises_one_line_value_error(kwargs, message):
    kwargs = {"batch_size": 2, **kwargs}
    with pytest.raises(ValueError, match=message) as info:
        expected_padding([1, 5, 9], **kwargs)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("args, message", [
    (([1, 3], [2, 1], 4), "exceeds the 3 samples"),
    (([3, 1], [2, 1], 2), "ascending"),
    (([1, 3], [2, 0], 1), "positive"),
    (([1, 3], [2], 1), "equal size"),
    (([1.0, 3.0], [2, 1], 1), "integers"),
    (([1, 3], [2, 1], 0), "batch_size must be a positive integer"),
])
def test_expected_batch_max_bad_input(args, message):
    with pytest.raises(ValueError, match=message):
        expected_batch_max(*args)


# ----------------------------------------------------------------------------- exact totals, dtypes


def test_totals_beyond_2_53_are_exact():
    lengths = [8191, 8192]
    counts = [2**45 + 1, 2**44 + 3]
    hist = LengthHistogram.from_counts(lengths, counts)
    useful = 8191 * (2**45 + 1) + 8192 * (2**44 + 3)
    assert useful > 2**53
    sorted_est = expected_padding(hist, [0, 8191, 8192], batch_size=8)
    assert sorted_est.useful_tokens == useful and isinstance(sorted_est.useful_tokens, int)
    assert sorted_est.n_batches == -(-(2**45 + 1) // 8) + -(-(2**44 + 3) // 8)
    assert sorted_est.to_frame()["tokens"].tolist() == [8191 * (2**45 + 1), 8192 * (2**44 + 3)]
    one = expected_padding(hist, [0, 8192], batch_size=2)
    assert one.useful_tokens == useful
    assert close(one.padded_tokens, exact_bucket(lengths, counts, 2))


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32,
                                   np.int64, np.uint64])
def test_integer_dtypes(dtype):
    samples = np.array([3, 100, 7, 7, 120, 45, 64, 1, 99, 127], dtype=dtype)
    reference = expected_padding([int(s) for s in samples], [0, 50, 127], batch_size=3)
    for hist in (samples, LengthHistogram.from_lengths(samples)):
        est = expected_padding(hist, [0, 50, 127], batch_size=3)
        assert est.padded_tokens == reference.padded_tokens
        assert est.useful_tokens == 573 and type(est.useful_tokens) is int
    hist = LengthHistogram.from_lengths(samples)
    got = expected_batch_max(hist.lengths.astype(dtype), hist.counts.astype(dtype), 4)
    assert close(got, exact_batch_max(hist.lengths.tolist(), hist.counts.tolist(), 4))


# ----------------------------------------------------------------------------- Monte Carlo


@pytest.mark.parametrize("seed", [11, 12, 13])
def test_matches_simulated_bucketed_shuffle_within_4_standard_errors(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(500, 3000))
    samples = np.clip(rng.lognormal(np.log(rng.integers(100, 1500)), 0.8, n).round(), 1, 8192)
    samples = samples.astype(np.int64)
    hist = LengthHistogram.from_lengths(samples)
    cuts = np.unique(hist.quantile([0.3, 0.6, 0.85])).tolist()
    edges = [0, *[c for c in cuts if c < hist.max], hist.max]
    batch_size, m = int(rng.integers(2, 12)), int(rng.choice([1, 8]))
    est = expected_padding(hist, edges, batch_size=batch_size, pad_to_multiple_of=m)
    epochs = np.array([simulate_padded(samples, edges, est.batch_sizes, rng, m) for _ in range(40)])
    se = epochs.std(ddof=1) / math.sqrt(epochs.size)
    assert abs(epochs.mean() - est.padded_tokens) <= 4 * se
    efficiency = est.useful_tokens / epochs
    se_eff = efficiency.std(ddof=1) / math.sqrt(efficiency.size)
    assert abs(efficiency.mean() - est.efficiency) <= 4 * se_eff + 1e-12


def test_case_edges_beat_one_bucket_on_a_case_like_histogram():
    rng = np.random.default_rng(1701)
    samples = np.clip(rng.lognormal(np.log(1600), 0.75, 20_000).round(), 65, 8192).astype(np.int64)
    bucketed = expected_efficiency(samples, CASE_EDGES, batch_size=CASE_BATCH_SIZE)
    shuffled = expected_efficiency(samples, [0, 8192], batch_size=CASE_BATCH_SIZE)
    assert shuffled < bucketed < 1.0
