"""The DP's layers, compiled: the tables ``D[k][j]``, the push of a row of bucket costs
into them, and the fold of four sums into a row of running minima (the frontier's passes and
the floor search's bounds, tiled: :func:`fold`).

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


# Sums :func:`fold` takes into a row of minima at once (its loop is written out for four).
FOLD = 4


@numba.njit(cache=True, nogil=True, error_model="numpy", inline="always")
def fold_one(least: np.ndarray, row: np.ndarray, s: float, n: int) -> None:  # pragma: no cover - compiled
    """``least[q]`` lowered to ``s + row[q]``, ``q < n``: :func:`fold` for one sum (the tiles'
    last starts or ends, fewer than ``FOLD``)."""
    for q in range(n):
        v = s + row[q]
        least[q] = v if v < least[q] else least[q]


@numba.njit(cache=True, nogil=True, error_model="numpy", inline="always")
def fold(
    least: np.ndarray, rows: np.ndarray, sums: tuple[float, float, float, float], n: int
) -> None:  # pragma: no cover - compiled
    """``least[q]`` lowered to ``sums[e] + rows[e, q]`` for ``e = 0..3`` in turn, ``q < n``: one
    read and one write of each minimum for four sums, vectorised across ``q`` (the tiles of
    the frontier's passes and of the floor search's bounds; the same floats as four
    :func:`fold_one`)."""
    s0, s1, s2, s3 = sums
    for q in range(n):
        low = least[q]
        v = s0 + rows[0, q]
        low = v if v < low else low
        v = s1 + rows[1, q]
        low = v if v < low else low
        v = s2 + rows[2, q]
        low = v if v < low else low
        v = s3 + rows[3, q]
        least[q] = v if v < low else low
