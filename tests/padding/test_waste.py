"""The exact expected padding model (analysis.padding.waste) against brute force, exact rational
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

import analysis.padding.waste as waste_module
from analysis.batching import BatchRule, bucket_index
from analysis.case import CASE_BATCH_SIZE, CASE_EDGES
from analysis.lengths import LengthHistogram
from analysis.padding.order_stats import expected_batch_max
from analysis.padding.waste import (
    WasteEstimate,
    expected_padding,
    expected_strategies,
    sorted_padding,
    strategy_table,
)

# ----------------------------------------------------------------------------- references


def rounded(v: int, m: int) -> int:
    return -(-v // m) * m


def brute_force_bucket(samples: list[int], batch_size: int, m: int = 1) -> Fraction:
    """E[sum over batches of size * L], L = rounded longest, over ALL orderings."""
    total = Fraction(0)
    count = 0
    for order in itertools.permutations(samples):
        for start in range(0, len(order), batch_size):
            batch = order[start : start + batch_size]
            longest = rounded(max(batch), m)
            total += len(batch) * longest
        count += 1
    return total / count


def exact_batch_max(lengths: list[int], counts: list[int], size: int, m: int = 1, power: int = 1) -> Fraction:
    """E[rounded max ** power] of a random size-subset, with math.comb and Fractions."""
    n = sum(counts)
    cum, prev, num = 0, 0, 0
    for v, c in zip(lengths, counts, strict=False):
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


def simulate_padded(samples: np.ndarray, edges, batch_sizes, rng: np.random.Generator, m: int = 1) -> int:
    """One epoch of a bucketed shuffle: shuffle within each bucket, cut batches in order."""
    which = bucket_index(samples, edges)
    padded = 0
    for i, size in enumerate(batch_sizes):
        bucket = rng.permutation(samples[which == i])
        for start in range(0, bucket.size, size):
            batch = bucket[start : start + size]
            padded += batch.size * rounded(int(batch.max()), m)
    return padded


# ----------------------------------------------------------------------------- brute force


@pytest.mark.parametrize(
    "samples, batch_size",
    [
        ([1, 1, 3], 2),
        ([5, 2, 9, 2, 7], 2),
        ([5, 2, 9, 2, 7], 3),
        ([4, 4, 4, 1, 8, 8, 2], 2),
        ([4, 4, 4, 1, 8, 8, 2], 3),
        ([10, 3, 3, 6, 1, 12, 7], 3),
        ([3, 1, 2, 6, 5, 4], 4),
        ([7, 7], 3),  # only a partial batch
        ([9], 1),
    ],
)
def test_one_bucket_equals_all_orderings(samples, batch_size):
    hist = LengthHistogram.from_lengths(samples)
    est = expected_padding(hist, [0, hist.max], rule=BatchRule(batch_size=batch_size))
    want = brute_force_bucket(samples, batch_size)
    assert close(est.padded_tokens, want)
    assert est.useful_tokens == sum(samples)
    assert est.n_batches == -(-len(samples) // batch_size)
    assert close(est.efficiency, Fraction(sum(samples)) / want)
    assert close(est.waste_tokens, want - sum(samples))


def test_two_buckets_equal_independent_orderings():
    samples = [1, 2, 2, 4, 5, 6, 6, 7, 9, 9, 12]
    edges = [0, 5, 12]
    est = expected_padding(samples, edges, rule=BatchRule(batch_size=3))
    low = [s for s in samples if s <= 5]
    high = [s for s in samples if s > 5]
    want = brute_force_bucket(low, 3) + brute_force_bucket(high, 3)
    assert close(est.padded_tokens, want)
    assert est.n_batches == 2 + 2
    frame = est.to_frame()
    assert frame["samples"].tolist() == [5, 6]
    assert close(frame["padded_tokens"].iloc[0], brute_force_bucket(low, 3))


@pytest.mark.parametrize("m", [2, 4, 8])
@pytest.mark.parametrize("samples, batch_size", [([5, 2, 9, 2, 7, 3], 2), ([1, 3, 6, 11, 13, 2, 5], 3)])
def test_pad_to_multiple_of_equals_all_orderings(samples, batch_size, m):
    est = expected_padding(
        samples, [0, max(samples)], rule=BatchRule(batch_size=batch_size, pad_to_multiple_of=m)
    )
    assert close(est.padded_tokens, brute_force_bucket(samples, batch_size, m))


def test_pad_to_multiple_of_two_buckets_equal_independent_orderings():
    samples = [5, 2, 9, 2, 7, 3, 12]
    est = expected_padding(samples, [0, 4, 12], rule=BatchRule(batch_size=2, pad_to_multiple_of=2))
    low, high = [s for s in samples if s <= 4], [s for s in samples if s > 4]
    assert close(est.padded_tokens, brute_force_bucket(low, 2, 2) + brute_force_bucket(high, 2, 2))
    assert est.rule == BatchRule(batch_size=2, pad_to_multiple_of=2)


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
def test_one_bucket_padded_tokens_equal_exact_comb(batch_size):
    lengths, counts = [7, 30, 31, 90, 400], [40, 3, 9, 17, 2]
    hist = LengthHistogram.from_counts(lengths, counts)
    for m in (1, 8):
        got = expected_padding(hist, [0, 400], rule=BatchRule(batch_size=batch_size, pad_to_multiple_of=m))
        assert close(got.padded_tokens, exact_bucket(lengths, counts, batch_size, m))
    assert expected_batch_max([5, 6], [1, 1], 2, power=2) == 36


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
    est = expected_padding(hist, edges, BatchRule(**rule))
    # the batch sizes written out independently of BatchRule
    sizes = (
        [rule["batch_size"]] * (len(edges) - 1)
        if "batch_size" in rule
        else [max(1, rule["max_tokens"] // e) for e in edges[1:]]
    )
    assert est.batch_sizes == tuple(sizes)
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
    est = expected_padding(hist, [0, hist.max], rule=BatchRule(batch_size=batch_size))
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
    est = expected_padding(hist, edges, rule=BatchRule(batch_size=batch_size, pad_to_multiple_of=m))
    want = exact_padding(hist, edges, [batch_size] * (len(edges) - 1), m)
    assert close(est.padded_tokens, want)
    assert est.padded_tokens >= est.useful_tokens * (1 - 1e-12)


# ----------------------------------------------------------------------------- edge cases


def test_bucket_per_distinct_length_is_sorted_and_waste_free():
    rng = np.random.default_rng(3)
    samples = rng.integers(65, 8192, 50_000)
    hist = LengthHistogram.from_lengths(samples)
    edges = [0, *hist.lengths.tolist()]
    est = expected_padding(hist, edges, rule=BatchRule(batch_size=8))
    assert est.efficiency == 1.0
    assert est.padded_tokens == est.useful_tokens == int(samples.sum())
    assert est.n_batches == sum(-(-c // 8) for c in hist.counts.tolist())
    # with rounding, each sample pads to its own rounded length (a uniform bucket's batches)
    padded = expected_padding(hist, edges, rule=BatchRule(batch_size=8, pad_to_multiple_of=64)).padded_tokens
    assert close(
        padded,
        sum(c * rounded(v, 64) for v, c in zip(hist.lengths.tolist(), hist.counts.tolist(), strict=False)),
    )


def test_max_tokens_batch_sizes_per_bucket():
    samples = [100, 300, 300, 700, 900, 1000, 1000, 1000, 2000, 2500]
    edges = [0, 500, 1000, 4000]
    est = expected_padding(samples, edges, rule=BatchRule(max_tokens=2000))
    assert est.batch_sizes == (4, 2, 1)
    hist = LengthHistogram.from_lengths(samples)
    assert close(est.padded_tokens, exact_padding(hist, edges, [4, 2, 1]))
    assert est.n_batches == 1 + 3 + 2
    # a batch of one is its own longest: no padding in the last bucket
    assert est.to_frame()["efficiency"].iloc[2] == 1.0


def test_empty_bucket_row():
    est = expected_padding([1, 2, 9, 9], [0, 2, 5, 9], rule=BatchRule(batch_size=2))
    frame = est.to_frame()
    assert frame["samples"].tolist() == [2, 0, 2]
    assert frame.loc[1, "batches"] == 0 and frame.loc[1, "padded_tokens"] == 0.0
    assert np.isnan(frame.loc[1, "efficiency"])
    assert frame["tokens"].sum() == est.useful_tokens
    assert frame["padded_tokens"].sum() == pytest.approx(est.padded_tokens)
    assert frame.columns.tolist() == [
        "lower_edge",
        "upper_edge",
        "samples",
        "tokens",
        "batch_size",
        "batches",
        "padded_tokens",
        "waste_tokens",
        "efficiency",
    ]
    assert frame["lower_edge"].tolist() == [0, 2, 5] and frame["upper_edge"].tolist() == [2, 5, 9]
    assert est.n_buckets == 3
    assert est.edges == (0, 2, 5, 9)
    assert est.strategy == "bucketed"


def test_result_is_frozen():
    est = expected_padding([1, 2, 3], [0, 3], rule=BatchRule(batch_size=2))
    assert isinstance(est, WasteEstimate)
    with pytest.raises(AttributeError):
        est.padded_tokens = 0.0  # type: ignore[misc]


@pytest.mark.parametrize(
    "kwargs, message",
    [
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
        ({"edges": [0, 9], "rule": {"batch_size": 2}}, "rule must be a BatchRule, got dict"),
        ({"edges": np.array([[0, 9]])}, "1-D"),
    ],
)
def test_bad_input_raises_one_line_value_error(kwargs, message):
    kwargs = {"batch_size": 2, **kwargs}
    edges, given = kwargs.pop("edges"), kwargs.pop("rule", None)
    with pytest.raises(ValueError, match=message) as info:
        expected_padding([1, 5, 9], edges, BatchRule(**kwargs) if given is None else given)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    "args, message",
    [
        (([1, 3], [2, 1], 4), "exceeds the 3 samples"),
        (([3, 1], [2, 1], 2), "ascending"),
        (([1, 3], [2, 0], 1), "positive"),
        (([1, 3], [2], 1), "equal size"),
        (([1.0, 3.0], [2, 1], 1), "integers"),
        (([1, 3], [2, 1], 0), "batch_size must be a positive integer"),
    ],
)
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
    sorted_est = expected_padding(hist, [0, 8191, 8192], rule=BatchRule(batch_size=8))
    assert sorted_est.useful_tokens == useful and isinstance(sorted_est.useful_tokens, int)
    assert sorted_est.n_batches == -(-(2**45 + 1) // 8) + -(-(2**44 + 3) // 8)
    assert sorted_est.to_frame()["tokens"].tolist() == [8191 * (2**45 + 1), 8192 * (2**44 + 3)]
    one = expected_padding(hist, [0, 8192], rule=BatchRule(batch_size=2))
    assert one.useful_tokens == useful
    assert close(one.padded_tokens, exact_bucket(lengths, counts, 2))


@pytest.mark.parametrize(
    "dtype", [np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64, np.uint64]
)
def test_integer_dtypes(dtype):
    samples = np.array([3, 100, 7, 7, 120, 45, 64, 1, 99, 127], dtype=dtype)
    reference = expected_padding([int(s) for s in samples], [0, 50, 127], rule=BatchRule(batch_size=3))
    for hist in (samples, LengthHistogram.from_lengths(samples)):
        est = expected_padding(hist, [0, 50, 127], rule=BatchRule(batch_size=3))
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
    est = expected_padding(hist, edges, rule=BatchRule(batch_size=batch_size, pad_to_multiple_of=m))
    epochs = np.array([simulate_padded(samples, edges, est.batch_sizes, rng, m) for _ in range(40)])
    se = epochs.std(ddof=1) / math.sqrt(epochs.size)
    assert abs(epochs.mean() - est.padded_tokens) <= 4 * se
    efficiency = est.useful_tokens / epochs
    se_eff = efficiency.std(ddof=1) / math.sqrt(efficiency.size)
    assert abs(efficiency.mean() - est.efficiency) <= 4 * se_eff + 1e-12


def test_case_edges_beat_one_bucket_on_a_case_like_histogram():
    rng = np.random.default_rng(1701)
    samples = np.clip(rng.lognormal(np.log(1600), 0.75, 20_000).round(), 65, 8192).astype(np.int64)
    bucketed = expected_padding(samples, CASE_EDGES, rule=BatchRule(batch_size=CASE_BATCH_SIZE)).efficiency
    shuffled = expected_padding(samples, [0, 8192], rule=BatchRule(batch_size=CASE_BATCH_SIZE)).efficiency
    assert shuffled < bucketed < 1.0


# ----------------------------------------------------------------------------- sorted, strategies


def brute_force_sorted(samples: list[int], batch_size: int, m: int = 1) -> int:
    """Padded tokens of the sorted samples cut into batches of ``batch_size``, batch by batch."""
    s = sorted(samples)
    return sum(
        len(s[i : i + batch_size]) * rounded(max(s[i : i + batch_size]), m)
        for i in range(0, len(s), batch_size)
    )


def test_sorted_padding_matches_brute_force():
    rng = np.random.default_rng(8)
    samples = rng.integers(1, 778, 1001)
    hist = LengthHistogram.from_lengths(samples)
    for batch_size, multiple in ((1, 1), (7, 1), (7, 8), (1001, 1), (2000, 3)):
        est = sorted_padding(hist, rule=BatchRule(batch_size=batch_size, pad_to_multiple_of=multiple))
        assert isinstance(est, WasteEstimate) and est.strategy == "sorted"
        assert est.padded_tokens == brute_force_sorted(samples.tolist(), batch_size, multiple)
        assert type(est.padded_tokens) is int
        assert est.useful_tokens == int(samples.sum())
        assert est.n_batches == -(-1001 // batch_size)


@settings(max_examples=40, deadline=None)
@given(
    data=st.lists(st.tuples(st.integers(1, 60), st.integers(1, 12)), min_size=1, max_size=12),
    batch_size=st.integers(1, 9),
    max_tokens=st.one_of(st.none(), st.integers(1, 400)),
    m=st.sampled_from([1, 3, 8]),
)
def test_sorted_padding_on_random_histograms_matches_brute_force(data, batch_size, max_tokens, m):
    hist = LengthHistogram.from_counts([v for v, _ in data], [c for _, c in data])
    samples = hist.expand().tolist()
    rule = (
        BatchRule(max_tokens=max_tokens, pad_to_multiple_of=m)
        if max_tokens
        else BatchRule(batch_size=batch_size, pad_to_multiple_of=m)
    )
    size = max(1, max_tokens // (-(-hist.max // m) * m)) if max_tokens else batch_size
    est = sorted_padding(hist, rule)
    assert est.padded_tokens == brute_force_sorted(samples, size, m)
    assert est.batch_sizes == (size,) and est.rule == BatchRule(size, None, m)
    assert est.n_batches == -(-len(samples) // size)
    assert est.efficiency == pytest.approx(sum(samples) / brute_force_sorted(samples, size, m))


def test_sorted_padding_beyond_2_53_is_exact():
    lengths, counts = [8191, 8192], [2**45 + 1, 2**44 + 3]
    hist = LengthHistogram.from_counts(lengths, counts)
    n = sum(counts)
    est = sorted_padding(hist, rule=BatchRule(batch_size=8))
    # sorted batches: the shorter length's full batches, one batch straddling both lengths
    # (its longest 8192), then the longer length's batches
    short_full = counts[0] // 8
    want = 8 * short_full * 8191 + (n - 8 * short_full) * 8192
    assert est.padded_tokens == want and want > 2**53
    assert est.useful_tokens == 8191 * counts[0] + 8192 * counts[1]
    assert est.n_batches == -(-n // 8)


@pytest.mark.parametrize(
    "samples, rule",
    [
        ([5, 2, 9, 2, 7, 3], {"batch_size": 2}),
        ([1, 3, 6, 11, 13, 2, 5], {"batch_size": 3, "pad_to_multiple_of": 4}),
        ([1, 3, 6, 11, 13, 2, 5], {"max_tokens": 30}),  # random and sorted: 30 // 13 = 2 per batch
    ],
)
def test_expected_strategies_equal_brute_force(samples, rule):
    hist = LengthHistogram.from_lengths(samples)
    edges = [0, 5, max(samples)]
    got = expected_strategies(hist, edges, **rule)
    assert list(got) == ["random", "sorted", "bucketed"]
    m = rule.get("pad_to_multiple_of", 1)
    fixed = rule.get("batch_size") or rule["max_tokens"] // max(samples)
    assert close(got["random"].padded_tokens, brute_force_bucket(samples, fixed, m))
    assert got["random"].batch_sizes == (fixed,) and got["random"].n_buckets == 1
    assert got["sorted"].padded_tokens == brute_force_sorted(samples, fixed, m)
    low, high = [s for s in samples if s <= 5], [s for s in samples if s > 5]
    sizes = (
        [rule["max_tokens"] // 5, rule["max_tokens"] // max(samples)]
        if "max_tokens" in rule
        else [fixed, fixed]
    )
    assert close(
        got["bucketed"].padded_tokens,
        brute_force_bucket(low, sizes[0], m) + brute_force_bucket(high, sizes[1], m),
    )
    assert {k: v.strategy for k, v in got.items()} == {k: k for k in got}
    assert {v.useful_tokens for v in got.values()} == {sum(samples)}
    table = strategy_table(got)
    assert table.index.tolist() == ["random", "sorted", "bucketed"]
    assert table.columns.tolist() == [
        "efficiency",
        "padded_tokens",
        "useful_tokens",
        "waste_tokens",
        "n_batches",
        "batch_sizes",
    ]
    for name, est in got.items():
        assert table.loc[name, "efficiency"] == pytest.approx(sum(samples) / est.padded_tokens)
        assert table.loc[name, "waste_tokens"] == pytest.approx(est.padded_tokens - sum(samples))


def test_expected_strategies_checks_the_edges():
    hist = LengthHistogram.from_lengths([1, 5, 9])
    with pytest.raises(ValueError, match="below the longest length 9"):
        expected_strategies(hist, [0, 5], batch_size=2)


@pytest.mark.parametrize(
    "rule", [BatchRule(batch_size=4), BatchRule(max_tokens=900, pad_to_multiple_of=8)], ids=str
)
def test_prefix_sums_give_the_python_sums_exactly(monkeypatch, rule):
    """The int64 prefix sums of a histogram whose sums fit equal the per-bucket Python-int sums
    (the path of totals beyond 2**62), total for total and float for float."""
    hist = LengthHistogram.from_lengths(np.random.default_rng(3).integers(1, 300, size=5_000))
    edges = [0, 7, 40, 41, 120, 299]
    fast = expected_padding(hist, edges, rule)
    monkeypatch.setattr(waste_module, "_prefix_sums", lambda hist, multiple: None)
    slow = expected_padding(hist, edges, rule)
    assert fast.bucket_samples == slow.bucket_samples and fast.bucket_tokens == slow.bucket_tokens
    assert fast.bucket_waste_tokens == slow.bucket_waste_tokens and fast.padded_tokens == slow.padded_tokens
