"""The pruned DP's backward pass over lower bounds, compiled and tiled: ``back[k, i]``, the
least sum of ``k`` buckets' bounds covering ``(i, m]`` (:mod:`analysis.optimize._pruned`).

``back[k, i] = min over j > i of low(i, j) + back[k - 1, j]`` needs every bucket's bound, so
the work is arranged for the machine, not changed.  One fixed ``B`` whose ``C(x, B)`` is the
product formula (batch size 8 and the like) takes tiles of ``LANES`` starts in one pass over
the ends: at each end every lane's ``C(x, B)``, ratio, running sum and bound (the arithmetic
of :mod:`analysis.optimize._lower`'s three steps, lane by lane), then each layer's running
minimum, all as loops across the lanes (vectorised: the lanes are independent), with no row
of ratios or bounds ever stored.  A token budget takes tiles of ``LANES`` starts the same way
(:func:`_budget_tile`: each lane's :func:`~analysis.optimize._lower.budget_bound`, the power
bound only at the ends where some lane's term could lower a minimum).  Any other rule (a
fixed ``B`` without the product formula) takes ``_GROUP`` starts at a time (their rows of
bounds; their running sums advance side by side, independent chains each with exactly a lone
start's arithmetic), then each layer's minimum over the ends after the group's last start
for the ``_GROUP`` rows at once.  Every way the ends up to a tile's last start come last, row
by row from the top (they read ``back`` at the tile's own starts).  Every bound is a lone
start's and a minimum is exact (no NaN, no order), so ``back`` is bit for bit the row-by-row
table.
"""

from __future__ import annotations

import numba
import numpy as np

from analysis.optimize._budget import BudgetBounds
from analysis.optimize._costs import INF, Arrays
from analysis.optimize._exact import Short
from analysis.optimize._lower import (
    budget_bound,
    budget_end,
    budget_first,
    chain,
    fixed_bound,
    fixed_bounds,
    fixed_first,
    fixed_ratios,
)

# Starts whose rows of bounds are computed and reduced together.
_GROUP = 4


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _chains(starts: np.ndarray, step: np.ndarray, ratio: np.ndarray) -> None:  # pragma: no cover
    """The running sums of the ``_GROUP`` rows (``ratio[a]`` in, ``T`` out): each alone up to
    the last start's second end, then side by side (the loop runs at the throughput of the
    arithmetic, not at the latency of one chain)."""
    m = ratio.shape[1] - 1
    top = starts[_GROUP - 1] + 2
    t0 = chain(starts[0] + 2, top, 0.0, step, ratio[0])
    t1 = chain(starts[1] + 2, top, 0.0, step, ratio[1])
    t2 = chain(starts[2] + 2, top, 0.0, step, ratio[2])
    t3 = chain(starts[3] + 2, top, 0.0, step, ratio[3])
    r0, r1, r2, r3 = ratio[0], ratio[1], ratio[2], ratio[3]
    for j in range(top, m + 1):
        st = step[j - 1]
        t0 = (t0 + st) * r0[j]
        t1 = (t1 + st) * r1[j]
        t2 = (t2 + st) * r2[j]
        t3 = (t3 + st) * r3[j]
        r0[j], r1[j], r2[j], r3[j] = t0, t1, t2, t3


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _fixed_rows(
    starts: np.ndarray, data: Arrays, short: Short, is_end: np.ndarray, ratio: np.ndarray, low: np.ndarray
) -> None:  # pragma: no cover - compiled
    """``low[a, j]``: the bound on bucket ``(starts[a], j]`` for every ``j > starts[a]``, one
    fixed ``B`` (each the value of :func:`~analysis.optimize._lower.low_costs`)."""
    for a in range(_GROUP):
        fixed_ratios(starts[a], data, short, low[a], ratio[a])
    _chains(starts, data.step, ratio)
    for a in range(_GROUP):
        fixed_bounds(starts[a], data, short, is_end, ratio[a], low[a])
        low[a, starts[a] + 1] = fixed_first(starts[a], data, short, is_end)


