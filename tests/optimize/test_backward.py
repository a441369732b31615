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
budget_mod = importlib.import_module("analysis.optimize._budget")


def same_where_read(got: np.ndarray, want: np.ndarray) -> bool:
    """Bit for bit in every layer but the last, and the last at start 0."""
    return got[:-1].tobytes() == want[:-1].tobytes() and got[-1, 0].tobytes() == want[-1, 0].tobytes()


def row_by_row(data, short, rows: np.ndarray, is_end: np.ndarray, n_buckets: int, bounds=None) -> np.ndarray:
    """The recursion start by start, from the top, each row of bounds alone (``bounds``: a
    token budget's, else none)."""
    bounds = kernel._NO_BOUNDS if bounds is None else bounds
    m = data.cum.size - 1
    back = np.full((n_buckets + 1, m + 1), np.inf)
    back[0, m] = 0.0
    low, ratio = np.empty(m + 1), np.empty(m + 1)
    for i in rows[::-1]:
        lower.low_costs(i, data, short, bounds, is_end, ratio, low)
        for k in range(1, n_buckets + 1):
            back[k, i] = np.min(low[i + 1 :] + back[k - 1, i + 1 :])
    return back


def histogram(n_distinct: int, seed: int) -> LengthHistogram:
    rng = np.random.default_rng(seed)
    lengths = np.sort(rng.choice(np.arange(1, 4 * n_distinct), n_distinct, replace=False))
    counts = rng.integers(1, 40, n_distinct) * (rng.random(n_distinct) < 0.9) + 1
    return LengthHistogram.from_counts(lengths, counts)


@pytest.mark.parametrize("batch_size", [1, 3, 8, 28, 41, 64, 100])
@pytest.mark.parametrize(("n_distinct", "edge_multiple"), [(40, 1), (157, 1), (300, 4)])
def test_backward_is_the_row_by_row_recursion(batch_size: int, n_distinct: int, edge_multiple: int) -> None:
    """Tiles of several starts and tiles with fewer rows than lanes (40 starts), every start
    or every fourth length an end; the product formula (B <= 64; from 16 the mean's chord
    and, at ends of one or two samples, ``ratio_few``) and the table of log x!."""
    rule = BatchRule(batch_size=batch_size)
    prob = build_problem(histogram(n_distinct, batch_size), rule, edge_multiple)
    data, plain = exact.exact_arrays(prob)
    assert plain.product == (batch_size <= 64)
    for short in (plain, plain._replace(chords=True)):  # (from 24 the chords: chord_sizes)
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


@pytest.mark.parametrize(
    ("batch_size", "max_count", "step_time"),
    [(64, 6_000, False), (100, 400, False), (1_000, 400, True), (10_000, 400, False), (10**8, 40, False)],
)
def test_the_fixed_tiles_are_the_row_by_row_recursion(
    batch_size: int, max_count: int, step_time: bool
) -> None:
    """Batch sizes without the product formula (ratios by ``ratio_bound``): most buckets hold
    full batches, so above ``POWER_ABOVE`` the tiles skip the power bounds that cannot lower a
    minimum (beside the chords no power bound: ``takes_power``); at 64 with ``C(N, 64)`` beyond
    float64 (no power bound), and at a batch size above every bucket (none there either); the
    time objective's working-set term at 1,000."""
    rng = np.random.default_rng(batch_size)
    lengths = np.sort(rng.choice(np.arange(1, 3000), 700, replace=False))
    hist = LengthHistogram.from_counts(lengths, rng.integers(1, max_count, 700))
    model = (
        StepTimeModel(per_step=0.1, per_token=1e-3, attention=1e-6, working_set=1e-9) if step_time else None
    )
    prob = build_problem(hist, BatchRule(batch_size=batch_size), step_time=model)
    data, plain = exact.exact_arrays(prob)
    assert not plain.product and plain.power and plain.quad == step_time
    for short in (plain, plain._replace(chords=True)):  # (the chords where no q: chord_sizes)
        for n_buckets in (1, 3, 6):
            rows, is_end = kernel._rows(prob, n_buckets, prob.ends)
            got = backward_mod.backward(data, short, kernel._NO_BOUNDS, rows, is_end, n_buckets)
            assert same_where_read(got, row_by_row(data, short, rows, is_end, n_buckets))
            assert np.isfinite(got[n_buckets, 0])


