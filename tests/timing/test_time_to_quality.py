"""time_to_quality prices a step at the plan's own mean step seconds: under a token budget a
bucketed plan takes far fewer steps an epoch than a shuffle, and the ratio counts that."""

from __future__ import annotations

import pytest

from analysis import BatchRule, LengthHistogram, StepTimeModel
from analysis.timing.epoch import expected_epoch_time
from analysis.timing.noise import plan_noise, time_to_quality, toy_model


@pytest.mark.parametrize("rule", [BatchRule(batch_size=3), BatchRule(max_tokens=120)], ids=str)
def test_time_to_quality_is_step_seconds_times_steps_to_the_loss(rule):
    hist = LengthHistogram.from_counts([3, 8, 20, 45, 60], [30, 17, 25, 11, 9])
    clock = StepTimeModel(per_step=0.02, per_token=1e-3)
    edges = [0, 8, 60]
    model = toy_model()
    t, steps, epoch = time_to_quality(model, clock, hist, "bucketed", rule, edges=edges)
    plan, shuffle = (
        plan_noise(model, hist, "bucketed", rule, edges=edges),
        plan_noise(model, hist, "random", rule),
    )
    scale = plan.noise_scale.value
    step_seconds = expected_epoch_time(hist, clock, "bucketed", rule, edges=edges) / plan.steps
    shuffle_seconds = expected_epoch_time(hist, clock, "random", rule) / shuffle.steps
    to_loss = (1 + scale / plan.effective_batch.value) / (1 + scale / shuffle.effective_batch.value)
    assert t.value == pytest.approx(step_seconds / shuffle_seconds * to_loss, rel=1e-12)
    assert steps.value == pytest.approx(to_loss, rel=1e-12)
    if rule.max_tokens is not None:  # the middle factor matters here
        assert plan.steps < shuffle.steps
