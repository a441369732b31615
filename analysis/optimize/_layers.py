"""The DP's layers, compiled: the tables ``D[k][j]`` and the pushes of rows of bucket costs
into them.

The DP ``D[k][j] = min_i D[k-1][i] + cost(i, j)`` runs with the costs: each start's row of
costs pushes into every later end, for every ``k`` at once, so the cost matrix is never stored
and one pass gives the optimum for every bucket count.  Ties go to the smallest start; no
monotone-argmin shortcut is assumed.  The work is arranged for the machine, not changed:
``ROWS`` starts per pass, their cells up to the last of them pushed start by start (that
settles the later starts' ``D[k - 1]``), then the rest in tiles of ``TILE`` ends, within which
the running sums of ``GROUP`` starts advance side by side (independent chains, each with
exactly the arithmetic of a lone start) and the ``GROUP`` rows are pushed into a tile of
each layer at once, branch-free, in ascending order of start.  Every cost and every
comparison is the one of the start-by-start DP, so the tables are bit for bit the same.
"""

from __future__ import annotations

import numba
import numpy as np

from analysis.optimize._costs import GROUP, INF

# Starts per pass over the DP layers (in groups of GROUP).
ROWS = 32
# Ends per tile of those rows (the tile's costs, ratios and DP cells stay in cache).
TILE = 1024


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _push4(
    row: np.ndarray,
    at: np.ndarray,
    q0: np.ndarray,
    q1: np.ndarray,
    q2: np.ndarray,
    q3: np.ndarray,
    p0: float,
    p1: float,
    p2: float,
    p3: float,
    s0: int,
    s1: int,
    s2: int,
    s3: int,
) -> None:  # pragma: no cover - compiled
    """``row[j] = min(row[j], p_a + costs[a, j])`` over the four starts in ascending order
    (strict ``<``: ties keep the smaller start), ``at[j]`` the start that gave it.  Indices
    from 0 over slices, branch-free: the loop is vectorised."""
    # the four starts written out one after another (a deliberate repeat): their order is the
    # tie rule, and the loop body stays straight-line code
    for j in range(row.size):
        bv = row[j]
        ba = at[j]
        v = p0 + q0[j]
        ba = s0 if v < bv else ba
        bv = v if v < bv else bv
        v = p1 + q1[j]
        ba = s1 if v < bv else ba
        bv = v if v < bv else bv
        v = p2 + q2[j]
        ba = s2 if v < bv else ba
        bv = v if v < bv else bv
        v = p3 + q3[j]
        ba = s3 if v < bv else ba
        bv = v if v < bv else bv
        row[j] = bv
        at[j] = ba


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


@numba.njit(cache=True, nogil=True, error_model="numpy")
def layer_group(
    rows: np.ndarray, g0: int, starts: np.ndarray
) -> tuple[int, int]:  # pragma: no cover - compiled
    """The starts ``rows[g0 : g0 + ROWS]`` into ``starts``, the last repeated up to a multiple
    of ``GROUP`` (its copies give the same costs, which never win a strict comparison);
    returns how many are real and how many were written."""
    g = min(ROWS, rows.size - g0)
    n_sub = (g + GROUP - 1) // GROUP * GROUP
    for a in range(n_sub):
        starts[a] = rows[g0 + min(a, g - 1)]
    return g, n_sub


@numba.njit(cache=True, nogil=True, error_model="numpy")
def push_heads(
    best: np.ndarray, arg: np.ndarray, starts: np.ndarray, g: int, costs: np.ndarray
) -> None:  # pragma: no cover - compiled
    """The cells up to the last start, start by start: they settle the later starts'
    ``D[k - 1]``.  The top layer is only read at the last end, after every start."""
    last = starts[g - 1]
    for a in range(g):
        i = starts[a]
        for k in range(1, best.shape[0] - 1):
            if best[k - 1, i] != INF:
                cells = slice(i + 1, last + 1)
                push(best[k, cells], arg[k, cells], costs[a, cells], best[k - 1, i], i)


@numba.njit(cache=True, nogil=True, error_model="numpy")
def push_tile(
    best: np.ndarray, arg: np.ndarray, starts: np.ndarray, n_sub: int, costs: np.ndarray, j0: int, j1: int
) -> None:  # pragma: no cover - compiled
    """The cells ``j0 <= j < j1`` (after the last start) of every layer, ``GROUP`` starts at a
    time in ascending order, so ties keep the smallest start; the top layer only at the last
    end."""
    m = best.shape[1] - 1
    n_buckets = best.shape[0] - 1
    for k in range(1, n_buckets + 1):
        lo_j = max(j0, m) if k == n_buckets else j0
        if lo_j >= j1:
            continue
        for sub in range(0, n_sub, GROUP):
            s0, s1, s2, s3 = starts[sub], starts[sub + 1], starts[sub + 2], starts[sub + 3]
            _push4(
                best[k, lo_j:j1],
                arg[k, lo_j:j1],
                costs[sub, lo_j:j1],
                costs[sub + 1, lo_j:j1],
                costs[sub + 2, lo_j:j1],
                costs[sub + 3, lo_j:j1],
                best[k - 1, s0],
                best[k - 1, s1],
                best[k - 1, s2],
                best[k - 1, s3],
                s0,
                s1,
                s2,
                s3,
            )


@numba.njit(cache=True, nogil=True, error_model="numpy")
def push_rows(
    best: np.ndarray, arg: np.ndarray, starts: np.ndarray, g: int, n_sub: int, costs: np.ndarray
) -> None:  # pragma: no cover - compiled
    """A pass's ``g`` rows of costs (the last copied up to ``n_sub``) pushed into the layers
    as ``_solve_table`` pushes them: the heads start by start, then the tiles."""
    m = best.shape[1] - 1
    for a in range(g, n_sub):
        for j in range(m + 1):  # (an element loop: array assignment compiles slowly)
            costs[a, j] = costs[g - 1, j]
    push_heads(best, arg, starts, g, costs)
    for j0 in range(starts[g - 1] + 1, m + 1, TILE):
        push_tile(best, arg, starts, n_sub, costs, j0, min(j0 + TILE, m + 1))
