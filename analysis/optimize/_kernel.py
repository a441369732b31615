"""The exact DP over distinct lengths, compiled: bucket costs by a scaled running sum.

With distinct lengths ``v_1 < ... < v_m``, prefix counts ``c_0 = 0, c_1, ..., c_m`` and
``w_k = g(v_k)`` (``g`` the per-sample weight: the padded length), a bucket holding
``v_{i+1}..v_j`` has ``n = c_j - c_i`` samples and, for batches of ``B``,

    ``E[g(max)] = w_j - T(i, j)``,  ``T(i, j) = sum_{k=i+1}^{j-1} (w_{k+1} - w_k) C(x_k, B) / C(n, B)``

with ``x_k = c_k - c_i``.  ``T`` is a weighted sum of probabilities (``C(x_k, B) / C(n, B)``
is the chance that a batch holds no sample longer than ``v_k``), so it lies in
``[0, w_j - w_{i+1}]`` whatever ``B``: it never overflows, and it follows the end one step at
a time,

    ``T(i, j + 1) = (T(i, j) + w_{j+1} - w_j) * C(x_j, B) / C(x_{j+1}, B)``,

one multiplication by a ratio in ``[0, 1]`` per cell: all ``O(m^2)`` bucket costs in
``O(m^2)`` time, whatever ``B``.  The ratio ``C(a, B) / C(b, B)`` is read from a table of
``C(x, B)`` (a fixed ``B <= 64`` whose ``C(N, B)`` fits float64: the product formula; past
``_TABLE_MAX`` samples the tabulated DP computes those values where it reads them), or
is the product ``prod_{a < y <= b} (y - B) / y`` when ``b - a <= 8``, or
``exp(log((b-B)!/(a-B)!) - log(b!/a!))`` from a double-double table of ``log x!`` (any
``B``; beyond ``_TABLE_MAX`` samples, Stirling's series with the large terms paired).  A bucket
with fewer samples than ``B`` is one short batch: ``n w_j``.

With a token budget ``B`` follows the end ``j``; where it changes, each start's ``T`` is
recomputed by the same running sum started where the terms fall below ``2**-70`` (the
``x_k`` at which ``(x_k / n)**B`` does).  Those restarts, not the cells, would dominate
(``O(m)`` stretches of constant ``B`` for each of ``m`` starts), so a token budget's DP is
pruned (``_solve_pruned``), exactly:

1. *Bounds, restart-free.*  ``T`` only grows when the bucket's start moves down (more short
   samples: every ``P(max <= v)`` grows) and when ``B`` falls (fewer draws).  So the sums of
   the start at or below ``i`` that is a multiple of ``_BOUND_STRIDE``, under batch sizes
   lowered to rungs ``_RUNG`` apart (``_bound_table``: a restart per rung, not per end, and
   one row per ``_BOUND_STRIDE`` starts), bound ``T`` from above and every bucket's cost
   from below (``_lower_costs``), with a margin ``_SLACK`` far above the sums' rounding.
2. *Backwards over the bounds*: ``back[k, i]``, at most the cost of ``k`` buckets covering
   ``(i, m]``; the plan it picks, costed exactly, bounds each optimum from above.
3. *Forwards, exact*: a start is followed for its ``k``-th bucket only when the exact best
   ``k - 1`` buckets up to it plus ``back`` fit under an upper bound, and a bucket from it
   is costed exactly (lazily: ``_row_sums``) only when its bound fits too.  Every bucket of
   an optimal plan passes both tests, so the optimum and its path are the dense DP's, the
   same floats; on the bundled data at most 0.3 % of the buckets are costed exactly.

The time objective (``step_time``) has ``w`` in seconds and adds
``per_batch * ceil(n / B)`` to each bucket's cost; with a token budget and a working-set
term a sample weighs ``w + B w2`` in a bucket whose batches hold ``B``, so a second running
sum over the steps of ``w2`` goes beside ``T``, with the same ratios and restarts.

The DP ``D[k][j] = min_i D[k-1][i] + cost(i, j)`` runs with the costs: each start's row of
costs pushes into every later end, for every ``k`` at once, so the cost matrix is never stored
and one pass gives the optimum for every bucket count.  Ties go to the smallest start; no
monotone-argmin shortcut is assumed.  The work is arranged for the machine, not changed:
``_ROWS`` starts per pass, their cells up to the last of them pushed start by start (that
settles the later starts' ``D[k - 1]``), then the rest in tiles of ``_TILE`` ends, within which
the running sums of ``_GROUP`` starts advance side by side (independent chains, each with
exactly the arithmetic of a lone start) and the ``_GROUP`` rows are pushed into a tile of
each layer at once, branch-free, in ascending order of start.  Every cost and every
comparison is the one of the start-by-start DP, so the tables are bit for bit the same.
"""

from __future__ import annotations

import contextlib
import math
import threading

import numba
import numpy as np

from analysis._order_stats import stirling_series
from analysis.optimize._problem import _comb_computed, _Problem, _ratio_tables

# Ratios over at most this many samples are products (exact to a few ulps, no table read).
_PRODUCT_RATIO = 8
_INF = math.inf
# Starts whose rows of costs are computed and pushed into the DP together.
_GROUP = 4
# Starts per pass over the DP layers (in groups of _GROUP).
_ROWS = 32
# Ends per tile of those rows (the tile's costs, ratios and DP cells stay in cache).
_TILE = 1024
# Distinct lengths from which the tabulated DP runs on every thread (numba's thread count).
_THREADS_ABOVE = 20_000
# Distinct lengths from which a token budget's rows of costs (restarts) run on every thread.
_ROW_THREADS_ABOVE = 2_000
_THREADS_LOCK = threading.Lock()
# A token budget's DP from this many starts runs pruned (_solve_pruned): bounds on every
# bucket first, exact costs only where the bounds cannot rule a bucket out.
_PRUNE_ABOVE = 256
# The bounds' running sums: one row per this many starts, batch sizes within this factor
# share a restart, and this relative margin (far above the rounding of the sums) on each.
_BOUND_STRIDE = 32
_BOUND_BYTES = 64 << 20
_RUNG = 1.05
_SLACK = 1e-8


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _log_fact_compiled(n_max: int) -> tuple[np.ndarray, np.ndarray]:  # pragma: no cover - compiled
    hi = np.zeros(n_max + 1)
    lo = np.zeros(n_max + 1)
    s = 0.0
    c = 0.0
    for y in range(2, n_max + 1):
        v = math.log(y)
        t = s + v
        z = t - s
        c += (s - (t - z)) + (v - z)  # TwoSum: the rounding error of s + v
        s = t
        hi[y] = s
        lo[y] = c
    return hi, lo