@numba.njit(cache=True, nogil=True, error_model="numpy", fastmath={"nnan", "nsz"})
def _reduce(low: np.ndarray, back: np.ndarray, j0: int, acc: np.ndarray) -> None:  # pragma: no cover
    """``acc[a, k] = min over j >= j0 of low[a, j] + back[k - 1, j]`` for every layer ``k >= 1``
    (no NaN is ever summed: bounds and ``back`` are finite or ``+inf``)."""
    m = back.shape[1] - 1
    l0, l1, l2, l3 = low[0, j0:], low[1, j0:], low[2, j0:], low[3, j0:]
    for k in range(1, back.shape[0]):
        prev = back[k - 1, j0:]
        m0 = m1 = m2 = m3 = INF
        for j in range(m + 1 - j0):
            p = prev[j]
            m0 = min(m0, l0[j] + p)
            m1 = min(m1, l1[j] + p)
            m2 = min(m2, l2[j] + p)
            m3 = min(m3, l3[j] + p)
        acc[0, k], acc[1, k], acc[2, k], acc[3, k] = m0, m1, m2, m3


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _group_of(rows: np.ndarray, r: int, starts: np.ndarray) -> int:  # pragma: no cover - compiled
    """The ``_GROUP`` starts ending at ``rows[r]`` into ``starts`` (ascending; the first repeated
    where fewer are left: a copy gives the same row, hence the same ``back``); returns the
    index of the next group's top (a group of ``starts.size``: ``_GROUP`` or ``LANES``)."""
    size = starts.size
    lo = max(0, r - size + 1)
    for a in range(size):
        starts[a] = rows[max(lo, r - size + 1 + a)]
    return lo - 1


# Starts of the product path's tiles (the forward pass's too): as many as keep the lane loops
# long enough for numba's loop vectoriser (numba runs no SLP vectoriser: a short, fully
# unrolled loop stays scalar).
LANES = 64
# A tile's state: rows of one value per lane, one flat array at these constant offsets (the
# vectoriser then sees that the rows never overlap, with no check at run time).
# Ends whose bounds :func:`tile_rows` gathers before writing them to the rows (a cache line).
TILE_ENDS = 8
_CI, _X, _Y, _PREV, _XPREV, _T, _G, _BASE, _Q, _FIRST, _LOW, _START, _ROWS = (r * LANES for r in range(13))


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _tile_state(
    starts: np.ndarray, data: Arrays, short: Short, is_end: np.ndarray, lane: np.ndarray, acc: np.ndarray
) -> None:  # pragma: no cover - compiled
    """A tile's lanes before its first end: each start's prefix count, first end's ``g_B``,
    ``base``, ``q`` and bound (:func:`~analysis.optimize._lower.fixed_first`), running sums 0;
    ``acc`` (the layers' minima) inf."""
    count = short.cum_float
    for a in range(LANES):
        i = starts[a]
        lane[_CI + a] = count[i]
        lane[_G + a], lane[_BASE + a], lane[_Q + a] = data.weight[i + 1], short.base[i + 1], short.q[i + 1]
        lane[_FIRST + a] = fixed_first(i, data, short, is_end)
        lane[_START + a] = float(i)
        lane[_Y + a] = lane[_XPREV + a] = lane[_T + a] = 0.0
    acc[:] = INF


