"""The frontier on the gradient axis (analysis.answers.frontier with noise=): every row's
effective-batch share and time to quality, the Pareto set on (axis, effective_batch_share)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from analysis import LengthHistogram, StepTimeModel
from analysis.answers.frontier import frontier
from analysis.timing.noise import plan_noise, time_to_quality
from tests.answers.conftest import length_noise

CLOCK = StepTimeModel(per_step=0.01, per_token=1e-4, attention=1e-7)


@pytest.fixture(scope="module")
def case():
    rng = np.random.default_rng(3)
    model = length_noise(rng, 120)
    hist = LengthHistogram.from_lengths(rng.integers(4, 120, 800))
    res = frontier(
        hist,
        batch_size=4,
        rng=np.random.default_rng(1),
        max_buckets=4,
        n_lambdas=3,
        noise=model,
        step_time=CLOCK,
        gradient_accumulation_steps=(1,),
        padding_noises=(0.1,),
        epochs=2,
    )
    return model, hist, res


def test_exact_rows_are_priced_by_plan_noise_and_time_to_quality(case):
    model, hist, res = case
    assert res.mixing_axis == "effective_batch_share"
    for _, row in res.frame[res.frame["exact"]].iterrows():
        edges = list(row["edges"]) if row["strategy"] == "bucketed" else None
        priced = plan_noise(model, hist, row["strategy"], batch_size=4, edges=edges)
        assert row["effective_batch_share"] == pytest.approx(priced.effective_batch.value / priced.batch_size)
        assert row["effective_batch_share_se"] == pytest.approx(priced.effective_batch.se / priced.batch_size)
        t = time_to_quality(model, CLOCK, hist, row["strategy"], batch_size=4, edges=edges)[0]
        assert row["quality_time"] == pytest.approx(t.value)
    random = res.frame[res.frame["label"] == "random"].iloc[0]
    assert random["quality_time"] == pytest.approx(1.0)


def test_simulated_rows_have_a_share_with_a_standard_error(case):
    _, _, res = case
    sim = res.frame[~res.frame["exact"]]
    assert len(sim) == 3
    assert (sim["effective_batch_share"] > 0).all() and (sim["effective_batch_share_se"] > 0).all()
    assert np.isfinite(sim["quality_time"]).all()


def test_the_pareto_set_is_on_the_axis_and_the_effective_batch(case):
    _, _, res = case
    f = res.frame
    a, g = f[res.axis].to_numpy(float), f["effective_batch_share"].to_numpy(float)
    for i in range(len(f)):
        beaten = ((a >= a[i]) & (g >= g[i]) & ((a > a[i]) | (g > g[i]))).any()
        assert bool(f["pareto"].iloc[i]) == (not beaten)
    row = res.best(min_effective_batch=float(np.median(g)))
    assert row["effective_batch_share"] >= np.median(g)
    assert row[res.axis] == max(a[g >= np.median(g)])


def test_without_a_noise_model_the_columns_are_nan():
    hist = LengthHistogram.from_lengths(np.random.default_rng(0).integers(1, 200, 300))
    res = frontier(
        hist,
        batch_size=4,
        rng=np.random.default_rng(1),
        max_buckets=3,
        n_lambdas=2,
        simulate_strategies=False,
    )
    assert res.mixing_axis == "mixing"
    assert res.frame[["effective_batch_share", "effective_batch_share_se", "quality_time"]].isna().all().all()
    with pytest.raises(ValueError, match="needs a frontier made with a noise model"):
        res.best(min_effective_batch=0.9)
    assert math.isnan(float(res.frame["quality_time"].iloc[0]))
