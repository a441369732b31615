"""The exact DP over distinct lengths, compiled: which kernel solves a problem.

:func:`solve_kernel` minimises the exact objective (each bucket's last short batch as it is,
:mod:`analysis.optimize._exact`) by the pruned DP of :mod:`analysis.optimize._pruned`: ``O(1)``
lower bounds on every bucket first, exact costs only where they cannot rule a bucket out of
every optimal plan; ``dense=True`` costs every bucket (the reference it equals bit for bit).

:func:`_full_batch_solve` is the DP of the full-batch objective (every batch counted as
full: an upper bound on each bucket's exact cost), the tiled kernels of
:mod:`analysis.optimize._dense` (a bucket's cost a scaled running sum along its start's row,
:mod:`analysis.optimize._costs`, pushed into every layer at once,
:mod:`analysis.optimize._layers`) and a token budget's pruned DP
(:mod:`analysis.optimize._budget`); the candidate search's proof bounds it
(:mod:`analysis.optimize._cells`).
"""

from __future__ import annotations

import numba
import numpy as np

from analysis.optimize._budget import (
    BOUND_BYTES,
    BOUND_STRIDE,
    BudgetBounds,
    budget_bounds,
    solve_token_pruned,
)
from analysis.optimize._compile import threads_lock
from analysis.optimize._costs import Arrays, cost_arrays, costs_compiled
from analysis.optimize._dense import solve_rows, solve_rows_threads, solve_table, solve_table_threads
from analysis.optimize._exact import exact_arrays
from analysis.optimize._problem import Problem
from analysis.optimize._pruned import exact_matrix, solve_exact
from analysis.optimize._ratios import EMPTY, build_ratio_tables, comb_computed

_NO_BOUNDS = BudgetBounds(EMPTY, EMPTY, np.zeros((0, 0)), np.zeros((0, 0)), 1)


def _bound_stride(data: Arrays) -> int:
    """A token budget's bound rows ``BOUND_STRIDE`` starts apart, or further where the table
    would pass ``BOUND_BYTES``."""
    m = data.cum.size - 1
    per_row = (m + 1) * 8 * (2 if data.weight2.any() else 1)
    return max(BOUND_STRIDE, -(-m * per_row // BOUND_BYTES))


# Distinct lengths from which the tabulated DP runs on every thread (numba's thread count).
_THREADS_ABOVE = 20_000
# Distinct lengths from which a token budget's rows of costs (restarts) run on every thread.
_ROW_THREADS_ABOVE = 2_000
# A token budget's DP from this many starts runs pruned (solve_token_pruned): bounds on every
# bucket first, exact costs only where the bounds cannot rule a bucket out.
_PRUNE_ABOVE = 256


def solve_kernel(
    prob: Problem, n_buckets: int, ends: np.ndarray, dense: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """``D[k, j]``: least exact objective of ``k`` buckets covering lengths ``1..j`` with every
    bucket ending in ``ends`` (short batches as they are, :mod:`analysis.optimize._exact`);
    ``A[k, j]``: the start of the last bucket (for backtracking).

    Pruned (:mod:`analysis.optimize._pruned`) unless ``dense``: ``D[k, m]`` and the path back
    from it are exact (the dense DP's, bit for bit) for every ``k``, and the other cells are
    at least the dense DP's (only optimal plans are followed)."""
    rows, is_end = _rows(prob, n_buckets, ends)
    data, short = exact_arrays(prob)
    if data.token and not dense:
        with threads_lock(numba.get_num_threads() > 1):
            bounds = budget_bounds(data, _bound_stride(data))
    else:
        bounds = _NO_BOUNDS
    out: tuple[np.ndarray, np.ndarray] = solve_exact(data, short, bounds, rows, is_end, n_buckets, dense)
    return out


def _rows(prob: Problem, n_buckets: int, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The starts the DP pushes from and the mask of allowed ends."""
    m = prob.m
    is_end = np.zeros(m + 1, np.bool_)
    is_end[ends] = True
    is_row = np.zeros(m + 1, np.bool_)
    is_row[0] = True
    is_row[ends[:-1]] = True
    # every start but 0 is an allowed end, so it is reached by 1..n_buckets - 1 buckets
    rows = np.flatnonzero(is_row) if n_buckets > 1 else np.zeros(1, np.int64)
    return rows, is_end


def _full_batch_solve(
    prob: Problem, n_buckets: int, ends: np.ndarray, dense: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """The DP of the full-batch objective (each bucket's last short batch counted as a full
    one: an upper bound on every bucket's exact cost), by the tiled kernels."""
    rows, is_end = _rows(prob, n_buckets, ends)
    m = prob.m
    computed = prob.per_batch == 0.0 and comb_computed(prob)  # no table of any kind needed
    comb, hi, lo = (np.zeros(0),) * 3 if computed else build_ratio_tables(prob)
    data = cost_arrays(prob, (comb, hi, lo))
    out: tuple[np.ndarray, np.ndarray]
    if computed or (comb.size and prob.per_batch == 0.0):
        if m >= _THREADS_ABOVE and numba.get_num_threads() > 1:
            with threads_lock(True):
                out = solve_table_threads(data, rows, is_end, n_buckets, True)
        else:
            out = solve_table(data, rows, is_end, n_buckets, False)
        return out
    if data.token and not dense and rows.size >= _PRUNE_ABOVE:
        return solve_token_pruned(data, n_buckets, rows, is_end)
    threaded = data.token and m >= _ROW_THREADS_ABOVE and numba.get_num_threads() > 1
    with threads_lock(threaded):
        out = (solve_rows_threads if threaded else solve_rows)(data, rows, is_end, n_buckets)
    return out


def backtrack(arg: np.ndarray, k: int, m: int) -> list[int]:
    """Bucket ends (ascending, last = m) of the optimum with ``k`` buckets."""
    out, j = [], m
    for layer in range(k, 0, -1):
        out.append(j)
        j = int(arg[layer, j])
    return out[::-1]


def cost_matrix(prob: Problem, points: np.ndarray) -> np.ndarray:
    """Dense ``M[a, b]`` = exact objective of bucket ``(points[a], points[b]]`` (inf when a >= b)."""
    data, short = exact_arrays(prob)
    out: np.ndarray = exact_matrix(data, short, np.asarray(points, np.int64))
    return out


def full_batch_matrix(prob: Problem, points: np.ndarray) -> np.ndarray:
    """Dense ``M[a, b]`` = full-batch objective of bucket ``(points[a], points[b]]``."""
    out: np.ndarray = costs_compiled(cost_arrays(prob), np.asarray(points, np.int64))
    return out
