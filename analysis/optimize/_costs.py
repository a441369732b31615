"""A bucket's full-batch cost, compiled: the scaled running sum along a start's row of ends.

(The full-batch cost counts each bucket's last short batch as a full one: an upper bound on
the exact cost, :mod:`analysis.optimize._exact`, which reads the running sums written here.)

With distinct lengths ``v_1 < ... < v_m``, prefix counts ``c_0 = 0, c_1, ..., c_m`` and
``w_k = g(v_k)`` (``g`` the per-sample weight: the padded length), a bucket holding
``v_{i+1}..v_j`` has ``n = c_j - c_i`` samples and, for batches of ``B``,

    ``E[g(max)] = w_j - T(i, j)``,  ``T(i, j) = sum_{k=i+1}^{j-1} (w_{k+1} - w_k) C(x_k, B) / C(n, B)``

with ``x_k = c_k - c_i``.  ``T`` is a weighted sum of probabilities (``C(x_k, B) / C(n, B)``
is the chance that a batch holds no sample longer than ``v_k``), so it lies in
``[0, w_j - w_{i+1}]`` whatever ``B``: it never overflows, and it follows the end one step at
a time,

    ``T(i, j + 1) = (T(i, j) + w_{j+1} - w_j) * C(x_j, B) / C(x_{j+1}, B)``,

one multiplication by a ratio in ``[0, 1]`` per cell (:mod:`analysis.optimize._ratios`): all
``O(m^2)`` bucket costs in ``O(m^2)`` time, whatever ``B``.  A bucket with fewer samples than
``B`` is one short batch: ``n w_j``.

With a token budget ``B`` follows the end ``j``; where it changes, each start's ``T`` is
recomputed by the same running sum started where the terms fall below ``2**-70`` (the
``x_k`` at which ``(x_k / n)**B`` does): :func:`_restart`.

The time objective (``step_time``) has ``w`` in seconds and adds
``per_batch * ceil(n / B)`` to each bucket's cost; with a token budget and a working-set
term a sample weighs ``w + B w2`` in a bucket whose batches hold ``B``, so a second running
sum over the steps of ``w2`` goes beside ``T``, with the same ratios and restarts.

The compiled functions read the problem as one value, :class:`Arrays`.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numba
import numpy as np

from analysis.optimize._problem import Problem
from analysis.optimize._ratios import (
    PRODUCT_RATIO,
    build_ratio_tables,
    log_fact_pair,
    product_ratio,
    ratio_at,
)

INF = math.inf


class Arrays(NamedTuple):
    """The problem as the compiled kernel reads it (one numba argument): :class:`Problem`'s
    arrays, the per-batch seconds, whether ``B`` follows the end (a token budget), and the
    ratio tables of :func:`build_ratio_tables` (``comb``, ``hi``, ``lo``; empty where not used)."""

    cum: np.ndarray
    weight: np.ndarray
    step: np.ndarray
    weight2: np.ndarray
    step2: np.ndarray
    size: np.ndarray
    per_batch: float
    token: bool
    comb: np.ndarray
    hi: np.ndarray
    lo: np.ndarray


def cost_arrays(prob: Problem, tables: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None) -> Arrays:
    """``prob`` for the kernel, with ``tables`` (default: :func:`build_ratio_tables` of ``prob``)."""
    comb, hi, lo = build_ratio_tables(prob) if tables is None else tables
    return Arrays(
        prob.cum,
        prob.weight,
        prob.step,
        prob.weight2,
        prob.step2,
        prob.size,
        float(prob.per_batch),
        prob.rule.batch_size is None,
        comb,
        hi,
        lo,
    )


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _restart(i: int, j: int, size: int, data: Arrays) -> tuple[float, float]:  # pragma: no cover - compiled
    """``T(i, j)`` for batches of ``size`` from the running sum started at the first ``k``
    whose ``x_k`` exceeds ``n 2**(-70/size)``: every term below it has
    ``C(x_k, B) / C(n, B) <= (x_k / n)**B <= 2**-70``, and they sum to at most that times
    ``w_j``.  The same sum over ``step2`` beside it (the same ratios)."""
    cum, step, step2, hi, lo = data.cum, data.step, data.step2, data.hi, data.lo
    ci = cum[i]
    n = cum[j] - ci
    if n < size:
        return 0.0, 0.0
    cut = ci + n * 2.0 ** (-70.0 / size)
    first = i + 1 + np.searchsorted(cum[i + 1 : j], cut, side="right")  # first k with c_k > cut
    total = 0.0
    total2 = 0.0
    if n >= hi.size:  # beyond the table: Stirling's series
        no_comb = hi[:0]
        for kk in range(first, j):
            ratio = ratio_at(cum[kk] - ci, cum[kk + 1] - ci, size, no_comb, hi, lo)
            total = (total + step[kk]) * ratio
            total2 = (total2 + step2[kk]) * ratio
        return total, total2
    # log C(a, B) - log C(b, B) from log x! at b and b - B, those at a carried from the last term
    a = cum[first] - ci
    a_hi, a_lo, s_hi, s_lo = log_fact_pair(a, size, hi, lo)
    for kk in range(first, j):
        b = cum[kk + 1] - ci
        b_hi, b_lo, t_hi, t_lo = log_fact_pair(b, size, hi, lo)
        if a < size:
            ratio = 0.0
        elif b - a <= PRODUCT_RATIO:
            ratio = product_ratio(a, b, size)
        else:
            ratio = math.exp(((t_hi - s_hi) + (t_lo - s_lo)) - ((b_hi - a_hi) + (b_lo - a_lo)))
        total = (total + step[kk]) * ratio
        total2 = (total2 + step2[kk]) * ratio
        a, a_hi, a_lo, s_hi, s_lo = b, b_hi, b_lo, t_hi, t_lo
    return total, total2


@numba.njit(cache=True, nogil=True, error_model="numpy")
def row_sums(
    i: int,
    data: Arrays,
    size: np.ndarray,
    need: np.ndarray,
    as_costs: bool,
    t_out: np.ndarray,
    t2_out: np.ndarray,
) -> None:  # pragma: no cover - compiled
    """For every ``j > i`` with ``need[j]`` and batches of ``size[j]`` (``data.size``, or the
    bounds' rungs; a fixed ``B`` unless ``data.token``; ratios from
    ``log x!``): ``T(i, j)`` and the second sum over ``step2`` into ``t_out[j]`` and
    ``t2_out[j]``, or with ``as_costs`` the bucket's objective ``n ((w - T) + B (w2 - T2))``
    (``n (w + B w2)`` below a full batch) into ``t_out[j]``, inf where not needed.

    The sums are lazy: a change of ``B`` (a token budget) only marks where the next restart
    starts, and the running sum is carried from the last end computed to the next one
    needed, so ends not needed cost nothing and a stretch of constant ``B`` with none needed
    costs no restart.  Each value is the one the dense walk (every end needed) gives, bit
    for bit: a restart at the first end of its stretch of constant ``B``, then one step per
    end, the same arithmetic in the same order."""
    cum, weight, step, weight2, step2 = data.cum, data.weight, data.step, data.weight2, data.step2
    token, hi, lo = data.token, data.hi, data.lo
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
    no_comb = hi[:0]  # (once: a slice in the loop may count a reference at every step)
    for j in range(i + 1, m + 1):
        if token and size[j] != b:  # B follows the end: T restarts where it changes
            b = size[j]
            seg = j
        if not need[j]:
            if as_costs:
                t_out[j] = INF
            continue
        if seg > at:  # the sums held another B: restart at the stretch's first end
            t, t2 = _restart(i, seg, b, data)
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
            if n - below <= PRODUCT_RATIO:
                ratio = product_ratio(below, n, b)
                known = False
            elif table:
                if not known:
                    b_hi, b_lo, s_hi, s_lo = log_fact_pair(below, b, hi, lo)
                n_hi, n_lo, t_hi, t_lo = log_fact_pair(n, b, hi, lo)
                ratio = math.exp(((t_hi - s_hi) + (t_lo - s_lo)) - ((n_hi - b_hi) + (n_lo - b_lo)))
                b_hi, b_lo, s_hi, s_lo = n_hi, n_lo, t_hi, t_lo
                known = True
            else:
                ratio = ratio_at(below, n, b, no_comb, hi, lo)
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
def row_costs(
    i: int, data: Arrays, is_end: np.ndarray, out: np.ndarray
) -> None:  # pragma: no cover - compiled
    """``out[j]`` = objective of bucket ``(i, j]`` for every ``j > i`` (inf where ``j`` may
    not end a bucket).  A bucket ending
    at ``j`` weighs its samples ``weight + B * weight2`` (``weight2`` is 0 but for a token
    budget's time objective with a working-set term): the second running sum ``t2`` follows
    ``step2`` with the same ratios."""
    cum, weight, step, weight2, size = data.cum, data.weight, data.step, data.weight2, data.size
    per_batch, comb = data.per_batch, data.comb
    m = cum.size - 1
    ci = cum[i]
    if not data.token and size[i + 1] > cum[m] - ci:  # a fixed B above every bucket: one short batch
        for j in range(i + 1, m + 1):
            out[j] = (cum[j] - ci) * (weight[j] + size[j] * weight2[j]) if is_end[j] else INF
    elif not comb.size:  # log x! (a token budget, or a B whose C(N, B) overflows float64)
        row_sums(i, data, size, is_end, True, out, out)
    else:  # one B, C(x, B) tabulated (the hot loop: one table read per cell)
        b = size[i + 1]
        t = 0.0
        out[i + 1] = (cum[i + 1] - ci) * weight[i + 1] if is_end[i + 1] else INF  # one length
        below = comb[cum[i + 1] - ci]  # C(x_{j-1}, B)
        for j in range(i + 2, m + 1):
            n = cum[j] - ci
            here = comb[n]
            t = (t + step[j - 1]) * (below / here) if n >= b else 0.0
            below = here
            w = weight[j]
            cost = n * w if n < b else n * (w - t)
            out[j] = cost if is_end[j] else INF
    if per_batch != 0.0:  # the time objective: per_batch for each of ceil(n / B) batches
        for j in range(i + 1, m + 1):
            n = cum[j] - ci
            out[j] += per_batch * ((n + size[j] - 1) // size[j])
