"""A bucket's exact cost, compiled: its full batches and its last, short batch as they are.

A bucket of ``n`` samples with batches of ``B`` is, after a within-bucket shuffle,
``full = n // B`` full batches (each a uniformly random ``B``-subset) and one batch of
``r = n mod B`` samples (a uniformly random ``r``-subset), so its exact expected cost is

    ``full * B * E[g_B(max of B)] + r * E[g_r(max of r)]``  (plus ``per_batch * ceil(n / B)``)

with ``g_s = base + s * q`` the per-sample weight in a batch of ``s`` (``q`` the step-time
model's working-set term, 0 for padding, so ``g_B`` is :mod:`analysis.optimize._costs`'s
weight).  ``E[g(max of s)] = g(v_j) - T_s(i, j)`` with ``T_s`` the running sum of
:mod:`analysis.optimize._costs` for subsets of ``s``; ``T_B`` follows the row as there, but
``r`` changes from end to end, so ``T_r`` has no recursion along a row.  Here:

* :func:`exact_row`: the exact costs of the ends a row needs, ``T_B`` by the row's running
  sum and each ``T_r`` by a running sum of its own residue ``r`` (carried along the row
  from the start for ``r <= _CARRY_MAX``, every size in one pass with its ratios from shared
  prefix products, :func:`step_ratios`; each computed from where its terms pass ``2**-70``
  above, the cells side by side, :func:`long_residue_sums`): every value is a function of
  ``(i, j)`` alone, whatever else the row needs, and the float :func:`_advance` would give it
  alone (:func:`carried_row`; for one fixed ``B <= 16`` read without a table every size's
  ratio is a prefix product of the same ``B`` quotients, so :func:`small_row` carries all
  the sums in one pass, the same floats);
* the ``O(1)`` lower bounds from the full-batch cost ``n E_B`` (for a fixed ``B``
  :func:`~analysis.optimize._lower.fixed_bound`, under a token budget
  :func:`~analysis.optimize._lower.budget_bound`).  For a
  fixed weight ``h`` the chance that a random ``s``-subset holds a sample above a level is
  concave in ``s`` (its increments shrink by ``(x - s) / (n - s - 1) <= 1``), so
  ``E_s[h] >= h_first + (s / B) (E_B[h] - h_first)`` (the chord from ``s = 0``, where the
  ``E`` is the shortest, ``h_first``), and with ``q``
  ``E_r[g_r] >= g_r(first) + (r / B)**2 (E_B[g_B] - g_B(first))``;
* and where ``B > POWER_ABOVE`` (above, a residue's exact sum is long) the *power bound*
  where higher (:func:`power_cap`, :func:`power_bounds`; not beside the chords:
  :func:`takes_power`).  With ``P(x) = C(x, B) / C(n, B)``
  and ``R(x) = C(x, r) / C(n, r)`` the chances that a batch of ``B`` (``r``) draws no sample
  above the ``x`` shortest: ``R(x) <= (x / n)**r`` and ``P(x) >= ((x - B + 1) / (n - B + 1))**B``
  (each factor ``(x - t) / (n - t)`` falls with ``t``), so ``R(x) <= Psi(P(x))`` for every
  ``x`` (``x < B``: ``P = 0`` and ``R <= ((B - 1) / n)**r = Psi(0)``) with
  ``Psi(y) = (1 - beta (1 - y**(1/B)))**r``, ``beta = (n - B + 1) / n``, concave and
  increasing on ``[0, 1]`` (``y**(1/B)`` is, and ``(1 - beta + beta z)**(r - 1) z**(1 - B)``
  falls with ``z``: ``r < B``).  For steps ``>= 0`` summing to ``S``, Jensen's inequality gives
  ``T_r = sum step_k R(x_k) <= S Psi(T_B / S)``, so ``E_r[h] >= h_top - S Psi(T_B / S)``: a
  short batch of half a batch draws nearly the longest when a full batch does, which the
  chord (linear in ``r / B``) cannot see.  With ``q`` (steps of ``base`` and ``q`` ``>= 0``,
  checked: ``Short.power``), ``g_r = g_B - (B - r) q`` has ``T_B[g_r] <= T_B[g_B]`` and
  ``S = g_r(top) - g_r(first)``; ``S Psi(min(1, t / S))`` grows with ``t``, so any
  ``t >= T_B[g_B]`` bounds it.

The DP over these costs is :mod:`analysis.optimize._pruned`.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numba
import numpy as np

from analysis.optimize._costs import INF, Arrays, cost_arrays, row_sums
from analysis.optimize._problem import Problem
from analysis.optimize._ratios import (
    EMPTY,
    LOG_TABLE_MAX,
    PRODUCT_RATIO,
    QUOTIENT_TERMS,
    build_ratio_tables,
    comb_applies,
    log_comb_ratio,
    log_fact_ratio,
    log_fact_table,
    product_ratio,
    quotient_ratio,
    ratio_at,
)

# Residues up to this carry one running sum along the row (from its start); above, each
# cell's sum starts where its terms pass 2**-70.
_CARRY_MAX = 64
# Rows whose residues up to _CARRY_MAX walk at least this many times the longest walk, all
# told, advance them in one pass (:func:`_advance_all`: a step of it costs a few of one
# size's); below, each on its own (the same floats either way).
_SHARED_FROM = 6
# Rows with at least this many residues above _CARRY_MAX walk them side by side
# (:func:`_sweep`); fewer, each on its own.
_SWEEP_FROM = 8
# Residues above _CARRY_MAX up to this keep each end's ratio for the next cell of the same
# residue (:func:`_live_step`).
_MEMO_MAX = 1 << 16
# Batch sizes above which the lower bounds add the power bound (:func:`power_cap`; at or
# below, every residue is carried and an exact cost is cheap).
POWER_ABOVE = _CARRY_MAX
# Subsets up to this size take their ratio C(a, s) / C(b, s) as a product of s factors.
_SMALL_SIZE = 16
# Ends whose ratios :func:`small_row` computes at once (a loop across them per subset size).
_BLOCK = 256
# Relative margin of the lower bounds (far above the rounding of the costs).
LOW_SLACK = 1e-9
_ROUND = 2.0**52  # x + 2**52 - 2**52 rounds 0 <= x < 2**52 to the nearest integer
# The least ``T_B / S`` the power bound reads (:func:`power_cap`): far above what rounding
# and underflow leave of a running sum (whose terms and steps are far above 2**-1000).
_Y_FLOOR = 2.0**-900


class Short(NamedTuple):
    """What the short batches read: ``base`` and ``q`` (``g_s = base + s q``) with their
    steps, whether ``q`` is nonzero, a table of ``log x!`` (``hi + lo``) for the ratios, and
    the prefix counts as floats, and the sums of ``base`` above each end (the means the bounds
    read: :func:`~analysis.optimize._lower.mean_low`)."""

    base: np.ndarray
    base_step: np.ndarray
    q: np.ndarray
    q_step: np.ndarray
    quad: bool
    hi: np.ndarray
    lo: np.ndarray
    cum_float: np.ndarray  # the prefix counts as floats (exact below 2**53)
    product: bool  # one fixed B whose C(N, B) fits float64: C(x, B) by the product formula
    power: bool  # steps of base and q >= 0 (the power bound holds): the module docstring
    above: np.ndarray  # the sum of base over the samples above each end, from the top
    # the bounds also read the chords through E_s at two powers of two below B where they apply
    # (:func:`~analysis.optimize._lower.chord_sizes`; set by the pruned DP where the bounds are loose)
    chords: bool = False


def _short(prob: Problem, hi: np.ndarray | None = None, lo: np.ndarray | None = None) -> Short:
    """The short batches' arrays of ``prob``: ``g_s = weight + B weight2 - (B - s) member``;
    ``hi, lo`` a table of ``log x!`` to read (default: one of at most ``LOG_TABLE_MAX``
    samples, Stirling's series above)."""
    m = prob.m
    q = prob.weight2 if prob.rule.batch_size is None else prob.member
    q = np.zeros(m + 1) if q is None else q
    base = prob.weight + prob.size * prob.weight2 - prob.size * q
    if prob.rule.batch_size is None:
        base = prob.weight.copy()
    steps = np.zeros((2, m + 1))
    steps[0, 1:m] = np.diff(base[1:])
    steps[1, 1:m] = np.diff(q[1:])
    if hi is None or lo is None or not hi.size:
        hi, lo = log_fact_table(min(int(prob.cum[-1]), LOG_TABLE_MAX))
    product = prob.rule.batch_size is not None and comb_applies(prob)
    power = bool((steps >= 0.0).all())
    cum_float = prob.cum.astype(np.float64)
    above = np.zeros(m + 1)  # (from the top, one term at a time: within m + 1 ulps of itself)
    above[:m] = np.cumsum((np.diff(prob.cum) * base[1:])[::-1])[::-1]
    return Short(base, steps[0], q, steps[1], bool(q.any()), hi, lo, cum_float, product, power, above)


def exact_arrays(prob: Problem) -> tuple[Arrays, Short]:
    """The kernel's arrays for the exact costs: a fixed ``B`` whose ``C(N, B)`` fits float64
    computes ``C(x, B)`` by the product formula where it reads it (no table: time and memory
    do not grow with the sample count; the short batches' ``log x!`` table is of fixed size),
    any other rule reads the tables of :func:`build_ratio_tables` (``log x!`` up to
    ``LOG_TABLE_MAX`` samples, Stirling's series above)."""
    if prob.rule.batch_size is None or not comb_applies(prob):
        tables = build_ratio_tables(prob)
    else:  # C(x, B) computed where read (:func:`_short`): no table of the sample count's size
        tables = (EMPTY, EMPTY, EMPTY)
    return cost_arrays(prob, tables), _short(prob, tables[1], tables[2])


@numba.njit(cache=True, nogil=True, error_model="numpy", inline="always")
def short_ratio(a: int, b: int, s: int, hi: np.ndarray, lo: np.ndarray) -> float:  # pragma: no cover
    """``C(a, s) / C(b, s)`` for ``a <= b``, ``s <= b`` (0 when ``a < s``): a product of ``s``
    quotients (``s <= 16``, :func:`small_row`'s), of ``b - a <= 8``
    (:func:`~analysis.optimize._ratios.product_ratio`), of at most ``QUOTIENT_TERMS`` where
    ``s`` is (:func:`~analysis.optimize._ratios.quotient_ratio`), each within a few ulps of
    itself (the bounds of a fixed ``B <= 64`` read these ulps:
    :func:`~analysis.optimize._lower.product_grow`).  A larger ``s`` reads the table of
    ``log x!`` up to its end (as before: a few ulps of ``d log b``, ``d = b - a``, of the
    logarithm ``L``), beyond it the exponential of Stirling's series paired
    (:func:`~analysis.optimize._ratios.log_comb_ratio`: a few ulps of ``L`` itself, so ``|L|``
    ulps of the ratio, ``3e-14`` at ``|L| <= 50``, where a cost can see it; the plain
    difference of two ``log(b! / a!)``, near ``d log b``, kept ``1e-7`` of the ratio at ``1e10``
    samples), or where ``a < s + 16`` a product of ``b - a <= QUOTIENT_TERMS`` quotients or the
    plain difference (``s`` and ``b - a`` above 64: a ratio below ``e**-60``)."""
    if a < s:
        return 0.0
    if s <= _SMALL_SIZE:
        out = 1.0
        for t in range(s):
            out *= (a - t) / (b - t)
        return out
    if b - a <= PRODUCT_RATIO:
        return product_ratio(a, b, s)
    if s <= QUOTIENT_TERMS:
        return quotient_ratio(a, b, s)
    if b >= hi.size and a - s >= 16:
        return math.exp(log_comb_ratio(a, b, s))
    if b >= hi.size and b - a <= QUOTIENT_TERMS:
        return quotient_ratio(a, b, s)
    return math.exp(log_fact_ratio(a - s, b - s, hi, lo) - log_fact_ratio(a, b, hi, lo))


@numba.njit(cache=True, nogil=True, error_model="numpy")
def ratio_bounds(i: int, j0: int, data: Arrays, short: Short, ratio: np.ndarray) -> None:  # pragma: no cover
    """``ratio[j] >= C(x_{j-1}, B) / C(x_j, B)`` for ``j0 <= j <= m`` (one fixed ``B``,
    ``x_{j0-1} >= B``), by :func:`ratio_upper`, in flops only (vectorised; what the bounds read
    where no table of ``C(x, B)`` applies: a larger ratio gives a larger running sum ``T_B``, so
    a smaller ``E_B`` and a lower bound).  Over at most ``FEW_STEPS`` samples the product
    (:func:`ratio_few`), else within about ``1e-5`` of it where ``B / x`` and ``d / x`` are
    small (:func:`ratio_bound`):

    * the ratio is ``exp(-Z)``, ``Z = sum_{a < y <= b} h(y)``, ``h(y) = -ln(1 - B / y)``
      (``a = x_{j-1}``, ``b = x_j``, ``d = b - a``); ``h'' = ((1 - v)**-2 - 1) / y**2
      >= (2v + 3v**2 + 4v**3) / y**2`` (``v = B / y``), least at ``y = b``: ``c``; so by
      Taylor's theorem about the mean ``ybar = (a + b + 1) / 2 > B`` (the first-order terms
      cancel) ``Z >= d h(ybar) + (c / 2) sum (y - ybar)**2 = d h(ybar) + c d (d**2 - 1) / 24``,
      and ``h(ybar) >= u + u**2/2 + ... + u**8/8`` with ``u = B / ybar`` (the series of
      ``-ln(1 - u)``, terms > 0);
    * ``exp(-Z) <= exp(-z)`` for ``z = min(that, 700) <= Z``, and
      ``exp(-z) = exp(-z/256)**256 <= p(z/256)**256`` with ``p`` the Taylor polynomial of
      ``exp(-h)`` to ``h**6/720`` (it ends on a positive term: above ``exp(-h)``, and > 0);
    * times ``RATIO_GROW = 1 + 1e-11``: above the rounding of these steps (a few ulps of ``z <= 700``, its
      quotients taken from one reciprocal, ``7e-13`` at most through ``exp``; a few ulps
      doubled by each of the 8 squarings) and of
      each step of the running sum that reads it, so the computed ``T_B`` is at least the
      exact one."""
    count = short.cum_float
    m = count.size - 1
    c_i = count[i]
    bf = float(data.size[i + 1])
    below, above, out = count[j0 - 1 : m], count[j0 : m + 1], ratio[j0 : m + 1]
    for k in range(out.size):
        out[k] = ratio_upper(below[k] - c_i, above[k] - c_i, bf)


@numba.njit(cache=True, nogil=True, error_model="numpy", inline="always")
def ratio_bound(a: float, b: float, bf: float) -> float:  # pragma: no cover - compiled
    """One ratio of :func:`ratio_bounds`: at least ``C(a, B) / C(b, B)`` for ``B <= a <= b``
    (``bf``: ``B``), in flops only (the backward pass's tiles read it lane by lane)."""
    d = b - a
    ybar = 0.5 * (a + b + 1.0)
    inv = 1.0 / (ybar * b)  # (one division: u = B / ybar, v = B / b and 1 / b**2 from it)
    u = bf * b * inv
    series = 1.0 + u * (
        0.5 + u * (1.0 / 3.0 + u * (0.25 + u * (0.2 + u * (1.0 / 6.0 + u * (1.0 / 7.0 + u * 0.125)))))
    )
    inv_b = ybar * inv
    v = bf * inv_b
    gap = d * (d * d - 1.0) * (v * (2.0 + v * (3.0 + 4.0 * v))) * (inv_b * inv_b * (1.0 / 24.0))
    z = d * u * series + gap  # (Jensen's gap, at least)
    h = (z if z < 700.0 else 700.0) * (1.0 / 256.0)
    e = 1.0 - h * (
        1.0 - h * (0.5 - h * (1.0 / 6.0 - h * (1.0 / 24.0 - h * (1.0 / 120.0 - h * (1.0 / 720.0)))))
    )
    e = e * e
    e = e * e
    e = e * e
    e = e * e
    e = e * e
    e = e * e
    e = e * e
    e = e * e  # p(h)**256
    return e * RATIO_GROW


# What a bound's ratio is multiplied by (:func:`ratio_bound`, :func:`ratio_upper`): above the
# rounding of its own steps, of the exact cost's ratio and of the running sum that reads it.
RATIO_GROW = 1.0 + 1e-11
# A ratio over at most this many samples is taken as its product (:func:`ratio_few`): exact to
# a few ulps in a fifth of :func:`ratio_bound`'s flops.  Most ends of a long tail hold one or two
# samples (41 % and 3 % of the bundled data's ends); 4 and 8 were no faster (the backward pass
# at batch sizes 100 to 10**5; the goals: ``benchmarks/bench_optimize.py --goals``).
FEW_STEPS = 2


@numba.njit(cache=True, nogil=True, error_model="numpy", inline="always")
def ratio_few(b: float, d: float, bf: float, grow: float) -> float:  # pragma: no cover - compiled
    """At least ``C(b - d, B) / C(b, B) = prod_{s < d} (b - s - B) / (b - s)`` for ``1 <= d <=
    FEW_STEPS`` and ``b - d >= B`` (``bf``: ``B``): the products of the factors (each an exact
    integer ``>= 1``; ``1`` for ``s >= d``, so the loop vectorises across callers' lanes), one
    quotient (three roundings for ``d <= 2``), times the caller's ``grow`` (``RATIO_GROW``, or
    the product formula's :func:`~analysis.optimize._lower.product_grow`, which budgets more
    for its own quotient), above those and the running sum's."""
    num, den = b - bf, b
    for s in range(1, FEW_STEPS):
        sf = float(s)
        num *= (b - sf - bf) if sf < d else 1.0
        den *= (b - sf) if sf < d else 1.0
    return num / den * grow


@numba.njit(cache=True, nogil=True, error_model="numpy", inline="always")
def ratio_upper(a: float, b: float, bf: float) -> float:  # pragma: no cover - compiled
    """At least ``C(a, B) / C(b, B)`` for ``B <= a < b``: :func:`ratio_few` over at most
    ``FEW_STEPS`` samples, else :func:`ratio_bound` (the one rule every bound's ratio takes:
    the backward pass's tiles choose per end, the same floats)."""
    d = b - a
    return ratio_few(b, d, bf, RATIO_GROW) if d <= FEW_STEPS else ratio_bound(a, b, bf)


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _advance(
    ci: int,
    at: int,
    t: float,
    t2: float,
    j: int,
    s: int,
    cum: np.ndarray,
    short: Short,
    full: bool,
    data: Arrays,
) -> tuple[int, float, float]:  # pragma: no cover - compiled
    """The running sums for subsets of ``s`` carried from end ``at`` to ``j``: over the steps of
    ``weight`` (and ``weight2``) with the full batches' ratios (``full``: the table of
    ``C(x, B)`` where there is one), else over ``base`` and ``q``.  (The rows are read out of
    the tables before the loop: a read in it may count a reference at every step.)"""
    comb, hi, lo = data.comb, short.hi, short.lo
    step, step2 = (data.step, data.step2) if full else (short.base_step, short.q_step)
    while at < j:
        below = cum[at] - ci
        at += 1
        n = cum[at] - ci
        if below < s:
            t = 0.0
            t2 = 0.0
            continue
        if full and comb.size:
            ratio = ratio_at(below, n, s, comb, hi, lo)
        else:
            ratio = short_ratio(below, n, s, hi, lo)
        t = (t + step[at - 1]) * ratio
        t2 = (t2 + step2[at - 1]) * ratio
    return at, t, t2


@numba.njit(cache=True, nogil=True, error_model="numpy")
def exact_row(
    i: int,
    data: Arrays,
    short: Short,
    need: np.ndarray,
    out: np.ndarray,
    tb: np.ndarray,
    t2b: np.ndarray,
    carried: bool | None = True,
) -> None:  # pragma: no cover - compiled
    """``out[j]`` = exact objective of bucket ``(i, j]`` for every ``j > i`` with ``need[j]``
    (inf elsewhere); ``tb``, ``t2b``: work rows.  One fixed ``B <= 16`` read without a table
    of ``C(x, B)`` (batch size 8 and the like) takes :func:`small_row`, any other rule
    :func:`carried_row`: the same floats.  ``carried``: ``None`` where no row of the problem
    takes :func:`carried_row` (:func:`carried_rows`): numba then leaves it out of the
    compiled code (the branch goes with the argument's type)."""
    if carried is None or _small(i, data):
        small_row(i, data, short, need, out, tb, t2b)
    else:
        carried_row(i, data, short, need, out, tb, t2b)


def carried_rows(data: Arrays) -> bool | None:
    """``None`` where every row of ``data`` takes :func:`small_row` (one fixed ``B <= 16``
    read without a table), else ``True``: the ``carried`` argument of :func:`exact_row` and
    of its callers, so that batch size 8's first call compiles no :func:`carried_row` (about
    a third of its compile)."""
    return None if not data.token and not data.comb.size and data.size[1:].max() <= _SMALL_SIZE else True


@numba.njit(cache=True, nogil=True, error_model="numpy", inline="always")
def _small(i: int, data: Arrays) -> bool:  # pragma: no cover - compiled
    """Whether the row of start ``i`` takes :func:`small_row`: one fixed ``B <= 16`` read
    without a table of ``C(x, B)``."""
    return not data.token and not data.comb.size and data.size[i + 1] <= _SMALL_SIZE


@numba.njit(cache=True, nogil=True, error_model="numpy")
def exact_cells(
    i: int,
    first: int,
    last: int,
    data: Arrays,
    short: Short,
    need: np.ndarray,
    out: np.ndarray,
    tb: np.ndarray,
    t2b: np.ndarray,
    carried: bool | None,
) -> None:  # pragma: no cover - compiled
    """:func:`exact_row`'s ``out[j]`` for ``first <= j <= last`` (the first and last ends with
    ``need[j]``): :func:`small_cells` only up to ``last`` where :func:`exact_row` would take
    :func:`small_row` (the same floats), else :func:`exact_row` (``carried`` as there)."""
    if carried is None or _small(i, data):
        out[first : last + 1] = INF
        small_cells(i, last, data, short, need, out, tb, t2b)
    else:
        exact_row(i, data, short, need, out, tb, t2b, carried)


@numba.njit(cache=True, nogil=True, error_model="numpy")
def carried_row(
    i: int,
    data: Arrays,
    short: Short,
    need: np.ndarray,
    out: np.ndarray,
    tb: np.ndarray,
    t2b: np.ndarray,
) -> None:  # pragma: no cover - compiled
    """:func:`exact_row` for any rule: ``T_B`` along the row (with a token budget its restarts,
    lazily), the residues ``r <= _CARRY_MAX`` in one pass of every size the row needs
    (:func:`_advance_all`, each size's floats those of its own :func:`_advance`; where their
    walks, each to its last end, add up to less than ``_SHARED_FROM`` times the longest, each
    by :func:`_advance`), each larger
    one from where its terms pass ``2**-70``, side by side (:func:`long_residue_sums`)."""
    cum, size = data.cum, data.size
    m = cum.size - 1
    ci = cum[i]
    if data.token:
        row_sums(i, data, size, need, False, tb, t2b)  # T_B with its restarts, lazily
    else:
        at, t, t2 = i + 1, 0.0, 0.0
        b = size[i + 1]
        for j in range(i + 1, m + 1):
            if need[j]:
                at, t, t2 = _advance(ci, at, t, t2, j, b, cum, short, True, data)
                tb[j] = t
                t2b[j] = t2
    last, n_long = _residue_ends(i, data, need)
    sizes, alone = _carried_sizes(last, i)
    live = sizes.size
    sums = np.zeros((2, _CARRY_MAX + 1))  # T_s and its second sum, by size s
    work = np.empty((5, 0 if alone else _CARRY_MAX + 1))  # (per call: the DP makes many)
    carry_at = i + 1
    ats = np.full(_CARRY_MAX + 1, i + 1)
    sums_long = np.empty((2, n_long))  # by cell, in the order of the ends
    if n_long:
        long_residue_sums(i, data, short, need, sums_long[0], sums_long[1])
    c_long = 0
    for j in range(i + 1, m + 1):
        if not need[j]:
            out[j] = INF
            continue
        n = cum[j] - ci
        b = size[j]
        r = n % b if n >= b else 0
        t, t2 = 0.0, 0.0
        if 0 < r <= _CARRY_MAX and alone:
            at_r, t, t2 = _advance(ci, ats[r], sums[0, r], sums[1, r], j, r, cum, short, False, data)
            ats[r], sums[0, r], sums[1, r] = at_r, t, t2
        elif 0 < r <= _CARRY_MAX:
            live = _keep(sizes, live, last, j)
            carry_at = _advance_all(ci, carry_at, j, sizes, live, cum, short, sums, work)
            t, t2 = sums[0, r], sums[1, r]
        elif r > _CARRY_MAX:
            t, t2 = sums_long[0, c_long], sums_long[1, c_long]
            c_long += 1
        out[j] = _bucket_cost(n, b, _at(j, data, short), (tb[j], t2b[j], t, t2))


@numba.njit(cache=True, nogil=True, error_model="numpy")
def long_residue_sums(
    i: int, data: Arrays, short: Short, need: np.ndarray, t_out: np.ndarray, t2_out: np.ndarray
) -> None:  # pragma: no cover - compiled
    """``t_out[c]``, ``t2_out[c]``: the running sums ``T_r`` of the ``c``-th end ``j > i`` with
    ``need[j]`` whose residue ``r = n mod B`` exceeds ``_CARRY_MAX`` (``t_out.size`` of them:
    per cell, not per end, so that a row allocates no array of the ends), each from the first end
    ``k`` whose ``x_k`` passes ``n 2**(-70/r)`` (the terms below are ``< 2**-70``) to ``j``.
    The cells are walked side by side, one end of the row at a time (:func:`_sweep`): each
    cell's sum takes the steps :func:`_advance` would, in its order, so the same floats."""
    cum, size = data.cum, data.size
    ci = cum[i]
    m = cum.size - 1
    nc = t_out.size
    if nc == 0:
        return
    js = np.empty(nc, np.int64)
    c = 0
    for j in range(i + 1, m + 1):
        if c < nc and need[j] and cum[j] - ci >= size[j] and (cum[j] - ci) % size[j] > _CARRY_MAX:
            js[c] = j
            c += 1
    rs = np.empty(nc, np.int64)
    firsts = np.empty(nc, np.int64)
    for c in range(nc):
        j = js[c]
        n = cum[j] - ci
        rs[c] = n % size[j]
        cut = ci + n * 2.0 ** (-70.0 / rs[c])
        firsts[c] = i + 1 + np.searchsorted(cum[i + 1 : j], cut, side="right")
    if nc < _SWEEP_FROM:  # a few cells: each walks on its own (the same floats)
        for c in range(nc):
            _, t_out[c], t2_out[c] = _advance(ci, firsts[c], 0.0, 0.0, js[c], rs[c], cum, short, False, data)
        return
    order = _by_first(firsts, i, m)
    _sweep(ci, js[order], rs[order], firsts[order], order, cum, short, t_out, t2_out)


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _by_first(firsts: np.ndarray, i: int, m: int) -> np.ndarray:  # pragma: no cover - compiled
    """The cells in the order of their first ends ``i < first <= m`` (a counting sort: cheaper
    to compile than ``np.argsort``; an insertion sort for a few cells, whose rows are many in
    the DP; the order of ties is the cells' own, and reads nothing)."""
    if firsts.size <= 32:
        order = np.arange(firsts.size)
        for c in range(1, firsts.size):
            x = order[c]
            k = c
            while k and firsts[order[k - 1]] > firsts[x]:
                order[k] = order[k - 1]
                k -= 1
            order[k] = x
        return order
    start = np.zeros(m - i + 2, np.int64)
    for f in firsts:
        start[f - i + 1] += 1
    for k in range(1, start.size):
        start[k] += start[k - 1]
    order = np.empty(firsts.size, np.int64)
    for c in range(firsts.size):
        slot = firsts[c] - i
        order[start[slot]] = c
        start[slot] += 1
    return order


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _sweep(
    ci: int,
    js: np.ndarray,
    rs: np.ndarray,
    firsts: np.ndarray,
    ids: np.ndarray,
    cum: np.ndarray,
    short: Short,
    t_out: np.ndarray,
    t2_out: np.ndarray,
) -> None:  # pragma: no cover - compiled
    """The walks of :func:`long_residue_sums` (cells by their first end, ascending; ``ids``
    where their sums go): from its first end each cell joins the live ones, every live cell
    takes the step of end ``k`` (:func:`_live_step`), and at its own end ``j`` it leaves with
    its sums."""
    nc = js.size
    live_j = np.empty(nc, np.int64)
    live_r = np.empty(nc, np.int64)
    live_id = np.empty(nc, np.int64)
    sums = np.zeros((4, nc))  # T_r, its second sum, the ratios, r as a float
    top = 0
    for r in rs:
        top = max(top, r)
    memo = np.full((2, top + 1 if top <= _MEMO_MAX else 0), -1.0)
    live = 0
    p = 0
    k = firsts[0]
    while p < nc or live:
        while p < nc and firsts[p] == k:
            if js[p] == k:  # no step: the sums are 0
                t_out[ids[p]], t2_out[ids[p]] = 0.0, 0.0
            else:
                live_j[live], live_r[live], live_id[live] = js[p], rs[p], ids[p]
                sums[0, live], sums[1, live], sums[3, live] = 0.0, 0.0, rs[p]
                live += 1
            p += 1
        if live:
            _live_step(cum[k] - ci, cum[k + 1] - ci, k, live_r[:live], sums[:, :live], short, memo)
        k += 1
        kept = 0
        for c in range(live):
            if live_j[c] == k:
                t_out[live_id[c]], t2_out[live_id[c]] = sums[0, c], sums[1, c]
            else:
                live_j[kept], live_r[kept], live_id[kept] = live_j[c], live_r[c], live_id[c]
                sums[0, kept], sums[1, kept], sums[3, kept] = sums[0, c], sums[1, c], sums[3, c]
                kept += 1
        live = kept


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _live_step(
    a: int, b: int, k: int, rs: np.ndarray, sums: np.ndarray, short: Short, memo: np.ndarray
) -> None:  # pragma: no cover - compiled
    """One step of :func:`_advance` over ``base`` and ``q`` (from ``a`` to ``b`` samples, end
    ``k`` to ``k + 1``) for the sums ``sums[0, c]``, ``sums[1, c]`` of subsets of ``rs[c] >
    _SMALL_SIZE`` (``sums[3, c]``: ``rs[c]`` as a float, exact), each ratio
    :func:`short_ratio`'s: where ``b - a <= PRODUCT_RATIO``
    :func:`~analysis.optimize._ratios.product_ratio`, whose denominator every size shares
    (its numerators ``y - r``, integers, the same floats computed in floats), else
    :func:`short_ratio` itself, once per size and end (``memo``: the end each size's ratio
    ``memo[1, r]`` was computed at, where sizes are small enough to index it)."""
    st, st2 = short.base_step[k], short.q_step[k]
    t, t2, ratio, rf = sums[0], sums[1], sums[2], sums[3]
    af = float(a)
    if b - a <= PRODUCT_RATIO:
        den = 1.0
        for y in range(a + 1, b + 1):
            den *= y
        ratio[:] = 1.0
        for y in range(a + 1, b + 1):
            yf = float(y)
            for c in range(rs.size):
                ratio[c] *= yf - rf[c]
        for c in range(rs.size):
            ratio[c] = ratio[c] / den
    else:
        for c in range(rs.size):
            s = rs[c]
            kept = s < memo.shape[1]
            if kept and memo[0, s] == k:
                ratio[c] = memo[1, s]
                continue
            ratio[c] = short_ratio(a, b, s, short.hi, short.lo)  # (one call: inlined once)
            if kept:
                memo[0, s], memo[1, s] = k, ratio[c]
    for c in range(rs.size):
        t[c] = (t[c] + st) * ratio[c] if af >= rf[c] else 0.0
        t2[c] = (t2[c] + st2) * ratio[c] if af >= rf[c] else 0.0


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _residue_ends(i: int, data: Arrays, need: np.ndarray) -> tuple[np.ndarray, int]:  # pragma: no cover
    """``last[s]``: the last end ``j > i`` with ``need[j]`` whose bucket ``(i, j]`` leaves
    ``s = n mod B`` samples to its short batch, for ``0 < s <= _CARRY_MAX`` (``i`` where none),
    and how many such ends leave more than ``_CARRY_MAX``."""
    cum, size = data.cum, data.size
    ci = cum[i]
    last = np.full(_CARRY_MAX + 1, i)
    long = 0
    for j in range(i + 1, cum.size):
        if need[j]:
            n = cum[j] - ci
            b = size[j]
            r = n % b if n >= b else 0
            if 0 < r <= _CARRY_MAX:
                last[r] = j
            long += r > _CARRY_MAX
    return last, long


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _carried_sizes(last: np.ndarray, i: int) -> tuple[np.ndarray, bool]:  # pragma: no cover - compiled
    """The residues a row reads (``last[s] > i``), ascending, and whether to carry each on its
    own: their walks, each to its last end, add up to less than ``_SHARED_FROM`` times the
    longest.  (Plain loops: cheaper to compile than their NumPy spellings.)"""
    sizes = np.empty(last.size, np.int64)
    live, walks, longest = 0, 0, 0
    for s in range(1, last.size):
        if last[s] > i:
            sizes[live] = s
            live += 1
            walks += last[s] - i
            longest = max(longest, last[s] - i)
    return sizes[:live], walks < _SHARED_FROM * longest


@numba.njit(cache=True, nogil=True, error_model="numpy", inline="always")
def _keep(sizes: np.ndarray, live: int, last: np.ndarray, j: int) -> int:  # pragma: no cover - compiled
    """Drop from the first ``live`` of ``sizes`` (in place, in order) those no end from ``j``
    on reads; returns how many are left."""
    kept = int(np.int64(0))  # (typed int64, not a literal 0: the caller's _advance_all compiles once)
    for k in range(live):
        s = sizes[k]
        if last[s] >= j:
            sizes[kept] = s
            kept += 1
    return kept


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _advance_all(
    ci: int,
    at: int,
    j: int,
    sizes: np.ndarray,
    count: int,
    cum: np.ndarray,
    short: Short,
    sums: np.ndarray,
    work: np.ndarray,
) -> int:  # pragma: no cover - compiled
    """:func:`_advance` over ``base`` and ``q`` from end ``at`` to ``j`` for every subset size
    of ``sizes[:count]`` (ascending, ``<= _CARRY_MAX``) at once: ``sums[0, s]``, ``sums[1, s]``
    the running sums of size ``s``.  Each step takes every size's ratio from
    :func:`step_ratios` (the floats of :func:`short_ratio`) and each sum the same step as
    :func:`_advance` (0 while fewer than ``s`` samples lie below), so each size's sums are
    the floats :func:`_advance` would carry.  (Rows are indexed, never sliced, in the loop: a
    slice, or a row read out of a table, may count a reference at every step.)"""
    base_step, q_step = short.base_step, short.q_step
    live = count
    while at < j:
        a = cum[at] - ci
        at += 1
        n = cum[at] - ci
        st, st2 = base_step[at - 1], q_step[at - 1]
        while live and sizes[live - 1] > a:  # (a grows along the row: once reached, kept)
            live -= 1
        if live:
            step_ratios(a, n, sizes, live, work)
        for k in range(live):
            s = sizes[k]
            sums[0, s] = (sums[0, s] + st) * work[0, s]
            sums[1, s] = (sums[1, s] + st2) * work[0, s]
        for k in range(live, count):
            s = sizes[k]
            sums[0, s] = 0.0
            sums[1, s] = 0.0
        live = count
    return at


@numba.njit(cache=True, nogil=True, error_model="numpy")
def step_ratios(
    a: int, b: int, sizes: np.ndarray, count: int, work: np.ndarray
) -> None:  # pragma: no cover - compiled
    """``work[0, s] = short_ratio(a, b, s)`` for every ``s`` of ``sizes[:count]`` (ascending,
    ``<= min(a, _CARRY_MAX)``), the same floats: :func:`short_ratio` multiplies, for
    ``s <= _SMALL_SIZE``, the first ``s`` of the quotients ``(a - t) / (b - t)`` in order, so
    each is a prefix product of one chain; above, where ``d = b - a <= PRODUCT_RATIO``, it is
    :func:`~analysis.optimize._ratios.product_ratio`, whose denominator is the same product
    for every size (its numerator, ``d`` factors per size, is each size's own), else
    :func:`_quotients`."""
    top = sizes[count - 1]
    p = 1.0
    for t in range(min(top, _SMALL_SIZE)):
        p *= (a - t) / (b - t)
        work[0, t + 1] = p
    if top <= _SMALL_SIZE:
        return
    first = 0
    while sizes[first] <= _SMALL_SIZE:  # (top > _SMALL_SIZE: it stops)
        first += 1
    if b - a > PRODUCT_RATIO:
        _quotients(a, b, sizes, first, count, work)
        return
    den = 1.0
    for y in range(a + 1, b + 1):
        den *= y
    for k in range(first, count):
        s = sizes[k]
        num = 1.0
        for y in range(a + 1, b + 1):
            num *= y - s
        work[0, s] = num / den


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _quotients(
    a: int, b: int, sizes: np.ndarray, first: int, count: int, work: np.ndarray
) -> None:  # pragma: no cover - compiled
    """``work[0, s] =`` :func:`~analysis.optimize._ratios.quotient_ratio` ``(a, b, s)`` for
    the sizes ``sizes[first:count]`` (ascending, ``_SMALL_SIZE < s <= QUOTIENT_TERMS``) where
    ``d = b - a > PRODUCT_RATIO``, the same floats.  It multiplies the quotients of 8 factors
    over 8 in order, each a running product restarted every 8: for ``s <= d`` its factors are
    ``(a - t) / (b - t)``, ``t < s``, whose running products (``work[1]``, ``work[2]``) and
    the product of whole groups (``work[3]``) every such size shares, so that one of them is
    ``whole[s // 8]`` times the quotient of its last, partial group; for ``s > d`` its ``d``
    numerators ``b - s - t`` are the size's own (the running denominators ``b - t`` are the
    same)."""
    d = b - a
    kk = min(sizes[count - 1], d)
    nv, dv = 1.0, 1.0
    for t in range(kk):
        if t % 8 == 0:
            nv, dv = 1.0, 1.0
        nv *= a - t
        dv *= b - t
        work[1, t], work[2, t] = nv, dv
    work[3, 0] = 1.0
    for g in range(kk // 8):
        work[3, g + 1] = work[3, g] * (work[1, 8 * g + 7] / work[2, 8 * g + 7])
    for k in range(first, count):
        s = sizes[k]
        if s > d:
            work[0, s] = _own_numerators(b - s, d, work)
        elif s % 8 == 0:
            work[0, s] = work[3, s // 8]
        else:
            work[0, s] = work[3, s // 8] * (work[1, s - 1] / work[2, s - 1])


@numba.njit(cache=True, nogil=True, error_model="numpy", inline="always")
def _own_numerators(top: int, d: int, work: np.ndarray) -> float:  # pragma: no cover - compiled
    """:func:`~analysis.optimize._ratios.quotient_ratio` of ``d`` factors ``(top - t) / (b - t)``
    from the running denominators ``work[2]`` (restarted every 8)."""
    out = 1.0
    for t0 in range(0, d, 8):
        nv = 1.0
        end = min(t0 + 8, d)
        for t in range(t0, end):
            nv *= top - t
        out *= nv / work[2, end - 1]
    return out


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _bucket_cost(
    n: int, b: int, at_j: tuple[float, float, float, float, float], sums: tuple[float, float, float, float]
) -> float:  # pragma: no cover - compiled
    """The exact objective of a bucket of ``n`` samples in batches of ``b``: ``at_j`` its end's
    ``weight``, ``weight2``, ``base``, ``q`` and the per-batch cost, ``sums`` its running sums
    (``T_B`` and its second sum for the full batches, ``T_r`` and its second for the short
    one, read only where it has ``r = n mod b > 0`` samples).  (Scalars only: a call that
    passes the tables' tuples pays for counting their references.)"""
    w, w2, base, q, per_batch = at_j
    tb, t2b, t, t2 = sums
    if n < b:  # one batch of n samples: each pads to the longest
        cost = n * (base + n * q)
    else:
        full = n // b
        r = n - full * b
        cost = full * b * ((w - tb) + b * (w2 - t2b))
        if r:
            cost += r * ((base - t) + r * (q - t2))
    if per_batch != 0.0:
        cost += per_batch * ((n + b - 1) // b)
    return float(cost)


@numba.njit(cache=True, nogil=True, error_model="numpy", inline="always")
def _at(j: int, data: Arrays, short: Short) -> tuple[float, float, float, float, float]:  # pragma: no cover
    """What :func:`_bucket_cost` reads at end ``j``."""
    return data.weight[j], data.weight2[j], short.base[j], short.q[j], data.per_batch


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _small_ratios(
    j0: int, nb: int, c_i: float, b: int, count: np.ndarray, ratio: np.ndarray
) -> None:  # pragma: no cover - compiled
    """``ratio[s, k]`` for the ``nb`` ends ``j = j0 + k`` of a block and ``1 <= s <= b``: the
    product ``prod_{t < s} (a - t) / (n - t)`` (``a``, ``n`` the counts up to ``j - 1`` and
    ``j``), factor by factor as :func:`short_ratio` has it (integers below 2**53: exact in
    floats), each ``s`` a loop across the block (vectorised: whole rows of a C-ordered table)."""
    below, above = count[j0 - 1 : j0 - 1 + nb], count[j0 : j0 + nb]
    ratio[0, :nb] = 1.0
    for s in range(1, b + 1):
        tf = float(s - 1)
        prev, row = ratio[s - 1], ratio[s]
        for k in range(nb):
            row[k] = prev[k] * (((below[k] - c_i) - tf) / ((above[k] - c_i) - tf))


@numba.njit(cache=True, nogil=True, error_model="numpy")
def small_row(
    i: int, data: Arrays, short: Short, need: np.ndarray, out: np.ndarray, tb: np.ndarray, t2b: np.ndarray
) -> None:  # pragma: no cover - compiled
    """:func:`exact_row` for one fixed ``B <= _SMALL_SIZE`` read without a table of ``C(x, B)``,
    in one pass up to the last needed end: every subset size ``s <= B`` takes its ratio
    ``C(a, s) / C(n, s)`` as the product of the first ``s`` factors ``(a - t) / (n - t)``
    (:func:`short_ratio`'s, in its order), so ``B`` quotients per end give every residue's
    and the full batches' ratios (:func:`_small_ratios`, a block of ends at a time), the same
    floats as their own products, and each running sum is the one :func:`_advance` carries
    (0 while ``a < s``; the second sums stay 0 where their steps are)."""
    m = data.cum.size - 1
    last = i
    for j in range(i + 1, m + 1):
        out[j] = INF
        last = j if need[j] else last
    small_cells(i, last, data, short, need, out, tb, t2b)


@numba.njit(cache=True, nogil=True, error_model="numpy")
def small_cells(
    i: int,
    last: int,
    data: Arrays,
    short: Short,
    need: np.ndarray,
    out: np.ndarray,
    tb: np.ndarray,
    t2b: np.ndarray,
) -> None:  # pragma: no cover - compiled
    """:func:`small_row`'s costs into ``out[j]`` for the ends ``j <= last`` with ``need[j]``
    (``out`` untouched elsewhere)."""
    cum, count = data.cum, short.cum_float
    ci = cum[i]
    c_i = count[i]
    b = data.size[i + 1]
    two = False  # any step of q or weight2 up to the last end
    for j in range(i + 1, last):
        two = two or short.q_step[j] != 0.0 or data.step2[j] != 0.0
    ts, t2s = np.zeros(b + 1), np.zeros(b + 1)  # s = b: the full batches
    ratio = np.empty((b + 1, _BLOCK))
    for j0 in range(i + 2, last + 1, _BLOCK):
        nb = min(_BLOCK, last + 1 - j0)
        _small_ratios(j0, nb, c_i, b, count, ratio)
        for k in range(nb):
            j = j0 + k
            below = count[j - 1] - c_i
            st, st2 = short.base_step[j - 1], short.q_step[j - 1]
            for s in range(1, b):
                ts[s] = (ts[s] + st) * ratio[s, k] if below >= s else 0.0
            ts[b] = (ts[b] + data.step[j - 1]) * ratio[b, k] if below >= b else 0.0
            if two:
                for s in range(1, b):
                    t2s[s] = (t2s[s] + st2) * ratio[s, k] if below >= s else 0.0
                t2s[b] = (t2s[b] + data.step2[j - 1]) * ratio[b, k] if below >= b else 0.0
            if need[j]:
                n = cum[j] - ci
                r = n % b if n >= b else 0
                tb[j], t2b[j] = ts[b], t2s[b]
                out[j] = _bucket_cost(n, b, _at(j, data, short), (ts[b], t2s[b], ts[r], t2s[r]))
    if last > i and need[i + 1]:  # the first end: every sum 0
        n = cum[i + 1] - ci
        tb[i + 1], t2b[i + 1] = 0.0, 0.0
        out[i + 1] = _bucket_cost(n, b, _at(i + 1, data, short), (0.0, 0.0, 0.0, 0.0))


@numba.njit(cache=True, nogil=True, error_model="numpy")
def power_cap(t: float, s: float, n: float, b: float, r: float) -> float:  # pragma: no cover
    """An upper bound on ``T_r / S`` for a short batch of ``r`` from ``t >= T_B``, the running
    sum of the bucket's ``n >= B`` samples in batches of ``B`` over steps ``>= 0`` that sum
    to ``s > 0`` (the power bound of the module docstring), in flops only (no ``exp`` or
    ``log``: vectorised):

    * ``y = t / s`` (at least ``_Y_FLOOR``, at most 1) and ``L = -ln y >= 32 (u + u**2/2 + u**3/3)``
      with ``u = 1 - y**(1/32)`` (five square roots; ``-ln(1 - u)`` is that series' sum);
    * ``1 - y**(1/B) = 1 - exp(-L/B) >= a - a**2/2`` for ``a = min(L/B, 1)``;
    * ``Psi(y) <= exp(-c)``, ``c = r beta (a - a**2/2)``, ``beta = (n - B + 1) / n``, and
      ``exp(-c) <= exp(-h)**64 <= (1 - h + h**2/2)**64`` with ``h = min(c, 64) / 64``;
    * times ``1 + 1e-12``: above the relative rounding of these steps (a few ulps each,
      ``2**-40`` through the square roots), at most 1."""
    y = t * (1.0 + LOW_SLACK) / s  # (a NaN of 0 / 0 takes the floor below: s = 0 reads no cap)
    y = y if y > _Y_FLOOR else _Y_FLOOR
    y = y if y < 1.0 else 1.0
    u = 1.0 - math.sqrt(math.sqrt(math.sqrt(math.sqrt(math.sqrt(y)))))
    a = 32.0 * (u * (1.0 + u * (0.5 + u * (1.0 / 3.0)))) / b
    a = a if a < 1.0 else 1.0
    c = r * ((n - b + 1.0) / n) * (a - 0.5 * a * a)
    h = (c if c < 64.0 else 64.0) * (1.0 / 64.0)
    e = 1.0 - h * (1.0 - 0.5 * h)
    e = e * e
    e = e * e
    e = e * e
    e = e * e
    e = e * e
    e = e * e  # (1 - h + h**2/2)**64
    e = e * (1.0 + 1e-12)
    return e if e < 1.0 else 1.0


@numba.njit(cache=True, nogil=True, error_model="numpy")
def capped(
    n: float, b: float, r: float, eb: float, t: float, top: float, top_q: float, first: float, first_q: float
) -> float:  # pragma: no cover - compiled
    """The power bound on the exact cost of a bucket of ``n >= B`` samples with ``r`` in the
    short batch, from ``eb <= E_B[g_B]`` and ``t >= T_B[g_B]``, ``base`` and ``q`` at its
    longest (``top``, ``top_q``) and shortest length (before the margin and the per-batch
    seconds)."""
    g_top = top + r * top_q
    s_r = g_top - (first + r * first_q)
    return (n - r) * eb + r * (g_top - s_r * power_cap(t, s_r, n, b, r))


@numba.njit(cache=True, nogil=True, error_model="numpy", inline="always")
def takes_power(short: Short, bf: float) -> bool:  # pragma: no cover - compiled
    """Whether the bounds of batches of ``bf`` are raised to the power bound (:func:`power_bounds`,
    :func:`power_bounds_within` and the backward pass's tiles): ``B > POWER_ABOVE``, steps
    ``>= 0`` (``Short.power``: the bound holds), and no chords read (``Short.chords``).  Beside
    the chords it paid nothing back: without it the forward pass took the same time on
    alpaca_eval_outputs at batch size 100 and the backward pass 1.9 ms less (of 14.0).  ``K =
    6`` took 0.82x to 0.94x the time on gsm8k, tldr_pages and arena_hard_answers at batch sizes
    100 to 1,000, 0.91x to 0.99x on alpaca_eval_outputs at 100 to 1,500; elsewhere (moss, the
    bundled data, whose bounds mostly read no chords, and alpaca from 3,000) within the runs'
    noise, 0.93x to 1.13x; the same plans (two runs of ``benchmarks/bench_against.py`` beside
    a checkout from before)."""
    return short.power and not short.chords and bf > POWER_ABOVE


@numba.njit(cache=True, nogil=True, error_model="numpy")
def power_bounds(
    i: int, data: Arrays, short: Short, t: np.ndarray, out: np.ndarray
) -> None:  # pragma: no cover
    """``out[j]`` (the bounds of :func:`~analysis.optimize._lower.fixed_bounds` from
    ``t[j] = T_B(i, j)``, one fixed ``B``) raised to the power bound where higher, for every
    ``j > i + 1`` with a full batch (nothing where :func:`takes_power` is false).  The rows
    are sliced from the first such ``j`` (an index from 0 is known not to wrap: the loop is
    vectorised)."""
    bf = float(data.size[i + 1])
    if not takes_power(short, bf):
        return
    count = short.cum_float
    c_i = count[i]
    first = max(i + 2, i + 1 + np.searchsorted(count[i + 1 :], c_i + bf, side="left"))  # n >= B
    cnt, w, tt, low_row = count[first:], data.weight[first:], t[first:], out[first:]
    base, q = short.base[first:], short.q[first:]
    base_first, q_first, per_batch = short.base[i + 1], short.q[i + 1], data.per_batch
    for k in range(cnt.size):
        low = power_bound(
            cnt[k] - c_i, w[k] - tt[k], tt[k], bf, base[k], q[k], base_first, q_first, per_batch
        )
        old = low_row[k]
        low_row[k] = low if low > old else old  # (inf where not an end stays inf)


@numba.njit(cache=True, nogil=True, error_model="numpy")
def power_bounds_within(
    i: int, data: Arrays, short: Short, t: np.ndarray, out: np.ndarray, room: np.ndarray
) -> None:  # pragma: no cover
    """:func:`power_bounds` only where ``out[j] <= room[j]``: elsewhere the raised bound, at
    least ``out[j]``, is above ``room[j]`` either way (all the forward pass asks of a bound,
    and the power bound costs several times the rest of it)."""
    bf = float(data.size[i + 1])
    if not takes_power(short, bf):
        return
    count = short.cum_float
    m = count.size - 1
    c_i = count[i]
    first = max(i + 2, i + 1 + np.searchsorted(count[i + 1 :], c_i + bf, side="left"))  # n >= B
    base_first, q_first, per_batch = short.base[i + 1], short.q[i + 1], data.per_batch
    for j in range(first, m + 1):
        old = out[j]
        if old <= room[j]:
            n, tj = count[j] - c_i, t[j]
            low = power_bound(
                n, data.weight[j] - tj, tj, bf, short.base[j], short.q[j], base_first, q_first, per_batch
            )
            out[j] = low if low > old else old


@numba.njit(cache=True, nogil=True, error_model="numpy", inline="always")
def power_bound(
    n: float,
    eb: float,
    t: float,
    bf: float,
    top: float,
    top_q: float,
    first: float,
    first_q: float,
    per_batch: float,
) -> float:  # pragma: no cover - compiled
    """The power bound of :func:`power_bounds` on one bucket of ``n >= B`` samples (``bf``:
    ``B``) from ``eb <= E_B[g_B]`` and ``t >= T_B[g_B]`` (:func:`capped`'s other arguments),
    with the margin and the per-batch seconds (the backward pass's tiles read it lane by lane)."""
    inv_b = 1.0 / bf
    full = (n * inv_b + _ROUND) - _ROUND  # the nearest integer (n < 2**52), then corrected
    r = n - full * bf
    full = full - 1.0 if r < 0.0 else full  # floor(n / B)
    r = n - full * bf
    low = capped(n, bf, r, eb, t, top, top_q, first, first_q)
    return float(low * (1.0 - LOW_SLACK) + per_batch * (full + (1.0 if r > 0.0 else 0.0)))


@numba.njit(cache=True, nogil=True, error_model="numpy")
def cut_cost(i: int, j: int, data: Arrays, short: Short) -> float:  # pragma: no cover - compiled
    """Bucket ``(i, j]``'s exact objective (one fixed ``B``) with ``T_B`` too summed only from
    the first end whose count passes ``n 2**(-70/B)`` (as :func:`carried_row` sums a residue
    above ``_CARRY_MAX``, and every residue here): each term left out is at most ``2**-70``
    of its step, so this is :func:`exact_row`'s cost to about ``1e-20`` of itself, from a few
    ends instead of the row's (an estimate to compare plans by, not a cost the DP reads)."""
    cum = data.cum
    ci = cum[i]
    n = cum[j] - ci
    b = data.size[j]
    r = n % b if n >= b else 0
    sums = np.zeros(4)
    for c in range(2):
        s = b if c == 0 else r
        if s > 0 and n >= s:
            cut = ci + n * 2.0 ** (-70.0 / s)
            first = i + 1 + np.searchsorted(cum[i + 1 : j], cut, side="right")
            if c == 0:  # (literal flags, as every caller passes them: a bool compiles _advance again)
                _, sums[0], sums[1] = _advance(ci, first, 0.0, 0.0, j, s, cum, short, True, data)
            else:
                _, sums[2], sums[3] = _advance(ci, first, 0.0, 0.0, j, s, cum, short, False, data)
    return _bucket_cost(n, b, _at(j, data, short), (sums[0], sums[1], sums[2], sums[3]))
