"""A start's bounds one end at a time (:func:`~analysis.optimize._lower.fixed_path_end`, the
search for the plan the bounds chose) are the floats of its row of bounds
(:func:`~analysis.optimize._lower.low_costs`): the same first end for every target."""

from __future__ import annotations

import importlib

import numpy as np
import pytest

from analysis import BatchRule, LengthHistogram, StepTimeModel
from analysis.optimize._problem import build_problem

kernel = importlib.import_module("analysis.optimize._kernel")
lower = importlib.import_module("analysis.optimize._lower")
exact = importlib.import_module("analysis.optimize._exact")


def scan(low: np.ndarray, after: np.ndarray, target: float, i: int) -> int:
    """The first ``j > i`` with ``low[j] + after[j] == target``, ``m`` if none before it."""
    m = low.size - 1
    j = i + 1
    while j < m and low[j] + after[j] != target:
        j += 1
    return j


@pytest.mark.parametrize(
    ("batch_size", "time", "chords"),
    [
        (1, False, False),
        (3, False, False),
        (8, False, False),
        (8, True, False),
        (64, False, False),
        (64, False, True),
    ],
)
def test_path_end_is_the_row_scan(batch_size: int, time: bool, chords: bool) -> None:
    rng = np.random.default_rng(batch_size)
    lengths = np.sort(rng.choice(np.arange(1, 900), 200, replace=False))
    hist = LengthHistogram.from_counts(lengths, rng.integers(1, 30, 200))
    model = StepTimeModel(per_step=0.1, per_token=1e-3, attention=1e-6, working_set=1e-9) if time else None
    prob = build_problem(hist, BatchRule(batch_size=batch_size), 3, step_time=model)
    data, short = exact.exact_arrays(prob)
    assert short.product
    short = short._replace(chords=chords)  # (the chords' sums carried one end at a time too)
    m = prob.m
    is_end = np.zeros(m + 1, np.bool_)
    is_end[prob.ends] = True
    after = rng.random(m + 1) * 1e3
    low, ratio = np.empty(m + 1), np.empty(m + 1)
    for i in range(0, m, 7):
        lower.low_costs(i, data, short, kernel._NO_BOUNDS, is_end, ratio, low)
        sums = low + after
        for j in rng.choice(np.arange(i + 1, m + 1), min(5, m - i), replace=False):
            if np.isfinite(sums[j]):
                got = lower.fixed_path_end(i, sums[j], after, data, short, is_end)
                assert got == scan(low, after, sums[j], i) and got <= j
        assert lower.fixed_path_end(i, -1.0, after, data, short, is_end) == m  # none: the last end


@pytest.mark.parametrize(("batch_size", "step_time"), [(100, False), (1_000, True), (10_000, False)])
def test_the_bounds_within_a_room_are_the_bounds_where_they_fit(batch_size: int, step_time: bool) -> None:
    """``low_costs_within`` (the forward pass's rows, power bounds only where the bound before
    them fits the room): within the room exactly where ``low_costs`` is, and the same floats
    there, for rooms around the bounds (some cells raised by the power bound above the room)."""
    rng = np.random.default_rng(batch_size)
    lengths = np.sort(rng.choice(np.arange(1, 3000), 400, replace=False))
    hist = LengthHistogram.from_counts(lengths, rng.integers(1, 400, 400))
    model = (
        StepTimeModel(per_step=0.1, per_token=1e-3, attention=1e-6, working_set=1e-9) if step_time else None
    )
    prob = build_problem(hist, BatchRule(batch_size=batch_size), step_time=model)
    data, short = exact.exact_arrays(prob)
    m = prob.m
    is_end = np.ones(m + 1, np.bool_)
    low, chord, within, work = np.empty(m + 1), np.empty(m + 1), np.empty(m + 1), np.empty(m + 1)
    split = 0
    for i in range(0, m, 7):
        lower.low_costs(i, data, short, kernel._NO_BOUNDS, is_end, work, low)
        lower.low_costs(i, data, short._replace(power=False), kernel._NO_BOUNDS, is_end, work, chord)
        room = np.where(rng.random(m + 1) < 0.5, chord, low) * (1.0 + rng.uniform(-1e-3, 1e-3, m + 1))
        lower.low_costs_within(i, data, short, kernel._NO_BOUNDS, is_end, room, work, within)
        fits = low[i + 1 :] <= room[i + 1 :]
        assert np.array_equal(within[i + 1 :] <= room[i + 1 :], fits)
        assert within[i + 1 :][fits].tobytes() == low[i + 1 :][fits].tobytes()
        split += int(((chord <= room) & (low > room))[i + 1 :].sum())
    assert split > 0  # some bound fits only before its power bound


@pytest.mark.parametrize("batch_size", [1, 2, 3, 8, 17, 32, 47, 64])
def test_the_paired_product_formula_is_the_binomial_within_its_rounding(batch_size: int) -> None:
    """``C(x, B)`` two factors at a time (``product_pairs``): exactly 0 for ``0 <= x < B``, and
    within ``(2.5 B + 3)`` units of ``2**-53`` of ``math.comb`` (the count ``product_grow``'s
    margin assumes), where ``u = x (x - B + 1)`` is exact (``x`` up to 9e7) and where it is
    rounded (up to 1e12 samples)."""
    import math
    from fractions import Fraction

    pairs = lower.product_pairs(batch_size)
    assert pairs.shape == (2, batch_size)
    for x in range(batch_size):
        assert lower._product(float(x), pairs) == 0.0
    xs = [batch_size, batch_size + 1, 2 * batch_size + 7, 1_000, 902_087, 94_906_265, 10**9 + 7, 10**12 + 3]
    for x in xs:
        want = math.comb(x, batch_size)
        got = lower._product(float(x), pairs)
        if want > 1e300:
            continue
        err = abs(Fraction(got) - want) / want
        assert err <= (2.5 * batch_size + 3) * Fraction(2) ** -53, (x, float(err))