@pytest.mark.parametrize(
    ("budget_factor", "time", "stride", "every"),
    [
        (0.6, False, 32, 1),  # batches of one (the sums of weights), samples over the budget
        (3.0, False, 8, 1),
        (400.0, False, 32, 1),  # B > POWER_ABOVE: the power bound, asked only where it may lower a minimum
        (400.0, True, 4, 1),  # a working-set term (two sums), a table row per 4 starts: runs of lanes
        (900.0, False, 16, 3),  # every third length a start: the tile's lanes far apart
    ],
)
def test_budget_backward_is_the_row_by_row_recursion(
    budget_factor: float, time: bool, stride: int, every: int
) -> None:
    """A token budget's tiles (:func:`~analysis.optimize._backward._budget_tile`): the same
    floats as the recursion over each start's row (``low_costs``, every bound with the power
    bound where it applies), for several tiles, so seeded from the tile before."""
    rng = np.random.default_rng(int(budget_factor * 10) + time)
    lengths = np.sort(rng.choice(np.arange(10, 3000), 300, replace=False))
    counts = np.where(rng.random(300) < 0.3, 1, rng.integers(1, 4000, 300))
    hist = LengthHistogram.from_counts(lengths, counts)
    model = StepTimeModel(per_step=0.05, per_token=1e-3, attention=1e-7, working_set=1e-9) if time else None
    prob = build_problem(hist, BatchRule(max_tokens=int(lengths[-1] * budget_factor)), 1, model)
    data, short = exact.exact_arrays(prob)
    bounds = budget_mod.budget_bounds(data, stride, objective=prob.objective)
    assert (bounds.t2_up.shape[0] > 0) == time and ((prob.size == 1).any() == (budget_factor < 2))
    ends = np.unique(np.r_[prob.ends[every - 1 :: every], prob.m])
    for n_buckets in (1, 3, 6):
        rows, is_end = kernel._rows(prob, n_buckets, ends)
        got = backward_mod.backward(data, short, bounds, rows, is_end, n_buckets)
        want = row_by_row(data, short, rows, is_end, n_buckets, bounds)
        assert same_where_read(got, want)
        assert np.isfinite(got[n_buckets, 0])


@pytest.mark.parametrize(
    ("batch_size", "chords"), [(1, False), (8, False), (41, False), (41, True), (64, True)]
)
def test_tile_rows_are_the_rows_of_bounds(batch_size: int, chords: bool) -> None:
    """The forward pass's tile of rows: each lane's row the start's own
    (:func:`~analysis.optimize._lower.low_costs`) above it, the last start repeated (with
    the chords' sums too)."""
    prob = build_problem(histogram(157, batch_size), BatchRule(batch_size=batch_size), 2)
    data, short = exact.exact_arrays(prob)
    short = short._replace(chords=chords)
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


def tiled_against_rows(prob, n_buckets: int, tau_share: float, chords: bool = False):
    """The product path's backward pass with its near ends (``tau``: ``tau_share`` of one
    bucket's bound; ``chords``: the bounds' chords asked for), bit for bit the rows' recursion
    where the DP reads it; returns what the checks of the near ends read."""
    data, short = exact.exact_arrays(prob)
    short = short._replace(chords=chords)
    m = prob.m
    rows, is_end = kernel._rows(prob, n_buckets, prob.ends)
    want = row_by_row(data, short, rows, is_end, n_buckets)
    tau = tau_share * want[1, rows[0]]
    last, at_m = np.full((n_buckets + 1, m + 1), -1), np.full(m + 1, -1.0)
    got = backward_mod.product_backward(data, short, rows, is_end, n_buckets, (tau, last, at_m))
    assert same_where_read(got, want)
    return data, short, rows, is_end, want, tau, last, at_m


