"""The gradient-noise sentences (narrative.noise) and the length mixing said to be a proxy
(narrative.frontier): every number they state checked against the cluster-sample formulas worked
out by hand, "sooner" only with a step-time model, the proxy only on the length axis."""

from __future__ import annotations

import math
import re
from dataclasses import replace

import pandas as pd
import pytest

from analysis import BatchRule, LengthHistogram
from analysis.answers.frontier import Frontier
from analysis.answers.gradient_noise import plan_quality
from analysis.answers.tradeoff import BucketedPoint, TradeOff, TrainerPoint
from analysis.narrative.frontier import MIXING_PROXY, frontier_sentence
from analysis.narrative.noise import describe_noise_model, describe_plan_noise
from analysis.timing.noise import toy_model
from analysis.timing.step_time import StepTimeModel

HIST = LengthHistogram.from_counts([5, 50], [40, 40])
EDGES = [0, 10, 50]
RULE = BatchRule(batch_size=4)
# by hand (tests/answers/test_plan_quality.py works them out): B_eff = 1 / (0.245 / tr + 1 / 80)
TRACE = (2 * 39 + 80 * 0.02) / 79
B_EFF = 1 / (0.245 / TRACE + 1 / 80)
SCALE = TRACE / 1.22
STEPS = (1 + SCALE / B_EFF) / (1 + SCALE / 4)
P_SHORT = math.comb(40, 4) / math.comb(80, 4)
EPOCH = (10 * 0.03 + 10 * 0.21) / (20 * (0.01 + 4e-3 * (5 * P_SHORT + 50 * (1 - P_SHORT))))


def test_the_plan_sentence_with_a_clock_says_how_much_sooner():
    q = plan_quality(
        toy_model(), HIST, RULE, edges=EDGES, step_time=StepTimeModel(per_step=0.01, per_token=1e-3)
    )
    text = describe_plan_noise(q, errors=False)
    assert text.startswith("K = 2 keeps ")
    assert f"keeps {100 * B_EFF / 4:.1f}% of the effective batch" in text
    assert f"(B_eff {B_EFF:.2f} of a shuffle's 4.00)" in text
    assert f"is predicted to reach the same loss {1 / (STEPS * EPOCH):.2f}× sooner than a shuffle" in text
    assert f"({STEPS:.3f} times the steps, each epoch in {EPOCH:.2f} of a shuffle's time)" in text
    with_errors = describe_plan_noise(q)
    assert f"B_eff {B_EFF:.3f} ± {q.effective_batch.se:.2g}" in with_errors
    assert "sooner" in with_errors and with_errors.count("±") == 4  # share, B_eff, speed-up, steps


def test_without_a_clock_the_sentence_gives_steps_and_never_time():
    q = plan_quality(toy_model(), HIST, RULE, edges=EDGES)
    text = describe_plan_noise(q, errors=False)
    assert "sooner" not in text and not re.search(r"\btime\b", text)
    assert text.endswith(f"is predicted to need {STEPS:.3f} times a shuffle's steps to reach the same loss.")


def test_a_plan_slower_to_the_loss_is_said_to_take_longer():
    # every step costs the same: the epoch takes as long as a shuffle's, and the noise adds steps
    q = plan_quality(toy_model(), HIST, RULE, edges=EDGES, step_time=StepTimeModel(per_step=0.01))
    assert q.epoch_ratio == pytest.approx(1.0)
    text = describe_plan_noise(q, errors=False)
    assert "sooner" not in text
    assert f"is predicted to take {STEPS:.2f}× a shuffle's time to reach the same loss" in text


def test_the_model_sentence_states_its_figures_and_cost():
    model = toy_model()
    figures = model.figures(HIST)
    text = describe_noise_model(model, figures)
    assert f"B_noise = tr Σ / |G|² = {SCALE:.4f} ± " in text  # to the digits its error warrants
    assert f"tr Σ = {TRACE:.3f}" in text and "|G|² = 1.220" in text
    assert "20 backward passes of 1 sample over 2 length bins" in text
    assert text.count("±") == 3


def _trade(best: BucketedPoint, trainer: TrainerPoint | None) -> TradeOff:
    frontier = Frontier(frame=pd.DataFrame(), rule=RULE, axis="efficiency", lambdas=())
    return TradeOff(
        frontier=frontier, measure="efficiency", target=0.8, best=best, most_efficient=best, trainer=trainer
    )


def test_the_trade_off_on_the_length_axis_says_it_is_a_proxy_and_on_the_gradient_axis_not():
    q = plan_quality(toy_model(), HIST, RULE, edges=EDGES)
    point = BucketedPoint(n_buckets=2, reached=0.9, mixing=q.effective_batch_share.value)
    trainer = TrainerPoint(reached=0.8, mixing=0.5, mixing_se=0.01, lag1_autocorr=0.7)
    for who in (None, trainer):
        length = frontier_sentence(_trade(point, who))
        assert length.endswith(MIXING_PROXY) and "of the mixing" in length
        gradient = frontier_sentence(_trade(point, who), mixing_axis="effective_batch_share")
        assert "proxy" not in gradient and "of the mixing" not in gradient
        assert f"keeps {100 * B_EFF / 4:.1f}% of the effective batch" in gradient
    with pytest.raises(ValueError, match="mixing_axis"):
        frontier_sentence(_trade(point, None), mixing_axis="spread")
    assert "length variance" in MIXING_PROXY and "--noise" in MIXING_PROXY


def test_no_plan_reaching_the_target_is_said_of_the_ks_searched():
    top = BucketedPoint(n_buckets=32, reached=0.9689, mixing=0.00105)
    text = frontier_sentence(replace(_trade(top, None), best=None, target=0.97))
    assert text.startswith("No bucketed plan of up to 32 buckets reaches 97.0% efficiency (K = 32 reaches")


def test_notebook_04s_quality_edges_sentence_says_the_plans_own_figures():
    """The edges placed for time to the same loss: their edges, rho, and the exact time ratio
    as plan.gradient holds them; without a model or under a budget, why there are none."""
    from analysis import optimize_edges
    from analysis.narrative.noise import describe_edges_for_quality

    hist = LengthHistogram.from_counts([5, 8, 50, 60], [40, 40, 40, 40])
    clock = StepTimeModel(per_step=0.01, per_token=1e-3)
    plan = optimize_edges(hist, 2, batch_size=4, noise=toy_model(), step_time=clock)
    text = describe_edges_for_quality(plan, BatchRule(4))
    g = plan.gradient
    assert text.startswith(f"Edges {plan.edges}. ")
    assert f"ρ = {g.between_share:.3g}" in text
    assert f"{g.time_ratio.value:.4f}" in text and f"({g.predicted_time_ratio:.4f} in the design" in text
    assert "No gradient-noise model" in describe_edges_for_quality(None, BatchRule(4))
    assert "need a batch size" in describe_edges_for_quality(None, BatchRule(max_tokens=256))
