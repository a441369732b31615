"""A token budget's DP, pruned exactly: bounds on every bucket first, exact costs only where
the bounds cannot rule a bucket out of every optimal plan.

With a token budget ``B`` follows the end, so each start's running sum restarts where ``B``
changes (:func:`~analysis.optimize._costs._restart`).  Those restarts, not the cells, would
dominate (``O(m)`` stretches of constant ``B`` for each of ``m`` starts), so a token budget's
DP is pruned (:func:`_solve_pruned`), exactly:

1. *Bounds, restart-free.*  ``T`` only grows when the bucket's start moves down (more short
   samples: every ``P(max <= v)`` grows) and when ``B`` falls (fewer draws).  So the sums of
   the start at or below ``i`` that is a multiple of ``BOUND_STRIDE``, under batch sizes
   lowered to rungs ``_RUNG`` apart (``_bound_table``: a restart per rung, not per end, and
   one row per ``BOUND_STRIDE`` starts), bound ``T`` from above and every bucket's cost
   from below (``lower_costs``), with a margin ``SLACK`` far above the sums' rounding.
2. *Backwards over the bounds*: ``back[k, i]``, at most the cost of ``k`` buckets covering
   ``(i, m]``; the plan it picks, costed exactly, bounds each optimum from above.
3. *Forwards, exact*: a start is followed for its ``k``-th bucket only when the exact best
   ``k - 1`` buckets up to it plus ``back`` fit under an upper bound, and a bucket from it
   is costed exactly (lazily: ``row_sums``) only when its bound fits too.  Every bucket of
   an optimal plan passes both tests, so the optimum and its path are the dense DP's, the
   same floats; on the bundled data at most 0.3 % of the buckets are costed exactly.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numba
import numpy as np

from analysis.optimize._compile import threads_lock
from analysis.optimize._costs import INF, Arrays, row_costs, row_sums
from analysis.optimize._layers import push, run_layers

# The bounds' running sums: one row per this many starts, batch sizes within this factor
# share a restart, and this relative margin (far above the rounding of the sums) on each.
BOUND_STRIDE = 32
BOUND_BYTES = 64 << 20
_RUNG = 1.05
SLACK = 1e-8


class BudgetBounds(NamedTuple):
    """The table of bounds' sums (``t_up``, ``t2_up``: :func:`_bound_table`, a row per
    ``stride`` starts) with ``cum`` and ``size`` as floats."""

    cum_float: np.ndarray
    size_float: np.ndarray
    t_up: np.ndarray
    t2_up: np.ndarray
    stride: int


@numba.njit(cache=True, nogil=True, error_model="numpy")
def lower_costs(
    i: int, data: Arrays, bounds: BudgetBounds, is_end: np.ndarray, out: np.ndarray
) -> None:  # pragma: no cover - compiled
    """``out[j]``: a lower bound on the objective of bucket ``(i, j]`` for every ``j > i``
    (inf where ``j`` may not end a bucket), from the row of ``_bound_table``'s sums at or
    below ``i`` (``t_up[i // stride][j] >= T(i, j)``, and ``t2_up``, empty without a second
    sum): the objective is decreasing in ``T``; below a full batch it is the exact one.
    ``count`` and ``batch`` are ``cum`` and ``size`` as floats (exact below 2**53), so the
    loop is branch-free and vectorised; ``ceil`` of a rounded quotient is at most the
    exact one."""
    weight, weight2, per_batch = data.weight, data.weight2, data.per_batch
    count, batch, stride = bounds.cum_float, bounds.size_float, bounds.stride
    t_up, t2_up = bounds.t_up, bounds.t2_up
    m = count.size - 1
    ci = count[i]
    w_first = weight[i + 1]
    w2_first = weight2[i + 1]
    t_row = t_up[i // stride]
    if t2_up.shape[0] == 0:  # no working-set term: one sum
        for j in range(i + 1, m + 1):
            n = count[j] - ci
            w = weight[j]
            # T(i, j) <= w_j - w_{i+1}: the longest sample drawn is at least the shortest
            tu = min(t_row[j], w - w_first) + SLACK * w
            c = n * w if n < batch[j] else n * (w - tu)
            out[j] = c if is_end[j] else INF
    else:
        t2_row = t2_up[i // stride]
        for j in range(i + 1, m + 1):
            n = count[j] - ci
            b = batch[j]
            w = weight[j]
            w2 = weight2[j]
            tu = min(t_row[j], w - w_first) + SLACK * w
            tu2 = min(t2_row[j], w2 - w2_first) + SLACK * w2
            c = n * (w + b * w2) if n < b else n * ((w - tu) + b * (w2 - tu2))
            out[j] = c if is_end[j] else INF
    if per_batch != 0.0:
        for j in range(i + 1, m + 1):
            out[j] += per_batch * math.ceil((count[j] - ci) / batch[j])


@numba.njit(cache=True, nogil=True, error_model="numpy")
def back_column(i: int, low: np.ndarray, back_t: np.ndarray) -> None:  # pragma: no cover - compiled
    """``back_t[i, k] = min over j > i of low[j] + back_t[j, k - 1]`` for every ``k >= 1``
    (``back_t``: the backward table transposed, a row per end), every layer in one sweep over
    the row of bounds: the layers side by side (vectorised), the minima of the same sums
    as layer by layer."""
    layers = back_t.shape[1]
    acc = np.full(layers, INF)
    for j in range(i + 1, low.size):
        lj = low[j]
        if lj == INF:
            continue
        prev = back_t[j]
        for k in range(1, layers):
            v = lj + prev[k - 1]
            acc[k] = v if v < acc[k] else acc[k]
    for k in range(1, layers):
        back_t[i, k] = acc[k]


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
def reach_table(back: np.ndarray, upper: np.ndarray) -> np.ndarray:  # pragma: no cover - compiled
    """``reach[k, j]``: the most a path may spend on its first ``k`` buckets up to ``j`` and
    still be optimal for some bucket count (its rest costs at least ``back``; ``upper[K]`` an
    upper bound on the optimum of ``K`` buckets)."""
    n_buckets = back.shape[0] - 1
    m = back.shape[1] - 1
    reach = np.full((n_buckets + 1, m + 1), -INF)
    for k in range(1, n_buckets + 1):
        for total_k in range(k, n_buckets + 1):
            if upper[total_k] < INF:
                for j in range(m + 1):
                    reach[k, j] = max(reach[k, j], upper[total_k] - back[total_k - k, j])
    return reach


@numba.njit(cache=True, nogil=True, error_model="numpy")
def live_room(
    i: int,
    best: np.ndarray,
    back: np.ndarray,
    upper: np.ndarray,
    reach: np.ndarray,
    live: np.ndarray,
    room: np.ndarray,
) -> bool:  # pragma: no cover - compiled
    """Whether start ``i`` is live for some layer (``live[k]``: its best ``k - 1`` buckets plus
    a bound on the rest stay within an upper bound) and, if so, ``room[j]`` for ``j > i``: the
    most a bucket ``(i, j]`` may cost and still lie on an optimal plan."""
    n_buckets = back.shape[0] - 1
    m = back.shape[1] - 1
    any_live = False
    for k in range(1, n_buckets + 1):
        a = best[k - 1, i]
        live[k] = False
        for total_k in range(k, n_buckets + 1):
            live[k] = live[k] or (a < INF and a + back[total_k - k + 1, i] <= upper[total_k])
        any_live = any_live or live[k]
    if not any_live:
        return False
    for j in range(i + 1, m + 1):
        room[j] = -INF
    for k in range(1, n_buckets + 1):
        if live[k]:
            a = best[k - 1, i]
            for j in range(i + 1, m + 1):
                room[j] = max(room[j], reach[k, j] - a)
    return True


@numba.njit(cache=True, nogil=True, error_model="numpy")
def needed(
    i: int, low: np.ndarray, room: np.ndarray, need: np.ndarray
) -> tuple[int, int]:  # pragma: no cover - compiled
    """``need[j]``: whether bucket ``(i, j]`` may lie on an optimal plan (its bound within the
    room), for every ``j > i``; returns the first and last such ``j`` (``last == i``: none)."""
    m = low.size - 1
    first, last = m + 1, i
    for j in range(i + 1, m + 1):
        need[j] = low[j] <= room[j]
        first = j if need[j] and first > m else first
        last = j if need[j] else last
    return first, last


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _solve_pruned(
    data: Arrays, bounds: BudgetBounds, rows: np.ndarray, is_end: np.ndarray, n_buckets: int
) -> tuple[np.ndarray, np.ndarray]:  # pragma: no cover - compiled
    """The DP of a token budget with the exact bucket costs only where bounds cannot rule a
    bucket out of every optimal plan (the module docstring): the optimum and its path for every
    bucket count are those of ``_solve_rows``, bit for bit."""
    m = data.cum.size - 1
    low = np.empty(m + 1)
    # 1. backwards over the lower bounds: back[k, i] <= the least objective of k buckets
    #    covering (i, m]
    back_t = np.full((m + 1, n_buckets + 1), INF)
    back_t[m, 0] = 0.0
    for r in range(rows.size - 1, -1, -1):
        i = rows[r]
        lower_costs(i, data, bounds, is_end, low)
        back_column(i, low, back_t)
    back = np.ascontiguousarray(back_t.T)
    # 2. an upper bound for each bucket count: the exact objective of the plan the bounds chose
    costs = np.empty(m + 1)
    one = np.zeros(m + 1, np.bool_)
    upper = np.full(n_buckets + 1, INF)
    for k in range(1, n_buckets + 1):
        if back[k, 0] == INF:
            continue
        total = 0.0
        i = 0
        for layer in range(k, 0, -1):  # the end of a first bucket that gives back[layer, i]
            lower_costs(i, data, bounds, is_end, low)
            j = i + 1
            while j < m and low[j] + back[layer - 1, j] != back[layer, i]:  # (the same sums)
                j += 1
            one[j] = True
            row_costs(i, data, one, costs)
            one[j] = False
            total += costs[j]
            i = j
        upper[k] = total * (1.0 + SLACK)
    reach = reach_table(back, upper)
    # 3. forwards, exact costs where a bucket may be on an optimal plan: a start is live for
    #    its k-th bucket when the best k - 1 buckets up to it plus a bound on the rest stay
    #    within an upper bound, and a bucket from it where that plus its own bound does
    best, arg = run_layers(n_buckets, m)
    need = np.zeros(m + 1, np.bool_)
    room = np.empty(m + 1)
    live = np.zeros(n_buckets + 1, np.bool_)
    for r in range(rows.size):
        i = rows[r]
        if not live_room(i, best, back, upper, reach, live, room):
            continue
        lower_costs(i, data, bounds, is_end, low)
        first, last = needed(i, low, room, need)
        if last == i:
            continue
        row_costs(i, data, need, costs)
        cells = slice(first, last + 1)  # (the other cells' costs are inf: they win nothing)
        for k in range(1, n_buckets + 1):
            if live[k]:
                push(best[k, cells], arg[k, cells], costs[cells], best[k - 1, i], i)
    return best, arg


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


def budget_bounds(data: Arrays, stride: int) -> BudgetBounds:
    """The bounds of a token budget's bucket costs, their rows ``stride`` starts apart."""
    t_up, t2_up = _bound_table(data, _rungs(data.size), stride, bool(data.weight2.any()))
    return BudgetBounds(data.cum.astype(np.float64), data.size.astype(np.float64), t_up, t2_up, stride)


def solve_token_pruned(
    data: Arrays, n_buckets: int, rows: np.ndarray, is_end: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """``_solve_pruned`` for a token budget: the table of bounds' sums on every thread, its
    rows ``BOUND_STRIDE`` starts apart, or further where the table would pass
    ``BOUND_BYTES``."""
    m = data.cum.size - 1
    per_row = (m + 1) * 8 * (2 if data.weight2.any() else 1)
    stride = max(BOUND_STRIDE, -(-m * per_row // BOUND_BYTES))
    with threads_lock(numba.get_num_threads() > 1):
        bounds = budget_bounds(data, stride)
    return _solve_pruned(data, bounds, rows, is_end, n_buckets)
