"""``O(1)`` lower bounds on the exact cost of every bucket of a start's row, compiled: what
the pruned DP (:mod:`analysis.optimize._pruned`) rules buckets out with.

For a fixed ``B`` the chord bound of :mod:`analysis.optimize._exact` is computed
straight from the row's running sum ``T_B`` (``E_B = w_j - T_B``), in three steps that the
backward pass (:mod:`analysis.optimize._backward`) runs lane by lane for tiles of starts:
:func:`fixed_ratios` (the ratios ``C(x_{j-1}, B) / C(x_j, B)``, nothing carried: vectorised),
the chain ``T`` (:func:`chain`), then :func:`fixed_bounds` (nothing carried: vectorised).
The formula of one bucket's bound is :func:`fixed_bound`, the one home that the rows, the
backward pass's tiles (the same three steps lane by lane) and :func:`fixed_path_end` (a
row's bounds one end at a time, up to the end the search asks for) all read.
Where the DP asks (``Short.chords``: :func:`chord_sizes`) a bucket's short batch also reads the
chords through ``E_s`` at two sizes ``s`` below ``B``, each from a running sum ``T_s`` carried
as ``T_B`` is (:func:`chord_ratio`; a row's: :func:`chord_sums`).
With a token budget the bounds come from the restart-free sums of
:mod:`analysis.optimize._budget` (:func:`budget_bound`, one bucket's: the home that the rows
and the backward pass's tiles both read).  :func:`low_costs` gives one start's row either way,
and :func:`low_costs_within` the row the forward pass compares with its room (the power bound
only where the bound before it fits: above the room, a bound stays above it).
:func:`residue_bound` is one bucket's tighter bound where its short batch is a small part of
a large ``B`` (its sums carried over the last ends, with bounds on the ratios: ``O(ends)``),
which the forward pass asks only of the buckets that the row's bounds leave in.
"""

from __future__ import annotations

import numba
import numpy as np

from analysis.optimize._budget import BudgetBounds, full_bound, ones_bound
from analysis.optimize._costs import INF, Arrays
from analysis.optimize._exact import (
    FEW_STEPS,
    LOW_SLACK,
    POWER_ABOVE,
    RATIO_GROW,
    Short,
    capped,
    power_bounds,
    power_bounds_within,
    ratio_bounds,
    ratio_few,
    ratio_upper,
    takes_power,
)

_ROUND = 2.0**52  # x + 2**52 - 2**52 rounds 0 <= x < 2**52 to the nearest integer
# Relative margin per sample beside ``LOW_SLACK`` of the bounds that read a bucket's samples
# one by one (:func:`residue_bound`, the product path's last bucket): found by the property
# test, 1.1e-8 low at 2.2e8 samples, which came from the exact ratios above 16; those now keep
# a few ulps of themselves (:func:`~analysis.optimize._exact.short_ratio`) and the case passes
# without it: kept as a cheap cover; at the bundled data's 902,087 samples it adds 4e-10.
COUNT_SLACK = 4.0 * 2.0**-53
# :func:`residue_bound` sums its terms exactly from the first end whose count passes
# ``n 2**(-_RESIDUE_CUT / r)`` (each term below weighs at most ``2**-_RESIDUE_CUT`` of its step).
_RESIDUE_CUT = 20.0


# Batch sizes from which the product formula's ratios over at most ``FEW_STEPS`` samples are
# taken by :func:`~analysis.optimize._exact.ratio_few` instead (``B / 2`` pairs of factors at
# both ends against one quotient).  Measured on the bundled data, the backward pass alone
# (min of 5): from 32 it took batch sizes 32 / 48 / 64 from 0.111 / 0.126 / 0.146 s to 0.095 /
# 0.099 / 0.107 s; from 16 rather than 32, batch sizes 16 and 24 0.104 / 0.113 s -> 0.090 /
# 0.097 s.
FEW_PRODUCT_FROM = 16


