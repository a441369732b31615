"""Edges for time to quality and floors on the gradient axis (analysis.optimize._quality,
analysis.optimize._gradient) against exhaustive search over every K-subset of ends, each plan
priced independently: epoch seconds by analysis.timing.epoch, the between-bucket share by
analysis.timing.noise.plan_noise."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from analysis import BatchRule, LengthHistogram, StepTimeModel, evaluate_edges, optimize_edges
from analysis.optimize import Floor, floor_plans
from analysis.optimize.gradient import steps_factor
from analysis.timing.epoch import expected_epoch_time
from analysis.timing.noise import (
    GradientNoise,
    effective_batch_share,
    measure_gradient_noise,
    plan_noise,
)

CLOCK = StepTimeModel(per_step=0.05, per_sample=2e-3, per_token=1e-3, attention=1e-5)
RULES = [BatchRule(batch_size=3), BatchRule(batch_size=4, pad_to_multiple_of=4)]


def _model(seed: int) -> GradientNoise:
    """A model probed from synthetic per-sample gradients whose mean drifts with length (its
    bins cover 5..50: the test data reach outside them on both sides)."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(5, 51, 400)
    drift = rng.normal(size=6)
    grads = rng.normal(size=(400, 6)) + np.outer(np.sin(lengths / 9.0), drift) + 0.3
    return measure_gradient_noise(
        lambda idx: grads[idx].mean(0), lengths, n_bins=5, groups_per_bin=5, folds=3, rng=rng
    )


def _hist(seed: int) -> LengthHistogram:
    """6..9 distinct lengths in 1..59, each 1..11 times."""
    rng = np.random.default_rng(1000 + seed)
    m = int(rng.integers(6, 10))
    lengths = np.sort(rng.choice(np.arange(1, 60), size=m, replace=False))
    return LengthHistogram.from_counts(lengths, rng.integers(1, 12, size=m))


def _every(hist: LengthHistogram, k: int) -> list[list[int]]:
    inner = hist.lengths[:-1].tolist()
    return [[0, *cut, int(hist.max)] for cut in itertools.combinations(inner, k - 1)]


def _rho(model: GradientNoise, hist: LengthHistogram, edges: list[int], rule: BatchRule) -> float:
    return plan_noise(model, hist, "bucketed", rule, edges=edges).between_share.value


def _product(model, hist, edges, rule) -> float:
    scale = model.figures(hist)["noise_scale"].value
    inverse = 1 / scale if math.isfinite(scale) and scale > 0 else 0.0
    seconds = expected_epoch_time(hist, CLOCK, "bucketed", rule, edges=edges)
    return seconds * steps_factor(_rho(model, hist, edges, rule), rule.batch_size, inverse)


def test_some_models_here_have_an_indefinite_gram_matrix():
    """The signed eigenbasis is exercised: the unbiased Gram matrix has a negative mode."""
    assert any(np.linalg.eigvalsh(_model(s).gram).min() < 0 for s in range(4))


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("rule", RULES, ids=str)
def test_time_to_quality_is_the_least_product_of_exhaustive_search(seed, rule):
    model, hist = _model(seed), _hist(seed)
    for k in (2, 3, 4):
        plan = optimize_edges(hist, k, rule, noise=model, step_time=CLOCK)
        best = min(_product(model, hist, e, rule) for e in _every(hist, k))
        assert _product(model, hist, plan.edges, rule) == pytest.approx(best, rel=1e-9), k
        g = plan.gradient
        assert g.exact and g.vertices >= 1 and g.passes >= 3
        assert g.between_share == pytest.approx(_rho(model, hist, plan.edges, rule), rel=1e-9, abs=1e-12)
        assert g.effective_batch_share == pytest.approx(
            effective_batch_share(g.between_share, rule.batch_size)
        )
        ratio = _product(model, hist, plan.edges, rule) / _product(model, hist, [0, int(hist.max)], rule)
        assert g.predicted_time_ratio == pytest.approx(
            ratio
            * expected_epoch_time(hist, CLOCK, "bucketed", rule, edges=[0, int(hist.max)])
            / expected_epoch_time(hist, CLOCK, "random", rule),
            rel=1e-9,
        )


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("rule", RULES, ids=str)
def test_gradient_floors_are_the_constrained_optimum_of_exhaustive_search(seed, rule):
    model, hist = _model(seed), _hist(seed)
    rng = np.random.default_rng(seed)
    size = rule.batch_size
    for k in (2, 3):
        plans = [evaluate_edges(hist, e, rule) for e in _every(hist, k)]
        share = {tuple(p.edges): effective_batch_share(_rho(model, hist, p.edges, rule), size) for p in plans}
        shares = sorted(share.values())
        for x in shares[0] + rng.uniform(0, 1, 3) * (shares[-1] - shares[0]):
            plan = optimize_edges(hist, k, rule, noise=model, min_effective_batch=float(x))
            best = min(p.objective for p in plans if share[tuple(p.edges)] >= x - 1e-12)
            assert share[tuple(plan.edges)] >= x - 1e-12 and plan.objective <= best * (1 + 1e-12), (k, x)
            assert plan.floor.exact and plan.floor.mixing_axis == "effective_batch_share"
            assert plan.floor.bound <= best * (1 + 1e-12)
        effs = sorted(p.efficiency for p in plans)
        for x in effs[0] + rng.uniform(0, 1, 3) * (effs[-1] - effs[0]):
            plan = optimize_edges(hist, k, rule, noise=model, min_efficiency=float(x))
            best = max(share[tuple(p.edges)] for p in plans if p.efficiency >= x)
            assert plan.efficiency >= x and share[tuple(plan.edges)] >= best - 1e-12, (k, x)
            assert plan.floor.exact and plan.floor.bound >= best - 1e-12
            assert plan.gradient.effective_batch_share == pytest.approx(share[tuple(plan.edges)], rel=1e-9)


