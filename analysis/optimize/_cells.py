"""The candidate grid's proof, compiled: a DP over cells of lengths whose value is a lower
bound on the exact optimum (:func:`cell_dp`; the grid search, :mod:`analysis.optimize._search`,
splits the cells where its own optimum needs them)."""

from __future__ import annotations

import numba
import numpy as np

from analysis.optimize._costs import INF, Arrays, cost_arrays, row_costs
from analysis.optimize._exact import Short, carried_rows, exact_arrays, exact_row
from analysis.optimize._problem import Problem


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _cell_dp_compiled(
    data: Arrays,
    short: Short,
    full: Arrays,
    points: np.ndarray,
    last_start: np.ndarray,
    single: np.ndarray,
    is_end: np.ndarray,
    n_buckets: int,
    carried: bool | None,
) -> tuple[np.ndarray, np.ndarray]:  # pragma: no cover - compiled
    """A lower bound on the exact optimum by a DP over cells ``[points[a], points[a + 1])``
    (the last cell is the end ``m`` alone), where a bucket's cost depends only on the cells of
    its start and end.

    The fact used is about the *full-batch* cost ``F`` (each bucket's last short batch counted
    as a full one, :mod:`analysis.optimize._costs`): adding a sample no longer than any of a
    bucket's own raises ``F = n E[g(max of B)]`` by at least its ``g`` (the rise is
    ``B E_{B-1} - (B-1) E_B``, at least ``g`` of the old shortest, because the chance that
    ``B`` draws hit the samples above a level is concave in ``B``; ``B`` is the end's, so this
    holds for a token budget too, and the per-batch seconds only add).  (The exact cost, short
    batch as it is, does not have it: a sample added can split off a cheap short batch.)  The
    exact cost is at least ``F`` less ``r (g_B(v_j) - g_1(first))``, ``r < B``, so a bucket
    ``(i, j]`` with ``i`` in cell ``a`` (last possible start ``r_a``) and ``j`` in cell ``b``
    costs at least ``F(r_a, j) - (B - 1)(g_B(v_j) - g_1(v_{points[a]+1})) + U(i, r_a)``,
    ``U`` the mass of the samples between, each at ``g_1`` (what a sample costs at least,
    alone in its batch); where the cell holds one possible start the bucket's exact cost
    itself.  Charging the mass ``U(j, r_b)`` of the next bucket's bottom to the bucket that ends
    at ``j``, ``L(a, b) = min_j cost(a, j) + U(j, r_b)`` over the allowed ends ``j`` of cell
    ``b`` (the first bucket also gets ``U(0, r_0)``); a bucket inside one cell is already
    charged (cost 0 here).  ``D[k, b]`` is then at most ``k`` buckets' objective up to an end
    in cell ``b`` plus the mass left in the cell, and ``D[k, -1] <= OPT[k]``.  Where every
    cell on its path holds one possible start, the path is a plan and ``D`` its exact
    objective, added in the same order as the exact DP adds it.  ``carried``:
    :func:`~analysis.optimize._exact.carried_rows`."""
    cum, weight, weight2, size = data.cum, data.weight, data.weight2, data.size
    m = cum.size - 1
    p = points.size
    mass = np.zeros(m + 1)  # U(0, t), each sample at g_1 (alone in its batch)
    for t in range(1, m + 1):
        mass[t] = mass[t - 1] + (cum[t] - cum[t - 1]) * (short.base[t] + short.q[t])
    tb = np.zeros(m + 1)
    t2b = np.zeros(m + 1)
    best = np.full((n_buckets + 1, p), INF)
    arg = np.zeros((n_buckets + 1, p), np.int64)
    best[0, 0] = mass[last_start[0]] if last_start[0] >= 0 else 0.0
    costs = np.empty(m + 1)
    for a in range(p - 1):
        inner = False  # an allowed end after the cell's first index: a bucket fits inside
        for j in range(points[a] + 1, points[a + 1]):
            inner = inner or is_end[j]
        live = False
        for k in range(1, n_buckets + 1):
            if inner and best[k - 1, a] < best[k, a]:
                best[k, a] = best[k - 1, a]
                arg[k, a] = a
            live = live or best[k - 1, a] < INF
        if last_start[a] < 0 or not live:
            continue
        if single[a]:
            exact_row(last_start[a], data, short, is_end, costs, tb, t2b, carried)
        else:
            row_costs(last_start[a], full, is_end, costs)
            first = points[a] + 1
            g1 = short.base[first] + short.q[first]
            for j in range(first, m + 1):
                if costs[j] < INF:
                    slack = (size[j] - 1) * max(0.0, weight[j] + size[j] * weight2[j] - g1)
                    costs[j] = costs[j] * (1.0 - 1e-9) - slack * (1.0 + 1e-9)  # (other arithmetic: a margin)
        for b in range(a + 1, p):
            least = INF
            if b + 1 < p:
                rest = mass[last_start[b]] if last_start[b] >= 0 else 0.0
                for j in range(points[b], points[b + 1]):
                    if costs[j] < INF:
                        least = min(least, costs[j] + (rest - mass[j]))
            else:
                least = costs[m]
            for k in range(1, n_buckets + 1):
                v = best[k - 1, a] + least
                if v < best[k, b]:
                    best[k, b] = v
                    arg[k, b] = a
    return best, arg


def cell_dp(prob: Problem, points: np.ndarray, n_buckets: int) -> tuple[np.ndarray, np.ndarray]:
    """``_cell_dp_compiled`` for ``prob``: ``points`` ascending from 0 to ``m``; the possible
    starts are 0 and every allowed end but the last."""
    points = np.asarray(points, np.int64)
    is_end = np.zeros(prob.m + 1, np.bool_)
    is_end[prob.ends] = True
    starts = np.r_[0, prob.ends[:-1]]
    # the last start of each cell: the largest start below the next cell's first index
    at = np.searchsorted(starts, points[1:], side="left") - 1
    last_start = np.where(at >= 0, starts[np.maximum(at, 0)], -1)
    last_start = np.where(last_start >= points[:-1], last_start, -1)
    first = np.searchsorted(starts, points[:-1], side="left")  # the cell's possible starts: first..at
    single = (at - first) == 0
    data, short = exact_arrays(prob)
    starts_of = last_start.astype(np.int64)
    out: tuple[np.ndarray, np.ndarray] = _cell_dp_compiled(
        data, short, cost_arrays(prob), points, starts_of, single, is_end, n_buckets, carried_rows(data)
    )
    return out
