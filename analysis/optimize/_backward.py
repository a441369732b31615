"""The pruned DP's backward pass over lower bounds, compiled and tiled: ``back[k, i]``, the
least sum of ``k`` buckets' bounds covering ``(i, m]`` (:mod:`analysis.optimize._pruned`).

``back[k, i] = min over j > i of low(i, j) + back[k - 1, j]`` needs every bucket's bound, so
the work is arranged for the machine, not changed.  One fixed ``B`` whose ``C(x, B)`` is the
product formula (batch size 8 and the like) takes tiles of ``LANES`` starts in one pass over
the ends: at each end every lane's ``C(x, B)``, ratio, running sum and bound (the arithmetic
of :mod:`analysis.optimize._lower`'s three steps, lane by lane), then each layer's running
minimum, all as loops across the lanes (vectorised: the lanes are independent), with no row
of ratios or bounds ever stored.  Any other rule takes ``_GROUP`` starts at a time (the rows'
bounds of :mod:`analysis.optimize._lower`; for a fixed ``B`` their running sums advance side
by side, independent chains each with exactly a lone start's arithmetic), then each layer's
minimum over the ends after the group's last start for the ``_GROUP`` rows at once.  Either
way the ends up to a tile's last start come last, row by row from the top (they read ``back``
at the tile's own starts).  Every bound is a lone start's and a minimum is exact (no NaN, no
order), so ``back`` is bit for bit the row-by-row table.
"""

from __future__ import annotations

import numba
import numpy as np

