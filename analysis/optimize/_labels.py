"""The exact floor search: a DP over bucket ends that carries every Pareto-optimal pair.

A floor asks for the best plan of ``K`` buckets under a constraint: the most mixing whose
padded tokens (or steps) stay below a limit, or the least objective keeping some mixing.  Both
are one problem, *minimise* ``X`` subject to ``Y <= limit``, with ``X`` and ``Y`` additive over
buckets (``X = -mixing, Y = padded`` or ``steps``; ``X = objective, Y = -mixing``).  A state of
the DP is a bucket count and an end, as in the λ-DP, but it keeps a *set* of labels ``(x, y)``:
the sums of the buckets so far, one per partial plan no other partial plan ending there beats
on both (any completion adds the same to both, so a dominated label never leads to the best
plan).  The labels of the last state hold the best plan.

The set can grow fast; three bounds from backward DPs over the same matrices cut it down.  A
partial plan is dropped when its best completion still breaks the limit (``y + min Y``), cannot
beat the incumbent (``x + min X``), or, the tightest, when ``x + mu y`` plus the least
completion of ``X + mu Y`` passes ``incumbent + mu * limit``: every plan that meets the limit
and beats the incumbent lies below that line (a Lagrangian bound; ``mu`` the slope of the hull
edge the floor falls in, where the triangle between the edge and the floor is smallest).  Each
bound is loosened by a relative ``slack``, so the float sums never drop the best plan.

The cuts come in bulk where they can, with the same outcome label by label: an end's labels
run by ascending ``x`` and falling ``y``, so the limit cuts a prefix and the incumbent a suffix
(found by binary search on the very sums each label's test computes), and a bucket from an
end whose best label on some line (its least ``x + mu y``) passes that line by a margin far
above rounding is cut whole (and where its worst label stays below every line by as much, no
label is tested against them); only the ends that hold labels are read.  ``work`` still counts
every label each bucket extends, cut in bulk or not, so the work limit stops a search at the
same point.

When the labels would pass ``max_labels`` in one state or the work ``max_work`` label
extensions, the search stops and says so (the caller keeps its hull vertex and its bound).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numba
import numpy as np

from analysis.optimize._costs import INF
from analysis.optimize._layers import FOLD, fold, fold_one

# The Lagrangian bounds' multipliers, times the hull edge's: a partial plan's completions are
# cut by several lines, which follow their frontier's curve closer than one.
_SPREAD = (1.0, 1 / 8, 8.0, 1 / 64, 64.0)


# Starts a tile of :func:`backward` takes side by side (the loops across them vectorised).
_TILE = 64


@numba.njit(cache=True, nogil=True, error_model="numpy")
def backward(
    xm: np.ndarray, ym: np.ndarray, weights: np.ndarray, n_buckets: int
) -> tuple[np.ndarray, np.ndarray]:  # pragma: no cover - compiled
    """``out[u, r, c]``: the least sum of ``r`` buckets covering ``(points[c], points[-1]]`` of
    ``weights[u, 0] X + weights[u, 1] Y`` (a weight of 0 drops its matrix: ``X`` alone is
    ``(1, 0)``), and ``scale[u]`` its largest finite bucket value; ``xm[d, c]``, ``ym[d, c]``
    bucket ``(points[c], points[d]]``'s values, ``c < d`` (the floor search's matrices, so an
    end's starts are contiguous).  Every bucket count at once, by tiles of ``_TILE`` starts
    from the top: at each end above the tile every start's bucket value, then each layer's
    running minimum across the starts (vectorised), then the ends within the tile start by
    start from the top (they read the tile's own rows).  A minimum does not depend on its
    order (no NaN is ever taken), so the table is the layer-by-layer one."""
    p = xm.shape[0]
    last = p - 1
    nt = weights.shape[0]
    out = np.full((nt, n_buckets + 1, p), INF)
    scale = np.zeros(nt)
    rows = np.empty((FOLD, _TILE))
    acc = np.empty((n_buckets + 1, _TILE))
    for u in range(nt):
        work = out[u]  # work[r, c]
        work[0, last] = 0.0
        wx, wy = weights[u, 0], weights[u, 1]
        top = 0.0
        c1 = last  # the tile: starts c0 <= c < c1
        while c1 > 0:
            c0 = max(0, c1 - _TILE)
            n = c1 - c0
            acc[:, :n] = INF
            for d in range(c1, p, FOLD):  # above the tile: every start's buckets to FOLD ends
                top = _tile_block(xm, ym, wx, wy, work, d, c0, c1, n_buckets, rows, acc, top)
            for a in range(n - 1, -1, -1):  # within the tile, from the top
                c = c0 + a
                for d in range(c + 1, c1):
                    top = _combined(xm[d, c : c + 1], ym[d, c : c + 1], wx, wy, rows[0, :1], top)
                    for r in range(1, n_buckets + 1):
                        v = work[r - 1, d] + rows[0, 0]
                        acc[r, a] = v if v < acc[r, a] else acc[r, a]
                for r in range(1, n_buckets + 1):
                    work[r, c] = acc[r, a]
            c1 = c0
        scale[u] = top
    return out, scale


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _tile_block(
    xm: np.ndarray,
    ym: np.ndarray,
    wx: float,
    wy: float,
    work: np.ndarray,
    d: int,
    c0: int,
    c1: int,
    n_buckets: int,
    rows: np.ndarray,
    acc: np.ndarray,
    top: float,
) -> float:  # pragma: no cover - compiled
    """The running minima ``acc[r, a]`` of :func:`backward`'s tile (starts ``c0 <= c < c1``)
    over the ends ``d`` to ``d + FOLD - 1`` (fewer at the last one), in ascending order; the
    buckets' values in ``rows``; returns ``top`` raised to their largest finite one (the ends
    in ascending order; a minimum does not depend on its order: the same floats)."""
    n = c1 - c0
    ends = min(FOLD, xm.shape[0] - d)
    for e in range(ends):
        top = _combined(xm[d + e, c0:c1], ym[d + e, c0:c1], wx, wy, rows[e, :n], top)
    for r in range(1, n_buckets + 1):
        least = acc[r]
        if ends == FOLD:
            fold(least, rows, (work[r - 1, d], work[r - 1, d + 1], work[r - 1, d + 2], work[r - 1, d + 3]), n)
        else:
            for e in range(ends):
                fold_one(least, rows[e], work[r - 1, d + e], n)
    return top


@numba.njit(cache=True, nogil=True, error_model="numpy", inline="always")
def _combined(
    rx: np.ndarray, ry: np.ndarray, wx: float, wy: float, row: np.ndarray, top: float
) -> float:  # pragma: no cover
    """``row = wx X + wy Y`` of the buckets ``rx``, ``ry`` (the matrix alone where the other's
    weight is 0, so an inf beside it never makes a NaN); returns ``top`` raised to their
    largest finite absolute value."""
    if wy == 0.0:
        row[:] = rx
    elif wx == 0.0:
        row[:] = ry
    else:
        for a in range(row.size):
            row[a] = rx[a] + wy * ry[a]
    for a in range(row.size):
        m = abs(row[a])
        top = max(top, m if m < INF else 0.0)
    return top


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _merge_fronts(
    xs: np.ndarray,
    ys: np.ndarray,
    src: np.ndarray,
    i: int,
    ie: int,
    j: int,
    je: int,
    dst: np.ndarray,
    out: int,
) -> int:  # pragma: no cover - compiled
    """The labels ``src[i:ie]`` and ``src[j:je]`` (each by ascending ``x``, the first's indices
    the smaller) merged by ascending ``x`` (the first's on equal ``x``: a stable sort), then
    those no other beats written to ``dst[out:]``: of equal ``x`` the least ``y`` (the first of
    equal ones), kept where its ``y`` is below every kept one's; returns the new ``out``."""
    best = INF
    pend = -1  # the pick of the current x, written once x changes
    while i < ie or j < je:
        if j >= je or (i < ie and xs[src[i]] <= xs[src[j]]):
            t = src[i]
            i += 1
        else:
            t = src[j]
            j += 1
        if pend >= 0 and xs[t] == xs[pend]:
            pend = t if ys[t] < ys[pend] else pend
            continue
        if pend >= 0 and ys[pend] < best:
            dst[out] = pend
            out += 1
            best = ys[pend]
        pend = t
    if pend >= 0 and ys[pend] < best:
        dst[out] = pend
        out += 1
    return out


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _front(xs: np.ndarray, ys: np.ndarray, runs: np.ndarray) -> np.ndarray:  # pragma: no cover
    """Indices of the labels no other beats, by ascending ``x`` (of equal pairs the first),
    from runs ``runs[r]:runs[r + 1]`` each by ascending ``x`` (a bucket from one end extends
    that end's labels, already so ordered): the runs merged pairwise, neighbours first, each
    merge keeping only its unbeaten labels (:func:`_merge_fronts`).  A label a merge drops is
    beaten within it, hence in all, and the pick among equals is the first of the least, so
    this is the stable sort by ``x`` and one scan, in ``O(n log runs)``."""
    src = np.arange(runs[-1])
    dst = np.empty(runs[-1], np.int64)
    lo, hi = runs[:-1].copy(), runs[1:].copy()
    count = lo.size
    while True:  # a round merges runs 2r and 2r + 1 into run r of dst, written from 0 on
        new = 0
        for r in range(0, count, 2):
            at = hi[new - 1] if new > 0 else 0
            if r + 1 < count:
                end = _merge_fronts(xs, ys, src, lo[r], hi[r], lo[r + 1], hi[r + 1], dst, at)
            else:  # (the last alone, beside an empty run: only its own unbeaten labels)
                end = _merge_fronts(xs, ys, src, lo[r], hi[r], hi[r], hi[r], dst, at)
            lo[new], hi[new] = at, end  # (entries r >= 2 new + 2, still to read, untouched)
            new += 1
        src, dst = dst, src
        count = new
        if count == 1:
            return src[lo[0] : hi[0]].copy()


@numba.njit(cache=True, nogil=True, error_model="numpy", inline="always")
def _first_within(
    v: np.ndarray, lo: int, hi: int, add: float, bound: float, limit: float, sign: float
) -> int:  # pragma: no cover - compiled
    """With ``sign = -1``: the first ``t`` in ``[lo, hi)`` where ``v[t] + add + bound <= limit``
    (``v`` falling: every later one holds too), else ``hi``; with ``sign = 1``: the first where
    ``v[t] + add + bound >= limit`` (``v`` rising: every later one breaks it too).  A binary
    search of the same float sums the labels' own tests compute (a rounded sum never falls when
    a term rises), so the labels it passes over are exactly those the tests would cut."""
    while lo < hi:
        mid = (lo + hi) // 2
        s = v[mid] + add + bound
        if (s > limit) if sign < 0.0 else (s < limit):
            lo = mid + 1
        else:
            hi = mid
    return lo


# Relative margin of :func:`_lines_cut` (far above the rounding of a few sums: ~1e-15).
_CUT_MARGIN = 1e-9


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _line_ranges(
    xs: np.ndarray, ys: np.ndarray, start: np.ndarray, held: np.ndarray, mus: np.ndarray
) -> np.ndarray:  # pragma: no cover - compiled
    """``out[h, i]`` and ``out[h, nmu + 1 + i]``: the least and the most ``x + mus[i] y`` over
    the labels of end ``held[h]`` (``start[a]:start[a + 1]``), and ``out[h, nmu]`` the most
    ``|x| + mus_max |y|`` (``nmu = mus.size``)."""
    nmu = mus.size
    top = mus.max()
    out = np.empty((held.size, 2 * nmu + 1))
    for h in range(held.size):
        a = held[h]
        out[h, :nmu] = INF
        out[h, nmu:] = -INF
        out[h, nmu] = 0.0
        for t in range(start[a], start[a + 1]):
            for i in range(nmu):
                v = xs[t] + mus[i] * ys[t]
                out[h, i] = min(out[h, i], v)
                out[h, nmu + 1 + i] = max(out[h, nmu + 1 + i], v)
            out[h, nmu] = max(out[h, nmu], abs(xs[t]) + top * abs(ys[t]))
    return out


@numba.njit(cache=True, nogil=True, error_model="numpy", inline="always")
def _lines_cut(
    ranges: np.ndarray,
    x_add: float,
    y_add: float,
    mus: np.ndarray,
    bound: np.ndarray,
    lines: np.ndarray,
    slack: np.ndarray,
) -> int:  # pragma: no cover - compiled
    """What the Lagrangian lines do to the labels of an end extended by a bucket (``x_add``,
    ``y_add``), from the end's least and most ``x + mu y`` (:func:`_line_ranges`) plus the
    bucket's and the completion's bound: 1 where one line cuts them all, 0 where no line cuts
    any, -1 where each label must be tested.  Each verdict holds by more than ``_CUT_MARGIN``
    of the terms' size, far above what rounding moves each label's own float test."""
    nmu = mus.size
    size = ranges[nmu]
    none = True
    for i in range(nmu):
        add = x_add + mus[i] * y_add + bound[i]
        terms = size + abs(x_add) + mus[i] * abs(y_add) + abs(bound[i]) + abs(lines[i]) + slack[i]
        margin = _CUT_MARGIN * terms
        if ranges[i] + add - margin > lines[i] + slack[i]:
            return 1
        none = none and ranges[nmu + 1 + i] + add + margin <= lines[i] + slack[i]
    return 0 if none else -1


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _layer(
    prev_x: np.ndarray,
    prev_y: np.ndarray,
    prev_start: np.ndarray,
    xm: np.ndarray,
    ym: np.ndarray,
    k: int,
    n_buckets: int,
    bounds: np.ndarray,
    mus: np.ndarray,
    incumbent: float,
    limit: float,
    slack: np.ndarray,
    max_labels: int,
    max_work: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int, bool]:  # pragma: no cover - compiled
    """The labels of bucket count ``k`` at every end from those of ``k - 1`` (``prev_*``, the
    labels of end ``a`` at ``prev_start[a]:prev_start[a + 1]``): their ``x``, ``y``, parent
    label, the start of each end's labels, the extensions tried, and whether it overflowed
    (labels or work)."""
    p = xm.shape[0]
    last = p - 1
    rem = n_buckets - k
    bx, by = bounds[0, rem], bounds[1, rem]
    nmu = mus.size
    lines = incumbent + mus * limit
    start = np.zeros(p + 1, np.int64)
    work = 0
    cap = 1024
    cx = np.empty(cap)
    cy = np.empty(cap)
    cp = np.empty(cap, np.int64)
    size = 1024
    out_x = np.empty(size)
    out_y = np.empty(size)
    out_parent = np.empty(size, np.int64)
    total = 0
    held = np.flatnonzero(prev_start[1:] > prev_start[:-1])
    runs = np.empty(64, np.int64)  # where each bucket's run of candidates starts
    ranges = _line_ranges(prev_x, prev_y, prev_start, held, mus)
    for c in range(p):
        start[c] = total
        if c < k or (rem == 0 and c != last) or (rem > 0 and c == last):
            continue
        if bx[c] == INF or by[c] == INF:
            continue
        n = 0
        nr = 0
        for h in range(held.size):  # (the starts with labels, ascending: the others add none)
            a = held[h]
            if a >= c:
                break
            x_add = xm[c, a]
            y_add = ym[c, a]
            if x_add == INF or y_add == INF:
                continue
            t0, t1 = prev_start[a], prev_start[a + 1]
            work += t1 - t0
            verdict = _lines_cut(ranges[h], x_add, y_add, mus, bounds[2:, rem, c], lines, slack[2:])
            if verdict == 1:
                continue
            lo = _first_within(prev_y, t0, t1, y_add, by[c], limit + slack[1], -1.0)
            hi = _first_within(prev_x, lo, t1, x_add, bx[c], incumbent - slack[0], 1.0)
            if nr + 1 >= runs.size:
                runs = np.concatenate((runs, np.empty(runs.size, np.int64)))
            runs[nr] = n
            nr += 1 if lo < hi else 0  # (a run of this bucket's labels, by ascending x)
            for t in range(lo, hi):
                x = prev_x[t] + x_add
                y = prev_y[t] + y_add
                cut = False
                for i in range(nmu if verdict < 0 else 0):
                    if x + mus[i] * y + bounds[2 + i, rem, c] > lines[i] + slack[2 + i]:
                        cut = True
                        break
                if cut:
                    continue
                if n == cap:
                    cap *= 2
                    nx = np.empty(cap)
                    ny = np.empty(cap)
                    npar = np.empty(cap, np.int64)
                    nx[:n] = cx[:n]
                    ny[:n] = cy[:n]
                    npar[:n] = cp[:n]
                    cx, cy, cp = nx, ny, npar
                cx[n] = x
                cy[n] = y
                cp[n] = t
                n += 1
        if n == 0:
            continue
        runs[nr] = n
        keep = _front(cx, cy, runs[: nr + 1])
        if keep.size > max_labels or work > max_work:
            return out_x[:0], out_y[:0], out_parent[:0], start, work, True
        # grown like the candidates' arrays above on purpose: compiled code, where a shared
        # helper returning three arrays costs a tuple per label round
        while total + keep.size > size:
            size *= 2
            nx = np.empty(size)
            ny = np.empty(size)
            npar = np.empty(size, np.int64)
            nx[:total] = out_x[:total]
            ny[:total] = out_y[:total]
            npar[:total] = out_parent[:total]
            out_x, out_y, out_parent = nx, ny, npar
        for i in range(keep.size):
            out_x[total + i] = cx[keep[i]]
            out_y[total + i] = cy[keep[i]]
            out_parent[total + i] = cp[keep[i]]
        total += keep.size
    start[p] = total
    return out_x[:total], out_y[:total], out_parent[:total], start, work, False


class Bounds(NamedTuple):
    """The matrices of one floor search and the backward DPs that bound its completions."""

    xm: np.ndarray
    ym: np.ndarray
    n_buckets: int
    mus: np.ndarray  # the Lagrangian multipliers
    tables: np.ndarray  # [0]: least X, [1]: least Y, [2 + i]: least X + mus[i] Y, by (r, c)
    scale: np.ndarray  # the largest finite bucket value of each


def bounds(
    xm: np.ndarray, ym: np.ndarray, n_buckets: int, mu: float, memo: dict[int, Any] | None = None
) -> Bounds:
    """The completion bounds of ``n_buckets`` buckets over ``xm``, ``ym`` (``[c, a]``: bucket
    ``(points[a], points[c]]``, inf where none), with multipliers spread around ``mu``;
    ``memo``, a dict kept with these two matrices, holds the tables of ``X`` and ``Y`` alone by
    bucket count, which every search on them shares (the tables are computed weight by
    weight: the same floats either way)."""
    mus = np.array([mu * f for f in _SPREAD] if mu > 0 else [0.0])
    memo = {} if memo is None else memo
    if n_buckets not in memo:
        memo[n_buckets] = backward(xm, ym, np.array([[1.0, 0.0], [0.0, 1.0]]), n_buckets)
    alone, alone_scale = memo[n_buckets]
    lines, line_scale = backward(xm, ym, np.array([[1.0, v] for v in mus]), n_buckets)
    return Bounds(
        xm, ym, n_buckets, mus, np.concatenate([alone, lines]), np.concatenate([alone_scale, line_scale])
    )


def label_search(
    b: Bounds,
    incumbent: float,
    limit: float,
    *,
    max_labels: int,
    max_work: int,
    rel: float = 1e-9,
    max_found: int | None = None,
) -> tuple[list[tuple[float, float, list[int]]], int, bool, int]:
    """Every plan of ``b.n_buckets`` buckets with ``y <= limit`` and ``x < incumbent`` (within
    the ``rel`` slack) that no other such plan beats on both: ``(x, y, point indices of its
    ends)`` by ascending ``x`` (the first ``max_found`` of them: only those are traced back);
    the labels kept; whether it finished (False: ``max_labels`` or ``max_work`` passed, the
    list is empty); the label extensions tried."""
    k_all = b.n_buckets
    size = [
        max(abs(incumbent), 1.0),
        max(abs(limit), 1.0),
        *(max(abs(incumbent + v * limit), 1.0) for v in b.mus),
    ]
    slack = np.array([rel * (k_all * f + s) for f, s in zip(b.scale, size, strict=True)])
    p = b.xm.shape[0]
    layers = []
    x = np.zeros(1)
    y = np.zeros(1)
    start = np.zeros(p + 1, np.int64)
    start[1:] = 1  # one empty plan, at point 0
    labels = 0
    work = 0
    for k in range(1, k_all + 1):
        x, y, parent, start, w, overflow = _layer(
            x,
            y,
            start,
            b.xm,
            b.ym,
            k,
            k_all,
            b.tables,
            b.mus,
            incumbent,
            limit,
            slack,
            max_labels,
            max_work - work,
        )
        work += w
        labels += x.size
        if overflow or work > max_work:
            return [], labels, False, work
        layers.append((parent, start))
    found = []
    last_start = layers[-1][1]
    order = np.argsort(x[last_start[p - 1] : last_start[p]], kind="mergesort") + last_start[p - 1]
    for t in order[:max_found]:
        found.append((float(x[t]), float(y[t]), _trace(layers, int(t))))
    return found, labels, True, work


def _trace(layers: list[tuple[np.ndarray, np.ndarray]], t: int) -> list[int]:
    """The point index of each end of label ``t`` of the last layer, ascending."""
    ends = []
    for parent, start in reversed(layers):
        ends.append(int(np.searchsorted(start, t, side="right") - 1))
        t = int(parent[t])
    return ends[::-1]


def polish(xm: np.ndarray, ym: np.ndarray, idx: list[int], limit: float, rounds: int = 50) -> list[int]:
    """A plan (the point index of each end, the last the last point) improved by moving one end
    at a time to where ``x`` is least with ``y`` still within ``limit`` (a local search for a
    better plan where the exact search stops: no proof)."""
    ends = [0, *idx]
    for _ in range(rounds):
        moved = False
        for i in range(1, len(ends) - 1):
            a, c = ends[i - 1], ends[i + 1]
            mid = np.arange(a + 1, c)
            if mid.size < 2:
                continue
            xs = xm[mid, a] + xm[c, mid]
            ys = ym[mid, a] + ym[c, mid]
            here = ends[i] - a - 1
            y_rest = sum(ym[ends[t + 1], ends[t]] for t in range(len(ends) - 1)) - ys[here]
            ok = np.flatnonzero(ys + y_rest <= limit)
            if ok.size == 0:
                continue
            best = int(ok[np.argmin(xs[ok])])
            if xs[best] < xs[here] - 1e-12 * max(abs(xs[here]), 1.0):
                ends[i] = int(mid[best])
                moved = True
        if not moved:
            break
    return ends[1:]