@numba.njit(cache=True, nogil=True, error_model="numpy", inline="always")
def _at(
    j: int, data: Arrays, short: Short, is_end: np.ndarray
) -> tuple[float, float, float, float, float, bool]:  # pragma: no cover - compiled
    """What :func:`_tile_lows` reads at end ``j``: the count up to it, the step before it, its
    weight, ``base`` and ``q``, and whether it is an end."""
    return short.cum_float[j], data.step[j - 1], data.weight[j], short.base[j], short.q[j], is_end[j]


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _tile_lows(
    at_j: tuple[float, float, float, float, float, bool],
    per_batch: float,
    quad: bool,
    inv: np.ndarray,
    lane: np.ndarray,
) -> None:  # pragma: no cover - compiled
    """``lane[_LOW]``: every lane's bound on ``(start, j]`` (inf up to its start, its first
    bound at ``start + 1``), the lanes' ratios and running sums advanced to ``j`` (``at_j``:
    :func:`_at`; scalars, not the tables' tuples, whose reference counts a call per end
    pays): per lane the arithmetic of :func:`~analysis.optimize._lower.fixed_ratios` (the
    product formula), :func:`~analysis.optimize._lower.chain` and
    :func:`~analysis.optimize._lower.fixed_bounds`, the same floats."""
    cj, st, w, base_j, q_j, end = at_j
    b = inv.size
    bf = float(b)
    for a in range(LANES):
        lane[_PREV + a] = lane[_Y + a]
        lane[_X + a] = cj - lane[_CI + a]
        lane[_Y + a] = lane[_X + a]
    for f in range(1, b):  # C(x, B) = prod_f (x - f) / (f + 1)
        ff, inv_f = float(f), inv[f]
        for a in range(LANES):
            lane[_Y + a] *= (lane[_X + a] - ff) * inv_f
    for a in range(LANES):
        x, y = lane[_X + a], lane[_Y + a]
        ok = (y > 0.0) & (lane[_XPREV + a] >= bf)
        ratio = lane[_PREV + a] / y if ok else 0.0  # (0 below a full batch, and up to the start)
        lane[_XPREV + a] = x
        t = (lane[_T + a] + st) * ratio
        lane[_T + a] = t
        first = (lane[_G + a], lane[_BASE + a], lane[_Q + a])
        v = fixed_bound(x, w - t, bf, first, base_j, q_j, quad, per_batch)
        lane[_LOW + a] = v if end else INF


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _product_tile(
    starts: np.ndarray,
    data: Arrays,
    short: Short,
    is_end: np.ndarray,
    back: np.ndarray,
    layers: int,
    work: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
) -> None:  # pragma: no cover - compiled
    """``back[k, i]`` for ``k < layers`` and the ``LANES`` starts of a tile (ascending, the
    first repeated where fewer are left), ``C(x, B)`` by the product formula: one pass over
    the ends, every lane's bound then its layers' minima over the ends above the top start
    (vectorised across the lanes: each lane's arithmetic is a lone start's), then from the
    top down the ends up to the top start + 1 (they read ``back`` at the tile's own starts)."""
    inv, lane, acc, head = work
    m = back.shape[1] - 1
    _tile_state(starts, data, short, is_end, lane, acc)
    j0, top = starts[0] + 1, starts[LANES - 1]
    low = lane[_LOW : _LOW + LANES]
    for j in range(j0, m + 1):
        _tile_lows(_at(j, data, short, is_end), data.per_batch, short.quad, inv, lane)
        if j <= top + 1:  # up to a lane's start inf, at start + 1 its first bound
            fj = float(j)
            for a in range(LANES):
                v = lane[_FIRST + a] if fj == lane[_START + a] + 1.0 else low[a]
                head[j - j0, a] = INF if fj <= lane[_START + a] else v
            continue
        if not is_end[j]:  # (every lane's bound inf)
            continue
        for k in range(1, layers):
            p = back[k - 1, j]
            if p < INF:
                for a in range(LANES):
                    s = low[a] + p
                    acc[k, a] = s if s < acc[k, a] else acc[k, a]
    for a in range(LANES - 1, -1, -1):
        i = starts[a]
        for k in range(1, layers):
            v = acc[k, a]
            for j in range(i + 1, top + 2):
                s = head[j - j0, a] + back[k - 1, j]
                v = s if s < v else v
            back[k, i] = v


