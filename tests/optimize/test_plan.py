"""A plan's padding and objective computed with their shared order statistics: the same numbers."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from analysis.batching import BatchRule
from analysis.lengths import LengthHistogram
from analysis.optimize._problem import build_problem
from analysis.optimize.plan import make_plan


@pytest.mark.parametrize(
    "rule",
    [BatchRule(batch_size=4), BatchRule(batch_size=100, pad_to_multiple_of=16), BatchRule(max_tokens=512)],
)
def test_shared_statistics_leave_the_plan_unchanged(rule: BatchRule) -> None:
    rng = np.random.default_rng(3)
    lengths = np.unique(rng.integers(1, 400, size=70))
    hist = LengthHistogram.from_counts(lengths, rng.integers(1, 60, size=lengths.size))
    objective = "steps" if rule.max_tokens else "padding"
    prob = build_problem(hist, rule, 1, None, objective)
    # a problem whose lengths are another array: make_plan shares nothing with it
    alone = dataclasses.replace(prob, lengths=prob.lengths.copy())
    memo: dict[object, object] = {}
    for edges in ([0, 50, 120, 399], [0, 120, 399], [0, 50, 120, 250, 399]):
        shared = make_plan(hist, prob, edges, "test", len(edges) - 1, memo=memo)
        plain = make_plan(hist, alone, edges, "test", len(edges) - 1)
        assert shared.objective == plain.objective
        assert shared.estimate.bucket_waste_tokens == plain.estimate.bucket_waste_tokens
        assert shared.padded_tokens == plain.padded_tokens
