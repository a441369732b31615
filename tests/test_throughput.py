"""The throughput model (analysis.throughput): the case's arithmetic, the cost of explicit
batches, and calibrations built from expected padding."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from analysis.case import CASE_BATCH_SIZE, CASE_BUCKETED_TOKENS_PER_S, CASE_SORTED_TOKENS_PER_S
from analysis.lengths import LengthHistogram
from analysis.throughput import Calibration, batch_cost, predict_throughput
from analysis.waste import expected_padding


def test_case_arithmetic():
    predicted = predict_throughput(0.868, reference_tokens_per_s=CASE_SORTED_TOKENS_PER_S)
    assert predicted == pytest.approx(27_776.0, rel=1e-15)
    # the measured 25.1 Ktok/s is below the prediction: the model is an upper bound
    assert CASE_BUCKETED_TOKENS_PER_S < predicted
    # a sorted run slightly below 1 raises the prediction in proportion
    assert predict_throughput(0.868, reference_tokens_per_s=32_000, reference_efficiency=0.99) == \
        pytest.approx(32_000 * 0.868 / 0.99)
    # the reference predicts itself
    assert predict_throughput(0.99, reference_tokens_per_s=32_000, reference_efficiency=0.99) == \
        pytest.approx(32_000)


def test_predict_throughput_arrays_and_monotone():
    eff = np.linspace(0.1, 1.0, 10)
    out = predict_throughput(eff, reference_tokens_per_s=1000.0)
    assert isinstance(out, np.ndarray)
    np.testing.assert_allclose(out, 1000.0 * eff, rtol=1e-15)
    assert (np.diff(out) > 0).all()


@pytest.mark.parametrize("kwargs, message", [
    ({"efficiency": 0.0}, "efficiency must be in"),
    ({"efficiency": 1.5}, "efficiency must be in"),
    ({"efficiency": float("nan")}, "efficiency must be in"),
    ({"reference_tokens_per_s": 0}, "tokens_per_s must be a finite number > 0"),
    ({"reference_tokens_per_s": float("inf")}, "tokens_per_s must be a finite number > 0"),
    ({"reference_efficiency": 1.2}, "efficiency must be in"),
    ({"reference_efficiency": -0.5}, "efficiency must be a finite number > 0"),
])
def test_predict_throughput_bad_input(kwargs, message):
    kwargs = {"efficiency": 0.8, "reference_tokens_per_s": 1000.0, **kwargs}
    efficiency = kwargs.pop("efficiency")
    with pytest.raises(ValueError, match=message):
        predict_throughput(efficiency, **kwargs)


def test_batch_cost():
    assert batch_cost(8, 1000) == 8000.0
    assert batch_cost(8, 1000, attention_weight=0.5) == 8 * (1000 + 0.5 * 1000**2)
    sizes = np.array([8, 8, 3])
    longest = np.array([1000, 2000, 500])
    np.testing.assert_array_equal(batch_cost(sizes, longest), [8000.0, 16000.0, 1500.0])
    np.testing.assert_allclose(batch_cost(sizes, longest, 1e-3), sizes * (longest + 1e-3 * longest**2))
    with pytest.raises(ValueError, match="attention_weight"):
        batch_cost(8, 1000, attention_weight=-1)
    with pytest.raises(ValueError, match=">= 0"):
        batch_cost(-1, 1000)


def test_calibration_depends_only_on_useful_per_cost():
    cal = Calibration(tokens_per_s=2000.0, useful_tokens=800.0, cost=1000.0)
    assert cal.cost_per_s == pytest.approx(2500.0)
    assert cal.predict(800.0, 1000.0) == pytest.approx(2000.0)  # itself
    assert cal.predict(400.0, 500.0) == pytest.approx(2000.0)
    assert cal.predict(900.0, 1000.0) == pytest.approx(2250.0)
    np.testing.assert_allclose(cal.predict([800.0, 500.0], [1000.0, 1000.0]), [2000.0, 1250.0])
    with pytest.raises(dataclasses.FrozenInstanceError):
        cal.tokens_per_s = 1.0  # type: ignore[misc]
    with pytest.raises(ValueError, match="cost must be > 0"):
        cal.predict(1.0, 0.0)
    with pytest.raises(ValueError, match="useful_tokens must be a finite number > 0"):
        Calibration(1000.0, 0.0, 1.0)


def test_tokens_only_calibration_equals_efficiency_ratio():
    rng = np.random.default_rng(5)
    samples = np.clip(rng.lognormal(np.log(1500), 0.8, 20_000).round(), 65, 8192).astype(np.int64)
    hist = LengthHistogram.from_lengths(samples)
    one_bucket = expected_padding(hist, [0, 8192], batch_size=CASE_BATCH_SIZE)
    bucketed = expected_padding(hist, [0, 770, 1216, 1728, 2432, 3296, 8192], batch_size=8)
    cal = Calibration.from_estimate(12_000, one_bucket)
    want = predict_throughput(bucketed.efficiency, reference_tokens_per_s=12_000,
                              reference_efficiency=one_bucket.efficiency)
    assert cal.predict_estimate(bucketed) == pytest.approx(want, rel=1e-13)
    assert cal.predict_estimate(one_bucket) == pytest.approx(12_000, rel=1e-13)
    assert Calibration.from_efficiency(12_000, one_bucket.efficiency).predict(
        bucketed.useful_tokens, bucketed.padded_tokens) == pytest.approx(want, rel=1e-13)


def test_attention_calibration_against_explicit_batches():
    # One bucket per distinct length: every batch is uniform, so the epoch is deterministic
    # and its cost can be summed batch by batch with batch_cost.
    lengths, counts, a = [100, 400, 1600], [10, 7, 5], 1e-3
    hist = LengthHistogram.from_counts(lengths, counts)
    edges = [0, 100, 400, 1600]
    sizes, longest = [], []
    for v, c in zip(lengths, counts):
        full, rest = divmod(c, 4)
        sizes += [4] * full + ([rest] if rest else [])
        longest += [v] * (full + (1 if rest else 0))
    explicit_cost = batch_cost(np.array(sizes), np.array(longest), a).sum()
    sorted_est = expected_padding(hist, edges, batch_size=4, attention_weight=a)
    assert sorted_est.expected_cost == pytest.approx(explicit_cost, rel=1e-14)
    shuffled = expected_padding(hist, [0, 1600], batch_size=4, attention_weight=a)
    cal = Calibration.from_estimate(30_000, sorted_est)
    want = 30_000 * (shuffled.useful_tokens / shuffled.expected_cost) / (
        sorted_est.useful_tokens / explicit_cost)
    assert cal.predict_estimate(shuffled) == pytest.approx(want, rel=1e-13)
    # the attention term punishes the shuffle more than padded tokens alone do
    tokens_only = Calibration.from_estimate(
        30_000, expected_padding(hist, edges, batch_size=4)).predict_estimate(
        expected_padding(hist, [0, 1600], batch_size=4))
    assert cal.predict_estimate(shuffled) < tokens_only


def test_mixing_cost_models_raises():
    est0 = expected_padding([1, 2, 3, 9], [0, 9], batch_size=2)
    est1 = expected_padding([1, 2, 3, 9], [0, 9], batch_size=2, attention_weight=0.1)
    with pytest.raises(ValueError, match="attention_weight"):
        Calibration.from_estimate(1000, est0).predict_estimate(est1)