@numba.njit(cache=True, nogil=True, error_model="numpy")
def product_work(
    b: int, n_buckets: int, ends: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:  # pragma: no cover - compiled
    """A tile's work arrays for batches of ``b``: the product formula's ``1 / (f + 1)`` (as
    :func:`~analysis.optimize._lower.fixed_ratios` computes them), the lanes' state, the
    minima of ``n_buckets`` layers and room for ``ends`` ends up to the top start."""
    inv = np.zeros(b)
    for f in range(1, b):
        inv[f] = 1.0 / (float(f) + 1.0)
    return inv, np.zeros(_ROWS), np.empty((n_buckets + 1, LANES)), np.empty((ends, LANES))


@numba.njit(cache=True, nogil=True, error_model="numpy")
def tile_rows(
    starts: np.ndarray,
    data: Arrays,
    short: Short,
    is_end: np.ndarray,
    work: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    out: np.ndarray,
) -> None:  # pragma: no cover - compiled
    """``out[a, j]`` for every ``j > starts[0]``: the row of bounds of start ``starts[a]``
    (:func:`~analysis.optimize._lower.low_costs`' floats, inf up to the start), for the
    ``LANES`` starts of a tile at once (one fixed ``B``, ``C(x, B)`` by the product formula;
    a block of ``TILE_ENDS`` ends' bounds goes to the rows a cache line at a time)."""
    inv, lane, acc, _ = work
    _tile_state(starts, data, short, is_end, lane, acc)
    m = out.shape[1] - 1
    buf = np.empty((TILE_ENDS, LANES))
    for j0 in range(starts[0] + 1, m + 1, TILE_ENDS):
        nj = min(TILE_ENDS, m + 1 - j0)
        for q in range(nj):
            _tile_lows(_at(j0 + q, data, short, is_end), data.per_batch, short.quad, inv, lane)
            fj = float(j0 + q)
            for a in range(LANES):
                v = lane[_FIRST + a] if fj == lane[_START + a] + 1.0 else lane[_LOW + a]
                buf[q, a] = INF if fj <= lane[_START + a] else v
        for a in range(LANES):
            for q in range(nj):
                out[a, j0 + q] = buf[q, a]


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _product_backward(
    data: Arrays, short: Short, rows: np.ndarray, is_end: np.ndarray, n_buckets: int
) -> np.ndarray:  # pragma: no cover - compiled
    """:func:`backward` for one fixed ``B`` with ``C(x, B)`` by the product formula, by tiles
    of ``LANES`` starts (:func:`_product_tile`)."""
    m = data.cum.size - 1
    back = np.full((n_buckets + 1, m + 1), INF)
    back[0, m] = 0.0
    work = product_work(data.size[1], n_buckets, m + 1)
    starts = np.empty(LANES, np.int64)
    r = rows.size - 1
    while r >= 0:
        r = _group_of(rows, r, starts)
        layers = n_buckets + 1 if r < 0 else n_buckets  # (the last layer is read at rows[0] alone)
        _product_tile(starts, data, short, is_end, back, layers, work)
    return back


# A budget tile's lanes: the seven values of budget_first, the bounds at one end, and the
# table's sums at that end for each run of lanes (rows of one flat array at constant offsets,
# as the product path's).
_BF1, _BF2, _BF3, _BF4, _BF5, _BF6, _BV, _BT, _BT2, _BSTATE = (r * LANES for r in range(1, 11))


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _lanes(
    cj: float,
    end: tuple[float, float, float, float, float, float, float],
    scalars: tuple[float, bool, float],
    state: np.ndarray,
    power: bool,
) -> None:  # pragma: no cover - compiled
    """``state[_BV + a]``: :func:`~analysis.optimize._lower.budget_bound` of every lane's bucket
    ending at the end read (``cj``, ``end``: :func:`~analysis.optimize._lower.budget_end`;
    ``scalars``: the rounding bound of the prefix sums, whether ``q`` is nonzero, the
    per-batch cost; each lane's table sums at ``state[_BT + a]``, ``state[_BT2 + a]``), with the
    power bound if ``power``: one loop across the lanes, vectorised.  (Scalars and one array
    only: a call that passes the tables' tuples pays for counting their references, at every
    end.)"""
    err, quad, per_batch = scalars
    if power:  # (the two loops compiled apart: the one without is vectorised)
        for a in range(LANES):
            t, t2, first = _lane(state, a)
            state[_BV + a] = budget_bound(cj, end, t, t2, first, err, quad, per_batch, True)
    else:
        for a in range(LANES):
            t, t2, first = _lane(state, a)
            state[_BV + a] = budget_bound(cj, end, t, t2, first, err, quad, per_batch, False)


@numba.njit(cache=True, nogil=True, error_model="numpy", inline="always")
def _lane(state: np.ndarray, a: int) -> tuple[float, float, tuple[float, ...]]:  # pragma: no cover - compiled
    """Lane ``a``'s table sums and :func:`~analysis.optimize._lower.budget_first` values."""
    first = (
        state[a],
        state[_BF1 + a],
        state[_BF2 + a],
        state[_BF3 + a],
        state[_BF4 + a],
        state[_BF5 + a],
        state[_BF6 + a],
    )
    return state[_BT + a], state[_BT2 + a], first


@numba.njit(cache=True, nogil=True, error_model="numpy", inline="always")
def _budget_lanes(
    j: int, data: Arrays, short: Short, bounds: BudgetBounds, state: np.ndarray, runs: np.ndarray, power: bool
) -> None:  # pragma: no cover - compiled
    """:func:`_lanes` at end ``j``: the runs' table sums read into ``state`` first."""
    two = bounds.t2_up.shape[0] > 0
    for u in range(runs[0, LANES]):  # (each run's lanes read one row of the table)
        row = runs[1, u]
        t, t2 = bounds.t_up[row, j], bounds.t2_up[row, j] if two else 0.0
        for a in range(runs[0, u], runs[0, u + 1]):
            state[_BT + a], state[_BT2 + a] = t, t2
    scalars = (bounds.mass_err, short.quad, data.per_batch)
    _lanes(bounds.cum_float[j], budget_end(j, data, short, bounds), scalars, state, power)


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _budget_runs(starts: np.ndarray, stride: int, runs: np.ndarray) -> None:  # pragma: no cover - compiled
    """The tile's lanes in runs that read one row of the bounds' table (``starts // stride``
    never falls): ``runs[0, u]`` the first lane of run ``u`` (``runs[0, count]`` = ``LANES``),
    ``runs[1, u]`` its row, ``runs[0, LANES]`` the count."""
    count = 0
    for a in range(LANES):
        row = starts[a] // stride
        if a == 0 or row != runs[1, count - 1]:
            runs[0, count], runs[1, count] = a, row
            count += 1
    runs[0, count] = LANES
    runs[0, LANES] = count


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _budget_seed(
    starts: np.ndarray,
    data: Arrays,
    short: Short,
    bounds: BudgetBounds,
    is_end: np.ndarray,
    back: np.ndarray,
    layers: int,
    work: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray],
) -> None:  # pragma: no cover - compiled
    """A budget tile's lanes before its first end (:func:`_budget_tile`): each start's
    :func:`~analysis.optimize._lower.budget_first` and table row, and each layer's minimum
    seeded with the least of its terms at ``seed[0, k]`` and ``seed[1, k]`` (the previous
    tile's lowest start's best end, and that end moved on by its drift over that tile; each
    where above this tile's top start + 1: a term of the minimum, with the power bound), else
    inf."""
    state, runs, acc, arg, _, seed = work
    for a in range(LANES):
        first = budget_first(starts[a], data, short, bounds)
        for f in range(7):
            state[f * LANES + a] = first[f]
    _budget_runs(starts, bounds.stride, runs)
    acc[:] = INF
    m = back.shape[1] - 1
    for k in range(1, layers):
        for c in range(2):
            j = seed[c, k]
            if starts[LANES - 1] + 1 < j <= m and is_end[j] and back[k - 1, j] < INF:
                _budget_lanes(j, data, short, bounds, state, runs, True)
                for a in range(LANES):
                    s = state[_BV + a] + back[k - 1, j]
                    if s < acc[k, a]:
                        acc[k, a], arg[k, a] = s, j


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _budget_tile(
    starts: np.ndarray,
    data: Arrays,
    short: Short,
    bounds: BudgetBounds,
    is_end: np.ndarray,
    back: np.ndarray,
    layers: int,
    work: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray],
) -> None:  # pragma: no cover - compiled
    """``back[k, i]`` for ``k < layers`` and the ``LANES`` starts of a tile under a token budget,
    as :func:`_product_tile` (one pass over the ends, the ends up to the top start + 1 last,
    from the top down), every lane's bound a lone start's
    (:func:`~analysis.optimize._lower.budget_bound`).  The power bound (square roots) only
    where some lane's term could lower a minimum: at each end the bounds without it first,
    and only if one of them plus ``back`` is below its layer's minimum so far, all of them
    with it (a bound with it is at least one without, so a term skipped could lower nothing:
    the minima are the same floats); the minima are seeded (:func:`_budget_seed`) so that
    few ends pass."""
    state, runs, acc, arg, head, seed = work
    _budget_seed(starts, data, short, bounds, is_end, back, layers, work)
    m = back.shape[1] - 1
    j0, top = starts[0] + 1, starts[LANES - 1]
    v = state[_BV : _BV + LANES]
    for j in range(j0, m + 1):
        if j <= top + 1:  # up to a lane's start inf, then its bound with the power bound
            _budget_lanes(j, data, short, bounds, state, runs, True)
            for a in range(LANES):
                head[j - j0, a] = INF if j <= starts[a] or not is_end[j] else v[a]
            continue
        if not is_end[j]:
            continue
        _budget_lanes(j, data, short, bounds, state, runs, False)
        hit = 0
        for k in range(1, layers):
            p = back[k - 1, j]
            if p < INF:
                for a in range(LANES):
                    hit += v[a] + p < acc[k, a]
        if hit == 0:
            continue
        _budget_lanes(j, data, short, bounds, state, runs, True)
        for k in range(1, layers):
            p = back[k - 1, j]
            for a in range(LANES):
                s = v[a] + p
                if s < acc[k, a]:
                    acc[k, a], arg[k, a] = s, j
    _tile_finish(starts, back, layers, acc, head, j0, top)
    for k in range(1, layers):  # the lowest start's best end, and its drift over the tile, again
        seed[0, k] = arg[k, 0]
        seed[1, k] = max(0, 2 * arg[k, 0] - arg[k, LANES - 1])


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _tile_finish(
    starts: np.ndarray, back: np.ndarray, layers: int, acc: np.ndarray, head: np.ndarray, j0: int, top: int
) -> None:  # pragma: no cover - compiled
    """``back[k, i]`` of a tile's starts from the top down: the minimum over the ends above the
    top start + 1 (``acc[k, a]``) and over the ends up to it (bounds ``head``, which read
    ``back`` at the tile's own starts)."""
    for a in range(LANES - 1, -1, -1):
        i = starts[a]
        for k in range(1, layers):
            v = acc[k, a]
            for j in range(i + 1, top + 2):
                s = head[j - j0, a] + back[k - 1, j]
                v = s if s < v else v
            back[k, i] = v


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _budget_backward(
    data: Arrays, short: Short, bounds: BudgetBounds, rows: np.ndarray, is_end: np.ndarray, n_buckets: int
) -> np.ndarray:  # pragma: no cover - compiled
    """:func:`backward` under a token budget, by tiles of ``LANES`` starts (:func:`_budget_tile`)."""
    m = data.cum.size - 1
    back = np.full((n_buckets + 1, m + 1), INF)
    back[0, m] = 0.0
    work = (
        np.zeros(_BSTATE),
        np.zeros((2, LANES + 1), np.int64),
        np.empty((n_buckets + 1, LANES)),
        np.zeros((n_buckets + 1, LANES), np.int64),
        np.empty((m + 1, LANES)),
        np.zeros((2, n_buckets + 1), np.int64),  # (0: no seed)
    )
    starts = np.empty(LANES, np.int64)
    r = rows.size - 1
    while r >= 0:
        r = _group_of(rows, r, starts)
        layers = n_buckets + 1 if r < 0 else n_buckets  # (the last layer is read at rows[0] alone)
        _budget_tile(starts, data, short, bounds, is_end, back, layers, work)
    return back


