"""LengthHistogram: exact totals for every integer dtype, statistics against NumPy and brute
force, and the bad inputs it must refuse."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from analysis import LengthHistogram

INT64_MAX = 2**63 - 1
INT_DTYPES = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64]


def python_sum(values: np.ndarray) -> int:
    """Reference total with Python ints (no fixed-width accumulator)."""
    return sum(int(v) for v in values.tolist())


# ------------------------------------------------------------------------------ exact totals
@pytest.mark.parametrize("dtype", INT_DTYPES, ids=lambda d: np.dtype(d).name)
def test_totals_exact_for_every_integer_dtype(dtype: type) -> None:
    rng = np.random.default_rng(7)
    top = min(np.iinfo(dtype).max, 10**6)
    values = rng.integers(1, top, size=50_000, endpoint=True).astype(dtype)
    # the largest representable value too, so narrow dtypes would overflow if summed natively
    values[:100] = np.iinfo(dtype).max if np.iinfo(dtype).max <= 10**6 else top
    hist = LengthHistogram.from_lengths(values)
    assert hist.total_tokens == python_sum(values)
    assert hist.n_samples == values.size
    assert type(hist.total_tokens) is int and type(hist.n_samples) is int
    assert hist.lengths.dtype == np.int64 and hist.counts.dtype == np.int64


@pytest.mark.parametrize("dtype", INT_DTYPES, ids=lambda d: np.dtype(d).name)
def test_narrow_dtype_sum_would_overflow_but_total_does_not(dtype: type) -> None:
    top = min(int(np.iinfo(dtype).max), INT64_MAX)
    values = np.full(1000, top, dtype=dtype)
    hist = LengthHistogram.from_lengths(values)
    assert hist.total_tokens == 1000 * top


def test_uint64_near_int64_max() -> None:
    values = np.array([INT64_MAX, INT64_MAX - 1, 1], dtype=np.uint64)
    hist = LengthHistogram.from_lengths(values)
    assert hist.lengths.tolist() == [1, INT64_MAX - 1, INT64_MAX]
    assert hist.total_tokens == 2 * INT64_MAX


@pytest.mark.parametrize("value", [2**63, 2**64 - 1])
def test_uint64_above_int64_max_is_refused(value: int) -> None:
    values = np.array([5, value], dtype=np.uint64)
    with pytest.raises(ValueError, match=rf"^row 1: length {value} is too large$"):
        LengthHistogram.from_lengths(values)


def test_case_regression_902087_int32_lengths() -> None:
    """The case: an int32 sum of these lengths overflowed and gave negative waste."""
    rng = np.random.default_rng(902087)
    lengths = rng.integers(65, 8193, 902_087, dtype=np.int32)
    hist = LengthHistogram.from_lengths(lengths)
    expected = python_sum(lengths)
    assert expected > 2**31  # the int32 accumulator really would overflow
    assert hist.total_tokens == expected
    assert hist.n_samples == 902_087
    assert hist.max <= 8192 and hist.min >= 65


@pytest.mark.parametrize("threshold", [2**31, 2**53, 10**15])
def test_from_counts_totals_beyond_float_and_int32(threshold: int) -> None:
    lengths = [1, 8191, 8192]
    counts = [1, 3, threshold // 8192 + 1]
    hist = LengthHistogram.from_counts(lengths, counts)
    expected = sum(n * c for n, c in zip(lengths, counts, strict=False))
    assert expected > threshold
    assert hist.total_tokens == expected
    assert hist.n_samples == sum(counts)


def test_total_exact_where_float64_is_not() -> None:
    # 2**53 + 1 tokens: float64 cannot represent it, the histogram total must.
    hist = LengthHistogram.from_counts([1, 2], [1, 2**52])
    assert hist.total_tokens == 2**53 + 1
    assert float(hist.total_tokens) == 2**53  # what a float accumulator would report
    hist = LengthHistogram.from_counts([3], [2**53 + 1])
    assert hist.n_samples == 2**53 + 1 and hist.total_tokens == 3 * (2**53 + 1)


def test_total_beyond_int64() -> None:
    hist = LengthHistogram.from_counts([2**40, 2**41], [2**40, 2**40])
    assert hist.total_tokens == 3 * 2**80


# ------------------------------------------------------------------------------ statistics
@pytest.mark.parametrize("seed", range(5))
def test_quantile_matches_numpy_inverted_cdf(seed: int) -> None:
    rng = np.random.default_rng(seed)
    values = rng.integers(1, 60, size=rng.integers(1, 200))
    hist = LengthHistogram.from_lengths(values)
    qs = np.r_[0.0, 1.0, np.linspace(0, 1, 101), rng.random(50)]
    expected = np.quantile(values, qs, method="inverted_cdf")
    np.testing.assert_array_equal(hist.quantile(qs), expected)
    for q in qs[:5]:
        assert hist.quantile(float(q)) == int(np.quantile(values, q, method="inverted_cdf"))
        assert type(hist.quantile(float(q))) is int


@pytest.mark.parametrize("q", [-0.1, 1.1, float("nan")])
def test_quantile_refuses_out_of_range(q: float) -> None:
    with pytest.raises(ValueError, match="quantile q must be in"):
        LengthHistogram.from_lengths([1, 2]).quantile(q)


def test_basic_statistics_against_brute_force() -> None:
    values = np.array([4, 1, 9, 9, 2, 4, 4, 100])
    hist = LengthHistogram.from_lengths(values)
    assert hist.lengths.tolist() == [1, 2, 4, 9, 100]
    assert hist.counts.tolist() == [1, 1, 3, 2, 1]
    assert (hist.min, hist.max, hist.n_distinct) == (1, 100, 5)
    assert hist.mean == values.sum() / values.size
    np.testing.assert_array_equal(hist.expand(), np.sort(values))
    np.testing.assert_array_equal(hist.cumulative_counts(), [1, 2, 5, 7, 8])
    frame = hist.to_frame()
    assert list(frame.columns) == ["length", "count"]
    assert frame["length"].tolist() == [1, 2, 4, 9, 100]


def test_summary_values() -> None:
    values = np.arange(1, 101)  # 1..100
    summary = LengthHistogram.from_lengths(values).summary()
    assert isinstance(summary, pd.Series)
    assert summary["samples"] == 100 and summary["tokens"] == 5050
    assert summary["distinct_lengths"] == 100
    assert (summary["min"], summary["max"]) == (1, 100)
    for name, q in [("p10", 0.1), ("p50", 0.5), ("p90", 0.9), ("p99", 0.99)]:
        assert summary[name] == int(np.quantile(values, q, method="inverted_cdf"))
    assert summary["mean"] == 50.5
    assert summary["token_share_longest_1pct"] == 100 / 5050
    assert summary["token_share_longest_10pct"] == sum(range(91, 101)) / 5050


@pytest.mark.parametrize("seed", range(4))
def test_tail_token_share_brute_force(seed: int) -> None:
    rng = np.random.default_rng(seed)
    values = rng.integers(1, 30, size=137)
    hist = LengthHistogram.from_lengths(values)
    ordered = np.sort(values)[::-1]
    for fraction in [0.001, 0.01, 0.1, 0.25, 0.5, 0.999, 1.0]:
        k = max(1, math.ceil(fraction * values.size))
        assert hist.tail_token_share(fraction) == pytest.approx(ordered[:k].sum() / values.sum(), rel=1e-15)


@pytest.mark.parametrize("fraction", [0, -0.5, 1.5])
def test_tail_token_share_refuses_bad_fraction(fraction: float) -> None:
    with pytest.raises(ValueError, match="fraction must be in"):
        LengthHistogram.from_lengths([1]).tail_token_share(fraction)


# ------------------------------------------------------------------------------ transforms
def test_clip_brute_force() -> None:
    values = np.array([2, 5, 9, 9, 4, 12])
    hist = LengthHistogram.from_lengths(values)
    for max_len in [1, 4, 5, 8, 9, 12, 100]:
        assert hist.clip(max_len) == LengthHistogram.from_lengths(np.minimum(values, max_len))
    assert hist.clip(12) is hist


def test_clip_summary_brute_force() -> None:
    values = np.array([2, 5, 9, 9, 4, 12])
    hist = LengthHistogram.from_lengths(values)
    for max_len in [1, 4, 9, 100]:
        s = hist.clip_summary(max_len)
        over = values[values > max_len]
        assert s["max_len"] == max_len
        assert s["samples_clipped"] == over.size
        assert s["share_samples_clipped"] == over.size / values.size
        assert s["tokens_removed"] == int((over - max_len).sum())
        assert s["share_tokens_removed"] == (over - max_len).sum() / values.sum()


# ------------------------------------------------------------------------ curves for figures
SMALL = LengthHistogram.from_lengths([3, 3, 5, 8, 8, 8, 40, 41, 200, 1000, 1000])


@pytest.mark.parametrize("weight", ["samples", "tokens"])
@pytest.mark.parametrize(
    "bin_edges",
    [[0.5, 4.5, 8.5, 999.5, 1000.5], np.geomspace(2.5, 1000.5, 13), [3, 8, 41, 1000], [100.5, 150.5]],
)
def test_binned_matches_numpy_on_the_samples(bin_edges, weight) -> None:
    samples = SMALL.expand()
    want, _ = np.histogram(
        samples, bins=np.asarray(bin_edges, float), weights=None if weight == "samples" else samples
    )
    np.testing.assert_array_equal(SMALL.binned(np.asarray(bin_edges, float), weight), want)


def test_binned_refuses_a_bad_weight() -> None:
    with pytest.raises(ValueError, match="weight must be"):
        SMALL.binned(np.array([0.5, 2000.5]), "bytes")


def test_token_share_curve_brute_force() -> None:
    x, y = SMALL.token_share_curve()
    assert (x[0], y[0]) == (0.0, 0.0) and x[-1] == pytest.approx(1) and y[-1] == pytest.approx(1)
    assert np.all(np.diff(x) > 0) and np.all(y >= x - 1e-12)  # above the diagonal
    desc = np.sort(SMALL.expand())[::-1]
    for k in range(1, desc.size + 1):
        assert np.interp(k / desc.size, x, y) == pytest.approx(desc[:k].sum() / desc.sum())


def test_token_share_curve_matches_tail_token_share() -> None:
    from analysis.case.synthetic import case_like_histogram

    case = case_like_histogram()
    x, y = case.token_share_curve()
    n = case.n_samples
    for k in (1, 71_503, 71_504, 90_209, 450_000, n):
        assert np.interp(k / n, x, y) == pytest.approx(case.tail_token_share(k / n), rel=1e-9)


def test_clipping_curve_brute_force() -> None:
    lengths, samples, tokens = SMALL.clipping_curve()
    np.testing.assert_array_equal(lengths, SMALL.lengths)
    values = SMALL.expand()
    for length, s, t in zip(lengths.tolist(), samples, tokens, strict=False):
        over = values[values > length]
        assert s == pytest.approx(over.size / values.size)
        assert t == pytest.approx((over - length).sum() / values.sum())
        summary = SMALL.clip_summary(length)
        assert s == pytest.approx(summary["share_samples_clipped"])
        assert t == pytest.approx(summary["share_tokens_removed"])


@pytest.mark.parametrize("max_len", [0, -3, 2.5, "8", True])
def test_clip_refuses_bad_max_len(max_len: object) -> None:
    hist = LengthHistogram.from_lengths([1, 2])
    with pytest.raises(ValueError, match="max_len must be a positive integer"):
        hist.clip(max_len)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max_len must be a positive integer"):
        hist.clip_summary(max_len)  # type: ignore[arg-type]


def test_add_merges_samples() -> None:
    a, b = [1, 3, 3, 10], [3, 4, 10, 10, 10]
    merged = LengthHistogram.from_lengths(a) + LengthHistogram.from_lengths(b)
    assert merged == LengthHistogram.from_lengths(a + b)
    with pytest.raises(TypeError):
        LengthHistogram.from_lengths(a) + [1]  # type: ignore[operator]


def test_equality_and_hash() -> None:
    a = LengthHistogram.from_lengths([1, 2, 2])
    assert a == LengthHistogram.from_counts([2, 1], [2, 1])
    assert a != LengthHistogram.from_lengths([1, 2])
    assert a != LengthHistogram.from_lengths([1, 1, 2])
    assert (a == "x") is False
    with pytest.raises(TypeError):
        hash(a)


def test_arrays_are_read_only_copies() -> None:
    source = np.array([3, 1, 2], dtype=np.int64)
    hist = LengthHistogram.from_lengths(source)
    for arr in (hist.lengths, hist.counts):
        assert not arr.flags.writeable
        with pytest.raises(ValueError, match="read-only"):
            arr[0] = 99
    lengths = np.array([1, 2])
    direct = LengthHistogram(lengths, np.array([1, 1]))
    lengths[0] = 50
    assert direct.lengths.tolist() == [1, 2]


def test_from_counts_sums_repeats_and_drops_zero_counts() -> None:
    hist = LengthHistogram.from_counts([5, 2, 5, 9], [1, 3, 2, 0])
    assert hist.lengths.tolist() == [2, 5] and hist.counts.tolist() == [3, 3]


def test_from_lengths_accepts_series_lists_and_integral_floats() -> None:
    expected = LengthHistogram.from_lengths([1, 2, 2])
    assert LengthHistogram.from_lengths(pd.Series([2, 1, 2])) == expected
    assert LengthHistogram.from_lengths(pd.Series([2, 1, 2], dtype="Int64")) == expected
    assert LengthHistogram.from_lengths((2.0, 1.0, 2.0)) == expected
    assert LengthHistogram.from_lengths(iter([2, 1, 2])) == expected
    assert LengthHistogram.from_lengths([2**62, 1]).max == 2**62


def test_allow_zero() -> None:
    with pytest.raises(ValueError, match=r"^row 1: zero length 0 \(pass allow_zero=True"):
        LengthHistogram.from_lengths([3, 0])
    hist = LengthHistogram.from_lengths([3, 0], allow_zero=True)
    assert hist.lengths.tolist() == [0, 3] and hist.total_tokens == 3


# ------------------------------------------------------------------------------ bad input
@pytest.mark.parametrize(
    ("values", "message"),
    [
        ([], r"^empty input: no lengths$"),
        (np.array([], dtype=np.int32), r"^empty input: no lengths$"),
        ([4, -1], r"^row 1: negative length -1$"),
        (np.array([4, 2, -7], dtype=np.int8), r"^row 2: negative length -7$"),
        ([1.0, 2.5], r"^row 1: length 2.5 is not an integer$"),
        (np.array([1.0, np.nan]), r"^row 1: length is nan, not a number$"),
        (np.array([np.inf]), r"^row 0: length is inf, not a number$"),
        ([1, float("nan")], r"^row 1: length is nan, not a number$"),
        (np.array([True, False]), r"bool is not a length"),
        ([1, True], r"^row 1: bool True is not a length$"),
        ([1, "7"], r"^row 1: '7' is not a length \(type str\)$"),
        ([1, None], r"^row 1: None is not a length \(type NoneType\)$"),
        ([1, 2**64], r"^row 1: length 18446744073709551616 is too large$"),
        ([1, -(2**70)], r"^row 1: negative length -1180591620717411303424$"),
        (np.array([1e19]), r"^row 0: length 1e\+19 is too large$"),
        ("123", r"got a string"),
        (5, r"got a scalar"),
        (np.ones((2, 2), dtype=int), r"1-D"),
        (np.array(["1", "2"]), r"lengths must be integers, got dtype <U1"),
        (np.array([1 + 0j]), r"lengths must be integers"),
    ],
)
def test_from_lengths_bad_input(values: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        LengthHistogram.from_lengths(values)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("lengths", "counts", "message"),
    [
        ([1, 2], [1], r"differ in size: 2 and 1"),
        ([1, 2], [0, 0], r"all counts are zero"),
        ([], [], r"empty input"),
        ([1, 2], [1, -3], r"^counts: row 1: negative count -3$"),
        ([1, -2], [1, 3], r"^lengths: row 1: negative length -2$"),
        ([0, 2], [1, 3], r"^lengths: row 0: zero length 0"),
        ([1, 2], [1.5, 3], r"^counts: row 0: count 1.5 is not an integer$"),
        ([1, 1], [2**62, 2**62], r"a count exceeds int64"),
        ([1], [2**63], r"^counts: row 0: count 9223372036854775808 is too large$"),
    ],
)
def test_from_counts_bad_input(lengths: list, counts: list, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        LengthHistogram.from_counts(lengths, counts)


@pytest.mark.parametrize(
    ("lengths", "counts", "message"),
    [
        ([], [], "empty histogram"),
        ([1, 2], [1], "equal size"),
        ([2, 1], [1, 1], "distinct and ascending"),
        ([1, 1], [1, 1], "distinct and ascending"),
        ([1, 2], [1, 0], "counts must be positive"),
        ([-1, 2], [1, 1], "negative length -1"),
        ([1.5, 2], [1, 1], r"length 1.5 is not an integer"),
        (np.array([1, 2**63], dtype=np.uint64), [1, 1], "too large"),
    ],
)
def test_constructor_validates(lengths: object, counts: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        LengthHistogram(lengths, counts)  # type: ignore[arg-type]


# ------------------------------------------------------------------------------ properties
lengths_lists = st.lists(st.integers(1, 2**40), min_size=1, max_size=60)
small_hists = st.lists(st.integers(1, 50), min_size=1, max_size=40).map(LengthHistogram.from_lengths)


@settings(max_examples=60, deadline=None)
@given(lengths_lists)
def test_property_total_is_python_sum(values: list[int]) -> None:
    hist = LengthHistogram.from_lengths(values)
    assert hist.total_tokens == sum(values)
    assert hist.n_samples == len(values)
    assert hist.expand().tolist() == sorted(values)


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(INT_DTYPES), st.lists(st.integers(1, 2**64), min_size=1, max_size=30))
def test_property_every_dtype_exact(dtype: type, raw: list[int]) -> None:
    top = min(int(np.iinfo(dtype).max), INT64_MAX)
    values = np.array([min(v, top) for v in raw], dtype=dtype)
    assert LengthHistogram.from_lengths(values).total_tokens == sum(min(v, top) for v in raw)


@settings(max_examples=40, deadline=None)
@given(small_hists, small_hists, small_hists)
def test_property_merge_associative_and_commutative(
    a: LengthHistogram, b: LengthHistogram, c: LengthHistogram
) -> None:
    assert (a + b) + c == a + (b + c)
    assert a + b == b + a
    assert (a + b).total_tokens == a.total_tokens + b.total_tokens


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.integers(1, 40), min_size=1, max_size=80), st.lists(st.floats(0, 1), min_size=1, max_size=5)
)
def test_property_quantile_matches_numpy(values: list[int], qs: list[float]) -> None:
    expected = np.quantile(np.array(values), qs, method="inverted_cdf")
    np.testing.assert_array_equal(LengthHistogram.from_lengths(values).quantile(qs), expected)
