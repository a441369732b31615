"""The pruned DP's backward pass over lower bounds, compiled and tiled: ``back[k, i]``, the
least sum of ``k`` buckets' bounds covering ``(i, m]`` (:mod:`analysis.optimize._pruned`).

``back[k, i] = min over j > i of low(i, j) + back[k - 1, j]`` needs every bucket's bound, so
the work is arranged for the machine, not changed.  Every rule takes tiles of ``LANES`` starts
in one pass over the ends: at each end every lane's bound (the arithmetic of
:mod:`analysis.optimize._lower`, lane by lane), then each layer's running minimum, all as loops
across the lanes (vectorised: the lanes are independent), with no row of ratios or bounds ever
stored.  A fixed ``B`` takes its ratio by the product formula (``C(x, B)``, batch size 8 and
the like: :func:`_product_tile`) or else by :func:`~analysis.optimize._exact.ratio_upper`
(:func:`_fixed_tile`), then the running sum and the bound (with the chords' sums where
:func:`~analysis.optimize._lower.chord_sizes` asks: :func:`_chord_lanes`); a token budget takes
:func:`~analysis.optimize._lower.budget_bound` (:func:`_budget_tile`).  Where a bound may be
raised by the power bound (``B > POWER_ABOVE`` without the chords:
:func:`~analysis.optimize._exact.takes_power`), which costs several times the rest, it is
computed only at the ends where some lane's bound without it (at most its bound) could still
lower a minimum.  The ends up to a tile's last start come last, row by row from the top (they
read ``back`` at the tile's own starts).  Every bound is a lone start's and a minimum is exact
(no NaN, no order; a skipped bound is at least a minimum already taken), so ``back`` is bit
for bit the row-by-row table.
"""

from __future__ import annotations

import numba
import numpy as np

from analysis.optimize._budget import BudgetBounds
from analysis.optimize._costs import INF, Arrays
from analysis.optimize._exact import (
    FEW_STEPS,
    RATIO_GROW,
    Short,
    power_bound,
    ratio_bound,
    ratio_few,
    takes_power,
)
from analysis.optimize._lower import (
    FEW_PRODUCT_FROM,
    NO_CHORDS,
    budget_bound,
    budget_end,
    budget_first,
    chord_sizes,
    fixed_bound,
    fixed_first,
    mean_low,
    mean_scale,
    pair_start,
    power_grow,
    power_quotient,
    product_grow,
    product_pairs,
    row_mean_scale,
)


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _group_of(rows: np.ndarray, r: int, starts: np.ndarray) -> int:  # pragma: no cover - compiled
    """The ``starts.size`` (``LANES``) starts of a tile ending at ``rows[r]`` into ``starts``
    (ascending; the first repeated where fewer are left: a copy gives the same row, hence the
    same ``back``); returns the index of the next tile's top."""
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
# Layers from which :func:`_product_tile` skips a layer at an end where no lane's sum can count:
# the test costs a minimum over the lanes per end, and skipping repaid it from about 12 layers
# (bundled data, batch size 8, the backward pass alone, alternating checkouts: 6 layers 0.082
# -> 0.090 s with it, 13 layers 0.106 -> 0.101 s, 16 layers 0.124 -> 0.110 s; rerun:
# ``benchmarks/bench_backward.py --against DIR``, DIR a checkout from before).
_SKIP_LAYERS = 12
_CI, _X, _Y, _PREV, _XPREV, _T, _G, _BASE, _Q, _FIRST, _LOW = (r * LANES for r in range(11))
_START, _U, _A, _S, _T1, _T2, _Q1 = (r * LANES for r in range(11, 18))
_ROWS = 19 * LANES  # (_Q1: two rows)
_CHORD_ROWS = (_X, _XPREV, _T1, _T2, _Q1)


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
        lane[_A + a] = short.above[i] * row_mean_scale(short, float(data.size[i + 1]))
        lane[_START + a] = float(i)
        lane[_X + a] = lane[_Y + a] = lane[_XPREV + a] = lane[_T + a] = 0.0
        lane[_T1 + a] = lane[_T2 + a] = 0.0
    lane[_S] = 0.0  # (C(x, B) taken at x = 0)
    acc[:] = INF