@numba.njit(cache=True, nogil=True, error_model="numpy")
def fixed_ratios(
    i: int, data: Arrays, short: Short, cx: np.ndarray, ratio: np.ndarray
) -> None:  # pragma: no cover - compiled
    """``ratio[j] = C(x_{j-1}, B) / C(x_j, B)`` for ``i + 2 <= j <= m`` (0 below a full batch),
    from the table of ``C(x, B)`` or products, else at least it (``ratio_bounds``: a valid
    bound reads it); ``cx`` a work row (``C(x_j, B)``)."""
    cum, comb = data.cum, data.comb
    m = cum.size - 1
    ci = cum[i]
    b = data.size[i + 1]
    bf = float(b)
    if comb.size:
        for j in range(i + 1, m + 1):  # one read of the table per end, then the quotients
            cx[j] = comb[cum[j] - ci]
        for j in range(i + 2, m + 1):
            ratio[j] = cx[j - 1] / cx[j] if cx[j] > 0.0 else 0.0  # (0 below a full batch)
    elif short.product:  # C(x, B) by the product formula, two factors at a time (vectorised)
        count = short.cum_float
        c_i = count[i]
        pairs = product_pairs(b)
        u = ratio[i + 1 : m + 1]  # x_j (x_j - B + 1), then C(x_j, B) in cx (ratio is free until below)
        y = cx[i + 1 : m + 1]
        for j in range(u.size):
            x = count[i + 1 + j] - c_i
            y[j], u[j] = pair_start(x, pairs)
        for f in range(b // 2):  # C(x, B) = y * prod_f (u + c_f) d_f (:func:`product_pairs`)
            c, d = pairs[0, f], pairs[1, f]
            for j in range(y.size):
                y[j] *= (u[j] + c) * d
        grow = product_grow(b)
        for j in range(i + 2, m + 1):  # (over at most FEW_STEPS samples ratio_few: the same floats)
            ok = (cx[j] > 0.0) & (count[j - 1] - c_i >= bf)
            d = count[j] - count[j - 1]
            few = ratio_few(count[j] - c_i, d, bf, grow)
            pf = (cx[j - 1] / cx[j]) * grow
            ratio[j] = (
                (few if (d <= FEW_STEPS) & (b >= FEW_PRODUCT_FROM) else pf) if ok else 0.0
            )  # (0 below B)
    else:  # 0 while x_{j-1} < B, then bounds on the ratios
        full = i + 2 + np.searchsorted(cum[i + 1 : m], ci + b, side="left")  # first x_{j-1} >= B
        ratio[i + 2 : full] = 0.0
        ratio_bounds(i, full, data, short, ratio)  # at least each ratio: flops only


@numba.njit(cache=True, nogil=True, error_model="numpy")
def product_pairs(b: int) -> np.ndarray:  # pragma: no cover - compiled
    """The product formula's constants, its factors two at a time: ``C(x, B) = y0 prod_f
    (u + c_f) d_f`` over ``f < B // 2``, ``u = x (x - B + 1)``, the factors ``x - f`` and
    ``x - (B - 1 - f)`` paired (``(x - f)(x - B + 1 + f) = u + c_f``, ``c_f = f (B - 1 - f)``)
    over ``d_f = 1 / ((f + 1)(B - f))``; for an odd ``B`` the middle factor starts the product,
    ``y0 = (x - h) / (h + 1)``, ``h = (B - 1) / 2`` (:func:`pair_start`).  ``out[0, f] = c_f``,
    ``out[1, f] = d_f``; ``out[:, B // 2] = (h, 1 / (h + 1))`` for an odd ``B``; ``B`` columns
    (its shape says ``B``).  Half the products of one factor at a time; for integer ``x``
    below about ``9e7`` (``u < 2**53``) every ``u + c_f`` is exact, and ``C(x, B)`` is exactly
    0 for ``0 <= x < B`` (one pair, or the middle factor, is)."""
    out = np.zeros((2, b))
    bf = float(b)
    for f in range(b // 2):
        ff = float(f)
        out[0, f] = ff * (bf - 1.0 - ff)
        out[1, f] = 1.0 / ((ff + 1.0) * (bf - ff))
    if b % 2:
        h = float(b // 2)
        out[0, b // 2] = h
        out[1, b // 2] = 1.0 / (h + 1.0)
    return out


@numba.njit(cache=True, nogil=True, error_model="numpy", inline="always")
def pair_start(x: float, pairs: np.ndarray) -> tuple[float, float]:  # pragma: no cover - compiled
    """:func:`product_pairs`' start at ``x``: ``y0`` (the middle factor for an odd ``B``, else
    1) and ``u = x (x - B + 1)``, which every pair's factor ``(u + c_f) d_f`` reads."""
    b = pairs.shape[1]
    h = b // 2
    return ((x - pairs[0, h]) * pairs[1, h] if b % 2 else 1.0), x * (x - (float(b) - 1.0))


@numba.njit(cache=True, nogil=True, error_model="numpy", inline="always")
def product_grow(b: int) -> float:  # pragma: no cover - compiled
    """``1 + (8 B + 8) 2**-53``: what the bounds multiply each ratio ``C(x_{j-1}, B) / C(x_j, B)``
    of the product formula by, so that their running sum ``T_B`` is at least the exact
    cost's (:mod:`analysis.optimize._exact`), whose ``w - T_B`` may read a ratio's rounding
    ``T_B / E_B`` times over (``1e9`` times: a billion samples of length 1 beside one of
    ``1e9``).  Per step, in units of ``2**-53``: the formula's ``C(x, B)``, at most
    ``2.5 B + 2`` (:func:`product_pairs`: per pair ``u``, ``u + c_f``, a rounded ``d_f`` and
    two products, the middle factor's rounded inverse and product), so its quotient
    ``5 B + 5``; the exact cost's ratio, at most ``2 B + 1`` (a product of ``B`` quotients, or
    of fewer: :func:`~analysis.optimize._exact.short_ratio`); each running sum's sum and
    product, 2; this product, 1: at most ``7 B + 9 <= 8 B + 8`` in all, so each term of the
    bounds' sum, a product of ratios, is at least the exact cost's."""
    return 1.0 + (8.0 * b + 8.0) * 2.0**-53


@numba.njit(cache=True, nogil=True, error_model="numpy")
def chain(j0: int, j1: int, t: float, step: np.ndarray, ratio: np.ndarray) -> float:  # pragma: no cover
    """A start's running sum ``T(j) = (T(j - 1) + step[j - 1]) * ratio[j]`` into ``ratio[j]`` for
    ``j0 <= j < j1`` (``T`` at ``j0 - 1`` given: ``t``, 0 at the start's first end); returns
    ``T`` at ``j1 - 1``."""
    for j in range(j0, j1):
        t = (t + step[j - 1]) * ratio[j]
        ratio[j] = t
    return t


@numba.njit(cache=True, nogil=True, error_model="numpy")
def fixed_first(i: int, data: Arrays, short: Short, is_end: np.ndarray) -> float:  # pragma: no cover
    """The bound on bucket ``(i, i + 1]`` (one length: one batch, or full ones of it; inf where
    not an end): for full batches ``E_B = w`` exactly, so the chord's at ``T = 0``."""
    if not is_end[i + 1]:
        return INF
    count = short.cum_float
    n = count[i + 1] - count[i]
    bf = float(data.size[i + 1])
    if n < bf:
        return float(n * (short.base[i + 1] + n * short.q[i + 1]) + data.per_batch)
    full = np.floor(n / bf)
    r = n - full * bf
    w = data.weight[i + 1]
    low = (n - r) * w + r * (short.base[i + 1] + r * short.q[i + 1])
    steps = data.per_batch * (full + (1.0 if r > 0.0 else 0.0))
    return float(low * (1.0 - LOW_SLACK) + steps)


# Batch sizes from which the bounds may read the chords (:func:`chord_sizes`).  Measured with
# the chords always read against never, K = 6, one process, where the gate (``_pruned._loose``)
# opens: at 24 and 28 (chords through E_4 and E_16) 0.36x to 0.96x the time on the shared
# files; at 16 and 20 up to 1.15x and 1.19x (``benchmarks/chords_gate.py 16,20,24,28``).
_CHORDS_FROM = 24
# ... and up to which: where the gate opens 0.34x to 0.90x the time from 1,500 to 10**4 on the
# shared files (1.06x at 10**4 on tldr); the bundled data, 1.00x to 1.36x there, keeps its
# gate shut (``benchmarks/chords_gate.py 1500,2000,3000,4096,5000,10000``).
_CHORDS_TO = 10_000
# :func:`fixed_bound`'s ``chords`` where none are read.
NO_CHORDS = (0.0, 0.0, 0.0, 0.0)

# Batch sizes whose bounds read the chord from E_1 (:func:`fixed_bound`), a division per bucket.
# Below, the bounds lie within 1e-5 of the optimum without it (batch size 8 on the bundled data:
# 6e-6) and it cost batch size 8's backward pass 0.071 -> 0.093 s; above ``POWER_ABOVE`` the
# power bound takes the short batch, and it cost more than it pruned (batch sizes 100 to 10**5,
# 0.19-0.26 s either way).  Between, it cut the forward pass at 17 / 32 / 48 / 64 from 0.040 /
# 0.057 / 0.082 / 0.103 s to 0.020 / 0.029 / 0.036 / 0.048 s (rerun the goals:
# ``benchmarks/bench_optimize.py --goals``).
_MEAN_FROM = 16


@numba.njit(cache=True, nogil=True, error_model="numpy", inline="always")
def mean_scale(short: Short) -> float:
    """What ``above[i]`` is scaled by before :func:`mean_low` reads a mean from it: ``1 - (2 m +
    4) 2**-53`` (each sum from the top within ``m + 1`` ulps of itself, and the product's
    rounding) where ``E_r`` is concave in ``r`` (``q = 0``, steps ``>= 0``: the module
    docstring of :mod:`analysis.optimize._exact`), else 0 (no mean is read)."""
    if short.quad or not short.power:
        return 0.0
    return 1.0 - (2.0 * short.above.size + 4.0) * 2.0**-53


@numba.njit(cache=True, nogil=True, error_model="numpy", inline="always")
def row_mean_scale(short: Short, bf: float) -> float:
    """:func:`mean_scale` where every bucket's bound of batches of ``bf`` reads its mean
    (``_MEAN_FROM <= B <= POWER_ABOVE``), else 0."""
    return mean_scale(short) if _MEAN_FROM <= bf <= POWER_ABOVE else 0.0


@numba.njit(cache=True, nogil=True, error_model="numpy", inline="always")
def chord_sizes(short: Short, bf: float) -> tuple[float, float]:
    """The subset sizes ``s_1``, the power of two nearest ``sqrt(B)`` (in ``log2``; halved
    where ``4 s_1`` would reach ``B``), and ``s_2 = 4 s_1`` (8 and 32 at batch size 64, 32 and
    128 at 1,000) whose running sums ``T_s`` the bounds of batches of ``bf`` carry beside
    ``T_B`` (:func:`fixed_bound`'s ``chords``), where ``_CHORDS_FROM <= B <= _CHORDS_TO``,
    ``E_s`` is concave in ``s`` (:func:`mean_scale`: ``q = 0``, steps ``>= 0``) and
    ``short.chords`` asks for them, else ``(0, 0)``: none carried.

    The sizes were measured (K = 6, the shared files, batch sizes 64 to 1,000: the pairs
    ``(4, 16)`` to ``(64, 256)``, and the two largest powers of two below ``B`` these replace,
    which took 1.1x to 9x the time of the best pair at 100 to 1,000); a short batch of
    ``r`` reads the chord of its bracket among ``1, s_1, s_2, B`` (``chords_gate.py``)."""
    if not short.chords or bf < _CHORDS_FROM or bf > _CHORDS_TO or mean_scale(short) == 0.0:
        return 0.0, 0.0
    s1 = 2.0 ** np.floor(0.5 * np.log2(bf) + 0.5)
    s1 = s1 * 0.5 if 4.0 * s1 >= bf else s1
    return s1, 4.0 * s1


@numba.njit(cache=True, nogil=True, error_model="numpy", inline="always")
def chord_ratio(x_prev: float, x: float, sf: float) -> float:
    """The ratio a chord's running sum ``T_s`` (:func:`chord_sizes`: ``s`` a power of two) takes
    from ``x_prev`` to ``x`` samples, at least ``C(x_prev, s) / C(x, s)``, 0 while ``x_prev <
    s`` (up to a start too): over at most ``FEW_STEPS`` samples
    :func:`~analysis.optimize._exact.ratio_few`, else :func:`power_quotient` squared
    ``log2 s`` times, times :func:`power_grow` (the backward pass's lanes square all at once:
    the same floats)."""
    d = x - x_prev
    if d <= FEW_STEPS:
        ratio = ratio_few(x, d, sf, RATIO_GROW)
    else:
        ratio = power_quotient(x_prev, x, sf)
        k = 1.0
        while k < sf:
            ratio *= ratio
            k += k
        ratio *= power_grow(sf)
    return ratio if x_prev >= sf else 0.0


@numba.njit(cache=True, nogil=True, error_model="numpy", inline="always")
def power_quotient(a: float, b: float, sf: float) -> float:
    """``(a - h) / (b - h)``, ``h = (s - 1) / 2``: its ``s``-th power is at least ``C(a, s) / C(b, s)
    = prod_{t < s} (a - t) / (b - t)`` for ``s <= a < b`` (``log((a - t) / (b - t))`` is
    concave in ``t``, so the mean of its ``s`` values is at most its value at their mean ``h``:
    Jensen), within ``s**3 d / (12 a**3)`` of it per end of ``d`` samples; one division where
    :func:`~analysis.optimize._exact.ratio_bound` reads a series."""
    h = (sf - 1.0) * 0.5
    return (a - h) / (b - h)


@numba.njit(cache=True, nogil=True, error_model="numpy", inline="always")
def power_grow(sf: float) -> float:
    """What :func:`chord_ratio` multiplies the ``s``-th power of :func:`power_quotient` by so
    that it stays at least the ratio: ``RATIO_GROW`` and ``4 s`` ulps (the quotient's rounding
    doubled by each of ``log2 s`` squarings, and each squaring's own: under ``2 s`` ulps)."""
    return RATIO_GROW + 4.0 * sf * 2.0**-53


@numba.njit(cache=True, nogil=True, error_model="numpy", inline="always")
def mean_low(a_i: float, above_j: float, n: float) -> float:
    """At least the mean ``base`` of the ``n`` samples of ``(i, j]``, ``E_1``, from ``a_i =
    above[i] * mean_scale`` (the difference of the sums above ``i`` and ``j`` less their
    rounding), or -1 where ``a_i`` is 0 (no mean read: :func:`fixed_bound` takes none)."""
    return (a_i - above_j) / n if a_i > 0.0 else -1.0


@numba.njit(cache=True, nogil=True, error_model="numpy", inline="always")
def fixed_bound(
    n: float,
    eb: float,
    mean: float,
    bf: float,
    first: tuple[float, float, float],
    base_j: float,
    q_j: float,
    quad: bool,
    per_batch: float,
    chords: tuple[float, float, float, float],
) -> float:  # pragma: no cover - compiled
    """The bound of :func:`fixed_bounds` on one bucket of ``n`` samples whose full batches'
    ``E_B`` is at least ``eb`` (``first``: the row's ``g_B``, ``base`` and ``q`` at its first
    end; ``base_j``, ``q_j``: at the bucket's end; ``quad``: whether ``q`` is nonzero).  The
    short batch of ``r`` samples costs ``r E_r``, at least the chord from ``base`` at the
    first end (``r = 0``) to ``E_B``; where ``mean >= 0`` (:func:`mean_low`, at most ``E_1``:
    ``E_r`` concave in ``r``), also at least the chord from ``E_1`` to ``E_B``, tighter by as
    much as the bucket's mean lies above its shortest length (a heavy-tailed bucket).

    ``chords = (s_1, s_2, e_1, e_2)``: where ``s_1 > 0`` (:func:`chord_sizes`, only without
    ``q``), ``e_t`` at most ``E_{s_t}`` (``w - T_{s_t}``, its running sum by
    :func:`chord_ratio`), and ``E_r`` also at least the chord of the bracket that holds ``r``
    among ``1`` (``E_1`` at least ``mean``; where no mean is read, ``0``, where ``E_0`` is
    the shortest length), ``s_1``, ``s_2`` and ``B`` (between two sizes a concave ``E`` lies
    above its chord, and the chord only rises with its ends' values): where ``B`` is far
    above ``r``, far tighter than the chord from ``E_1`` to ``E_B`` (a short batch of half a
    batch draws nearly what a full one draws, which one chord across the whole range cannot
    see)."""
    g_first, base_first, q_first = first
    inv_b = 1.0 / bf
    full = (n * inv_b + _ROUND) - _ROUND  # the nearest integer (n < 2**52), then corrected
    r = n - full * bf
    full = full - 1.0 if r < 0.0 else full  # floor(n / B)
    r = n - full * bf
    f = r * inv_b
    f = f * f if quad else f
    d = eb - g_first
    d = d if d > 0.0 else 0.0
    e_r = (base_first + r * q_first) + f * d
    c1 = mean + ((r - 1.0) * (1.0 / (bf - 1.0))) * (eb - mean)  # (B = 1: r = 0, not read)
    e_r = c1 if (mean >= 0.0) & (r > 0.0) & (c1 > e_r) else e_r
    s1, s2, e1, e2 = chords
    e0s, e0 = (1.0, mean) if mean >= 0.0 else (0.0, base_first)  # (E_0: the shortest length)
    lo_s, lo_e = (e0s, e0) if r <= s1 else ((s1, e1) if r <= s2 else (s2, e2))
    hi_s, hi_e = (s1, e1) if r <= s1 else ((s2, e2) if r <= s2 else (bf, eb))
    c2 = lo_e + ((r - lo_s) / (hi_s - lo_s)) * (hi_e - lo_e)  # (s_1 = 0: not read)
    e_r = c2 if (s1 > 0.0) & (r > 0.0) & (c2 > e_r) else e_r
    low = (n - r) * eb + r * e_r
    steps = per_batch * (full + (1.0 if r > 0.0 else 0.0))
    alone = n * (base_j + n * q_j) + per_batch  # one batch of n samples: exact
    return float(alone if n < bf else low * (1.0 - LOW_SLACK) + steps)


@numba.njit(cache=True, nogil=True, error_model="numpy")
def fixed_bounds(
    i: int, data: Arrays, short: Short, is_end: np.ndarray, t: np.ndarray, out: np.ndarray
) -> None:  # pragma: no cover - compiled
    """``out[j]`` for ``i + 2 <= j <= m``: the bound of
    :mod:`analysis.optimize._exact` (the chord, then the power bound where higher) on the exact
    cost of ``(i, j]`` for one fixed ``B`` from ``t[j] = T_B(i, j)`` (:func:`fixed_chords`)."""
    fixed_chords(i, data, short, is_end, t, out)
    power_bounds(i, data, short, t, out)  # higher where B is large


@numba.njit(cache=True, nogil=True, error_model="numpy")
def chord_sums(
    i: int, data: Arrays, short: Short, sizes: tuple[float, float]
) -> np.ndarray:  # pragma: no cover - compiled
    """``out[t, j]``: the running sum ``T_{s_t}`` of the sizes ``sizes`` (:func:`chord_sizes`)
    from start ``i`` to end ``j``, ``i + 2 <= j <= m`` (0 at ``i + 1``), its ratios by
    :func:`chord_ratio` (as :func:`chain` carries ``T_B``: the same floats as the backward
    pass's lanes)."""
    count = short.cum_float
    m = count.size - 1
    c_i = count[i]
    out = np.zeros((2, m + 1))
    for t in range(2):
        sf = sizes[t]
        row = out[t]
        for j in range(i + 2, m + 1):
            row[j] = chord_ratio(count[j - 1] - c_i, count[j] - c_i, sf)
        chain(i + 2, m + 1, 0.0, data.step, row)
    return out


@numba.njit(cache=True, nogil=True, error_model="numpy")
def fixed_chords(
    i: int, data: Arrays, short: Short, is_end: np.ndarray, t: np.ndarray, out: np.ndarray
) -> None:  # pragma: no cover - compiled
    """:func:`fixed_bounds` before the power bound: :func:`fixed_bound` of every end (inf where
    not an end; ``floor(n / B)`` of the rounded quotient, corrected: branch-free, vectorised),
    with the chords' sums where :func:`chord_sizes` carries them (:func:`chord_sums`)."""
    c_i = short.cum_float[i]
    bf = float(data.size[i + 1])
    first = (data.weight[i + 1], short.base[i + 1], short.q[i + 1])  # (a fixed B: weight2 is 0)
    a_i = short.above[i] * row_mean_scale(short, bf)
    sizes = chord_sizes(short, bf)
    j0 = i + 2  # (the rows sliced from j0: an index from 0 is known not to wrap, vectorised)
    count, w, tt, base, q = short.cum_float[j0:], data.weight[j0:], t[j0:], short.base[j0:], short.q[j0:]
    end, row, per_batch, above = is_end[j0:], out[j0:], data.per_batch, short.above[j0:]
    if sizes[0] > 0.0:
        ts = chord_sums(i, data, short, sizes)
        t1, t2 = ts[0, j0:], ts[1, j0:]
        for k in range(count.size):
            n, eb = count[k] - c_i, w[k] - tt[k]
            mean = mean_low(a_i, above[k], n)
            chords = (sizes[0], sizes[1], w[k] - t1[k], w[k] - t2[k])
            low = fixed_bound(n, eb, mean, bf, first, base[k], q[k], short.quad, per_batch, chords)
            row[k] = low if end[k] else INF
        return
    for k in range(count.size):
        n, eb = count[k] - c_i, w[k] - tt[k]
        mean = mean_low(a_i, above[k], n)
        low = fixed_bound(n, eb, mean, bf, first, base[k], q[k], short.quad, per_batch, NO_CHORDS)
        row[k] = low if end[k] else INF


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _product(x: float, pairs: np.ndarray) -> float:  # pragma: no cover - compiled
    """``C(x, B)`` by the product formula, two factors at a time as :func:`fixed_ratios` has it
    (``pairs``: :func:`product_pairs`)."""
    y, u = pair_start(x, pairs)
    for f in range(pairs.shape[1] // 2):
        y *= (u + pairs[0, f]) * pairs[1, f]
    return y


@numba.njit(cache=True, nogil=True, error_model="numpy")
def fixed_path_end(
    i: int, target: float, after: np.ndarray, data: Arrays, short: Short, is_end: np.ndarray
) -> int:  # pragma: no cover - compiled
    """The first ``j > i`` whose bound plus ``after[j]`` is ``target`` (``m`` if none before
    it), the bounds of :func:`low_costs` one end at a time from ``i + 1`` (one fixed ``B``,
    ``C(x, B)`` by the product formula: the same floats as its three steps)."""
    count = short.cum_float
    m = count.size - 1
    c_i = count[i]
    b = data.size[i + 1]
    bf = float(b)
    if i + 1 >= m or fixed_first(i, data, short, is_end) + after[i + 1] == target:
        return i + 1
    first = (data.weight[i + 1], short.base[i + 1], short.q[i + 1])
    a_i = short.above[i] * row_mean_scale(short, bf)
    s1, s2 = chord_sizes(short, bf)
    pairs = product_pairs(b)
    prev = _product(count[i + 1] - c_i, pairs)
    grow = product_grow(b)
    t = t1 = t2 = 0.0
    for j in range(i + 2, m):
        x = count[j] - c_i
        y = _product(x, pairs)
        x_prev = count[j - 1] - c_i
        ok = (y > 0.0) & (x_prev >= bf)
        d = count[j] - count[j - 1]
        ratio = ratio_few(x, d, bf, grow) if (d <= FEW_STEPS) & (b >= FEW_PRODUCT_FROM) else (prev / y) * grow
        st = data.step[j - 1]
        t = (t + st) * (ratio if ok else 0.0)
        if s1 > 0.0:  # (the chords' sums as chord_sums carries them)
            t1 = (t1 + st) * chord_ratio(x_prev, x, s1)
            t2 = (t2 + st) * chord_ratio(x_prev, x, s2)
        prev = y
        mean = mean_low(a_i, short.above[j], x)
        w = data.weight[j]
        chords = (s1, s2, w - t1, w - t2)
        base_j, q_j = short.base[j], short.q[j]
        low = fixed_bound(x, w - t, mean, bf, first, base_j, q_j, short.quad, data.per_batch, chords)
        if is_end[j] and low + after[j] == target:
            return j
    return m


@numba.njit(cache=True, nogil=True, error_model="numpy")
def low_costs(
    i: int,
    data: Arrays,
    short: Short,
    bounds: BudgetBounds,
    is_end: np.ndarray,
    ratio: np.ndarray,
    out: np.ndarray,
) -> None:  # pragma: no cover - compiled
    """Lower bounds on the exact cost of every bucket ``(i, j]``, ``j > i`` (inf where not an
    end); ``ratio`` a work row."""
    if data.token:
        budget_row(i, data, short, bounds, is_end, out, out[:0])
        return
    fixed_row(i, data, short, is_end, ratio, out)


@numba.njit(cache=True, nogil=True, error_model="numpy")
def fixed_row(
    i: int, data: Arrays, short: Short, is_end: np.ndarray, ratio: np.ndarray, out: np.ndarray
) -> None:  # pragma: no cover - compiled
    """:func:`low_costs` for one fixed ``B`` (what a caller that knows the rule compiles alone)."""
    fixed_ratios(i, data, short, out, ratio)
    chain(i + 2, out.size, 0.0, data.step, ratio)
    fixed_bounds(i, data, short, is_end, ratio, out)
    out[i + 1] = fixed_first(i, data, short, is_end)


@numba.njit(cache=True, nogil=True, error_model="numpy")
def low_costs_within(
    i: int,
    data: Arrays,
    short: Short,
    bounds: BudgetBounds,
    is_end: np.ndarray,
    room: np.ndarray,
    ratio: np.ndarray,
    out: np.ndarray,
) -> None:  # pragma: no cover - compiled
    """:func:`low_costs` where ``out[j] <= room[j]`` may hold, and where it cannot a value above
    ``room[j]`` (for one fixed ``B`` the bound before the power bound, which only raises it:
    :func:`~analysis.optimize._exact.power_bounds_within`), so ``out[j] <= room[j]`` exactly
    where the bound is within it."""
    if data.token:
        budget_row(i, data, short, bounds, is_end, out, room)
        return
    fixed_ratios(i, data, short, out, ratio)
    chain(i + 2, out.size, 0.0, data.step, ratio)
    fixed_chords(i, data, short, is_end, ratio, out)
    power_bounds_within(i, data, short, ratio, out, room)
    out[i + 1] = fixed_first(i, data, short, is_end)


@numba.njit(cache=True, nogil=True, error_model="numpy", inline="always")
def budget_first(
    i: int, data: Arrays, short: Short, bounds: BudgetBounds
) -> tuple[float, ...]:  # pragma: no cover
    """What :func:`budget_bound` reads at start ``i``: its count and prefix weight, ``w``,
    ``w2``, ``base`` and ``q`` at its first end, and whether the power bound applies (1.0:
    :func:`~analysis.optimize._exact.takes_power` at ``B`` there; a float, as the tiles hold it)."""
    power = 1.0 if takes_power(short, float(data.size[i + 1])) else 0.0
    return (
        bounds.cum_float[i],
        bounds.mass[i],
        data.weight[i + 1],
        data.weight2[i + 1],
        short.base[i + 1],
        short.q[i + 1],
        power,
    )


@numba.njit(cache=True, nogil=True, error_model="numpy", inline="always")
def budget_bound(
    cj: float,
    end: tuple[float, float, float, float, float, float, float, float],
    t: float,
    t2: float,
    first: tuple[float, ...],
    err: float,
    quad: bool,
    per_batch: float,
    power: bool,
) -> float:  # pragma: no cover - compiled
    """A lower bound on the exact cost of bucket ``(i, j]`` under a token budget (``cj``: the
    count up to ``j``; ``end``: ``B``, ``1 / B``, ``w``, ``w2``, ``base``, ``q``, ``mass`` and
    ``1 / (B - 1)`` at ``j``; ``t``, ``t2``: the table's sums; ``first``:
    :func:`budget_first`), with the power bound where it applies and the chord from ``E_1``
    if ``power`` (a constant: the
    backward pass asks for them only where the rest cannot rule the bucket out; each only
    raises the bound, the chords' short batch maxed before the same monotone rounding and the
    power value after it, so either way the same floats where it is asked).

    Below a full batch the exact cost (one batch of ``n``); in batches of one the sum of the
    weights (:func:`~analysis.optimize._budget.ones_bound`); else the full batches at
    ``eb <= E_B`` (:func:`~analysis.optimize._budget.full_bound`) and the short batch of ``r``
    by the chord ``g_r(first) + f (eb - g_B(first))`` (``f = r / B``, squared with a working-set
    term; :mod:`analysis.optimize._exact`), with ``power`` and without a working-set term at
    least the chord from ``E_1`` to ``E_B``: ``E_r >= E_1 + (r - 1) / (B - 1) (E_B - E_1)`` for ``r >= 1``
    (``E_s`` is concave in ``s``, :mod:`analysis.optimize._exact`; ``E_1`` is the mean weight,
    at least ``(mass_j - mass_i - err) / n``, and both enter with weights ``>= 0``, so ``eb``
    and that bound on ``E_1`` keep it below; far tighter where ``B`` is large: the chord from
    the shortest weight puts a short batch of half a batch halfway between the shortest
    weight and ``E_B``), raised to the power bound
    (:func:`~analysis.optimize._exact.capped`) where it applies; the margin ``LOW_SLACK``,
    then ``per_batch`` for each of ``ceil(n / B)`` batches (``floor(n / B)`` of the rounded
    quotient, corrected: branch-free)."""
    b, inv_b, w, w2, base_j, q_j, mass_j, inv_b1 = end
    c_i, mass_i, w_first, w2_first, base_first, q_first, lane_power = first
    n = cj - c_i
    full = (n * inv_b + _ROUND) - _ROUND
    r = n - full * b
    full = full - 1.0 if r < 0.0 else full
    r = n - full * b
    steps = per_batch * (full + (1.0 if r > 0.0 else 0.0))
    eb, t_b = full_bound(t, t2, w, w2, b, (w_first, w2_first))
    f = r * inv_b
    f = f * f if quad else f
    d = eb - (w_first + b * w2_first)
    d = d if d > 0.0 else 0.0
    e_r = (base_first + r * q_first) + f * d
    if power and not quad:  # (raised as by the power bound: where asked, a division a lane)
        e1 = ((mass_j - mass_i) - err) / n  # (at most E_1, the mean weight, without q)
        chord = e1 + (r - 1.0) * inv_b1 * (eb - e1)
        e_r = chord if chord > e_r else e_r
    low = full * b * eb + r * e_r
    low = ones_bound(mass_j, mass_i, err, n, w + w2) if b == 1.0 else low
    alone = n * (base_j + n * q_j) + per_batch  # one batch of n samples: exact
    v = alone if n < b else low * (1.0 - LOW_SLACK) + steps
    if power and lane_power > 0.0 and n >= b:
        raised = capped(n, b, r, eb, t_b, base_j, q_j, base_first, q_first) * (1.0 - LOW_SLACK) + steps
        v = raised if raised > v else v
    return v


@numba.njit(cache=True, nogil=True, error_model="numpy", inline="always")
def budget_end(
    j: int, data: Arrays, short: Short, bounds: BudgetBounds
) -> tuple[float, float, float, float, float, float, float, float]:  # pragma: no cover - compiled
    """What :func:`budget_bound` reads at end ``j`` (``end``)."""
    b = bounds.size_float[j]
    inv_b1 = 1.0 / (b - 1.0) if b > 1.0 else 0.0
    return b, 1.0 / b, data.weight[j], data.weight2[j], short.base[j], short.q[j], bounds.mass[j], inv_b1


@numba.njit(cache=True, nogil=True, error_model="numpy")
def budget_row(
    i: int,
    data: Arrays,
    short: Short,
    bounds: BudgetBounds,
    is_end: np.ndarray,
    out: np.ndarray,
    room: np.ndarray,
) -> None:  # pragma: no cover - compiled
    """``out[j]``: :func:`budget_bound` of every bucket ``(i, j]``, ``j > i`` (inf where not an
    end), the table's row at or below ``i``.  With a ``room`` (empty: none), the power bound
    only where the bound without it is at most ``room[j]`` (it only raises a bound, and where
    it is asked the same floats: :func:`budget_bound`), so ``out[j] <= room[j]`` exactly where
    the bound is within it."""
    m = out.size - 1
    row = bounds.row_of[i]
    first = budget_first(i, data, short, bounds)
    t_row = bounds.t_up[row]
    t2_row = bounds.t2_up[row] if bounds.t2_up.shape[0] > 0 else np.zeros(m + 1)
    err, quad, per_batch = bounds.mass_err, short.quad, data.per_batch
    if room.size:  # (each loop compiled apart, nothing carried: vectorised)
        for j in range(i + 1, m + 1):
            end = budget_end(j, data, short, bounds)
            v = budget_bound(
                bounds.cum_float[j], end, t_row[j], t2_row[j], first, err, quad, per_batch, False
            )
            out[j] = v if is_end[j] else INF
        for j in range(i + 1, m + 1):  # (the power bound where the bound fits: few ends)
            if out[j] <= room[j]:
                end = budget_end(j, data, short, bounds)
                cj = bounds.cum_float[j]
                out[j] = budget_bound(cj, end, t_row[j], t2_row[j], first, err, quad, per_batch, True)
    else:
        for j in range(i + 1, m + 1):
            end = budget_end(j, data, short, bounds)
            v = budget_bound(bounds.cum_float[j], end, t_row[j], t2_row[j], first, err, quad, per_batch, True)
            out[j] = v if is_end[j] else INF


@numba.njit(cache=True, nogil=True, error_model="numpy")
def residue_bound(
    i: int, j: int, t_b: float, data: Arrays, short: Short, ratio: np.ndarray
) -> float:  # pragma: no cover - compiled
    """A lower bound on the exact cost of bucket ``(i, j]`` (one fixed ``B``, ``n >= B`` samples,
    ``r = n mod B > 0``, steps of ``base`` and ``q`` ``>= 0``: ``Short.power``) from ``t_b >= T_B``
    (the row's running sum, :func:`chain`), tighter than the chord and the power bound where
    ``r`` is far below ``B``; ``ratio`` a work row.

    The short batch's sums ``T_r = sum_k step_k C(x_k, r) / C(n, r)`` (and the second, over the
    steps of ``q``) are carried as the exact cost carries them, ``T = (T + step_k) ratio_k``,
    with :func:`~analysis.optimize._exact.ratio_upper`, at least each ratio (0 while
    ``x_k < r``, as there), from the end ``s`` before the first whose count passes
    ``n 2**(-_RESIDUE_CUT / r)``: the sum there is at most the steps' sum before it,
    ``base[s] - base[i + 1]`` (each ratio ``<= 1``; its rounding, a few ulps of ``base``, then
    falls by at least ``C(x_s, r) / C(n, r) <= (x_s / n)**r <= 2**-_RESIDUE_CUT``).  Steps
    ``>= 0`` and ratios at least the true ones give sums at least ``T_r``, so the cost
    ``(n - r) E_B + r ((base - T_r) + r (q - T2_r))`` is at least this bound, before the margin
    ``LOW_SLACK`` plus ``COUNT_SLACK`` per sample and the exact ``per_batch`` seconds.  The
    ratios are computed first, then the sums (the ratios' loop vectorised)."""
    cum, count = data.cum, short.cum_float
    b = data.size[j]
    n = cum[j] - cum[i]
    full = n // b
    nf, rf, c_i = float(n), float(n - full * b), count[i]
    cut = c_i + nf * 2.0 ** (-_RESIDUE_CUT / rf)
    s = max(i + 1, i + np.searchsorted(count[i + 1 : j], cut, side="left"))  # (the end before it)
    below, above, out = count[s:j], count[s + 1 : j + 1], ratio[s:j]
    for k in range(out.size):
        a = below[k] - c_i
        out[k] = ratio_upper(a, above[k] - c_i, rf) if a >= rf else 0.0
    t = short.base[s] - short.base[i + 1]
    t2 = short.q[s] - short.q[i + 1]
    t, t2 = (t if t > 0.0 else 0.0), (t2 if t2 > 0.0 else 0.0)
    for k in range(s, j):
        t = (t + short.base_step[k]) * ratio[k]
        t2 = (t2 + short.q_step[k]) * ratio[k]
    low = (nf - rf) * (data.weight[j] - t_b) + rf * ((short.base[j] - t) + rf * (short.q[j] - t2))
    return float(low * (1.0 - LOW_SLACK - COUNT_SLACK * nf) + data.per_batch * (float(full) + 1.0))