@numba.njit(cache=True, nogil=True, error_model="numpy")
def backward(
    data: Arrays,
    short: Short,
    bounds: BudgetBounds,
    rows: np.ndarray,
    is_end: np.ndarray,
    n_buckets: int,
) -> np.ndarray:  # pragma: no cover - compiled
    """``back[k, i]`` for every layer ``k < n_buckets`` and start ``i`` in ``rows``, and
    ``back[n_buckets, rows[0]]`` (``back[0, m] = 0``, inf elsewhere): the module docstring.
    (``back[n_buckets, i]`` is read at the DP's first start alone: ``n_buckets`` buckets from
    any other start leave none for the lengths below it; the product path leaves it inf.)"""
    if short.product and not data.token:
        return _product_backward(data, short, rows, is_end, n_buckets)
    if data.token:
        return _budget_backward(data, short, bounds, rows, is_end, n_buckets)
    m = data.cum.size - 1
    back = np.full((n_buckets + 1, m + 1), INF)
    back[0, m] = 0.0
    ratio = np.empty((_GROUP, m + 1))
    low = np.empty((_GROUP, m + 1))
    acc = np.empty((_GROUP, n_buckets + 1))
    starts = np.empty(_GROUP, np.int64)
    r = rows.size - 1
    while r >= 0:
        r = _group_of(rows, r, starts)
        _fixed_rows(starts, data, short, is_end, ratio, low)
        top = starts[_GROUP - 1]
        _reduce(low, back, top + 2, acc)
        for a in range(_GROUP - 1, -1, -1):  # the ends up to the last start + 1, from the top
            i = starts[a]
            for k in range(1, n_buckets + 1):
                v = acc[a, k]
                for j in range(i + 1, top + 2):
                    s = low[a, j] + back[k - 1, j]
                    v = s if s < v else v
                back[k, i] = v
    return back