@numba.njit(cache=True, nogil=True, error_model="numpy", inline="always")
def _at(
    j: int, data: Arrays, short: Short, is_end: np.ndarray
) -> tuple[float, float, float, float, float, bool, float]:  # pragma: no cover - compiled
    """What :func:`_tile_lows` reads at end ``j``: the count up to it, the step before it, its
    weight, ``base`` and ``q``, whether it is an end, and the sum of ``base`` above it."""
    cj, base_j, q_j, above_j = short.cum_float[j], short.base[j], short.q[j], short.above[j]
    return cj, data.step[j - 1], data.weight[j], base_j, q_j, is_end[j], above_j


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _tile_lows(
    at_j: tuple[float, float, float, float, float, bool, float],
    per_batch: float,
    quad: bool,
    pairs: np.ndarray,
    sizes: tuple[float, float],
    lane: np.ndarray,
) -> None:  # pragma: no cover - compiled
    """``lane[_LOW]``: every lane's bound on ``(start, j]`` (inf up to its start, its first
    bound at ``start + 1``), the lanes' ratios and running sums advanced to ``j`` (``at_j``:
    :func:`_at`; scalars, not the tables' tuples, whose reference counts a call per end
    pays): per lane the arithmetic of :func:`~analysis.optimize._lower.fixed_ratios` (the
    product formula; from ``FEW_PRODUCT_FROM``, at an end of at most ``FEW_STEPS`` samples,
    :func:`~analysis.optimize._exact.ratio_few`, ``C(x, B)`` then taken at the next end that
    needs it), :func:`~analysis.optimize._lower.chain` and
    :func:`~analysis.optimize._lower.fixed_bounds` (with the bucket's mean where
    :func:`~analysis.optimize._lower.row_mean_scale` reads one) and the chords' sums where
    :func:`~analysis.optimize._lower.chord_sizes` carries them
    (:func:`~analysis.optimize._lower.chord_sums`), the same floats."""
    cj, _, _, _, _, _, above_j = at_j
    b = pairs.shape[1]
    bf = float(b)
    grow = product_grow(b)
    d = cj - lane[_CI] - lane[_X]  # the samples at j (where lane 0 holds no full batch, no lane does)
    few = (d <= FEW_STEPS) & (b >= FEW_PRODUCT_FROM)  # (ratio_few, else C(x, B): fixed_ratios' choice)
    if not few and lane[_S] > 0.0:  # (C(x, B) at the end before j skipped: taken now)
        for a in range(LANES):
            lane[_Y + a], lane[_U + a] = pair_start(lane[_X + a], pairs)
        _products(pairs, lane)
    lane[_S] = 1.0 if few else 0.0
    for a in range(LANES):
        lane[_PREV + a] = lane[_Y + a]
        x = cj - lane[_CI + a]
        lane[_X + a] = x
        lane[_Y + a], lane[_U + a] = pair_start(x, pairs)  # (read where not few)
    means = lane[_A] > 0.0  # (every lane's scale the same: mean_scale; else no mean is read)
    # (the chords: a branch of its own, so that the plain one folds them away, in a function
    # not inlined: one call an end, as fast, and the two compile in 3.8 + 2.4 s of CPU at -O1
    # where _tile_lows with the chords inlined took 9.6 s)
    if sizes[0] > 0.0:
        _chord_lows(at_j, d, few, (per_batch, quad), pairs, sizes, lane)
        return
    if few:
        for a in range(LANES):
            ratio = ratio_few(lane[_X + a], d, bf, grow) if lane[_XPREV + a] >= bf else 0.0  # (C(x, B) > 0)
            mean = mean_low(lane[_A + a], above_j, lane[_X + a]) if means else -1.0
            _lane_bound(a, ratio, mean, at_j, bf, quad, per_batch, NO_CHORDS, lane)
        return
    _products(pairs, lane)
    if means:
        for a in range(LANES):
            mean = mean_low(lane[_A + a], above_j, lane[_X + a])
            _lane_bound(a, _pair_ratio(a, bf, grow, lane), mean, at_j, bf, quad, per_batch, NO_CHORDS, lane)
    else:  # (the chord from the mean folds away)
        for a in range(LANES):
            _lane_bound(a, _pair_ratio(a, bf, grow, lane), -1.0, at_j, bf, quad, per_batch, NO_CHORDS, lane)


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _chord_lows(
    at_j: tuple[float, float, float, float, float, bool, float],
    d: float,
    few: bool,
    model: tuple[float, bool],
    pairs: np.ndarray,
    sizes: tuple[float, float],
    lane: np.ndarray,
) -> None:  # pragma: no cover - compiled
    """:func:`_tile_lows` past its lanes' counts where the bounds read the chords (``sizes``:
    :func:`~analysis.optimize._lower.chord_sizes`; every bound then reads its mean): the
    chords' sums (:func:`_chord_lanes`), then each lane's bound reading them (``d``: the
    samples at ``j``; ``few``: ``ratio_few`` takes the ratio; ``model``: ``per_batch`` and
    ``quad``)."""
    _, st, w, _, _, _, above_j = at_j
    per_batch, quad = model
    bf = float(pairs.shape[1])
    grow = product_grow(pairs.shape[1])
    s1, s2 = sizes
    _chord_lanes(d, st, sizes, lane, _CHORD_ROWS)
    if few:
        for a in range(LANES):
            ratio = ratio_few(lane[_X + a], d, bf, grow) if lane[_XPREV + a] >= bf else 0.0
            mean = mean_low(lane[_A + a], above_j, lane[_X + a])
            chords = (s1, s2, w - lane[_T1 + a], w - lane[_T2 + a])
            _lane_bound(a, ratio, mean, at_j, bf, quad, per_batch, chords, lane)
        return
    _products(pairs, lane)
    for a in range(LANES):
        mean = mean_low(lane[_A + a], above_j, lane[_X + a])
        chords = (s1, s2, w - lane[_T1 + a], w - lane[_T2 + a])
        _lane_bound(a, _pair_ratio(a, bf, grow, lane), mean, at_j, bf, quad, per_batch, chords, lane)


@numba.njit(cache=True, nogil=True, error_model="numpy", inline="always")
def _chord_lanes(
    d: float, st: float, sizes: tuple[float, float], lane: np.ndarray, rows: tuple[int, int, int, int, int]
) -> None:  # pragma: no cover - compiled
    """Every lane's chords' sums ``T_{s_1}``, ``T_{s_2}`` advanced to its ``x`` from its
    ``x_prev``, ``d`` samples before, by :func:`~analysis.optimize._lower.chord_ratio` (its
    choice of rule made once for the lanes, the powers squared for all lanes at once: the same
    floats); ``rows``: the offsets in ``lane`` of ``x``, ``x_prev``, the two sums and two work
    rows (the product and the fixed tiles' layouts).  :func:`~analysis.optimize._lower.chord_ratio`
    called per lane instead, its rule chosen inside the loop, took K = 6 with the chords at
    batch size 64 from 174 to 252 ms on the bundled data and 20 to 31 ms on alpaca
    (``benchmarks/chords_gate.py 64``)."""
    s1, s2 = sizes
    xs, xps, t1s, t2s, qs = rows
    if d <= FEW_STEPS:
        for a in range(LANES):
            x, x_prev = lane[xs + a], lane[xps + a]
            r1 = ratio_few(x, d, s1, RATIO_GROW) if x_prev >= s1 else 0.0
            r2 = ratio_few(x, d, s2, RATIO_GROW) if x_prev >= s2 else 0.0
            lane[t1s + a] = (lane[t1s + a] + st) * r1
            lane[t2s + a] = (lane[t2s + a] + st) * r2
        return
    q2s = qs + LANES
    for a in range(LANES):
        x, x_prev = lane[xs + a], lane[xps + a]
        lane[qs + a] = power_quotient(x_prev, x, s1)
        lane[q2s + a] = power_quotient(x_prev, x, s2)
    k = 1.0
    while k < s1:
        for a in range(LANES):
            lane[qs + a] *= lane[qs + a]
            lane[q2s + a] *= lane[q2s + a]
        k += k
    while k < s2:
        for a in range(LANES):
            lane[q2s + a] *= lane[q2s + a]
        k += k
    g1, g2 = power_grow(s1), power_grow(s2)
    for a in range(LANES):
        x_prev = lane[xps + a]
        r1 = lane[qs + a] * g1 if x_prev >= s1 else 0.0
        r2 = lane[q2s + a] * g2 if x_prev >= s2 else 0.0
        lane[t1s + a] = (lane[t1s + a] + st) * r1
        lane[t2s + a] = (lane[t2s + a] + st) * r2