from analysis.optimize._budget import BudgetBounds
from analysis.optimize._costs import INF, Arrays
from analysis.optimize._exact import LOW_SLACK, Short
from analysis.optimize._lower import chain, fixed_bound, fixed_bounds, fixed_first, fixed_ratios, low_costs

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


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _budget_rows(
    starts: np.ndarray,
    data: Arrays,
    short: Short,
    bounds: BudgetBounds,
    is_end: np.ndarray,
    ratio: np.ndarray,
    low: np.ndarray,
) -> None:  # pragma: no cover - compiled
    """``low[a]`` as :func:`_fixed_rows` under a token budget (start by start: no carried sum).
    (Apart from it: with both branches in one function the fixed one compiled 8x slower at a
    batch size above every bucket.)"""
    for a in range(_GROUP):
        low_costs(starts[a], data, short, bounds, is_end, ratio[a], low[a])


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
# Ends whose layers' minima :func:`_product_tile` takes before testing which lanes are near.
_NEAR_ENDS = 64
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
def mean_sums(data: Arrays, short: Short) -> np.ndarray:  # pragma: no cover - compiled
    """``sums[i]``: the sum of ``base`` over the samples above end ``i`` (from the top: every
    term ``>= 0``, so its relative error stays below ``m`` ulps)."""
    count, base = short.cum_float, short.base
    m = count.size - 1
    sums = np.zeros(m + 1)
    for i in range(m - 1, -1, -1):
        sums[i] = sums[i + 1] + (count[i + 1] - count[i]) * base[i + 1]
    return sums


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _last_bound(
    starts: np.ndarray, data: Arrays, short: Short, sums: np.ndarray, lane: np.ndarray, at_m: np.ndarray
) -> None:  # pragma: no cover - compiled
    """``at_m[i]``: a bound on the exact cost of the last bucket ``(i, m]`` at least its row's
    (the lanes at ``m``).  Where ``q = 0`` and the steps of ``base`` are ``>= 0``, a short batch
    of ``r`` samples costs ``r E_r`` (``E_r = base_m - T_r``, the expected ``base`` of its
    longest), and ``E_r`` is concave in ``r`` (``-T_r`` sums steps ``>= 0`` times
    ``-C(a, r) / C(n, r)``, convex in ``r`` as ``a < n``): ``E_r`` is at least the chord from
    ``E_1`` (the mean of ``base``, from ``sums``) to ``E_B`` (``w_m - T_B``, as the row's
    bound reads it), tighter than the row's chord from ``base`` at the first end."""
    m = at_m.size - 1
    b = data.size[m]
    bf = float(b)
    chord = not short.quad and short.power and b >= 2
    for a in range(LANES):
        i = starts[a]
        v = lane[_FIRST + a] if i + 1 == m else lane[_LOW + a]
        n = lane[_X + a]
        if chord and n >= bf:
            full = np.floor(n / bf)
            r = n - full * bf
            eb = data.weight[m] - lane[_T + a]
            e1 = sums[i] / n
            e_r = e1 + (r - 1.0) / (bf - 1.0) * (eb - e1) if r > 0.0 else 0.0
            low = ((n - r) * eb + r * e_r) * (1.0 - LOW_SLACK)
            low += data.per_batch * (full + (1.0 if r > 0.0 else 0.0))
            v = low if low > v else v
        at_m[i] = v


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _near_flush(acc: np.ndarray, layers: int, tau: float, j: float) -> None:  # pragma: no cover
    """A block of ends' minima ``acc[1]`` into the running minima ``acc[0]`` (``acc[1]`` back to
    inf) and ``acc[2, k] = j`` for the lanes where the block's least ``low(i, j) +
    back[k - 1, j]`` is within ``tau`` of the running minimum, ``k >= 2`` (layer 1 reads
    ``back[0]``, finite at ``m`` alone: no near end)."""
    run, blk, near_j = acc[0], acc[1], acc[2]
    for k in range(1, layers):
        for a in range(LANES):
            b, c = blk[k, a], run[k, a]
            n = b if b < c else c
            near_j[k, a] = j if k >= 2 and b - n <= tau else near_j[k, a]
            run[k, a] = n
            blk[k, a] = INF


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _product_tile(
    starts: np.ndarray,
    data: Arrays,
    short: Short,
    is_end: np.ndarray,
    back: np.ndarray,
    layers: int,
    work: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    near: tuple[float, np.ndarray, np.ndarray, np.ndarray],
) -> None:  # pragma: no cover - compiled
    """``back[k, i]`` for ``k < layers`` and the ``LANES`` starts of a tile (ascending, the
    first repeated where fewer are left), ``C(x, B)`` by the product formula: one pass over
    the ends, every lane's bound then its layers' minima over the ends above the top start
    (vectorised across the lanes: each lane's arithmetic is a lone start's; a block of
    ``_NEAR_ENDS`` ends at a time), then from the top down the ends up to the top start + 1
    (they read ``back`` at the tile's own starts).  ``near = (tau, last, at_m, sums)``:
    ``at_m[i]`` from :func:`_last_bound`; ``last[k, i]`` at least every end ``j < m`` whose
    bound plus ``back[k - 1, j]`` is within ``tau`` of ``back[k, i]`` (``k >= 2``), and at
    least the top start + 1 below m (:func:`_near_flush`: the block's minimum against the running
    one, at least ``back[k, i]``: a superset)."""
    inv, lane, acc, head = work
    tau, last, at_m, sums = near
    m = back.shape[1] - 1
    _tile_state(starts, data, short, is_end, lane, acc)
    j0, top = starts[0] + 1, starts[LANES - 1]
    low = lane[_LOW : _LOW + LANES]
    acc[2] = float(min(top + 1, m - 1))
    for j in range(j0, m + 1):
        _tile_lows(_at(j, data, short, is_end), data.per_batch, short.quad, inv, lane)
        if j == m:
            _last_bound(starts, data, short, sums, lane, at_m)
        if j <= top + 1:  # up to a lane's start inf, at start + 1 its first bound
            fj = float(j)
            for a in range(LANES):
                v = lane[_FIRST + a] if fj == lane[_START + a] + 1.0 else low[a]
                head[j - j0, a] = INF if fj <= lane[_START + a] else v
            continue
        if is_end[j]:  # (else every lane's bound inf)
            for k in range(1, layers):
                p = back[k - 1, j]
                if p < INF:
                    for a in range(LANES):
                        s = low[a] + p
                        acc[1, k, a] = s if s < acc[1, k, a] else acc[1, k, a]
        if (j - top) % _NEAR_ENDS == 0 or j == m:
            _near_flush(acc, layers, tau, float(min(j, m - 1)))
    for a in range(LANES - 1, -1, -1):
        i = starts[a]
        for k in range(1, layers):
            last[k, i] = int(acc[2, k, a])
            v = acc[0, k, a]
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
    minima of ``n_buckets`` layers (running, a block's, and their near ends) and room for
    ``ends`` ends up to the top start."""
    inv = np.zeros(b)
    for f in range(1, b):
        inv[f] = 1.0 / (float(f) + 1.0)
    return inv, np.zeros(_ROWS), np.empty((3, n_buckets + 1, LANES)), np.empty((ends, LANES))


@numba.njit(cache=True, nogil=True, error_model="numpy")
def tile_rows(
    starts: np.ndarray,
    data: Arrays,
    short: Short,
    is_end: np.ndarray,
    work: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    out: np.ndarray,
    done: int,
    stop: int,
) -> None:  # pragma: no cover - compiled
    """``out[a, j]`` for ``done < j <= stop``: the row of bounds of start ``starts[a]``
    (:func:`~analysis.optimize._lower.low_costs`' floats, inf up to the start), for the
    ``LANES`` starts of a tile at once (one fixed ``B``, ``C(x, B)`` by the product formula;
    a block of ``TILE_ENDS`` ends' bounds goes to the rows a cache line at a time; ``done``
    the tile's first start, or the last end of the call before on the same tile: the lanes
    carry on from there)."""
    inv, lane, acc, _ = work
    if done == starts[0]:
        _tile_state(starts, data, short, is_end, lane, acc)
    buf = np.empty((TILE_ENDS, LANES))
    for j0 in range(done + 1, stop + 1, TILE_ENDS):
        nj = min(TILE_ENDS, stop + 1 - j0)
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
def product_backward(
    data: Arrays,
    short: Short,
    rows: np.ndarray,
    is_end: np.ndarray,
    n_buckets: int,
    near: tuple[float, np.ndarray, np.ndarray],
) -> np.ndarray:  # pragma: no cover - compiled
    """:func:`backward` for one fixed ``B`` with ``C(x, B)`` by the product formula, by tiles
    of ``LANES`` starts (:func:`_product_tile`; ``near = (tau, last, at_m)``: ``last[k, i]``
    for each start, at least the last end below ``m`` within ``tau`` of its minimum for layer
    ``k`` (``m - 1`` where not computed), ``at_m[i]`` a bound on the last bucket ``(i, m]``)."""
    m = data.cum.size - 1
    back = np.full((n_buckets + 1, m + 1), INF)
    back[0, m] = 0.0
    work = product_work(data.size[1], n_buckets, m + 1)
    sums = mean_sums(data, short)
    near[1][:] = m - 1
    starts = np.empty(LANES, np.int64)
    r = rows.size - 1
    while r >= 0:
        r = _group_of(rows, r, starts)
        layers = n_buckets + 1 if r < 0 else n_buckets  # (the last layer is read at rows[0] alone)
        _product_tile(starts, data, short, is_end, back, layers, work, (*near, sums))
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
        m = data.cum.size - 1
        near = (0.0, np.empty((n_buckets + 1, m + 1), np.int64), np.empty(m + 1))
        return product_backward(data, short, rows, is_end, n_buckets, near)
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
        if data.token:
            _budget_rows(starts, data, short, bounds, is_end, ratio, low)
        else:
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