def test_an_effective_batch_floor_under_step_time_is_the_least_time():
    model, hist, rule = _model(0), _hist(0), RULES[0]
    plans = [evaluate_edges(hist, e, rule, step_time=CLOCK) for e in _every(hist, 3)]
    share = {tuple(p.edges): effective_batch_share(_rho(model, hist, p.edges, rule), 3) for p in plans}
    x = sorted(share.values())[len(share) // 2]
    plan = optimize_edges(hist, 3, rule, noise=model, step_time=CLOCK, min_effective_batch=x)
    best = min(p.objective for p in plans if share[tuple(p.edges)] >= x - 1e-12)
    assert plan.objective <= best * (1 + 1e-12) and plan.gradient.time_ratio is not None


def test_lengths_outside_the_models_bins_are_priced_with_its_end_bins():
    """The model's bins cover 5..50: lengths 1..4 price as its first bin, 51.. as its last."""
    model = _model(0)
    inside = LengthHistogram.from_counts([5, 20, 50], [6, 6, 6])
    outside = LengthHistogram.from_counts([1, 20, 59], [6, 6, 6])
    assert model.bin_of([1, 5]).tolist() == [0, 0] and model.bin_of([50, 59]).tolist() == [4, 4]
    a = optimize_edges(inside, 2, batch_size=3, noise=model, min_efficiency=0.01)
    b = optimize_edges(outside, 2, batch_size=3, noise=model, min_efficiency=0.01)
    assert a.gradient.between_share == pytest.approx(b.gradient.between_share, rel=1e-12)


def test_floor_plans_take_the_noise_model():
    model, hist = _model(1), _hist(1)
    plan = optimize_edges(hist, 3, batch_size=3, noise=model, min_effective_batch=0.8)
    (same,) = floor_plans(hist, BatchRule(batch_size=3), [(3, Floor("effective_batch", 0.8))], noise=model)
    assert same is not None and same.edges == plan.edges


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"noise": "model"}, "noise must be a GradientNoise model"),
        ({}, "time to quality, which needs step_time"),
        ({"step_time": CLOCK, "method": "geometric"}, "method must be 'optimal'"),
        ({"min_mixing": 0.5}, "give min_effective_batch"),
        ({"step_time": CLOCK, "min_efficiency": 0.5}, "give min_effective_batch"),
        ({"step_time": CLOCK, "batch_size": None, "max_tokens": 200}, "need batch_size"),
        ({"noise": None, "min_effective_batch": 0.9}, "needs a gradient-noise model"),
    ],
)
def test_noise_arguments(kwargs, message):
    model, hist = _model(0), _hist(0)
    call = {"batch_size": 3, "noise": model, **kwargs}
    with pytest.raises(ValueError, match=message):
        optimize_edges(hist, 2, **call)


def test_a_noise_plan_serialises():
    import json

    plan = optimize_edges(_hist(2), 3, batch_size=3, noise=_model(2), step_time=CLOCK)
    d = json.loads(json.dumps(plan.to_dict(), allow_nan=False))
    assert d["gradient"]["exact"] and d["gradient"]["time_ratio"]["value"] > 0
