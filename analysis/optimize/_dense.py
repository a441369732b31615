"""The dense DPs, compiled: every bucket costed, the rows of costs pushed into the layers
(:mod:`analysis.optimize._layers`); each written once and compiled serial and on every thread
(:func:`~analysis.optimize._compile.serial_and_threaded`), the same tables bit for bit.

:func:`solve_table` is the padding objective with one tabulated ``B`` (the hot loop: one
table read per cell, the running sums of ``GROUP`` starts side by side); :func:`solve_rows`
is every other rule and objective, start by start by :func:`~analysis.optimize._costs.row_costs`.
"""

from __future__ import annotations

import numba
import numpy as np

from analysis.optimize._compile import serial_and_threaded
from analysis.optimize._costs import GROUP, Arrays, comb_heads, comb_tile, row_costs
from analysis.optimize._layers import ROWS, TILE, layer_group, push_heads, push_rows, push_tile, run_layers


def _solve_table_body(
    data: Arrays, rows: np.ndarray, is_end: np.ndarray, n_buckets: int, whole_rows: bool
) -> tuple[np.ndarray, np.ndarray]:  # pragma: no cover - compiled
    """The DP for one tabulated ``B`` (``data.size[0]``; ``data.comb``, or empty where the
    values are computed as read) and the padding objective: ``ROWS`` starts at a time,
    their costs and DP cells tile by tile (a tile of the layers stays in cache for them all).

    With ``whole_rows`` (on every thread, for long rows: many distinct lengths) a pass's
    costs go by groups of ``GROUP`` starts in parallel, each group's sums along the whole
    row, then its DP cells by tiles in parallel (a tile's cells only read ``D[k - 1]`` at the
    pass's starts, which are settled); else a tile's costs, then its cells.  The same
    arithmetic and order of comparison in every cell either way."""
    m = data.cum.size - 1
    best, arg = run_layers(n_buckets, m)
    n_groups = ROWS // GROUP
    span = (m + 1) if whole_rows else TILE  # ends whose costs come before their pushes
    n_buf = n_groups if whole_rows else 1  # a buffer of ratios for each group running at once
    costs = np.empty((ROWS, m + 1))
    t = np.zeros(ROWS)
    ratio = np.empty((n_buf, GROUP, TILE))
    table = np.empty((n_buf, TILE + 1))
    starts = np.empty(ROWS, np.int64)
    for g0 in range(0, rows.size, ROWS):
        g, n_sub = layer_group(rows, g0, starts)
        last = starts[g - 1]
        comb_heads(starts[:n_sub], data, is_end, costs, t)
        push_heads(best, arg, starts, g, costs)
        for s0 in range(last + 1, m + 1, span):
            s1 = min(s0 + span, m + 1)
            for q in numba.prange(n_sub // GROUP):
                sub = q * GROUP
                for j0 in range(s0, s1, TILE):
                    comb_tile(
                        starts[sub : sub + GROUP],
                        max(j0, last + 2),
                        min(j0 + TILE, m + 1),
                        data,
                        is_end,
                        costs[sub : sub + GROUP],
                        t[sub : sub + GROUP],
                        ratio[q % n_buf],
                        table[q % n_buf],
                    )
            for q in numba.prange((s1 - s0 + TILE - 1) // TILE):
                j0 = s0 + q * TILE
                push_tile(best, arg, starts, n_sub, costs, j0, min(j0 + TILE, m + 1))
    return best, arg


solve_table, solve_table_threads = serial_and_threaded(_solve_table_body)


def _solve_rows_body(
    data: Arrays, rows: np.ndarray, is_end: np.ndarray, n_buckets: int
) -> tuple[np.ndarray, np.ndarray]:  # pragma: no cover - compiled
    """The DP for every other rule and objective: each start's row of costs by
    ``row_costs`` (a pass's rows on every thread when threaded: a token budget's restarts
    make the rows, not the pushes, the work), pushed into the layers as in ``solve_table``."""
    m = data.cum.size - 1
    best, arg = run_layers(n_buckets, m)
    costs = np.empty((ROWS, m + 1))
    starts = np.empty(ROWS, np.int64)
    for g0 in range(0, rows.size, ROWS):
        g, n_sub = layer_group(rows, g0, starts)
        for a in numba.prange(g):
            row_costs(starts[a], data, is_end, costs[a])
        push_rows(best, arg, starts, g, n_sub, costs)
    return best, arg


solve_rows, solve_rows_threads = serial_and_threaded(_solve_rows_body)