# ``lgamma(x + 1) - (x log x - x + log(2 pi x) / 2)`` for ``x >= 16`` (the one definition)
_stirlerr = numba.njit(cache=True, nogil=True, error_model="numpy")(stirling_series)


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _log_fact_ratio(a: int, b: int, hi: np.ndarray, lo: np.ndarray) -> float:  # pragma: no cover - compiled
    """``log(b! / a!)`` for ``0 <= a <= b``: the double-double table, or Stirling's series
    (``x log1p(d/x) + d log b - d + log1p(d/x)/2`` plus the series remainders)."""
    if b < hi.size:
        return float((hi[b] - hi[a]) + (lo[b] - lo[a]))
    if a < 16:
        fb = float(b)
        lgb = fb * math.log(fb) - fb + 0.5 * math.log(2.0 * math.pi * fb) + _stirlerr(fb)
        return lgb - math.lgamma(a + 1.0)
    x = float(a)
    d = float(b - a)
    l1 = math.log1p(d / x)
    return x * l1 + d * math.log(float(b)) - d + 0.5 * l1 + _stirlerr(float(b)) - _stirlerr(x)


@numba.njit(cache=True, nogil=True, error_model="numpy", inline="always")
def _ratio(
    a: int, b: int, size: int, comb: np.ndarray, hi: np.ndarray, lo: np.ndarray
) -> float:  # pragma: no cover - compiled
    """``C(a, size) / C(b, size)`` for ``a <= b`` and ``b >= size`` (0 when ``a < size``):
    from the table of ``C(x, size)``, else ``prod_{a < y <= b} (y - size) / y`` when
    ``b - a`` is small, else from the table of ``log x!``."""
    if a < size:
        return 0.0
    if comb.size:
        return float(comb[a] / comb[b])
    if b - a <= _PRODUCT_RATIO:
        return _product_ratio(a, b, size)
    return math.exp(_log_fact_ratio(a - size, b - size, hi, lo) - _log_fact_ratio(a, b, hi, lo))


@numba.njit(cache=True, nogil=True, error_model="numpy", inline="always")
def _comb_value(x: int, size: int) -> float:  # pragma: no cover - compiled
    """``C(x, size)`` by the arithmetic of ``_problem._comb_table`` (bit for bit its entry):
    for more samples than that table holds, computed where it is read."""
    if x < size:
        return 0.0
    xf = float(x)
    out = xf
    for t in range(1, size):
        out *= (xf - t) / (t + 1)
    return out


@numba.njit(cache=True, nogil=True, error_model="numpy", inline="always")
def _comb_at(comb: np.ndarray, x: int, size: int) -> float:  # pragma: no cover - compiled
    """``C(x, size)``: the table's entry, or (an empty table) computed."""
    return float(comb[x]) if comb.size else _comb_value(x, size)


@numba.njit(cache=True, nogil=True, error_model="numpy", inline="always")
def _log_fact_pair(
    x: int, size: int, hi: np.ndarray, lo: np.ndarray
) -> tuple[float, float, float, float]:  # pragma: no cover - compiled
    """``log x!`` and ``log (x - size)!`` from the table (``x < hi.size``), as ``hi, lo`` each."""
    if x < size:
        return hi[x], lo[x], 0.0, 0.0
    return hi[x], lo[x], hi[x - size], lo[x - size]