def near_ends(low: np.ndarray, back: np.ndarray, i: int, k: int, tau: float) -> np.ndarray:
    """The ends ``j < m`` whose bound from ``i`` plus ``back[k - 1, j]`` is within ``tau`` of
    ``back[k, i]``."""
    m = low.size - 1
    return np.flatnonzero(low[i + 1 : m] + back[k - 1, i + 1 : m] <= back[k, i] + tau) + i + 1


@pytest.mark.parametrize(("batch_size", "chords"), [(3, False), (8, False), (41, False), (41, True)])
def test_the_near_ends_and_the_last_buckets_bound(batch_size: int, chords: bool) -> None:
    """What the product path's backward pass leaves for the forward pass, against the rows
    of bounds one start at a time: ``last[k, i]`` at least every end ``j < m`` whose bound
    plus ``back[k - 1, j]`` is within ``tau`` of ``back[k, i]`` (``k >= 2``), and below ``m``;
    ``at_m[i]`` at least the row's bound on ``(i, m]`` and at most its exact cost."""
    prob = build_problem(histogram(157, batch_size), BatchRule(batch_size=batch_size), 1)
    m, n_buckets = prob.m, 5
    data, short, rows, is_end, want, tau, last, at_m = tiled_against_rows(prob, n_buckets, 1e-3, chords)
    low, ratio, cost, work = np.empty(m + 1), np.empty(m + 1), np.empty(m + 1), np.zeros((2, m + 1))
    only_m = np.zeros(m + 1, np.bool_)
    only_m[m] = True
    wide = 0
    for i in rows:
        lower.low_costs(i, data, short, kernel._NO_BOUNDS, is_end, ratio, low)
        exact.exact_row(i, data, short, only_m, cost, work[0], work[1], True)  # (the DP's types)
        assert low[m] <= at_m[i] <= cost[m]
        for k in range(2, n_buckets):
            near = near_ends(low, want, i, k, tau)
            assert near.size == 0 or near.max() <= last[k, i] < m
            wide += near.size > 1
    assert wide > 0  # (tau lets some rows' near ends spread)


@pytest.mark.parametrize(("batch_size", "seed", "chords"), [(8, 0, False), (48, 1, False), (48, 2, True)])
def test_the_layers_skipped_at_far_ends_leave_every_bound_as_the_rows_give_it(
    batch_size: int, seed: int, chords: bool
) -> None:
    """Smooth histograms of 1,500 lengths and thousands of samples (as the bundled data: a
    tile's ends run on for many blocks past its best ones) and the sweep's many layers: the
    product path skips a layer at an end where the lanes' least bound plus ``back`` lies above
    every lane's running minimum by ``2 tau``, and ``back`` is still the rows' bit for bit, and
    ``last`` covers every near end.  (A cap lowered by a thousandth of itself fails it: tried.)"""
    rng = np.random.default_rng(seed)
    lengths = np.arange(20, 1_520)
    density = np.exp(-0.5 * ((np.log(lengths) - np.log(rng.uniform(200, 600))) / 0.6) ** 2)
    counts = rng.poisson(3000 * density / density.max()) + 1
    prob = build_problem(LengthHistogram.from_counts(lengths, counts), BatchRule(batch_size=batch_size), 1)
    m, n_buckets = prob.m, backward_mod._SKIP_LAYERS + 2  # (the skip's layers: the sweep's)
    data, short, rows, is_end, want, tau, last, _ = tiled_against_rows(prob, n_buckets, 1e-4, chords)
    low, ratio = np.empty(m + 1), np.empty(m + 1)
    for i in rows[::7]:
        lower.low_costs(i, data, short, kernel._NO_BOUNDS, is_end, ratio, low)
        for k in range(2, n_buckets):
            near = near_ends(low, want, i, k, tau)
            assert near.size == 0 or near.max() <= last[k, i] < m
