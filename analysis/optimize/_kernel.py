"""The exact DP over distinct lengths, compiled: the entry point production calls.

:func:`solve_kernel` minimises the exact objective (each bucket's last short batch as it is,
:mod:`analysis.optimize._exact`) by the pruned DP of :mod:`analysis.optimize._pruned`: ``O(1)``
lower bounds on every bucket first, exact costs only where they cannot rule a bucket out of
every optimal plan; ``dense=True`` costs every bucket (the reference it equals bit for bit).
:func:`cost_matrix` and :func:`full_batch_matrix` cost the buckets between given points (the
candidate search's proof, the greedy rule's descent).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from analysis.optimize._budget import BudgetBounds, budget_bounds
from analysis.optimize._costs import cost_arrays
from analysis.optimize._exact import exact_arrays
from analysis.optimize._problem import Problem
from analysis.optimize._pruned import cost_matrix_of, exact_matrix, solve_exact

# (writable, as budget_bounds' arrays are: the solver then compiles once for every rule, not
# again for a token budget's first call)
_NO_BOUNDS = BudgetBounds(
    np.zeros(0), np.zeros(0), np.zeros((0, 0)), np.zeros((0, 0)), 1, np.zeros(0), 0.0, np.zeros(0, np.int64)
)


def solve_kernel(
    prob: Problem,
    n_buckets: int,
    ends: np.ndarray,
    dense: bool = False,
    wanted: Sequence[int] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """``D[k, j]``: least exact objective of ``k`` buckets covering lengths ``1..j`` with every
    bucket ending in ``ends`` (short batches as they are, :mod:`analysis.optimize._exact`);
    ``A[k, j]``: the start of the last bucket (for backtracking).

    Pruned (:mod:`analysis.optimize._pruned`) unless ``dense``: ``D[k, m]`` and the path back
    from it are exact (the dense DP's, bit for bit) for every ``k`` in ``wanted`` (default:
    ``1..n_buckets``), and the other cells are at least the dense DP's (only plans that may be
    optimal for a wanted bucket count are followed)."""
    want = np.zeros(n_buckets + 1, np.bool_)
    want[list(range(1, n_buckets + 1)) if wanted is None else list(wanted)] = True
    rows, is_end = _rows(prob, n_buckets, ends)
    data, short = exact_arrays(prob)
    if data.token and not dense:
        bounds = budget_bounds(data, objective=prob.objective)
    else:
        bounds = _NO_BOUNDS
    out: tuple[np.ndarray, np.ndarray] = solve_exact(data, short, bounds, rows, is_end, want, dense)
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
    short = exact_arrays(prob)[1]  # (not read: the full-batch costs take cost_arrays' tables)
    # (carried None: the full-batch matrix costs no exact row, so none is compiled into it)
    out: np.ndarray = cost_matrix_of(cost_arrays(prob), short, np.asarray(points, np.int64), False, None)
    return out
