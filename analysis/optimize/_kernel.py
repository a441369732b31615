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
``C(x, B)`` (a fixed ``B <= 64`` whose ``C(N, B)`` fits float64: the product formula), or
is the product ``prod_{a < y <= b} (y - B) / y`` when ``b - a <= 8``, or
``exp(log((b-B)!/(a-B)!) - log(b!/a!))`` from a double-double table of ``log x!`` (any
``B``; beyond ``_TABLE_MAX`` samples, Stirling's series with the large terms paired).  A bucket
with fewer samples than ``B`` is one short batch: ``n w_j``.

With a token budget ``B`` follows the end ``j``; where it changes, each start's ``T`` is
recomputed by the same running sum started where the terms fall below ``2**-70`` (the
``x_k`` at which ``(x_k / n)**B`` does), so a token budget costs more than a fixed ``B``:
these restarts, not the cells, dominate.  The time objective (``step_time``) has
``w`` in seconds and adds ``per_batch * ceil(n / B)`` to each bucket's cost.

The DP ``D[k][j] = min_i D[k-1][i] + cost(i, j)`` runs with the costs, start by start (a
start's row of costs pushes into every later end), for every ``k`` at once: the cost matrix is
never stored, and one pass gives the optimum for every bucket count.  Ties go to the smallest
start.  No monotone-argmin shortcut is assumed.
"""

from __future__ import annotations

import math

import numba
import numpy as np

from analysis.optimize._problem import _Problem, _ratio_tables

# Ratios over at most this many samples are products (exact to a few ulps, no table read).
_PRODUCT_RATIO = 8
_INF = math.inf


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _stirlerr(x: float) -> float:  # pragma: no cover - compiled
    """``lgamma(x + 1) - (x log x - x + log(2 pi x) / 2)`` for ``x >= 16``."""
    y = 1.0 / (x * x)
    return (1.0 / 12 - y * (1.0 / 360 - y * (1.0 / 1260 - y * (1.0 / 1680 - y / 1188)))) / x


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
    i: int, j: int, size: int, cum: np.ndarray, step: np.ndarray, hi: np.ndarray, lo: np.ndarray
) -> float:  # pragma: no cover - compiled
    """``T(i, j)`` for batches of ``size`` from the running sum started at the first ``k``
    whose ``x_k`` exceeds ``n 2**(-70/size)``: every term below it has
    ``C(x_k, B) / C(n, B) <= (x_k / n)**B <= 2**-70``, and they sum to at most that times
    ``w_j``."""
    ci = cum[i]
    n = cum[j] - ci
    if n < size:
        return 0.0
    cut = ci + n * 2.0 ** (-70.0 / size)
    k = i + 1 + np.searchsorted(cum[i + 1 : j], cut, side="right")  # first k with c_k > cut
    total = 0.0
    if n >= hi.size:  # beyond the table: Stirling's series
        for kk in range(k, j):
            total = (total + step[kk]) * _ratio(cum[kk] - ci, cum[kk + 1] - ci, size, hi[:0], hi, lo)
        return total
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
        a, a_hi, a_lo, s_hi, s_lo = b, b_hi, b_lo, t_hi, t_lo
    return total


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _row_costs(
    i: int,
    cum: np.ndarray,
    weight: np.ndarray,
    step: np.ndarray,
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
    not end a bucket)."""
    m = cum.size - 1
    ci = cum[i]
    b = size[i + 1]
    t = 0.0
    if not comb.size:  # log x! (a token budget, or a B whose C(N, B) overflows float64)
        table = cum[m] - ci < hi.size
        below = cum[i + 1] - ci  # x_{j-1}
        b_hi = b_lo = s_hi = s_lo = 0.0  # log x_{j-1}! and log (x_{j-1} - B)!, when known
        known = False
        out[i + 1] = below * weight[i + 1] if is_end[i + 1] else _INF  # one length
        for j in range(i + 2, m + 1):
            n = cum[j] - ci
            if token and size[j] != b:  # B follows the end: T restarts where it changes
                b = size[j]
                t = _restart(i, j, b, cum, step, hi, lo)
                known = False
            elif n < b or below < b:
                t = 0.0
                known = False
            elif n - below <= _PRODUCT_RATIO:
                t = (t + step[j - 1]) * _product_ratio(below, n, b)
                known = False
            elif table:
                if not known:
                    b_hi, b_lo, s_hi, s_lo = _log_fact_pair(below, b, hi, lo)
                n_hi, n_lo, t_hi, t_lo = _log_fact_pair(n, b, hi, lo)
                ratio = math.exp(((t_hi - s_hi) + (t_lo - s_lo)) - ((n_hi - b_hi) + (n_lo - b_lo)))
                t = (t + step[j - 1]) * ratio
                b_hi, b_lo, s_hi, s_lo = n_hi, n_lo, t_hi, t_lo
                known = True
            else:
                t = (t + step[j - 1]) * _ratio(below, n, b, comb, hi, lo)
            below = n
            w = weight[j]
            cost = n * w if n < b else n * (w - t)
            out[j] = cost if is_end[j] else _INF
    else:  # one B, C(x, B) tabulated (the hot loop: one table read per cell)
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
def _solve_compiled(
    cum: np.ndarray,
    weight: np.ndarray,
    step: np.ndarray,
    size: np.ndarray,
    is_row: np.ndarray,
    is_end: np.ndarray,
    n_buckets: int,
    per_batch: float,
    token: bool,
    comb: np.ndarray,
    hi: np.ndarray,
    lo: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:  # pragma: no cover - compiled
    m = cum.size - 1
    best = np.full((n_buckets + 1, m + 1), _INF)
    arg = np.zeros((n_buckets + 1, m + 1), np.int64)
    best[0, 0] = 0.0
    costs = np.empty(m + 1)
    prev = np.empty(n_buckets + 1)
    for i in range(m):
        if not is_row[i]:
            continue
        live = False
        for k in range(1, n_buckets + 1):
            prev[k] = best[k - 1, i]
            live = live or prev[k] < _INF
        if not live:
            continue
        _row_costs(i, cum, weight, step, size, is_end, per_batch, token, comb, hi, lo, costs)
        for k in range(1, n_buckets + 1):
            p = best[k - 1, i]
            if p == _INF:
                continue
            row = best[k]
            at = arg[k]
            lo_j = m if k == n_buckets else i + 1  # the top layer is only read at the last end
            for j in range(lo_j, m + 1):
                v = p + costs[j]
                if v < row[j]:
                    row[j] = v
                    at[j] = i
    return best, arg


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _costs_compiled(
    cum: np.ndarray,
    weight: np.ndarray,
    step: np.ndarray,
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
        _row_costs(points[a], cum, weight, step, size, is_end, per_batch, token, comb, hi, lo, costs)
        for c in range(a + 1, p):
            out[a, c] = costs[points[c]]
    return out


def _solve(prob: _Problem, n_buckets: int, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``D[k, j]``: least objective of ``k`` buckets covering lengths ``1..j`` with every
    bucket ending in ``ends``; ``A[k, j]``: the start of the last bucket (for backtracking)."""
    m = prob.m
    is_end = np.zeros(m + 1, np.bool_)
    is_end[ends] = True
    is_row = np.zeros(m + 1, np.bool_)
    is_row[0] = True
    is_row[ends[:-1]] = True
    comb, hi, lo = _ratio_tables(prob)
    best, arg = _solve_compiled(
        prob.cum,
        prob.weight,
        prob.step,
        prob.size,
        is_row,
        is_end,
        n_buckets,
        float(prob.per_batch),
        prob.rule.batch_size is None,
        comb,
        hi,
        lo,
    )
    return best, arg


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
        prob.size,
        np.asarray(points, np.int64),
        float(prob.per_batch),
        prob.rule.batch_size is None,
        comb,
        hi,
        lo,
    )
    return out
