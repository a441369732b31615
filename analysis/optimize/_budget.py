"""A token budget's lower bounds on bucket costs, restart-free: what the pruned DP
(:mod:`analysis.optimize._pruned`) rules buckets out with when ``B`` follows the end.

With a token budget ``B`` follows the end, so each start's running sum restarts where ``B``
changes (:func:`~analysis.optimize._costs._restart`): ``O(m)`` stretches of constant ``B`` for
each of ``m`` starts, too many to run for every bucket.  ``T`` only grows when the bucket's
start moves down (more short samples: every ``P(max <= v)`` grows) and when ``B`` falls (fewer
draws).  So the sums of the start at or below ``i`` that is a multiple of ``BOUND_STRIDE``,
under batch sizes lowered to rungs ``_RUNG`` apart (``_bound_table``: a restart per rung, not
per end, and one row per ``BOUND_STRIDE`` starts), bound ``T`` from above and every bucket's
full-batch cost from below (:func:`lower_costs`), with a margin ``SLACK`` far above the sums'
rounding.  :func:`~analysis.optimize._exact.lower_row` then turns them into bounds on the
exact cost.

Where ``B = 1`` (samples at least half the budget, and those longer than it, whose weights
are whole steps: under the steps objective the bounds that matter) a bucket's cost needs no
sum at all: a batch of one pads nothing, ``n E_1 = sum of the samples' weights``, a
difference of prefix sums (``mass``), less a margin ``mass_err`` above their rounding and
``SLACK`` of ``n`` longest samples' weight (as the sums: above the exact costs' rounding).  The
stride's bound there would count every sample of up to ``BOUND_STRIDE`` lengths below the
start (the cheapest ones) as the bucket's: about ``5e-3`` of the optimum too low at
``max_tokens=4096`` on the bundled data, which the forward pass then paid for.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numba
import numpy as np

from analysis.optimize._costs import INF, Arrays, row_sums

# The bounds' running sums: one row per this many starts, batch sizes within this factor
# share a restart, and this relative margin (far above the rounding of the sums) on each.
BOUND_STRIDE = 32
BOUND_BYTES = 64 << 20
_RUNG = 1.05
SLACK = 1e-8


class BudgetBounds(NamedTuple):
    """The table of bounds' sums (``t_up``, ``t2_up``: :func:`_bound_table`, a row per
    ``stride`` starts) with ``cum`` and ``size`` as floats, and where ``B = 1`` the prefix
    sums of the samples' weights ``mass`` (:func:`_mass`) with a bound ``mass_err`` on the
    rounding of a difference of two."""

    cum_float: np.ndarray
    size_float: np.ndarray
    t_up: np.ndarray
    t2_up: np.ndarray
    stride: int
    mass: np.ndarray
    mass_err: float


@numba.njit(cache=True, nogil=True, error_model="numpy")
def lower_costs(
    i: int, data: Arrays, bounds: BudgetBounds, is_end: np.ndarray, out: np.ndarray
) -> None:  # pragma: no cover - compiled
    """``out[j]``: a lower bound on the objective of bucket ``(i, j]`` for every ``j > i``
    (inf where ``j`` may not end a bucket), from the row of ``_bound_table``'s sums at or
    below ``i`` (``t_up[i // stride][j] >= T(i, j)``, and ``t2_up``, empty without a second
    sum): the objective is decreasing in ``T``; below a full batch it is the exact one, and
    where ``B = 1`` the sum of the weights less its rounding margin.
    ``count`` and ``batch`` are ``cum`` and ``size`` as floats (exact below 2**53), so the
    loop is branch-free and vectorised; ``ceil`` of a rounded quotient is at most the
    exact one."""
    stride, t_up, t2_up, ci = bounds.stride, bounds.t_up, bounds.t2_up, bounds.cum_float[i]
    w_first, w2_first = data.weight[i + 1], data.weight2[i + 1]
    j0 = i + 1  # (the rows sliced from j0: an index from 0 is known not to wrap, vectorised)
    count, batch, end, row = bounds.cum_float[j0:], bounds.size_float[j0:], is_end[j0:], out[j0:]
    weight, weight2, t_row = data.weight[j0:], data.weight2[j0:], t_up[i // stride, j0:]
    mass, m_i, err = bounds.mass[j0:], bounds.mass[i], bounds.mass_err
    if t2_up.shape[0] == 0:  # no working-set term: one sum
        for k in range(count.size):
            n = count[k] - ci
            w = weight[k]
            # T(i, j) <= w_j - w_{i+1}: the longest sample drawn is at least the shortest
            tu = min(t_row[k], w - w_first) + SLACK * w
            c = n * w if n < batch[k] else n * (w - tu)
            c = ((mass[k] - m_i) - err) - SLACK * n * w if batch[k] == 1.0 else c  # (B = 1: the weights' sum)
            row[k] = c if end[k] else INF
    else:
        t2_row = t2_up[i // stride, j0:]
        for k in range(count.size):
            n = count[k] - ci
            b = batch[k]
            w = weight[k]
            w2 = weight2[k]
            tu = min(t_row[k], w - w_first) + SLACK * w
            tu2 = min(t2_row[k], w2 - w2_first) + SLACK * w2
            c = n * (w + b * w2) if n < b else n * ((w - tu) + b * (w2 - tu2))
            c = ((mass[k] - m_i) - err) - SLACK * n * (w + w2) if b == 1.0 else c
            row[k] = c if end[k] else INF
    if data.per_batch != 0.0:
        for k in range(count.size):
            row[k] += data.per_batch * math.ceil((count[k] - ci) / batch[k])


@numba.njit(cache=True, nogil=True, error_model="numpy", parallel=True)
def _bound_table(
    data: Arrays, rung: np.ndarray, stride: int, two: bool
) -> tuple[np.ndarray, np.ndarray]:  # pragma: no cover - compiled
    """``T(g, j)`` (and the second sum, if ``two``) for every start ``g`` that is a multiple
    of ``stride`` and every ``j > g``, for batches of ``rung[j]``, the rows on every thread:
    with ``rung <= size``, at least the sums of any start at or above ``g`` (the
    module docstring)."""
    m = data.cum.size - 1
    n_rows = (m - 1) // stride + 1
    every = np.ones(m + 1, np.bool_)
    t_up = np.zeros((n_rows, m + 1))
    t2_up = np.zeros((n_rows if two else 0, m + 1))
    for r in numba.prange(n_rows):
        second = t2_up[r] if two else np.empty(m + 1)
        row_sums(r * stride, data, rung, every, False, t_up[r], second)
    return t_up, t2_up


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _rungs(size: np.ndarray) -> np.ndarray:  # pragma: no cover - compiled
    """``size`` (non-increasing from index 1) lowered to the last of each run of ends whose
    batch sizes stay within a factor ``_RUNG`` of the run's first: at most ``size``, and
    changing ``log(B_max / B_min) / log(_RUNG)`` times, not at every end."""
    out = size.copy()
    m = size.size - 1
    j = 1
    while j <= m:
        end = j
        while end < m and size[end + 1] * _RUNG >= size[j]:
            end += 1
        for t in range(j, end + 1):
            out[t] = size[end]
        j = end + 1
    return out


def _mass(data: Arrays) -> tuple[np.ndarray, float]:
    """``mass[j]``: the sum of ``weight + weight2`` (a batch of one's weight) over the samples
    of lengths ``1..j``, and a bound on the rounding of ``mass[j] - mass[i]``: each of the
    ``m`` products and sums rounds by at most ``2**-53`` of a partial sum of magnitudes, so
    either prefix is off by at most ``2 (m + 1) 2**-53`` of the sum of them all, and their
    difference by twice that plus its own rounding (``4 (m + 2)``, doubled for safety)."""
    m = data.cum.size - 1
    counts = np.diff(data.cum).astype(np.float64)
    terms = counts * (data.weight[1:] + data.weight2[1:])
    mass = np.zeros(m + 1)
    mass[1:] = np.cumsum(terms)
    err = 8.0 * (m + 2) * 2.0**-53 * float(np.abs(terms).sum())
    return mass, err


def budget_bounds(data: Arrays, stride: int | None = None) -> BudgetBounds:
    """The bounds of a token budget's bucket costs, their rows ``stride`` starts apart (by
    default ``BOUND_STRIDE``, or further where the table would pass ``BOUND_BYTES``)."""
    if stride is None:
        m = data.cum.size - 1
        per_row = (m + 1) * 8 * (2 if data.weight2.any() else 1)
        stride = max(BOUND_STRIDE, -(-m * per_row // BOUND_BYTES))
    t_up, t2_up = _bound_table(data, _rungs(data.size), stride, bool(data.weight2.any()))
    mass, err = _mass(data)
    return BudgetBounds(
        data.cum.astype(np.float64), data.size.astype(np.float64), t_up, t2_up, stride, mass, err
    )