@numba.njit(cache=True, nogil=True, error_model="numpy", inline="always")
def _product_ratio(a: int, b: int, size: int) -> float:  # pragma: no cover - compiled
    """``C(a, size) / C(b, size) = prod_{a < y <= b} (y - size) / y`` (``size <= a <= b``)."""
    num = 1.0
    den = 1.0
    for y in range(a + 1, b + 1):
        num *= y - size
        den *= y
    return num / den


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _restart(
    i: int,
    j: int,
    size: int,
    cum: np.ndarray,
    step: np.ndarray,
    step2: np.ndarray,
    hi: np.ndarray,
    lo: np.ndarray,
) -> tuple[float, float]:  # pragma: no cover - compiled
    """``T(i, j)`` for batches of ``size`` from the running sum started at the first ``k``
    whose ``x_k`` exceeds ``n 2**(-70/size)``: every term below it has
    ``C(x_k, B) / C(n, B) <= (x_k / n)**B <= 2**-70``, and they sum to at most that times
    ``w_j``.  The same sum over ``step2`` beside it (the same ratios)."""
    ci = cum[i]
    n = cum[j] - ci
    if n < size:
        return 0.0, 0.0
    cut = ci + n * 2.0 ** (-70.0 / size)
    k = i + 1 + np.searchsorted(cum[i + 1 : j], cut, side="right")  # first k with c_k > cut
    total = 0.0
    total2 = 0.0
    if n >= hi.size:  # beyond the table: Stirling's series
        for kk in range(k, j):
            ratio = _ratio(cum[kk] - ci, cum[kk + 1] - ci, size, hi[:0], hi, lo)
            total = (total + step[kk]) * ratio
            total2 = (total2 + step2[kk]) * ratio
        return total, total2
    # log C(a, B) - log C(b, B) from log x! at b and b - B, those at a carried from the last term
    a = cum[k] - ci
    a_hi, a_lo, s_hi, s_lo = _log_fact_pair(a, size, hi, lo)
    for kk in range(k, j):
        b = cum[kk + 1] - ci
        b_hi, b_lo, t_hi, t_lo = _log_fact_pair(b, size, hi, lo)
        if a < size:
            ratio = 0.0
        elif b - a <= _PRODUCT_RATIO:
            ratio = _product_ratio(a, b, size)
        else:
            ratio = math.exp(((t_hi - s_hi) + (t_lo - s_lo)) - ((b_hi - a_hi) + (b_lo - a_lo)))
        total = (total + step[kk]) * ratio
        total2 = (total2 + step2[kk]) * ratio
        a, a_hi, a_lo, s_hi, s_lo = b, b_hi, b_lo, t_hi, t_lo
    return total, total2


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _row_sums(
    i: int,
    cum: np.ndarray,
    weight: np.ndarray,
    step: np.ndarray,
    weight2: np.ndarray,
    step2: np.ndarray,
    size: np.ndarray,
    need: np.ndarray,
    token: bool,
    as_costs: bool,
    hi: np.ndarray,
    lo: np.ndarray,
    t_out: np.ndarray,
    t2_out: np.ndarray,
) -> None:  # pragma: no cover - compiled
    """For every ``j > i`` with ``need[j]`` and batches of ``size[j]`` (ratios from
    ``log x!``): ``T(i, j)`` and the second sum over ``step2`` into ``t_out[j]`` and
    ``t2_out[j]``, or with ``as_costs`` the bucket's objective ``n ((w - T) + B (w2 - T2))``
    (``n (w + B w2)`` below a full batch) into ``t_out[j]``, inf where not needed.

    The sums are lazy: a change of ``B`` (a token budget) only marks where the next restart
    starts, and the running sum is carried from the last end computed to the next one
    needed, so ends not needed cost nothing and a stretch of constant ``B`` with none needed
    costs no restart.  Each value is the one the dense walk (every end needed) gives, bit
    for bit: a restart at the first end of its stretch of constant ``B``, then one step per
    end, the same arithmetic in the same order."""
    m = cum.size - 1
    ci = cum[i]
    table = cum[m] - ci < hi.size
    b = size[i + 1]
    seg = i + 1  # the first end of the current stretch of constant B
    at = i + 1  # the sums below hold T(i, at) for batches of b
    t = 0.0
    t2 = 0.0
    b_hi = b_lo = s_hi = s_lo = 0.0  # log x_at! and log (x_at - B)!, when known
    known = False
    for j in range(i + 1, m + 1):
        if token and size[j] != b:  # B follows the end: T restarts where it changes
            b = size[j]
            seg = j
        if not need[j]:
            if as_costs:
                t_out[j] = _INF
            continue
        if seg > at:  # the sums held another B: restart at the stretch's first end
            t, t2 = _restart(i, seg, b, cum, step, step2, hi, lo)
            at = seg
            known = False
        while at < j:
            below = cum[at] - ci
            at += 1
            n = cum[at] - ci
            if n < b or below < b:
                t = 0.0
                t2 = 0.0
                known = False
                continue
            if n - below <= _PRODUCT_RATIO:
                ratio = _product_ratio(below, n, b)
                known = False
            elif table:
                if not known:
                    b_hi, b_lo, s_hi, s_lo = _log_fact_pair(below, b, hi, lo)
                n_hi, n_lo, t_hi, t_lo = _log_fact_pair(n, b, hi, lo)
                ratio = math.exp(((t_hi - s_hi) + (t_lo - s_lo)) - ((n_hi - b_hi) + (n_lo - b_lo)))
                b_hi, b_lo, s_hi, s_lo = n_hi, n_lo, t_hi, t_lo
                known = True
            else:
                ratio = _ratio(below, n, b, hi[:0], hi, lo)
            t = (t + step[at - 1]) * ratio
            t2 = (t2 + step2[at - 1]) * ratio
        if as_costs:
            n = cum[j] - ci
            w = weight[j]
            w2 = weight2[j]
            t_out[j] = n * (w + b * w2) if n < b else n * ((w - t) + b * (w2 - t2))
        else:
            t_out[j] = t
            t2_out[j] = t2


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _row_costs(
    i: int,
    cum: np.ndarray,
    weight: np.ndarray,
    step: np.ndarray,
    weight2: np.ndarray,
    step2: np.ndarray,
    size: np.ndarray,
    is_end: np.ndarray,
    per_batch: float,
    token: bool,
    comb: np.ndarray,
    hi: np.ndarray,
    lo: np.ndarray,
    out: np.ndarray,
) -> None:  # pragma: no cover - compiled
    """``out[j]`` = objective of bucket ``(i, j]`` for every ``j > i`` (inf where ``j`` may
    not end a bucket).  A bucket ending
    at ``j`` weighs its samples ``weight + B * weight2`` (``weight2`` is 0 but for a token
    budget's time objective with a working-set term): the second running sum ``t2`` follows
    ``step2`` with the same ratios."""
    m = cum.size - 1
    ci = cum[i]
    if not token and size[i + 1] > cum[m] - ci:  # a fixed B above every bucket: one short batch
        for j in range(i + 1, m + 1):
            out[j] = (cum[j] - ci) * (weight[j] + size[j] * weight2[j]) if is_end[j] else _INF
    elif not comb.size:  # log x! (a token budget, or a B whose C(N, B) overflows float64)
        _row_sums(i, cum, weight, step, weight2, step2, size, is_end, token, True, hi, lo, out, out)
    else:  # one B, C(x, B) tabulated (the hot loop: one table read per cell)
        b = size[i + 1]
        t = 0.0
        out[i + 1] = (cum[i + 1] - ci) * weight[i + 1] if is_end[i + 1] else _INF  # one length
        below = comb[cum[i + 1] - ci]  # C(x_{j-1}, B)
        for j in range(i + 2, m + 1):
            n = cum[j] - ci
            here = comb[n]
            t = (t + step[j - 1]) * (below / here) if n >= b else 0.0
            below = here
            w = weight[j]
            cost = n * w if n < b else n * (w - t)
            out[j] = cost if is_end[j] else _INF
    if per_batch != 0.0:  # the time objective: per_batch for each of ceil(n / B) batches
        for j in range(i + 1, m + 1):
            n = cum[j] - ci
            out[j] += per_batch * ((n + size[j] - 1) // size[j])


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _comb_heads(
    starts: np.ndarray,
    cum: np.ndarray,
    weight: np.ndarray,
    step: np.ndarray,
    size: int,
    is_end: np.ndarray,
    comb: np.ndarray,
    out: np.ndarray,
    t: np.ndarray,
) -> None:  # pragma: no cover - compiled
    """``out[a, j]`` = padding of bucket ``(starts[a], j]`` for ``j`` up to the last start + 1
    and one tabulated ``B``, start by start (the arithmetic of ``_row_costs``); ``t[a]`` is the
    running sum there, where ``_comb_tile`` goes on."""
    last = starts[starts.size - 1]
    for a in range(starts.size):
        i = starts[a]
        ci = cum[i]
        out[a, i + 1] = (cum[i + 1] - ci) * weight[i + 1] if is_end[i + 1] else _INF
        below = _comb_at(comb, cum[i + 1] - ci, size)
        ta = 0.0
        for j in range(i + 2, last + 2):
            n = cum[j] - ci
            here = _comb_at(comb, n, size)
            ta = (ta + step[j - 1]) * (below / here) if n >= size else 0.0
            below = here
            w = weight[j]
            cost = n * w if n < size else n * (w - ta)
            out[a, j] = cost if is_end[j] else _INF
        t[a] = ta


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _comb_tile(
    starts: np.ndarray,
    j0: int,
    j1: int,
    cum: np.ndarray,
    weight: np.ndarray,
    step: np.ndarray,
    size: int,
    is_end: np.ndarray,
    comb: np.ndarray,
    out: np.ndarray,
    t: np.ndarray,
    ratio: np.ndarray,
    table: np.ndarray,
) -> None:  # pragma: no cover - compiled
    """``out[a, j]`` for ``j0 <= j < j1`` (after the last start + 1) and the ``_GROUP`` starts,
    the running sums ``t`` carried in and out: first each start's ratios
    ``C(x_{j-1}, B) / C(x_j, B)`` (table reads, or the same values computed where the
    table would be too long, then divisions with nothing carried: a vectorised loop), then
    the ``_GROUP`` sums side by side (independent chains, so the cell does not wait on the
    latency of the one before), with the arithmetic of ``_row_costs``."""
    n_j = j1 - j0
    if n_j <= 0:
        return
    for a in range(_GROUP):
        ci = cum[starts[a]]
        c = cum[j0 - 1 : j1]
        tab = table[: n_j + 1]
        if comb.size:
            for j in range(n_j + 1):
                tab[j] = comb[c[j] - ci]
        else:  # more samples than the table holds: _comb_value, factor by factor (vectorised)
            for j in range(n_j + 1):
                tab[j] = float(c[j] - ci)
            for f in range(1, size):
                for j in range(n_j + 1):
                    tab[j] *= (float(c[j] - ci) - f) / (f + 1)
            for j in range(n_j + 1):
                tab[j] = tab[j] if c[j] - ci >= size else 0.0
        r = ratio[a, :n_j]
        for j in range(n_j):
            r[j] = tab[j] / tab[j + 1]
    # the running sums, side by side, into ``ratio`` (a chain per start: the loop runs at the
    # throughput of the arithmetic, not at the latency of one sum)
    c0, c1, c2, c3 = cum[starts[0]], cum[starts[1]], cum[starts[2]], cum[starts[3]]
    t0, t1, t2, t3 = t[0], t[1], t[2], t[3]
    r0, r1, r2, r3 = ratio[0, :n_j], ratio[1, :n_j], ratio[2, :n_j], ratio[3, :n_j]
    cj_, st_ = cum[j0:j1], step[j0 - 1 : j1 - 1]
    if cj_[0] - c3 >= size:  # every bucket holds a full batch (c3 is the largest start count)
        for j in range(n_j):
            st = st_[j]
            t0 = (t0 + st) * r0[j]
            t1 = (t1 + st) * r1[j]
            t2 = (t2 + st) * r2[j]
            t3 = (t3 + st) * r3[j]
            r0[j], r1[j], r2[j], r3[j] = t0, t1, t2, t3
    else:
        for j in range(n_j):
            cj = cj_[j]
            st = st_[j]
            t0 = (t0 + st) * r0[j] if cj - c0 >= size else 0.0
            t1 = (t1 + st) * r1[j] if cj - c1 >= size else 0.0
            t2 = (t2 + st) * r2[j] if cj - c2 >= size else 0.0
            t3 = (t3 + st) * r3[j] if cj - c3 >= size else 0.0
            r0[j], r1[j], r2[j], r3[j] = t0, t1, t2, t3
    # the costs n (w - T), n w below a full batch (vectorised)
    w_, e_ = weight[j0:j1], is_end[j0:j1]
    for a in range(_GROUP):
        ci = cum[starts[a]]
        ta = ratio[a, :n_j]
        o = out[a, j0:j1]
        for j in range(n_j):
            n = cj_[j] - ci
            w = w_[j]
            o[j] = (n * w if n < size else n * (w - ta[j])) if e_[j] else _INF
    t[0], t[1], t[2], t[3] = t0, t1, t2, t3


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
def _push(
    row: np.ndarray, at: np.ndarray, costs: np.ndarray, p: float, start: int
) -> None:  # pragma: no cover - compiled
    """``row[j] = min(row[j], p + costs[j])`` (strict ``<``), ``at[j] = start`` where it won."""
    for j in range(row.size):
        v = p + costs[j]
        better = v < row[j]
        at[j] = start if better else at[j]
        row[j] = v if better else row[j]


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _layers(n_buckets: int, m: int) -> tuple[np.ndarray, np.ndarray]:  # pragma: no cover - compiled
    """The DP's empty tables: ``best[k, j]`` (inf but ``best[0, 0] = 0``) and ``arg[k, j]``."""
    best = np.full((n_buckets + 1, m + 1), _INF)
    arg = np.zeros((n_buckets + 1, m + 1), np.int64)
    best[0, 0] = 0.0
    return best, arg


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _group(rows: np.ndarray, g0: int, starts: np.ndarray) -> tuple[int, int]:  # pragma: no cover - compiled
    """The starts ``rows[g0 : g0 + _ROWS]`` into ``starts``, the last repeated up to a multiple
    of ``_GROUP`` (its copies give the same costs, which never win a strict comparison);
    returns how many are real and how many were written."""
    g = min(_ROWS, rows.size - g0)
    n_sub = (g + _GROUP - 1) // _GROUP * _GROUP
    for a in range(n_sub):
        starts[a] = rows[g0 + min(a, g - 1)]
    return g, n_sub


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _push_heads(
    best: np.ndarray, arg: np.ndarray, starts: np.ndarray, g: int, costs: np.ndarray
) -> None:  # pragma: no cover - compiled
    """The cells up to the last start, start by start: they settle the later starts'
    ``D[k - 1]``.  The top layer is only read at the last end, after every start."""
    last = starts[g - 1]
    for a in range(g):
        i = starts[a]
        for k in range(1, best.shape[0] - 1):
            if best[k - 1, i] != _INF:
                cells = slice(i + 1, last + 1)
                _push(best[k, cells], arg[k, cells], costs[a, cells], best[k - 1, i], i)


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _push_tile(
    best: np.ndarray, arg: np.ndarray, starts: np.ndarray, n_sub: int, costs: np.ndarray, j0: int, j1: int
) -> None:  # pragma: no cover - compiled
    """The cells ``j0 <= j < j1`` (after the last start) of every layer, ``_GROUP`` starts at a
    time in ascending order, so ties keep the smallest start; the top layer only at the last
    end."""
    m = best.shape[1] - 1
    n_buckets = best.shape[0] - 1
    for k in range(1, n_buckets + 1):
        lo_j = max(j0, m) if k == n_buckets else j0
        if lo_j >= j1:
            continue
        for sub in range(0, n_sub, _GROUP):
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
def _solve_table(
    cum: np.ndarray,
    weight: np.ndarray,
    step: np.ndarray,
    size: int,
    rows: np.ndarray,
    is_end: np.ndarray,
    n_buckets: int,
    comb: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:  # pragma: no cover - compiled
    """The DP for one tabulated ``B`` and the padding objective: ``_ROWS`` starts at a time,
    their costs and DP cells tile by tile (a tile of the layers stays in cache for them all)."""
    m = cum.size - 1
    best, arg = _layers(n_buckets, m)
    costs = np.empty((_ROWS, m + 1))
    t = np.zeros(_ROWS)
    ratio = np.empty((_GROUP, _TILE))
    table = np.empty(_TILE + 1)
    starts = np.empty(_ROWS, np.int64)
    for g0 in range(0, rows.size, _ROWS):
        g, n_sub = _group(rows, g0, starts)
        last = starts[g - 1]
        _comb_heads(starts[:n_sub], cum, weight, step, size, is_end, comb, costs, t)
        _push_heads(best, arg, starts, g, costs)
        for j0 in range(last + 1, m + 1, _TILE):
            j1 = min(j0 + _TILE, m + 1)
            for sub in range(0, n_sub, _GROUP):
                _comb_tile(
                    starts[sub : sub + _GROUP],
                    max(j0, last + 2),
                    j1,
                    cum,
                    weight,
                    step,
                    size,
                    is_end,
                    comb,
                    costs[sub : sub + _GROUP],
                    t[sub : sub + _GROUP],
                    ratio,
                    table,
                )
            _push_tile(best, arg, starts, n_sub, costs, j0, j1)
    return best, arg


@numba.njit(cache=True, nogil=True, error_model="numpy", parallel=True)
def _solve_table_threads(
    cum: np.ndarray,
    weight: np.ndarray,
    step: np.ndarray,
    size: int,
    rows: np.ndarray,
    is_end: np.ndarray,
    n_buckets: int,
    comb: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:  # pragma: no cover - compiled
    """``_solve_table`` on every thread, for long rows (many distinct lengths): a pass's
    costs by groups of ``_GROUP`` starts in parallel (each group's sums run along the whole
    row), then its DP cells by tiles in parallel (a tile's cells only read ``D[k - 1]`` at
    the pass's starts, which are settled).  The same arithmetic and order of comparison in
    every cell as ``_solve_table``."""
    m = cum.size - 1
    best, arg = _layers(n_buckets, m)
    n_groups = _ROWS // _GROUP
    costs = np.empty((_ROWS, m + 1))
    t = np.zeros(_ROWS)
    ratio = np.empty((n_groups, _GROUP, _TILE))
    table = np.empty((n_groups, _TILE + 1))
    starts = np.empty(_ROWS, np.int64)
    for g0 in range(0, rows.size, _ROWS):
        g, n_sub = _group(rows, g0, starts)
        last = starts[g - 1]
        _comb_heads(starts[:n_sub], cum, weight, step, size, is_end, comb, costs, t)
        _push_heads(best, arg, starts, g, costs)
        for q in numba.prange(n_sub // _GROUP):
            sub = q * _GROUP
            for j0 in range(last + 1, m + 1, _TILE):
                _comb_tile(
                    starts[sub : sub + _GROUP],
                    max(j0, last + 2),
                    min(j0 + _TILE, m + 1),
                    cum,
                    weight,
                    step,
                    size,
                    is_end,
                    comb,
                    costs[sub : sub + _GROUP],
                    t[sub : sub + _GROUP],
                    ratio[q],
                    table[q],
                )
        n_tiles = (m - last + _TILE - 1) // _TILE
        for q in numba.prange(n_tiles):
            j0 = last + 1 + q * _TILE
            _push_tile(best, arg, starts, n_sub, costs, j0, min(j0 + _TILE, m + 1))
    return best, arg


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _push_rows(
    best: np.ndarray, arg: np.ndarray, starts: np.ndarray, g: int, n_sub: int, costs: np.ndarray
) -> None:  # pragma: no cover - compiled
    """A pass's ``g`` rows of costs (the last copied up to ``n_sub``) pushed into the layers
    as ``_solve_table`` pushes them: the heads start by start, then the tiles."""
    m = best.shape[1] - 1
    for a in range(g, n_sub):
        for j in range(m + 1):  # (an element loop: array assignment compiles slowly)
            costs[a, j] = costs[g - 1, j]
    _push_heads(best, arg, starts, g, costs)
    for j0 in range(starts[g - 1] + 1, m + 1, _TILE):
        _push_tile(best, arg, starts, n_sub, costs, j0, min(j0 + _TILE, m + 1))


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _solve_rows(
    cum: np.ndarray,
    weight: np.ndarray,
    step: np.ndarray,
    weight2: np.ndarray,
    step2: np.ndarray,
    size: np.ndarray,
    rows: np.ndarray,
    is_end: np.ndarray,
    n_buckets: int,
    per_batch: float,
    token: bool,
    comb: np.ndarray,
    hi: np.ndarray,
    lo: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:  # pragma: no cover - compiled
    """The DP for every other rule and objective: each start's row of costs by
    ``_row_costs``, pushed into the layers as in ``_solve_table``."""
    m = cum.size - 1
    best, arg = _layers(n_buckets, m)
    costs = np.empty((_ROWS, m + 1))
    starts = np.empty(_ROWS, np.int64)
    for g0 in range(0, rows.size, _ROWS):
        g, n_sub = _group(rows, g0, starts)
        for a in range(g):
            _row_costs(
                starts[a],
                cum,
                weight,
                step,
                weight2,
                step2,
                size,
                is_end,
                per_batch,
                token,
                comb,
                hi,
                lo,
                costs[a],
            )
        _push_rows(best, arg, starts, g, n_sub, costs)
    return best, arg


@numba.njit(cache=True, nogil=True, error_model="numpy", parallel=True)
def _solve_rows_threads(
    cum: np.ndarray,
    weight: np.ndarray,
    step: np.ndarray,
    weight2: np.ndarray,
    step2: np.ndarray,
    size: np.ndarray,
    rows: np.ndarray,
    is_end: np.ndarray,
    n_buckets: int,
    per_batch: float,
    token: bool,
    comb: np.ndarray,
    hi: np.ndarray,
    lo: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:  # pragma: no cover - compiled
    """``_solve_rows`` with a pass's rows of costs computed on every thread (a token
    budget's restarts make the rows, not the pushes, the work); the pushes as there, so
    the tables are bit for bit the same."""
    m = cum.size - 1
    best, arg = _layers(n_buckets, m)
    costs = np.empty((_ROWS, m + 1))
    starts = np.empty(_ROWS, np.int64)
    for g0 in range(0, rows.size, _ROWS):
        g, n_sub = _group(rows, g0, starts)
        for a in numba.prange(g):
            _row_costs(
                starts[a],
                cum,
                weight,
                step,
                weight2,
                step2,
                size,
                is_end,
                per_batch,
                token,
                comb,
                hi,
                lo,
                costs[a],
            )
        _push_rows(best, arg, starts, g, n_sub, costs)
    return best, arg


# ------------------------------------------------------------------ token budgets: pruned
@numba.njit(cache=True, nogil=True, error_model="numpy")
def _lower_costs(
    i: int,
    count: np.ndarray,
    weight: np.ndarray,
    weight2: np.ndarray,
    batch: np.ndarray,
    is_end: np.ndarray,
    per_batch: float,
    t_up: np.ndarray,
    t2_up: np.ndarray,
    stride: int,
    out: np.ndarray,
) -> None:  # pragma: no cover - compiled
    """``out[j]``: a lower bound on the objective of bucket ``(i, j]`` for every ``j > i``
    (inf where ``j`` may not end a bucket), from the row of ``_bound_table``'s sums at or
    below ``i`` (``t_up[i // stride][j] >= T(i, j)``, and ``t2_up``, empty without a second
    sum): the objective is decreasing in ``T``; below a full batch it is the exact one.
    ``count`` and ``batch`` are ``cum`` and ``size`` as floats (exact below 2**53), so the
    loop is branch-free and vectorised; ``ceil`` of a rounded quotient is at most the
    exact one."""
    m = count.size - 1
    ci = count[i]
    w_first = weight[i + 1]
    w2_first = weight2[i + 1]
    t_row = t_up[i // stride]
    if t2_up.shape[0] == 0:  # no working-set term: one sum
        for j in range(i + 1, m + 1):
            n = count[j] - ci
            w = weight[j]
            # T(i, j) <= w_j - w_{i+1}: the longest sample drawn is at least the shortest
            tu = min(t_row[j], w - w_first) + _SLACK * w
            c = n * w if n < batch[j] else n * (w - tu)
            out[j] = c if is_end[j] else _INF
    else:
        t2_row = t2_up[i // stride]
        for j in range(i + 1, m + 1):
            n = count[j] - ci
            b = batch[j]
            w = weight[j]
            w2 = weight2[j]
            tu = min(t_row[j], w - w_first) + _SLACK * w
            tu2 = min(t2_row[j], w2 - w2_first) + _SLACK * w2
            c = n * (w + b * w2) if n < b else n * ((w - tu) + b * (w2 - tu2))
            out[j] = c if is_end[j] else _INF
    if per_batch != 0.0:
        for j in range(i + 1, m + 1):
            out[j] += per_batch * math.ceil((count[j] - ci) / batch[j])


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _least_sum(a: np.ndarray, b: np.ndarray) -> float:  # pragma: no cover - compiled
    """``min(a + b)`` (inf when empty), four lanes of selects: no branch to mispredict."""
    m0 = m1 = m2 = m3 = _INF
    n = a.size // 4 * 4
    for j in range(0, n, 4):
        v0 = a[j] + b[j]
        v1 = a[j + 1] + b[j + 1]
        v2 = a[j + 2] + b[j + 2]
        v3 = a[j + 3] + b[j + 3]
        m0 = v0 if v0 < m0 else m0
        m1 = v1 if v1 < m1 else m1
        m2 = v2 if v2 < m2 else m2
        m3 = v3 if v3 < m3 else m3
    for j in range(n, a.size):
        v = a[j] + b[j]
        m0 = v if v < m0 else m0
    return min(min(m0, m1), min(m2, m3))


@numba.njit(cache=True, nogil=True, error_model="numpy", parallel=True)
def _bound_table(
    cum: np.ndarray,
    step: np.ndarray,
    step2: np.ndarray,
    rung: np.ndarray,
    stride: int,
    two: bool,
    hi: np.ndarray,
    lo: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:  # pragma: no cover - compiled
    """``T(g, j)`` (and the second sum, if ``two``) for every start ``g`` that is a multiple
    of ``stride`` and every ``j > g``, for batches of ``rung[j]``, the rows on every thread:
    with ``rung <= size``, at least the sums of any start at or above ``g`` (the
    module docstring)."""
    m = cum.size - 1
    n_rows = (m - 1) // stride + 1
    every = np.ones(m + 1, np.bool_)
    t_up = np.zeros((n_rows, m + 1))
    t2_up = np.zeros((n_rows if two else 0, m + 1))
    for r in numba.prange(n_rows):
        second = t2_up[r] if two else np.empty(m + 1)
        _row_sums(
            r * stride, cum, step, step, step2, step2, rung, every, True, False, hi, lo, t_up[r], second
        )
    return t_up, t2_up


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _solve_pruned(
    cum: np.ndarray,
    weight: np.ndarray,
    step: np.ndarray,
    weight2: np.ndarray,
    step2: np.ndarray,
    size: np.ndarray,
    t_up: np.ndarray,
    t2_up: np.ndarray,
    stride: int,
    rows: np.ndarray,
    is_end: np.ndarray,
    n_buckets: int,
    per_batch: float,
    hi: np.ndarray,
    lo: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:  # pragma: no cover - compiled
    """The DP of a token budget with the exact bucket costs only where bounds cannot rule a
    bucket out of every optimal plan (the module docstring): the optimum and its path for every
    bucket count are those of ``_solve_rows``, bit for bit."""
    m = cum.size - 1
    count = cum.astype(np.float64)
    batch = size.astype(np.float64)
    low = np.empty(m + 1)
    # 1. backwards over the lower bounds: back[k, i] <= the least objective of k buckets
    #    covering (i, m]
    back = np.full((n_buckets + 1, m + 1), _INF)
    back[0, m] = 0.0
    for r in range(rows.size - 1, -1, -1):
        i = rows[r]
        _lower_costs(i, count, weight, weight2, batch, is_end, per_batch, t_up, t2_up, stride, low)
        for k in range(1, n_buckets + 1):
            back[k, i] = _least_sum(low[i + 1 :], back[k - 1, i + 1 :])
    # 2. an upper bound for each bucket count: the exact objective of the plan the bounds chose
    costs = np.empty(m + 1)
    one = np.zeros(m + 1, np.bool_)
    upper = np.full(n_buckets + 1, _INF)
    for k in range(1, n_buckets + 1):
        if back[k, 0] == _INF:
            continue
        total = 0.0
        i = 0
        for layer in range(k, 0, -1):  # the end of a first bucket that gives back[layer, i]
            _lower_costs(i, count, weight, weight2, batch, is_end, per_batch, t_up, t2_up, stride, low)
            j = i + 1
            while j < m and low[j] + back[layer - 1, j] != back[layer, i]:  # (the same sums)
                j += 1
            one[j] = True
            _row_costs(
                i, cum, weight, step, weight2, step2, size, one, per_batch, True, hi[:0], hi, lo, costs
            )
            one[j] = False
            total += costs[j]
            i = j
        upper[k] = total * (1.0 + _SLACK)
    # reach[k, j]: the most a path may spend on its first k buckets up to j and still be optimal
    # for some bucket count (its rest costs at least back)
    reach = np.full((n_buckets + 1, m + 1), -_INF)
    for k in range(1, n_buckets + 1):
        for total_k in range(k, n_buckets + 1):
            if upper[total_k] < _INF:
                for j in range(m + 1):
                    reach[k, j] = max(reach[k, j], upper[total_k] - back[total_k - k, j])
    # 3. forwards, exact costs where a bucket may be on an optimal plan: a start is live for
    #    its k-th bucket when the best k - 1 buckets up to it plus a bound on the rest stay
    #    within an upper bound, and a bucket from it where that plus its own bound does
    best, arg = _layers(n_buckets, m)
    need = np.zeros(m + 1, np.bool_)
    room = np.empty(m + 1)
    live = np.zeros(n_buckets + 1, np.bool_)
    for r in range(rows.size):
        i = rows[r]
        any_live = False
        for k in range(1, n_buckets + 1):
            a = best[k - 1, i]
            live[k] = False
            for total_k in range(k, n_buckets + 1):
                live[k] = live[k] or (a < _INF and a + back[total_k - k + 1, i] <= upper[total_k])
            any_live = any_live or live[k]
        if not any_live:
            continue
        for j in range(i + 1, m + 1):
            room[j] = -_INF
        for k in range(1, n_buckets + 1):
            if live[k]:
                a = best[k - 1, i]
                for j in range(i + 1, m + 1):
                    room[j] = max(room[j], reach[k, j] - a)
        _lower_costs(i, count, weight, weight2, batch, is_end, per_batch, t_up, t2_up, stride, low)
        for j in range(i + 1, m + 1):
            need[j] = low[j] <= room[j]
        _row_costs(i, cum, weight, step, weight2, step2, size, need, per_batch, True, hi[:0], hi, lo, costs)
        for k in range(1, n_buckets + 1):
            if live[k]:
                _push(best[k, i + 1 :], arg[k, i + 1 :], costs[i + 1 :], best[k - 1, i], i)
    return best, arg


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _rungs(size: np.ndarray) -> np.ndarray:  # pragma: no cover - compiled
    """``size`` (non-increasing from index 1) lowered to the last of each run of ends whose
    batch sizes stay within a factor ``_RUNG`` of the run's first: at most ``size``, and
    changing ``log(B_max / B_min) / log(_RUNG)`` times, not at every end."""
    out = size.copy()
    m = size.size - 1
    j = 1
    while j <= m:
        end = j
        while end < m and size[end + 1] * _RUNG >= size[j]:
            end += 1
        for t in range(j, end + 1):
            out[t] = size[end]
        j = end + 1
    return out


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _costs_compiled(
    cum: np.ndarray,
    weight: np.ndarray,
    step: np.ndarray,
    weight2: np.ndarray,
    step2: np.ndarray,
    size: np.ndarray,
    points: np.ndarray,
    per_batch: float,
    token: bool,
    comb: np.ndarray,
    hi: np.ndarray,
    lo: np.ndarray,
) -> np.ndarray:  # pragma: no cover - compiled
    m = cum.size - 1
    p = points.size
    is_end = np.zeros(m + 1, np.bool_)
    for a in range(p):
        is_end[points[a]] = True
    costs = np.empty(m + 1)
    out = np.full((p, p), _INF)
    for a in range(p - 1):
        _row_costs(
            points[a], cum, weight, step, weight2, step2, size, is_end, per_batch, token, comb, hi, lo, costs
        )
        for c in range(a + 1, p):
            out[a, c] = costs[points[c]]
    return out


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _cell_dp_compiled(
    cum: np.ndarray,
    weight: np.ndarray,
    step: np.ndarray,
    weight2: np.ndarray,
    step2: np.ndarray,
    size: np.ndarray,
    points: np.ndarray,
    last_start: np.ndarray,
    is_end: np.ndarray,
    n_buckets: int,
    per_batch: float,
    token: bool,
    comb: np.ndarray,
    hi: np.ndarray,
    lo: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:  # pragma: no cover - compiled
    """A lower bound on the optimum by a DP over cells ``[points[a], points[a + 1])`` (the
    last cell is the end ``m`` alone), where a bucket's cost depends only on the cells of
    its start and end.

    The fact used: adding a sample no longer than any of a bucket's own raises its objective
    ``n E[g(max of B)]`` by at least its ``g`` (the rise is ``B E_{B-1} - (B-1) E_B``, at
    least ``g`` of the old shortest, because the chance that ``B`` draws hit the samples
    above a level is concave in ``B``; ``B`` is the end's, so this holds for a token budget
    too, and the per-batch seconds of the time objective only add).  So a bucket ``(i, j]``
    with ``i`` in cell ``a`` (last possible start ``r_a``) and ``j`` in cell ``b`` costs at
    least ``cost(r_a, j) + U(i, r_a)``, ``U`` the ``g``-mass of the samples between.  Charging
    the mass ``U(j, r_b)`` of the next bucket's bottom to the bucket that ends at ``j``,
    ``L(a, b) = min_j cost(r_a, j) + U(j, r_b)`` over the allowed ends ``j`` of
    cell ``b`` (the first bucket also gets ``U(0, r_0)``); a bucket inside one cell is
    already charged (cost 0 here).  ``D[k, b]`` is then at most ``k`` buckets' objective up
    to an end in cell ``b`` plus the mass left in the cell, and ``D[k, -1] <= OPT[k]``.  Where
    every cell on its path holds one possible start, the path is a plan and ``D`` its
    objective, added in the same order as the exact DP adds it."""
    m = cum.size - 1
    p = points.size
    mass = np.zeros(m + 1)  # U(0, t)
    for t in range(1, m + 1):
        mass[t] = mass[t - 1] + (cum[t] - cum[t - 1]) * weight[t]
    best = np.full((n_buckets + 1, p), _INF)
    arg = np.zeros((n_buckets + 1, p), np.int64)
    best[0, 0] = mass[last_start[0]] if last_start[0] >= 0 else 0.0
    costs = np.empty(m + 1)
    for a in range(p - 1):
        inner = False  # an allowed end after the cell's first index: a bucket fits inside
        for j in range(points[a] + 1, points[a + 1]):
            inner = inner or is_end[j]
        live = False
        for k in range(1, n_buckets + 1):
            if inner and best[k - 1, a] < best[k, a]:
                best[k, a] = best[k - 1, a]
                arg[k, a] = a
            live = live or best[k - 1, a] < _INF
        if last_start[a] < 0 or not live:
            continue
        _row_costs(
            last_start[a],
            cum,
            weight,
            step,
            weight2,
            step2,
            size,
            is_end,
            per_batch,
            token,
            comb,
            hi,
            lo,
            costs,
        )
        for b in range(a + 1, p):
            least = _INF
            if b + 1 < p:
                rest = mass[last_start[b]] if last_start[b] >= 0 else 0.0
                for j in range(points[b], points[b + 1]):
                    if costs[j] < _INF:
                        least = min(least, costs[j] + (rest - mass[j]))
            else:
                least = costs[m]
            for k in range(1, n_buckets + 1):
                v = best[k - 1, a] + least
                if v < best[k, b]:
                    best[k, b] = v
                    arg[k, b] = a
    return best, arg


def _cell_dp(prob: _Problem, points: np.ndarray, n_buckets: int) -> tuple[np.ndarray, np.ndarray]:
    """``_cell_dp_compiled`` for ``prob``: ``points`` ascending from 0 to ``m``; the possible
    starts are 0 and every allowed end but the last."""
    points = np.asarray(points, np.int64)
    is_end = np.zeros(prob.m + 1, np.bool_)
    is_end[prob.ends] = True
    starts = np.r_[0, prob.ends[:-1]]
    # the last start of each cell: the largest start below the next cell's first index
    at = np.searchsorted(starts, points[1:], side="left") - 1
    last_start = np.where(at >= 0, starts[np.maximum(at, 0)], -1)
    last_start = np.where(last_start >= points[:-1], last_start, -1)
    comb, hi, lo = _ratio_tables(prob)
    return _cell_dp_compiled(
        prob.cum,
        prob.weight,
        prob.step,
        prob.weight2,
        prob.step2,
        prob.size,
        points,
        last_start.astype(np.int64),
        is_end,
        n_buckets,
        float(prob.per_batch),
        prob.rule.batch_size is None,
        comb,
        hi,
        lo,
    )


def _solve_token_pruned(
    prob: _Problem, n_buckets: int, rows: np.ndarray, is_end: np.ndarray, hi: np.ndarray, lo: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """``_solve_pruned`` for ``prob`` (a token budget): the table of bounds' sums on every
    thread, its rows ``_BOUND_STRIDE`` starts apart, or further where the table would pass
    ``_BOUND_BYTES``."""
    m = prob.m
    two = bool(prob.weight2.any())
    per_row = (m + 1) * 8 * (2 if two else 1)
    stride = max(_BOUND_STRIDE, -(-m * per_row // _BOUND_BYTES))
    with _THREADS_LOCK if numba.get_num_threads() > 1 else contextlib.nullcontext():  # (see _solve)
        t_up, t2_up = _bound_table(prob.cum, prob.step, prob.step2, _rungs(prob.size), stride, two, hi, lo)
    return _solve_pruned(
        prob.cum,
        prob.weight,
        prob.step,
        prob.weight2,
        prob.step2,
        prob.size,
        t_up,
        t2_up,
        stride,
        rows,
        is_end,
        n_buckets,
        float(prob.per_batch),
        hi,
        lo,
    )


def _solve(
    prob: _Problem, n_buckets: int, ends: np.ndarray, dense: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """``D[k, j]``: least objective of ``k`` buckets covering lengths ``1..j`` with every
    bucket ending in ``ends``; ``A[k, j]``: the start of the last bucket (for backtracking).

    A token budget from ``_PRUNE_ABOVE`` starts runs pruned unless ``dense``: then ``D[k, m]``
    and the path back from it are exact (the dense DP's, bit for bit) for every ``k``, and
    the other cells are at least the dense DP's (only optimal plans are followed)."""
    m = prob.m
    is_end = np.zeros(m + 1, np.bool_)
    is_end[ends] = True
    is_row = np.zeros(m + 1, np.bool_)
    is_row[0] = True
    is_row[ends[:-1]] = True
    # every start but 0 is an allowed end, so it is reached by 1..n_buckets - 1 buckets
    rows = np.flatnonzero(is_row) if n_buckets > 1 else np.zeros(1, np.int64)
    computed = prob.per_batch == 0.0 and _comb_computed(prob)  # no table of any kind needed
    comb, hi, lo = (np.zeros(0),) * 3 if computed else _ratio_tables(prob)
    if computed or (comb.size and prob.per_batch == 0.0):
        args = (prob.cum, prob.weight, prob.step, int(prob.size[0]), rows, is_end, n_buckets, comb)
        if m >= _THREADS_ABOVE and numba.get_num_threads() > 1:
            # numba's default (workqueue) threading layer aborts the process when two Python
            # threads enter parallel code at once (the explorer optimises in the background)
            with _THREADS_LOCK:
                return _solve_table_threads(*args)
        return _solve_table(*args)
    token = prob.rule.batch_size is None
    if token and not dense and rows.size >= _PRUNE_ABOVE:
        return _solve_token_pruned(prob, n_buckets, rows, is_end, hi, lo)
    solver = _solve_rows
    if token and m >= _ROW_THREADS_ABOVE and numba.get_num_threads() > 1:
        solver = _solve_rows_threads
    with _THREADS_LOCK if solver is _solve_rows_threads else contextlib.nullcontext():  # (see above)
        return solver(
            prob.cum,
            prob.weight,
            prob.step,
            prob.weight2,
            prob.step2,
            prob.size,
            rows,
            is_end,
            n_buckets,
            float(prob.per_batch),
            token,
            comb,
            hi,
            lo,
        )


def _backtrack(arg: np.ndarray, k: int, m: int) -> list[int]:
    """Bucket ends (ascending, last = m) of the optimum with ``k`` buckets."""
    out, j = [], m
    for layer in range(k, 0, -1):
        out.append(j)
        j = int(arg[layer, j])
    return out[::-1]


def _cost_matrix(prob: _Problem, points: np.ndarray) -> np.ndarray:
    """Dense ``M[a, b]`` = objective of bucket ``(points[a], points[b]]`` (inf when a >= b)."""
    comb, hi, lo = _ratio_tables(prob)
    out: np.ndarray = _costs_compiled(
        prob.cum,
        prob.weight,
        prob.step,
        prob.weight2,
        prob.step2,
        prob.size,
        np.asarray(points, np.int64),
        float(prob.per_batch),
        prob.rule.batch_size is None,
        comb,
        hi,
        lo,
    )
    return out