@numba.njit(cache=True, nogil=True, error_model="numpy", inline="always")
def _pair_ratio(a: int, bf: float, grow: float, lane: np.ndarray) -> float:  # pragma: no cover - compiled
    """Lane ``a``'s ratio ``C(x_prev, B) / C(x, B)`` from the product formula's values at both ends,
    times ``grow`` (0 below a full batch, and up to the start)."""
    y = lane[_Y + a]
    ok = (y > 0.0) & (lane[_XPREV + a] >= bf)
    return (lane[_PREV + a] / y) * grow if ok else 0.0


@numba.njit(cache=True, nogil=True, error_model="numpy", inline="always")
def _lane_bound(
    a: int,
    ratio: float,
    mean: float,
    at_j: tuple[float, float, float, float, float, bool, float],
    bf: float,
    quad: bool,
    per_batch: float,
    chords: tuple[float, float, float, float],
    lane: np.ndarray,
) -> None:  # pragma: no cover - compiled
    """Lane ``a``'s running sum advanced by ``ratio`` and its bound at the end of ``at_j`` (``mean``,
    ``chords``: :func:`~analysis.optimize._lower.fixed_bound`'s)."""
    _, st, w, base_j, q_j, end, _ = at_j
    x = lane[_X + a]
    lane[_XPREV + a] = x
    t = (lane[_T + a] + st) * ratio
    lane[_T + a] = t
    first = (lane[_G + a], lane[_BASE + a], lane[_Q + a])
    v = fixed_bound(x, w - t, mean, bf, first, base_j, q_j, quad, per_batch, chords)
    lane[_LOW + a] = v if end else INF


