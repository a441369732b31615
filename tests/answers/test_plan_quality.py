"""A plan in gradient noise as the faces state it (answers.gradient_noise.plan_quality) and what
recommendation.json records of a noise model, against independent formulas on a case small
enough to write out: two lengths, each alone in a bin and a bucket."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from analysis import BatchRule, LengthHistogram
from analysis.answers.gradient_noise import gradient_noise_record, plan_quality
from analysis.timing.noise import plan_noise, time_to_quality, toy_model
from analysis.timing.step_time import StepTimeModel

# 40 samples of 5 tokens (bin 0 of the toy model) and 40 of 50 (bin 1), batches of 4, one
# bucket per length: every batch is full and pure
HIST = LengthHistogram.from_counts([5, 50], [40, 40])
EDGES = [0, 10, 50]
RULE = BatchRule(batch_size=4)
CLOCK = StepTimeModel(per_step=0.01, per_token=1e-3)


def _by_hand() -> dict[str, float]:
    """The toy model's figures on HIST from the cluster-sample formulas: bin means (1, 0) and
    (1.2, 0.2), within traces S_j**2 = 1 (N - 1 divisor), no estimation noise."""
    n, b, n_b = 80, 4, 40
    offset2 = 0.1**2 + 0.1**2  # |mu_b - G|**2, G = (1.1, 0.1)
    trace = (2 * (n_b - 1) * 1.0 + n * offset2) / (n - 1)
    bucket_var = 1.0 / b * (1 - b / n_b) + offset2  # a batch of 4 from its bucket
    shuffle_var = trace / b * (1 - b / n)
    b_eff = 1 / (bucket_var / trace + 1 / n)
    b_shuffle = 1 / (shuffle_var / trace + 1 / n)
    scale = trace / (1.1**2 + 0.1**2)
    steps = (1 + scale / b_eff) / (1 + scale / b_shuffle)
    # epoch seconds: bucketed 10 batches of 4 x 5 and 10 of 4 x 50; a shuffle's batch is all
    # short with probability C(40, 4) / C(80, 4), else padded to 50
    bucketed = 10 * (0.01 + 1e-3 * 4 * 5) + 10 * (0.01 + 1e-3 * 4 * 50)
    p_short = math.comb(40, 4) / math.comb(80, 4)
    shuffle = 20 * (0.01 + 1e-3 * 4 * (5 * p_short + 50 * (1 - p_short)))
    epoch = bucketed / shuffle
    return {
        "b_eff": b_eff,
        "b_shuffle": b_shuffle,
        "scale": scale,
        "steps": steps,
        "epoch": epoch,
        "time": steps * epoch,
    }


def test_plan_quality_matches_the_cluster_sample_formulas():
    want = _by_hand()
    assert want["b_shuffle"] == pytest.approx(4.0, rel=1e-12)  # full batches: a shuffle's B_eff is B
    q = plan_quality(toy_model(), HIST, RULE, edges=EDGES, step_time=CLOCK)
    assert q.n_buckets == 2 and q.strategy == "bucketed"
    assert q.effective_batch.value == pytest.approx(want["b_eff"], rel=1e-12)
    assert q.shuffle_effective_batch == pytest.approx(4.0, rel=1e-12)
    assert q.effective_batch_share.value == pytest.approx(want["b_eff"] / 4, rel=1e-12)
    assert q.noise.noise_scale.value == pytest.approx(want["scale"], rel=1e-12)
    assert q.steps_ratio.value == pytest.approx(want["steps"], rel=1e-12)
    assert q.epoch_ratio == pytest.approx(want["epoch"], rel=1e-12)
    assert q.time_ratio is not None and q.time_ratio.value == pytest.approx(want["time"], rel=1e-12)
    assert q.time_speedup.value == pytest.approx(1 / want["time"], rel=1e-12)
    # the standard errors: the share's is B_eff's over B; the speed-up's by the delta method
    assert (
        q.effective_batch_share.se == pytest.approx(q.effective_batch.se / 4, rel=1e-12)
        and q.effective_batch.se > 0
    )
    assert q.time_speedup.se == pytest.approx(q.time_ratio.se / q.time_ratio.value**2, rel=1e-12)


def test_plan_quality_without_a_clock_and_for_a_shuffle():
    q = plan_quality(toy_model(), HIST, RULE, edges=EDGES)
    assert q.time_ratio is None and q.epoch_ratio is None and math.isnan(q.time_speedup.value)
    shuffle = plan_quality(toy_model(), HIST, RULE, strategy="random")
    assert shuffle.n_buckets is None
    assert shuffle.effective_batch_share.value == pytest.approx(1.0, rel=1e-12)
    assert shuffle.steps_ratio.value == pytest.approx(1.0, rel=1e-12)
    # a shuffle's B_eff handed in (the explorer keeps it per rule) changes nothing
    again = plan_quality(
        toy_model(), HIST, RULE, edges=EDGES, shuffle_effective_batch=q.shuffle_effective_batch
    )
    assert again.effective_batch_share == q.effective_batch_share


def test_the_record_carries_the_model_and_the_plan_as_plan_noise_prices_them():
    model = toy_model()
    record = gradient_noise_record(
        model, HIST, EDGES, RULE, rng=np.random.default_rng(0), epochs=2, step_time=CLOCK
    )
    record = json.loads(json.dumps(record, allow_nan=False))  # JSON-ready, as written
    m = record["model"]
    assert m["edges"] == list(model.edges) and m["bins"] == 2 and m["bin_samples"] == [50, 50]
    assert m["backward_passes"] == 20 and m["group_size"] == 1 and m["sketch_dimension"] == 2
    for name, figure in model.figures(HIST).items():
        assert m[name] == {
            "value": pytest.approx(figure.value, rel=1e-12),
            "se": pytest.approx(figure.se, rel=1e-12),
        }
    assert m["noise_scale"]["value"] == pytest.approx(_by_hand()["scale"], rel=1e-12)
    plan = record["plan"]
    priced = plan_noise(model, HIST, "bucketed", RULE, edges=EDGES)
    for name, row in priced.to_frame().iterrows():
        assert plan[name]["value"] == pytest.approx(row["value"], rel=1e-12)
        assert plan[name]["se"] == pytest.approx(row["se"], rel=1e-12)
    assert plan["edges"] == EDGES and plan["n_buckets"] == 2 and plan["steps"] == 20
    time, steps, epoch = time_to_quality(model, CLOCK, HIST, "bucketed", RULE, edges=EDGES)
    assert (
        plan["time_ratio"]["value"]
        == pytest.approx(time.value, rel=1e-12)
        == pytest.approx(_by_hand()["time"])
    )
    assert plan["time_ratio"]["se"] == pytest.approx(time.se, rel=1e-12)
    assert plan["epoch_ratio"] == pytest.approx(epoch, rel=1e-12)
    assert plan["effective_batch_share"]["value"] == pytest.approx(_by_hand()["b_eff"] / 4, rel=1e-12)
    no_clock = gradient_noise_record(model, HIST, EDGES, RULE, rng=np.random.default_rng(0), epochs=2)
    assert no_clock["plan"]["time_ratio"] is None and no_clock["plan"]["time_speedup"] is None
