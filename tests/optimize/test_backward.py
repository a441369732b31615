"""The tiled backward pass over lower bounds is, bit for bit, the textbook recursion
``back[k, i] = min over j > i of low(i, j) + back[k - 1, j]`` over each start's row of bounds
(:func:`~analysis.optimize._lower.low_costs`, one row at a time, minima by NumPy), wherever
the DP reads it: every layer below ``n_buckets``, and the last at the first start."""

from __future__ import annotations

import importlib

import numpy as np
import pytest

from analysis import BatchRule, LengthHistogram, StepTimeModel
from analysis.optimize._problem import build_problem

kernel = importlib.import_module("analysis.optimize._kernel")
backward_mod = importlib.import_module("analysis.optimize._backward")
lower = importlib.import_module("analysis.optimize._lower")
exact = importlib.import_module("analysis.optimize._exact")


def same_where_read(got: np.ndarray, want: np.ndarray) -> bool:
    """Bit for bit in every layer but the last, and the last at start 0."""
    return got[:-1].tobytes() == want[:-1].tobytes() and got[-1, 0].tobytes() == want[-1, 0].tobytes()


def row_by_row(data, short, rows: np.ndarray, is_end: np.ndarray, n_buckets: int) -> np.ndarray:
    """The recursion start by start, from the top, each row of bounds alone."""
    m = data.cum.size - 1
    back = np.full((n_buckets + 1, m + 1), np.inf)
    back[0, m] = 0.0
    low, ratio = np.empty(m + 1), np.empty(m + 1)
    for i in rows[::-1]:
        lower.low_costs(i, data, short, kernel._NO_BOUNDS, is_end, ratio, low)
        for k in range(1, n_buckets + 1):
            back[k, i] = np.min(low[i + 1 :] + back[k - 1, i + 1 :])
    return back


def histogram(n_distinct: int, seed: int) -> LengthHistogram:
    rng = np.random.default_rng(seed)
    lengths = np.sort(rng.choice(np.arange(1, 4 * n_distinct), n_distinct, replace=False))
    counts = rng.integers(1, 40, n_distinct) * (rng.random(n_distinct) < 0.9) + 1
    return LengthHistogram.from_counts(lengths, counts)


@pytest.mark.parametrize("batch_size", [1, 3, 8, 64, 100])
@pytest.mark.parametrize(("n_distinct", "edge_multiple"), [(40, 1), (157, 1), (300, 4)])
def test_backward_is_the_row_by_row_recursion(batch_size: int, n_distinct: int, edge_multiple: int) -> None:
    """Tiles of several starts and tiles with fewer rows than lanes (40 starts), every start
    or every fourth length an end; the product formula (B <= 64) and the table of log x!."""
    rule = BatchRule(batch_size=batch_size)
    prob = build_problem(histogram(n_distinct, batch_size), rule, edge_multiple)
    data, short = exact.exact_arrays(prob)
    assert short.product == (batch_size <= 64)
    for n_buckets in (1, 2, 5):
        rows, is_end = kernel._rows(prob, n_buckets, prob.ends)
        got = backward_mod.backward(data, short, kernel._NO_BOUNDS, rows, is_end, n_buckets)
        want = row_by_row(data, short, rows, is_end, n_buckets)
        assert same_where_read(got, want)
        assert np.isfinite(got[n_buckets, 0])


def test_backward_with_a_step_time_is_the_row_by_row_recursion() -> None:
    """The time objective: a working-set term (``q``, the bound's ``(r / B)**2``) and a cost
    per step."""
    model = StepTimeModel(per_step=0.1, per_token=1e-3, attention=1e-6, working_set=1e-9)
    prob = build_problem(histogram(157, 7), BatchRule(batch_size=8), step_time=model)
    data, short = exact.exact_arrays(prob)
    assert short.product and short.quad and data.per_batch > 0.0
    rows, is_end = kernel._rows(prob, 4, prob.ends)
    got = backward_mod.backward(data, short, kernel._NO_BOUNDS, rows, is_end, 4)
    assert same_where_read(got, row_by_row(data, short, rows, is_end, 4))


@pytest.mark.parametrize("batch_size", [1, 8, 64])
def test_tile_rows_are_the_rows_of_bounds(batch_size: int) -> None:
    """The forward pass's tile of rows: each lane's row the start's own
    (:func:`~analysis.optimize._lower.low_costs`) above it, the last start repeated."""
    prob = build_problem(histogram(157, batch_size), BatchRule(batch_size=batch_size), 2)
    data, short = exact.exact_arrays(prob)
    m = prob.m
    is_end = np.zeros(m + 1, np.bool_)
    is_end[prob.ends] = True
    lanes = backward_mod.LANES
    starts = np.minimum(np.arange(30, 30 + 3 * lanes, 3), prob.ends[-2])
    tile = np.full((lanes, m + 1), -1.0)
    backward_mod.tile_rows(
        starts, data, short, is_end, backward_mod.product_work(batch_size, 0, 0), tile, starts[0], m
    )
    low, ratio = np.empty(m + 1), np.empty(m + 1)
    for a, i in enumerate(starts):
        lower.low_costs(i, data, short, kernel._NO_BOUNDS, is_end, ratio, low)
        assert tile[a, i + 1 :].tobytes() == low[i + 1 :].tobytes()
        assert np.all(tile[a, starts[0] + 1 : i + 1] == np.inf) and np.all(tile[a, : starts[0] + 1] == -1.0)


@pytest.mark.parametrize("batch_size", [3, 8])
def test_the_near_ends_and_the_last_buckets_bound(batch_size: int) -> None:
    """What the product path's backward pass leaves for the forward pass, against the rows
    of bounds one start at a time: ``last[k, i]`` at least every end ``j < m`` whose bound
    plus ``back[k - 1, j]`` is within ``tau`` of ``back[k, i]`` (``k >= 2``), and below ``m``;
    ``at_m[i]`` at least the row's bound on ``(i, m]`` and at most its exact cost."""
    prob = build_problem(histogram(157, batch_size), BatchRule(batch_size=batch_size), 1)
    data, short = exact.exact_arrays(prob)
    m, n_buckets = prob.m, 5
    rows, is_end = kernel._rows(prob, n_buckets, prob.ends)
    want = row_by_row(data, short, rows, is_end, n_buckets)
    tau = 1e-3 * want[1, rows[0]]
    last, at_m = np.full((n_buckets + 1, m + 1), -1), np.full(m + 1, -1.0)
    got = backward_mod.product_backward(data, short, rows, is_end, n_buckets, (tau, last, at_m))
    assert same_where_read(got, want)
    low, ratio, cost, work = np.empty(m + 1), np.empty(m + 1), np.empty(m + 1), np.zeros((2, m + 1))
    only_m = np.zeros(m + 1, np.bool_)
    only_m[m] = True
    wide = 0
    for i in rows:
        lower.low_costs(i, data, short, kernel._NO_BOUNDS, is_end, ratio, low)
        exact.exact_row(i, data, short, only_m, cost, work[0], work[1])
        assert low[m] <= at_m[i] <= cost[m]
        for k in range(2, n_buckets):
            near = np.flatnonzero(low[i + 1 : m] + want[k - 1, i + 1 : m] <= want[k, i] + tau) + i + 1
            assert near.size == 0 or near.max() <= last[k, i] < m
            wide += near.size > 1
    assert wide > 0  # (tau lets some rows' near ends spread)