@numba.njit(cache=True, nogil=True, error_model="numpy", inline="always")
def _products(pairs: np.ndarray, lane: np.ndarray) -> None:  # pragma: no cover - compiled
    """``lane[_Y]``: ``C(x, B)`` at every lane's ``x`` by the product formula from its start
    ``lane[_Y]``, ``lane[_U]`` (:func:`~analysis.optimize._lower.pair_start`; the pairs of
    :func:`~analysis.optimize._lower.product_pairs`, as
    :func:`~analysis.optimize._lower.fixed_ratios` takes them)."""
    for f in range(pairs.shape[1] // 2):  # C(x, B) = y0 prod_f (u + c_f) d_f (product_pairs)
        c, d = pairs[0, f], pairs[1, f]
        for a in range(LANES):
            lane[_Y + a] *= (lane[_U + a] + c) * d


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _last_bound(
    starts: np.ndarray, data: Arrays, short: Short, lane: np.ndarray, at_m: np.ndarray
) -> None:  # pragma: no cover - compiled
    """``at_m[i]``: a bound on the last bucket ``(i, m]`` at least its row's (the lanes at
    ``m``), which the forward pass reads beside its rows of bounds (computed only up to the
    ends it needs): with the chord from ``E_1`` (:func:`~analysis.optimize._lower.fixed_bound`)
    at every batch size, where the rows take it only for some (``row_mean_scale``: ``m``
    buckets cost little)."""
    m = at_m.size - 1
    bf = float(data.size[m])
    scale = mean_scale(short)
    s1, s2 = chord_sizes(short, bf)
    w = data.weight[m]
    for a in range(LANES):
        i = starts[a]
        v = lane[_FIRST + a] if i + 1 == m else lane[_LOW + a]
        x = lane[_X + a]
        if i + 1 < m and scale > 0.0:
            first = (lane[_G + a], lane[_BASE + a], lane[_Q + a])
            mean = mean_low(short.above[i] * scale, 0.0, x)
            eb = w - lane[_T + a]
            chords = (s1, s2, w - lane[_T1 + a], w - lane[_T2 + a])
            base_m, q_m = short.base[m], short.q[m]
            c1 = fixed_bound(x, eb, mean, bf, first, base_m, q_m, short.quad, data.per_batch, chords)
            v = c1 if c1 > v else v
        at_m[i] = v


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _near_flush(acc: np.ndarray, layers: int, tau: float, j: float) -> None:  # pragma: no cover
    """A block of ends' minima ``acc[1]`` into the running minima ``acc[0]`` (``acc[1]`` back to
    inf) and ``acc[2, k] = j`` for the lanes where the block's least ``low(i, j) +
    back[k - 1, j]`` is within ``tau`` of the running minimum, ``k >= 2`` (layer 1 reads
    ``back[0]``, finite at ``m`` alone: no near end); with more than ``_SKIP_LAYERS`` layers,
    ``acc[3, k, 0]``: the lanes' largest running minimum plus ``2 tau``, the cap of
    :func:`_product_tile`'s skip (fewer layers read no cap)."""
    run, blk, near_j = acc[0], acc[1], acc[2]
    for k in range(1, layers):
        for a in range(LANES):
            b, c = blk[k, a], run[k, a]
            n = b if b < c else c
            near_j[k, a] = j if k >= 2 and b - n <= tau else near_j[k, a]
            run[k, a] = n
            blk[k, a] = INF
        if layers > _SKIP_LAYERS:
            acc[3, k, 0] = run[k].max() + 2.0 * tau


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _product_tile(
    starts: np.ndarray,
    data: Arrays,
    short: Short,
    is_end: np.ndarray,
    back: np.ndarray,
    layers: int,
    work: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    near: tuple[float, np.ndarray, np.ndarray],
) -> None:  # pragma: no cover - compiled
    """``back[k, i]`` for ``k < layers`` and the ``LANES`` starts of a tile (ascending, the
    first repeated where fewer are left), ``C(x, B)`` by the product formula: one pass over
    the ends, every lane's bound then its layers' minima over the ends above the top start
    (vectorised across the lanes: each lane's arithmetic is a lone start's; a block of
    ``_NEAR_ENDS`` ends at a time), then from the top down the ends up to the top start + 1
    (they read ``back`` at the tile's own starts).  ``near = (tau, last, at_m)``:
    ``at_m[i]`` from :func:`_last_bound`; ``last[k, i]`` at least every end ``j < m`` whose
    bound plus ``back[k - 1, j]`` is within ``tau`` of ``back[k, i]`` (``k >= 2``), and at
    least the top start + 1 below m (:func:`_near_flush`: the block's minimum against the running
    one, at least ``back[k, i]``: a superset).  With more than ``_SKIP_LAYERS`` layers, a layer
    at an end is skipped where the lanes' least bound plus ``back[k - 1, j]`` lies above every
    lane's running minimum by more than ``2 tau`` (as of the last block, so at least the
    present ones): there no lane's sum lowers a minimum or is near one, so ``back`` and
    ``last`` are the same floats."""
    pairs, lane, acc, head = work
    sizes = chord_sizes(short, float(data.size[starts[0] + 1]))
    tau, last, at_m = near
    m = back.shape[1] - 1
    _tile_state(starts, data, short, is_end, lane, acc)
    j0, top = starts[0] + 1, starts[LANES - 1]
    low = lane[_LOW : _LOW + LANES]
    acc[2] = float(min(top + 1, m - 1))
    for j in range(j0, m + 1):
        _tile_lows(_at(j, data, short, is_end), data.per_batch, short.quad, pairs, sizes, lane)
        if j == m:
            _last_bound(starts, data, short, lane, at_m)
        if j <= top + 1:  # up to a lane's start inf, at start + 1 its first bound
            fj = float(j)
            for a in range(LANES):
                v = lane[_FIRST + a] if fj == lane[_START + a] + 1.0 else low[a]
                head[j - j0, a] = INF if fj <= lane[_START + a] else v
            continue
        if is_end[j]:  # (else every lane's bound inf)
            least = -INF  # (below _SKIP_LAYERS no layer is skipped)
            if layers > _SKIP_LAYERS:
                least = INF
                for a in range(LANES):
                    least = low[a] if low[a] < least else least
            for k in range(1, layers):
                p = back[k - 1, j]
                if p < INF and not least + p > acc[3, k, 0]:  # (else no lane's sum counts: skipped)
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
    """A tile's work arrays for batches of ``b``: the product formula's constants
    (:func:`~analysis.optimize._lower.product_pairs`), the lanes' state, the
    minima of ``n_buckets`` layers (running, a block's, and their near ends) and room for
    ``ends`` ends up to the top start."""
    return product_pairs(b), np.zeros(_ROWS), np.empty((4, n_buckets + 1, LANES)), np.empty((ends, LANES))


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
    pairs, lane, acc, _ = work
    sizes = chord_sizes(short, float(data.size[starts[0] + 1]))
    if done == starts[0]:
        _tile_state(starts, data, short, is_end, lane, acc)
    buf = np.empty((TILE_ENDS, LANES))
    for j0 in range(done + 1, stop + 1, TILE_ENDS):
        nj = min(TILE_ENDS, stop + 1 - j0)
        for q in range(nj):
            _tile_lows(_at(j0 + q, data, short, is_end), data.per_batch, short.quad, pairs, sizes, lane)
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
    near[1][:] = m - 1
    starts = np.empty(LANES, np.int64)
    r = rows.size - 1
    while r >= 0:
        r = _group_of(rows, r, starts)
        layers = n_buckets + 1 if r < 0 else n_buckets  # (the last layer is read at rows[0] alone)
        _product_tile(starts, data, short, is_end, back, layers, work, near)
    return back


# Ends whose bounds a fixed-``B`` tile without the product formula computes before their
# layers' minima (:func:`_fixed_chunk`), and its lanes' state: rows of one value per lane, flat
# at constant offsets (as the product tile's).  A chunk's rows, ``buf[r, q, a]`` for end ``q``
# and lane ``a``: the bound before the power bound (``_LOWS``), ``T_B`` and ``n``, and the
# bound raised (``_RAISED``, one end at a time, at ``q = 0``): indexed, never sliced per end
# (each slice counts a reference and gives it back: with rows sliced per end, reference counting
# took 4.5 % of batch size 1,000's samples, 3.2 % without, ``benchmarks/perf_kernels.py b1000``).
_CHUNK = 64
_FCI, _FXPREV, _FT, _FG, _FBASE, _FQ, _FFIRST, _FSTART, _FA, _FM = (r * LANES for r in range(10))
_FX, _FT1, _FT2, _FQ1 = (r * LANES for r in range(10, 14))
_FROWS = 15 * LANES  # (_FQ1: two rows)
_FCHORD_ROWS = (_FX, _FXPREV, _FT1, _FT2, _FQ1)
_LOWS, _TB, _N, _RAISED = range(4)


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _fixed_state(
    starts: np.ndarray, data: Arrays, short: Short, is_end: np.ndarray, lane: np.ndarray, acc: np.ndarray
) -> None:  # pragma: no cover - compiled
    """A tile's lanes before its first end (:func:`_fixed_tile`): each start's prefix count,
    first end's ``g_B``, ``base``, ``q`` and bound, running sums 0; ``acc`` inf."""
    count = short.cum_float
    for a in range(LANES):
        i = starts[a]
        lane[_FCI + a] = count[i]
        lane[_FG + a], lane[_FBASE + a], lane[_FQ + a] = data.weight[i + 1], short.base[i + 1], short.q[i + 1]
        lane[_FFIRST + a] = fixed_first(i, data, short, is_end)
        lane[_FA + a] = short.above[i] * row_mean_scale(short, float(data.size[i + 1]))
        lane[_FM + a] = -1.0  # (the means: where lane[_FA] > 0, from each end)
        lane[_FSTART + a] = float(i)
        lane[_FXPREV + a] = lane[_FT + a] = lane[_FT1 + a] = lane[_FT2 + a] = 0.0
    acc[:] = INF


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _fixed_lows(
    at_j: tuple[float, float, float, float, float, bool, float],
    bf: float,
    quad: bool,
    per_batch: float,
    sizes: tuple[float, float],
    lane: np.ndarray,
    buf: np.ndarray,
    q: int,
) -> None:  # pragma: no cover - compiled
    """Every lane advanced to end ``j`` (``at_j``: :func:`_at`), ``B`` not by the product
    formula (the chords' sums too where ``sizes``,
    :func:`~analysis.optimize._lower.chord_sizes`, carries them: :func:`_chord_lanes`):
    ``buf[_LOWS, q]`` the bound of :func:`~analysis.optimize._lower.fixed_bounds` on
    ``(start, j]`` before the power bound (inf where not an end), ``buf[_TB, q]`` the running
    sum ``T_B``, ``buf[_N, q]`` the count ``n``; per lane the arithmetic of
    :func:`~analysis.optimize._lower.fixed_ratios` (0 below a full batch, else
    :func:`~analysis.optimize._exact.ratio_upper`), :func:`~analysis.optimize._lower.chain`
    and :func:`~analysis.optimize._lower.fixed_bound`: the same floats."""
    cj, st, w, base_j, q_j, end, above_j = at_j
    full = 0  # the lanes with a full batch below j: a prefix (the starts ascend)
    for a in range(LANES):
        full += lane[_FXPREV + a] >= bf
    d = cj - lane[_FCI] - lane[_FXPREV]  # (the samples at j: the same in every lane)
    if d <= FEW_STEPS:  # (ratio_upper's choice, made once for the lanes)
        for a in range(full):
            ratio = ratio_few(cj - lane[_FCI + a], d, bf, RATIO_GROW)
            lane[_FT + a] = (lane[_FT + a] + st) * ratio
    else:
        for a in range(full):
            ratio = ratio_bound(lane[_FXPREV + a], cj - lane[_FCI + a], bf)
            lane[_FT + a] = (lane[_FT + a] + st) * ratio
    for a in range(full, LANES):  # (0 below a full batch, up to the start too)
        lane[_FT + a] = (lane[_FT + a] + st) * 0.0
    if lane[_FA] > 0.0:  # (every lane's scale the same: mean_scale; else the means stay -1)
        for a in range(LANES):
            lane[_FM + a] = mean_low(lane[_FA + a], above_j, cj - lane[_FCI + a])
    s1, s2 = sizes
    if s1 > 0.0:
        for a in range(LANES):
            lane[_FX + a] = cj - lane[_FCI + a]
        _chord_lanes(d, st, sizes, lane, _FCHORD_ROWS)
        for a in range(LANES):
            x = lane[_FX + a]
            lane[_FXPREV + a] = x
            t = lane[_FT + a]
            first = (lane[_FG + a], lane[_FBASE + a], lane[_FQ + a])
            chords = (s1, s2, w - lane[_FT1 + a], w - lane[_FT2 + a])
            v = fixed_bound(x, w - t, lane[_FM + a], bf, first, base_j, q_j, quad, per_batch, chords)
            buf[_LOWS, q, a], buf[_TB, q, a], buf[_N, q, a] = (v if end else INF), t, x
        return
    for a in range(LANES):
        x = cj - lane[_FCI + a]
        lane[_FXPREV + a] = x
        t = lane[_FT + a]
        first = (lane[_FG + a], lane[_FBASE + a], lane[_FQ + a])
        v = fixed_bound(x, w - t, lane[_FM + a], bf, first, base_j, q_j, quad, per_batch, NO_CHORDS)
        buf[_LOWS, q, a], buf[_TB, q, a], buf[_N, q, a] = (v if end else INF), t, x


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _fixed_full(
    at_j: tuple[float, float, float, float, float, bool, float],
    bf: float,
    per_batch: float,
    lane: np.ndarray,
    buf: np.ndarray,
    q: int,
) -> None:  # pragma: no cover - compiled
    """``buf[_RAISED, 0, a]``: lane ``a``'s bound at end ``j`` (:func:`_fixed_lows`' rows at
    ``q``) raised to :func:`~analysis.optimize._exact.power_bound` where higher and ``n >= B``
    (as :func:`~analysis.optimize._exact.power_bounds` raises a row's: inf stays inf)."""
    _, _, w, base_j, q_j, _, _ = at_j
    for a in range(LANES):
        n, t = buf[_N, q, a], buf[_TB, q, a]
        pw = power_bound(n, w - t, t, bf, base_j, q_j, lane[_FBASE + a], lane[_FQ + a], per_batch)
        v = buf[_LOWS, q, a]
        buf[_RAISED, 0, a] = pw if (n >= bf) & (pw > v) else v


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _power_to(j: int, short: Short, bf: float, lane: np.ndarray) -> bool:  # pragma: no cover - compiled
    """Whether some lane's bound up to end ``j`` may take the power bound
    (:func:`~analysis.optimize._exact.takes_power`, and a full batch in the first lane's bucket:
    the most samples)."""
    return takes_power(short, bf) and short.cum_float[j] - lane[_FCI] >= bf


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _settle(
    j: int, back: np.ndarray, layers: int, buf: np.ndarray, row: int, q: int, acc: np.ndarray
) -> None:  # pragma: no cover
    """Each layer's minima take end ``j`` at the lanes' bounds ``buf[row, q]``."""
    for k in range(1, layers):
        p = back[k - 1, j]
        if p < INF:
            for a in range(LANES):
                s = buf[row, q, a] + p
                acc[k, a] = s if s < acc[k, a] else acc[k, a]


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _below(
    j: int, back: np.ndarray, layers: int, buf: np.ndarray, q: int, acc: np.ndarray
) -> bool:  # pragma: no cover
    """Whether some lane's bound before the power bound (``buf[_LOWS, q]``), plus ``back`` at
    ``j``, is below that lane's minimum of some layer (else no bound at ``j``, being at least
    it, can lower a minimum).  A layer where ``back`` is inf is passed over (layer 1 but at
    ``m``)."""
    hit = False
    for k in range(1, layers):
        p = back[k - 1, j]
        if p < INF:
            for a in range(LANES):
                hit |= buf[_LOWS, q, a] + p < acc[k, a]
    return hit


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _seed(
    c0: int, nc: int, k: int, back: np.ndarray, buf: np.ndarray, acc: np.ndarray
) -> int:  # pragma: no cover
    """The chunk's end (from ``c0``; -1 if none) where the middle lane's bound before the
    power bound plus ``back[k - 1]`` is least, if below its minimum of layer ``k``."""
    mid = LANES // 2
    best, arg = acc[k, mid], -1
    for q in range(nc):
        s = buf[_LOWS, q, mid] + back[k - 1, c0 + q]
        best, arg = (s, q) if s < best else (best, arg)
    return arg


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _fixed_chunk(
    c0: int,
    nc: int,
    data: Arrays,
    short: Short,
    is_end: np.ndarray,
    back: np.ndarray,
    layers: int,
    work: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
) -> None:  # pragma: no cover - compiled
    """The layers' minima (``acc``) over the ``nc`` ends from ``c0`` (all above the tile's
    top start + 1).  Without the power bound every end's bounds.  With it, a bound is at least
    the one before it (``buf[_LOWS, q]``), so an end where none of those, plus ``back``, is below
    its lane's minimum can lower no minimum and its power bounds are skipped: first the end
    least for the middle lane in each layer (a minimum that is near the final one early), then
    every end that passes that test, each with every lane's power bound (the minima of the
    same sums, so the same floats)."""
    lane, acc, _, buf = work
    bf, per_batch, quad = float(data.size[1]), data.per_batch, short.quad
    power = _power_to(c0 + nc - 1, short, bf, lane)
    sizes = chord_sizes(short, bf)
    for q in range(nc):
        _fixed_lows(_at(c0 + q, data, short, is_end), bf, quad, per_batch, sizes, lane, buf, q)
    for k in range(1, layers if power else 1):
        q = _seed(c0, nc, k, back, buf, acc)
        if q >= 0:
            _fixed_full(_at(c0 + q, data, short, is_end), bf, per_batch, lane, buf, q)
            _settle(c0 + q, back, layers, buf, _RAISED, 0, acc)
    for q in range(nc):
        j = c0 + q
        if not is_end[j]:  # (every lane's bound inf)
            continue
        if not power:
            _settle(j, back, layers, buf, _LOWS, q, acc)
        elif _below(j, back, layers, buf, q, acc):
            _fixed_full(_at(j, data, short, is_end), bf, per_batch, lane, buf, q)
            _settle(j, back, layers, buf, _RAISED, 0, acc)


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _fixed_head(
    starts: np.ndarray,
    data: Arrays,
    short: Short,
    is_end: np.ndarray,
    work: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
) -> None:  # pragma: no cover - compiled
    """``head[j - starts[0] - 1, a]``: lane ``a``'s bound on ``(start, j]`` for the ends up to
    the top start + 1 (inf up to its start, its first bound at ``start + 1``; power bound
    included), the lanes advanced to there."""
    lane, _, head, buf = work
    bf, per_batch, quad = float(data.size[1]), data.per_batch, short.quad
    power = _power_to(starts[LANES - 1] + 1, short, bf, lane)
    row = _RAISED if power else _LOWS
    sizes = chord_sizes(short, bf)
    q = int(np.int64(0))  # (typed int64 as the tiles' ends: a literal 0 compiles the callees again)
    j0 = starts[0] + 1
    for j in range(j0, starts[LANES - 1] + 2):
        at_j = _at(j, data, short, is_end)
        _fixed_lows(at_j, bf, quad, per_batch, sizes, lane, buf, q)
        if power:
            _fixed_full(at_j, bf, per_batch, lane, buf, q)
        fj = float(j)
        for a in range(LANES):
            x = lane[_FFIRST + a] if fj == lane[_FSTART + a] + 1.0 else buf[row, q, a]
            head[j - j0, a] = INF if fj <= lane[_FSTART + a] else x


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _fixed_tile(
    starts: np.ndarray,
    data: Arrays,
    short: Short,
    is_end: np.ndarray,
    back: np.ndarray,
    layers: int,
    work: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
) -> None:  # pragma: no cover - compiled
    """``back[k, i]`` for ``k < layers`` and the ``LANES`` starts of a tile (ascending, the
    first repeated where fewer are left), one fixed ``B`` not by the product formula: the ends
    up to the top start + 1 (:func:`_fixed_head`), the layers' minima over the ends above a
    chunk at a time (:func:`_fixed_chunk`), then as :func:`_product_tile` from the top down."""
    lane, acc, head, _ = work
    m = back.shape[1] - 1
    _fixed_state(starts, data, short, is_end, lane, acc)
    _fixed_head(starts, data, short, is_end, work)
    j0, top = starts[0] + 1, starts[LANES - 1]
    for c0 in range(top + 2, m + 1, _CHUNK):
        _fixed_chunk(c0, min(_CHUNK, m + 1 - c0), data, short, is_end, back, layers, work)
    _tile_finish(starts, back, layers, acc, head, j0, top)


@numba.njit(cache=True, nogil=True, error_model="numpy")
def fixed_backward(
    data: Arrays, short: Short, rows: np.ndarray, is_end: np.ndarray, n_buckets: int
) -> np.ndarray:  # pragma: no cover - compiled
    """:func:`backward` for one fixed ``B`` not by the product formula, by tiles of ``LANES``
    starts (:func:`_fixed_tile`)."""
    m = data.cum.size - 1
    back = np.full((n_buckets + 1, m + 1), INF)
    back[0, m] = 0.0
    work = (
        np.zeros(_FROWS),
        np.empty((n_buckets + 1, LANES)),
        np.empty((m + 1, LANES)),
        np.empty((4, _CHUNK, LANES)),
    )
    starts = np.empty(LANES, np.int64)
    r = rows.size - 1
    while r >= 0:
        r = _group_of(rows, r, starts)
        layers = n_buckets + 1 if r < 0 else n_buckets  # (the last layer is read at rows[0] alone)
        _fixed_tile(starts, data, short, is_end, back, layers, work)
    return back


# A budget tile's lanes: the seven values of budget_first, the bounds at one end, and the
# table's sums at that end for each run of lanes (rows of one flat array at constant offsets,
# as the product path's).
_BF1, _BF2, _BF3, _BF4, _BF5, _BF6, _BV, _BT, _BT2, _BSTATE = (r * LANES for r in range(1, 11))


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _lanes(
    cj: float,
    end: tuple[float, float, float, float, float, float, float, float],
    scalars: tuple[float, bool, float],
    state: np.ndarray,
    power: bool,
    lanes: np.ndarray,
) -> None:  # pragma: no cover - compiled
    """``state[_BV + a]``: :func:`~analysis.optimize._lower.budget_bound` of every lane's bucket
    ending at the end read (``cj``, ``end``: :func:`~analysis.optimize._lower.budget_end`;
    ``scalars``: the rounding bound of the prefix sums, whether ``q`` is nonzero, the
    per-batch cost; each lane's table sums at ``state[_BT + a]``, ``state[_BT2 + a]``): without
    the power bound one loop across the lanes, vectorised; with it (a loop that stays scalar)
    only the lanes with ``lanes[a]``, the others left as they are.  (Scalars and arrays only:
    a call that passes the tables' tuples pays for counting their references, at every
    end.)"""
    err, quad, per_batch = scalars
    if power:  # (the two loops compiled apart: the one without is vectorised)
        for a in range(LANES):
            if lanes[a]:
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
    j: int,
    data: Arrays,
    short: Short,
    bounds: BudgetBounds,
    state: np.ndarray,
    runs: np.ndarray,
    power: bool,
    lanes: np.ndarray,
) -> None:  # pragma: no cover - compiled
    """:func:`_lanes` at end ``j``: the runs' table sums read into ``state`` first."""
    two = bounds.t2_up.shape[0] > 0
    for u in range(runs[0, LANES]):  # (each run's lanes read one row of the table)
        row = runs[1, u]
        t, t2 = bounds.t_up[row, j], bounds.t2_up[row, j] if two else 0.0
        for a in range(runs[0, u], runs[0, u + 1]):
            state[_BT + a], state[_BT2 + a] = t, t2
    scalars = (bounds.mass_err, short.quad, data.per_batch)
    _lanes(bounds.cum_float[j], budget_end(j, data, short, bounds), scalars, state, power, lanes)


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _budget_runs(starts: np.ndarray, row_of: np.ndarray, runs: np.ndarray) -> None:  # pragma: no cover
    """The tile's lanes in runs that read one row of the bounds' table (``row_of[starts]``
    never falls): ``runs[0, u]`` the first lane of run ``u`` (``runs[0, count]`` = ``LANES``),
    ``runs[1, u]`` its row, ``runs[0, LANES]`` the count."""
    count = 0
    for a in range(LANES):
        row = row_of[starts[a]]
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
    work: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray],
) -> None:  # pragma: no cover - compiled
    """A budget tile's lanes before its first end (:func:`_budget_tile`): each start's
    :func:`~analysis.optimize._lower.budget_first` and table row, and the layers' minima
    seeded with their terms at the ends ``seed[c, k]`` (the previous tile's best ends of its
    lowest, middle and highest start for layer ``k``, and the lowest's moved on by its drift
    over that tile), each for every layer, where above this tile's top start + 1 (a term of
    the minimum, with the power bound), else inf."""
    state, runs, acc, arg, _, seed, lanes = work
    for a in range(LANES):
        first = budget_first(starts[a], data, short, bounds)
        for f in range(7):
            state[f * LANES + a] = first[f]
    _budget_runs(starts, bounds.row_of, runs)
    acc[:] = INF
    m = back.shape[1] - 1
    for k in range(1, layers):
        for c in range(seed.shape[0]):
            j = seed[c, k]
            if starts[LANES - 1] + 1 < j <= m and is_end[j]:
                _budget_lanes(j, data, short, bounds, state, runs, True, lanes[0])
                _budget_take(j, back, layers, state, acc, arg)


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _hit_lanes(
    j: int, back: np.ndarray, layers: int, v: np.ndarray, acc: np.ndarray, hits: np.ndarray
) -> None:  # pragma: no cover - compiled
    """``hits[a]``: whether lane ``a``'s bound ``v[a]`` at ``j`` plus ``back[k - 1, j]`` is
    below its minimum ``acc[k, a]`` for some layer ``k`` (the same sums as the test)."""
    hits[:] = False
    for k in range(1, layers):
        p = back[k - 1, j]
        if p < INF:
            for a in range(LANES):
                hits[a] = hits[a] or v[a] + p < acc[k, a]


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _budget_take(
    j: int, back: np.ndarray, layers: int, state: np.ndarray, acc: np.ndarray, arg: np.ndarray
) -> None:  # pragma: no cover - compiled
    """Every layer's minimum ``acc[k, a]`` lowered to lane ``a``'s bound at ``j`` plus
    ``back[k - 1, j]`` where that is less (``arg[k, a] = j`` there): selects across the
    lanes, vectorised."""
    v = state[_BV : _BV + LANES]
    for k in range(1, layers):
        p = back[k - 1, j]
        if p < INF:
            for a in range(LANES):
                s = v[a] + p
                lt = s < acc[k, a]
                arg[k, a] = j if lt else arg[k, a]
                acc[k, a] = s if lt else acc[k, a]


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _budget_tile(
    starts: np.ndarray,
    data: Arrays,
    short: Short,
    bounds: BudgetBounds,
    is_end: np.ndarray,
    back: np.ndarray,
    layers: int,
    work: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray],
) -> None:  # pragma: no cover - compiled
    """``back[k, i]`` for ``k < layers`` and the ``LANES`` starts of a tile under a token budget,
    as :func:`_product_tile` (one pass over the ends, the ends up to the top start + 1 last,
    from the top down), every lane's bound a lone start's
    (:func:`~analysis.optimize._lower.budget_bound`).  The power bound (square roots) only
    where some lane's term could lower a minimum: at each end the bounds without it first,
    and only if one of them plus ``back`` is below its layer's minimum so far, those lanes'
    bounds with it (:func:`_hit_lanes`; a bound with it is at least one without, so a term
    skipped could lower nothing: the minima are the same floats); the minima are seeded
    (:func:`_budget_seed`) so that few ends pass."""
    state, runs, acc, arg, head, seed, lanes = work
    _budget_seed(starts, data, short, bounds, is_end, back, layers, work)
    m = back.shape[1] - 1
    j0, top = starts[0] + 1, starts[LANES - 1]
    v, hits = state[_BV : _BV + LANES], lanes[1]
    for j in range(j0, m + 1):
        if j <= top + 1:  # up to a lane's start inf, then its bound with the power bound
            _budget_lanes(j, data, short, bounds, state, runs, True, lanes[0])
            for a in range(LANES):
                head[j - j0, a] = INF if j <= starts[a] or not is_end[j] else v[a]
            continue
        if not is_end[j]:
            continue
        _budget_lanes(j, data, short, bounds, state, runs, False, hits)
        hit = 0
        for k in range(1, layers):
            p = back[k - 1, j]
            if p < INF:
                for a in range(LANES):
                    hit += v[a] + p < acc[k, a]
        if hit == 0:
            continue
        _hit_lanes(j, back, layers, v, acc, hits)
        _budget_lanes(j, data, short, bounds, state, runs, True, hits)
        _budget_take(j, back, layers, state, acc, arg)
    _tile_finish(starts, back, layers, acc, head, j0, top)
    for k in range(1, layers):  # the best ends again: the lowest, middle and top starts', a drift
        seed[0, k] = arg[k, 0]
        seed[1, k] = max(0, 2 * arg[k, 0] - arg[k, LANES - 1])
        seed[2, k] = arg[k, LANES // 2]
        seed[3, k] = arg[k, LANES - 1]


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
def budget_backward(
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
        np.zeros((4, n_buckets + 1), np.int64),  # (0: no seed)
        np.ones((2, LANES), np.bool_),  # (every lane; the lanes that hit at an end)
    )
    starts = np.empty(LANES, np.int64)
    r = rows.size - 1
    while r >= 0:
        r = _group_of(rows, r, starts)
        layers = n_buckets + 1 if r < 0 else n_buckets  # (the last layer is read at rows[0] alone)
        _budget_tile(starts, data, short, bounds, is_end, back, layers, work)
    return back


def backward(
    data: Arrays,
    short: Short,
    bounds: BudgetBounds,
    rows: np.ndarray,
    is_end: np.ndarray,
    n_buckets: int,
    near: tuple[float, np.ndarray, np.ndarray] | None = None,
) -> np.ndarray:
    """``back[k, i]`` for every layer ``k < n_buckets`` and start ``i`` in ``rows``, and
    ``back[n_buckets, rows[0]]`` (``back[0, m] = 0``, inf elsewhere): the module docstring.
    (``back[n_buckets, i]`` is read at the DP's first start alone: ``n_buckets`` buckets from
    any other start leave none for the lengths below it; the product path leaves it inf.)
    The rule's pass is chosen here, in Python, so that a first call compiles only its own;
    ``near``: the product path's record of near ends (:func:`product_backward`; None: none
    kept)."""
    if short.product and not data.token:
        if near is None:
            m = data.cum.size - 1
            near = (0.0, np.empty((n_buckets + 1, m + 1), np.int64), np.empty(m + 1))
        out: np.ndarray = product_backward(data, short, rows, is_end, n_buckets, near)
    elif data.token:
        out = budget_backward(data, short, bounds, rows, is_end, n_buckets)
    else:  # (exact_arrays: no table of C(x, B))
        out = fixed_backward(data, short, rows, is_end, n_buckets)
    return out
