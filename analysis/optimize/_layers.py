"""The DP's layers, compiled: the tables ``D[k][j]`` and the push of a row of bucket costs
into them.

The DP ``D[k][j] = min_i D[k-1][i] + cost(i, j)`` runs with the costs: each start's row of
costs pushes into every later end, for every ``k`` at once, so the cost matrix is never stored
and one pass gives the optimum for every bucket count (pruned, :mod:`analysis.optimize._pruned`:
for every bucket count asked for).  Ties go to the smallest start (starts
are pushed in ascending order with a strict ``<``); no monotone-argmin shortcut is assumed.
"""

from __future__ import annotations

import numba
import numpy as np

from analysis.optimize._costs import INF


@numba.njit(cache=True, nogil=True, error_model="numpy")
def push(
    row: np.ndarray, at: np.ndarray, costs: np.ndarray, p: float, start: int
) -> None:  # pragma: no cover - compiled
    """``row[j] = min(row[j], p + costs[j])`` (strict ``<``), ``at[j] = start`` where it won."""
    for j in range(row.size):
        v = p + costs[j]
        better = v < row[j]
        at[j] = start if better else at[j]
        row[j] = v if better else row[j]


@numba.njit(cache=True, nogil=True, error_model="numpy")
def run_layers(n_buckets: int, m: int) -> tuple[np.ndarray, np.ndarray]:  # pragma: no cover - compiled
    """The DP's empty tables: ``best[k, j]`` (inf but ``best[0, 0] = 0``) and ``arg[k, j]``."""
    best = np.full((n_buckets + 1, m + 1), INF)
    arg = np.zeros((n_buckets + 1, m + 1), np.int64)
    best[0, 0] = 0.0
    return best, arg
