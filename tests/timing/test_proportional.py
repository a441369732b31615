"""The throughput model (analysis.timing.proportional): the case's arithmetic, and a prediction from
expected padding against time proportional to padded tokens."""

from __future__ import annotations

import numpy as np
import pytest

from analysis import BatchRule
from analysis.case import CASE_BATCH_SIZE, CASE_BUCKETED_TOKENS_PER_S, CASE_SORTED_TOKENS_PER_S
from analysis.lengths import LengthHistogram
from analysis.padding.waste import expected_padding
from analysis.timing.proportional import predict_throughput


def test_case_arithmetic():
    predicted = predict_throughput(0.868, reference_tokens_per_s=CASE_SORTED_TOKENS_PER_S)
    assert predicted == pytest.approx(27_776.0, rel=1e-15)
    # the measured 25.1 Ktok/s is below the prediction: the model is an upper bound
    assert CASE_BUCKETED_TOKENS_PER_S < predicted
    # a sorted run slightly below 1 raises the prediction in proportion
    assert predict_throughput(
        0.868, reference_tokens_per_s=32_000, reference_efficiency=0.99
    ) == pytest.approx(32_000 * 0.868 / 0.99)
    # the reference predicts itself
    assert predict_throughput(
        0.99, reference_tokens_per_s=32_000, reference_efficiency=0.99
    ) == pytest.approx(32_000)


def test_predict_throughput_arrays_and_monotone():
    eff = np.linspace(0.1, 1.0, 10)
    out = predict_throughput(eff, reference_tokens_per_s=1000.0)
    assert isinstance(out, np.ndarray)
    np.testing.assert_allclose(out, 1000.0 * eff, rtol=1e-15)
    assert (np.diff(out) > 0).all()


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"efficiency": 0.0}, "efficiency must be in"),
        ({"efficiency": 1.5}, "efficiency must be in"),
        ({"efficiency": float("nan")}, "efficiency must be in"),
        ({"reference_tokens_per_s": 0}, "tokens_per_s must be a finite number > 0"),
        ({"reference_tokens_per_s": float("inf")}, "tokens_per_s must be a finite number > 0"),
        ({"reference_efficiency": 1.2}, "efficiency must be in"),
        ({"reference_efficiency": -0.5}, "efficiency must be a finite number > 0"),
    ],
)
def test_predict_throughput_bad_input(kwargs, message):
    kwargs = {"efficiency": 0.8, "reference_tokens_per_s": 1000.0, **kwargs}
    efficiency = kwargs.pop("efficiency")
    with pytest.raises(ValueError, match=message):
        predict_throughput(efficiency, **kwargs)


def test_prediction_is_time_proportional_to_padded_tokens():
    # same data, so the same useful tokens: an epoch's time scales with its padded tokens
    rng = np.random.default_rng(5)
    samples = np.clip(rng.lognormal(np.log(1500), 0.8, 20_000).round(), 65, 8192).astype(np.int64)
    hist = LengthHistogram.from_lengths(samples)
    one_bucket = expected_padding(hist, [0, 8192], rule=BatchRule(batch_size=CASE_BATCH_SIZE))
    bucketed = expected_padding(hist, [0, 770, 1216, 1728, 2432, 3296, 8192], rule=BatchRule(batch_size=8))
    reference_seconds = one_bucket.useful_tokens / 12_000
    padded_per_s = one_bucket.padded_tokens / reference_seconds  # the hardware's fixed rate
    want = bucketed.useful_tokens / (bucketed.padded_tokens / padded_per_s)
    got = predict_throughput(
        bucketed.efficiency, reference_tokens_per_s=12_000, reference_efficiency=one_bucket.efficiency
    )
    assert got == pytest.approx(want, rel=1e-13)
    assert got == pytest.approx(12_000 * one_bucket.padded_tokens / bucketed.padded_tokens, rel=1e-13)
