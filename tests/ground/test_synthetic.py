"""The synthetic case-like data: exact reproducibility and the case's published statistics."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from analysis import BatchRule, LengthHistogram, load_lengths, save_histogram
from analysis.case import (
    CASE_EDGES,
    CASE_GEOMETRIC_EDGES,
    CASE_MAX_LENGTH,
    CASE_MEAN_LENGTH,
    CASE_MIN_LENGTH,
    CASE_N_SAMPLES,
    CASE_TOTAL_TOKENS,
)
from analysis.case.synthetic import (
    CASE_LIKE_MIXTURE,
    LengthMixture,
    LogNormalMode,
    case_like_histogram,
    largest_remainder,
    mixture_histogram,
)
from analysis.padding.waste import expected_padding
from analysis.paths import BUNDLED_DATA


@pytest.fixture(scope="module")
def hist() -> LengthHistogram:
    return case_like_histogram()


def test_bundled_csv_is_exactly_the_generator(hist):
    assert load_lengths(BUNDLED_DATA) == hist


def test_make_data_writes_the_same_file(tmp_path):
    # what `make data` runs: save_histogram(case_like_histogram(), path)
    out = save_histogram(case_like_histogram(), tmp_path / "h.csv")
    assert out.read_bytes() == BUNDLED_DATA.read_bytes()


def test_published_statistics(hist):
    assert hist.n_samples == CASE_N_SAMPLES
    assert (hist.min, hist.max) == (CASE_MIN_LENGTH, CASE_MAX_LENGTH)
    assert round(hist.mean) == CASE_MEAN_LENGTH
    assert round(hist.total_tokens / 1e9, 3) == CASE_TOTAL_TOKENS / 1e9
    # every length of the range occurs, and the counts are exact int64
    np.testing.assert_array_equal(hist.lengths, np.arange(CASE_MIN_LENGTH, CASE_MAX_LENGTH + 1))
    assert hist.counts.dtype == np.int64


def test_case_efficiencies_close_to_published(hist):
    geometric = expected_padding(hist, CASE_GEOMETRIC_EDGES, rule=BatchRule(batch_size=8)).efficiency
    final = expected_padding(hist, CASE_EDGES, rule=BatchRule(batch_size=8)).efficiency
    shuffle = expected_padding(hist, [0, CASE_MAX_LENGTH], rule=BatchRule(batch_size=8)).efficiency
    assert geometric == pytest.approx(0.774, abs=0.004)
    assert final == pytest.approx(0.868, abs=0.004)
    assert shuffle == pytest.approx(0.375, abs=0.01)  # 12 vs 32 Ktok/s


def test_counts_are_the_largest_remainder_of_the_expected_counts(hist):
    lengths, p = CASE_LIKE_MIXTURE.probabilities()
    quota = p * CASE_N_SAMPLES
    assert np.all(np.abs(hist.counts - quota) < 1)
    # spike at the context limit: the truncated documents
    assert hist.counts[-1] == pytest.approx(0.0792 / 0.9992 * CASE_N_SAMPLES, abs=1e3)


def test_probabilities_match_scipy_lognormal():
    m = LengthMixture(modes=(LogNormalMode(1.0, 300, 0.4),), min_length=50, max_length=1000)
    lengths, p = m.probabilities()
    dist = stats.lognorm(s=0.4, scale=300)
    expected = dist.cdf(lengths + 0.5) - dist.cdf(lengths - 0.5)
    expected[-1] = dist.sf(lengths[-1] - 0.5)  # truncation: everything above goes to max
    expected /= dist.sf(49.5)  # below min is filtered out
    np.testing.assert_allclose(p, expected, rtol=1e-9, atol=1e-15)
    assert p.sum() == pytest.approx(1.0)


def test_floor_and_spike():
    m = LengthMixture(modes=(), floor_weight=3.0, spike_weight=1.0, min_length=10, max_length=99)
    lengths, p = m.probabilities()
    assert p[-1] == pytest.approx(0.25 + 0.75 * (np.log(99.5 / 98.5) / np.log(99.5 / 9.5)))
    np.testing.assert_allclose(
        p[:-1], 0.75 * np.log((lengths[:-1] + 0.5) / (lengths[:-1] - 0.5)) / np.log(99.5 / 9.5)
    )
    frame = m.to_frame()
    assert frame["weight"].tolist() == [0.75, 0.25]


@pytest.mark.parametrize(
    "weights,total",
    [([1, 1, 1], 10), ([0.1, 0.2, 0.7], 1), ([3, 0, 2], 7), ([1e-9, 1, 1], 5), ([0.25] * 4, 1001)],
)
def test_largest_remainder_brute_force(weights, total):
    got = largest_remainder(weights, total)
    assert int(got.sum()) == total
    quota = np.asarray(weights, float) / np.sum(weights) * total
    assert np.all(np.abs(got - quota) < 1)
    # brute force: the units left after the floors go to the largest fractional parts
    floors = np.floor(quota).astype(int)
    extra = got - floors
    assert set(np.unique(extra)) <= {0, 1}
    if extra.any() and not extra.all():
        assert (quota - floors)[extra == 1].min() >= (quota - floors)[extra == 0].max()


def test_seeded_draw_is_reproducible_and_near_expectation(hist):
    a, b = case_like_histogram(seed=1701), case_like_histogram(seed=1701)
    assert a == b and a != case_like_histogram(seed=1702)
    assert a.n_samples == CASE_N_SAMPLES
    # multinomial: the mean of 902,087 draws has standard error sd / sqrt(n) ~ 1.9 tokens
    sd = float(np.sqrt(np.average((hist.lengths - hist.mean) ** 2, weights=hist.counts)))
    assert abs(a.mean - hist.mean) < 5 * sd / np.sqrt(CASE_N_SAMPLES)


def test_small_n_samples():
    h = case_like_histogram(n_samples=100)
    assert h.n_samples == 100 and h.max == CASE_MAX_LENGTH  # the 8 % spike survives


@pytest.mark.parametrize(
    "bad",
    [
        lambda: case_like_histogram(n_samples=0),
        lambda: largest_remainder([], 3),
        lambda: largest_remainder([1, -1], 3),
        lambda: largest_remainder([0, 0], 3),
        lambda: LogNormalMode(1.0, 0, 0.1),
        lambda: LengthMixture(modes=(), min_length=5, max_length=4, floor_weight=1),
        lambda: LengthMixture(modes=()),
        lambda: LengthMixture(modes=(), spike_weight=-1.0),
        lambda: mixture_histogram(CASE_LIKE_MIXTURE, 2.5),
    ],
)
def test_bad_input_raises_value_error(bad):
    with pytest.raises(ValueError):
        bad()
