"""The trade-off on the gradient axis (analysis.answers.tradeoff with noise=): every point read
on the frontier's effective-batch share, the Trainer's with its standard error, times to the
same loss from the frame, and the sentence saying those numbers."""

from __future__ import annotations

import math

import numpy as np
import pytest

from analysis import BatchRule, LengthHistogram, StepTimeModel
from analysis.answers.frontier import frontier
from analysis.answers.tradeoff import TRAINER_LABEL, read_tradeoff, tradeoff
from analysis.narrative.frontier import frontier_sentence
from analysis.tables import format_percent
from analysis.timing.noise import plan_noise, time_to_quality
from tests.answers.conftest import length_noise

CLOCK = StepTimeModel(per_step=0.01, per_token=1e-4, attention=1e-7)


@pytest.fixture(scope="module")
def case():
    rng = np.random.default_rng(3)
    model = length_noise(rng, 160)
    hist = LengthHistogram.from_lengths(rng.integers(4, 160, 900))
    trade = tradeoff(hist, BatchRule(4), rng=np.random.default_rng(1), noise=model, step_time=CLOCK)
    return model, hist, trade


def test_the_points_are_read_on_the_effective_batch(case):
    model, hist, trade = case
    frame = trade.frontier.frame
    assert trade.mixing_axis == trade.frontier.mixing_axis == "effective_batch_share"
    row = frame[frame["label"] == TRAINER_LABEL].iloc[0]
    t = trade.trainer
    assert (t.mixing, t.mixing_se, t.quality_time) == (
        row["effective_batch_share"],
        row["effective_batch_share_se"],
        row["quality_time"],
    )
    assert math.isfinite(t.quality_time) and 0 < t.mixing <= 1.05
    bucketed = frame[(frame["strategy"] == "bucketed") & (frame["knob"] == "n_buckets")]
    ok = bucketed[bucketed["efficiency"] >= trade.target]
    assert trade.best is not None and trade.best.mixing >= ok["effective_batch_share"].max()
    top = bucketed.sort_values(["efficiency", "effective_batch_share"]).iloc[-1]
    assert trade.most_efficient.mixing == top["effective_batch_share"]
    edges = list(top["edges"])  # the frame's share and time are plan_noise's and time_to_quality's
    priced = plan_noise(model, hist, "bucketed", BatchRule(4), edges=edges)
    assert trade.most_efficient.mixing == pytest.approx(priced.effective_batch.value / priced.batch_size)
    t_q = time_to_quality(model, CLOCK, hist, "bucketed", BatchRule(4), edges=edges)[0].value
    assert trade.most_efficient.quality_time == pytest.approx(t_q)
    assert trade.to_dict()["mixing_axis"] == "effective_batch_share"


def test_the_floor_search_reads_the_exact_share_of_the_gradient_plan(case):
    model, hist, trade = case
    frame = trade.frontier.frame
    bucketed = frame[(frame["strategy"] == "bucketed") & (frame["knob"] == "n_buckets")]
    target = float(bucketed["efficiency"].quantile(0.6))
    # without the model the floor search cannot run on the gradient axis: the frame's best stands
    plain = read_tradeoff(trade.frontier, hist, target)
    ok = bucketed[bucketed["efficiency"] >= target]
    assert plain.best.mixing == ok["effective_batch_share"].max() and plain.floor == target
    found = read_tradeoff(trade.frontier, hist, target, noise=model, step_time=CLOCK)
    assert found.best.reached >= target and found.best.mixing >= plain.best.mixing
    assert found.best.bound is None and math.isfinite(found.best.quality_time)


def test_the_sentence_says_the_frames_numbers(case):
    _, _, trade = case
    text = frontier_sentence(trade, trade.mixing_axis)
    best, t = trade.best, trade.trainer
    assert f"keeps {format_percent(best.mixing, 'prose')} of the effective batch" in text
    assert f"{1 / best.quality_time:.2f}× sooner than a shuffle" in text or (
        f"{best.quality_time:.2f}× a shuffle's time" in text
    )
    assert (
        f"keeps {format_percent(t.mixing, 'prose')} ± {format_percent(t.mixing_se, 'error')} of it per step"
        in text
    )
    assert "were its steps' errors independent" in text and "Mixing is a proxy" not in text
    assert f"lag-1 autocorrelation of {t.lag1_autocorr:.2f}" in text


def test_without_a_noise_model_nothing_changes_but_the_proxy_label():
    hist = LengthHistogram.from_lengths(np.random.default_rng(0).integers(1, 300, 600))
    res = frontier(hist, batch_size=4, rng=np.random.default_rng(0), max_buckets=4, n_lambdas=2)
    trade = read_tradeoff(res, min_efficiency=0.8)
    f = res.frame
    ok = f[(f["strategy"] == "bucketed") & (f["knob"] == "n_buckets") & (f["efficiency"] >= 0.8)]
    assert trade.mixing_axis == "mixing" and trade.best.mixing == ok["mixing"].max()
    assert math.isnan(trade.best.quality_time) and math.isnan(trade.trainer.quality_time)
    text = frontier_sentence(trade, trade.mixing_axis)
    assert text == frontier_sentence(trade)  # the length axis is the default
    assert "Mixing is a proxy" in text and "sooner" not in text and "per step" not in text
