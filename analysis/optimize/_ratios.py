"""The kernel's ratios ``C(a, B) / C(b, B)``: their tables, built in Python, and the compiled
helpers that read them.

The ratio is read from a table of ``C(x, B)`` (a fixed ``B <= _PRODUCT_MAX`` whose ``C(N, B)``
fits float64: the product formula, up to ``_TABLE_MAX`` samples), or is the product
``prod_{a < y <= b} (y - B) / y`` when ``b - a <= PRODUCT_RATIO``, or
``exp(log((b-B)!/(a-B)!) - log(b!/a!))`` from a double-double table of ``log x!`` (any ``B``;
beyond ``LOG_TABLE_MAX`` samples, Stirling's series with the large terms paired).
"""

from __future__ import annotations

import functools
import math

import numba
import numpy as np

from analysis.optimize._problem import Problem
from analysis.padding.order_stats import stirling_series

# Ratios over at most this many samples are products (exact to a few ulps, no table read).
PRODUCT_RATIO = 8
# Ratios whose subset size or samples between are at most this are products of that many
# quotients (:func:`quotient_ratio`: to a few ulps of themselves).
QUOTIENT_TERMS = 64
# Largest log C(N, B) for which the kernel reads ratios from a table of C(x, B), or computes
# C(x, B) by the product formula: e**700 is 1e304, below float64's largest (1.8e308), and no
# partial product passes the larger of C(x, B) and 2**128 (one factor at a time they are
# C(x, k), k < B <= 64, below C(x, B) unless x < 2 B; two at a time they rise to C(x, B)).
# (Was 600: batch sizes 57..64 on the bundled data's 902,087 samples now take the product
# formula, 60 to 64 in 0.24-0.26 s, were 0.27-0.31 s.)
_LINEAR_LOG_LIMIT = 700.0
# Batch sizes up to this may use that table (the product formula is O(B) per value).
_PRODUCT_MAX = 64
# Samples up to which C(x, B) is tabulated (one float64 per sample); log x! above.
_TABLE_MAX = 1 << 22
# Samples up to which log x! is tabulated (two float64 per sample, 2 MiB); Stirling's series
# above, so that a token budget's time and memory do not grow with the sample count.
LOG_TABLE_MAX = 1 << 17


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


@numba.njit(cache=True, nogil=True, error_model="numpy", inline="always")
def log_fact_ratio(a: int, b: int, hi: np.ndarray, lo: np.ndarray) -> float:  # pragma: no cover - compiled
    """``log(b! / a!)`` for ``0 <= a <= b``: the double-double table, or Stirling's series
    (:func:`_stirling_log_ratio`: a call that takes no array, so that none is counted at each
    call)."""
    if b < hi.size:
        return float((hi[b] - hi[a]) + (lo[b] - lo[a]))
    return _stirling_log_ratio(a, b)


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _stirling_log_ratio(a: int, b: int) -> float:  # pragma: no cover - compiled
    """``log(b! / a!)`` for ``0 <= a <= b`` (beyond the table) by Stirling's series (``x log1p(d/x)
    + d log b - d + log1p(d/x)/2`` plus the series remainders)."""
    if a < 16:
        fb = float(b)
        lgb = fb * math.log(fb) - fb + 0.5 * math.log(2.0 * math.pi * fb) + _stirlerr(fb)
        return lgb - math.lgamma(a + 1.0)
    x = float(a)
    d = float(b - a)
    l1 = math.log1p(d / x)
    return x * l1 + d * math.log(float(b)) - d + 0.5 * l1 + _stirlerr(float(b)) - _stirlerr(x)


@numba.njit(cache=True, nogil=True, error_model="numpy", inline="always")
def ratio_at(
    a: int, b: int, size: int, comb: np.ndarray, hi: np.ndarray, lo: np.ndarray
) -> float:  # pragma: no cover - compiled
    """``C(a, size) / C(b, size)`` for ``a <= b`` and ``b >= size`` (0 when ``a < size``):
    from the table of ``C(x, size)``, else ``prod_{a < y <= b} (y - size) / y`` when
    ``b - a`` is small, else from the table of ``log x!``; ``a / b`` for ``size = 1`` (the
    difference of two ``log x!`` near ``1e9`` keeps only ~1e-7 of it there, and a batch of one's
    cost is bounded by its samples' weights to 1e-8: :func:`~analysis.optimize._budget.ones_bound`)."""
    if a < size:
        return 0.0
    if size == 1:
        return a / b
    if comb.size:
        return float(comb[a] / comb[b])
    if b - a <= PRODUCT_RATIO:
        return product_ratio(a, b, size)
    return math.exp(log_fact_ratio(a - size, b - size, hi, lo) - log_fact_ratio(a, b, hi, lo))


@numba.njit(cache=True, nogil=True, error_model="numpy", inline="always")
def quotient_ratio(a: int, b: int, size: int) -> float:  # pragma: no cover - compiled
    """``C(a, size) / C(b, size)`` for ``size <= a <= b`` as a product of ``k = min(size, d)``
    quotients (``d = b - a``): ``prod_{t < size} (a - t) / (b - t)``, or where fewer
    ``prod_{u < d} (b - size - u) / (b - u)``, 8 factors over 8 at a time (integers below
    ``2**53``: exact in floats, and 8 of them below ``2**424``), so within ``2 k`` ulps of
    itself, however close to 1 (two roundings per factor)."""
    d = b - a
    k = min(size, d)
    top = a if size <= d else b - size  # the factors: (top - t) / (b - t), t < k
    out = 1.0
    for t0 in range(0, k, 8):
        num = 1.0
        den = 1.0
        for t in range(t0, min(t0 + 8, k)):
            num *= top - t
            den *= b - t
        out *= num / den
    return out


@numba.njit(cache=True, nogil=True, error_model="numpy", inline="always")
def log_comb_ratio(a: int, b: int, size: int) -> float:  # pragma: no cover - compiled
    """``log(C(a, size) / C(b, size))`` for ``size + 16 <= a <= b`` from Stirling's series,
    its large terms paired so that it keeps a few ulps of itself however close to 0 (the
    difference of two ``log(b! / a!)``, each near ``d log b``, keeps only ``d log b`` ulps of
    it: ``1e-7`` of the ratio at ``1e10`` samples, where a bucket's cost ``w - T`` may read
    the ratio ``T / E`` times over).  With ``d = b - a``, ``e = a - size`` and
    ``lam = log1p(size d / (b e))`` (``= log(a (b - size) / (b e))``), the second difference of
    ``x log x - x`` is ``a lam + d log1p(-size / b) - size log1p(d / e)`` (three terms of the
    size of the result, ``size d / b``), that of ``log(2 pi x) / 2`` is ``lam / 2``, and that
    of the series' remainder a small correction."""
    fa, fb, fs = float(a), float(b), float(size)
    fd = float(b - a)
    e = float(a - size)
    lam = math.log1p(fs * fd / (fb * e))
    main = fa * lam + fd * math.log1p(-fs / fb) - fs * math.log1p(fd / e)
    rest = (_stirlerr(fa) - _stirlerr(fb)) - (_stirlerr(e) - _stirlerr(fb - fs))
    return main + 0.5 * lam + rest


@numba.njit(cache=True, nogil=True, error_model="numpy", inline="always")
def log_fact_pair(
    x: int, size: int, hi: np.ndarray, lo: np.ndarray
) -> tuple[float, float, float, float]:  # pragma: no cover - compiled
    """``log x!`` and ``log (x - size)!`` from the table (``x < hi.size``), as ``hi, lo`` each."""
    if x < size:
        return hi[x], lo[x], 0.0, 0.0
    return hi[x], lo[x], hi[x - size], lo[x - size]


@numba.njit(cache=True, nogil=True, error_model="numpy", inline="always")
def product_ratio(a: int, b: int, size: int) -> float:  # pragma: no cover - compiled
    """``C(a, size) / C(b, size) = prod_{a < y <= b} (y - size) / y`` (``size <= a <= b``)."""
    num = 1.0
    den = 1.0
    for y in range(a + 1, b + 1):
        num *= y - size
        den *= y
    return num / den


# ------------------------------------------------------------------------- ratio tables
def build_ratio_tables(prob: Problem) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(comb, log_fact_hi, log_fact_lo)`` for the kernel's ratios ``C(a, B) / C(b, B)``.

    A fixed ``B <= _PRODUCT_MAX`` whose ``C(N, B)`` fits float64 gets ``comb``, the table of
    ``C(x, B)`` for ``x = 0..N`` (product formula) up to ``N = _TABLE_MAX``; otherwise ``comb`` is empty
    and the ratios come from ``log x!`` as a double-double table for ``x <= LOG_TABLE_MAX``
    (Stirling above)."""
    n_max = int(prob.cum[-1])
    size = prob.rule.batch_size
    if comb_applies(prob) and n_max <= _TABLE_MAX:
        return _comb_table(n_max, int(size or 0)), EMPTY, EMPTY
    hi, lo = log_fact_table(min(n_max, _TABLE_MAX, LOG_TABLE_MAX))
    return EMPTY, hi, lo


def comb_applies(prob: Problem) -> bool:
    """One ``B <= _PRODUCT_MAX`` whose ``C(N, B)`` fits float64: ratios of ``C(x, B)``."""
    n_max = int(prob.cum[-1])
    size = prob.rule.batch_size
    if size is None or size > _PRODUCT_MAX:
        return False
    return n_max < size or _log_comb_top(n_max, size) <= _LINEAR_LOG_LIMIT


EMPTY = np.zeros(0)
EMPTY.flags.writeable = False


def _log_comb_top(n: int, size: int) -> float:
    return math.lgamma(n + 1.0) - math.lgamma(n - size + 1.0) - math.lgamma(size + 1.0)


# the last few tables are kept (at most ~100 MB at _TABLE_MAX samples): a session that
# alternates two batch rules does not rebuild them
@functools.lru_cache(maxsize=2)
def _comb_table(n_max: int, size: int) -> np.ndarray:
    """``C(x, size)`` for ``x = 0..n_max`` (exactly 0 below ``size``), by the product formula."""
    xf = np.arange(n_max + 1, dtype=float)
    out = xf.copy()
    for t in range(1, size):
        out *= (xf - t) / (t + 1)
    out[:size] = 0.0  # the product's factors cross zero below size
    out.flags.writeable = False
    return out


@functools.lru_cache(maxsize=1)
def log_fact_table(n_max: int) -> tuple[np.ndarray, np.ndarray]:
    """``log x!`` for ``x = 0..n_max`` as ``hi + lo`` (a running double-double sum of
    ``log y``), so that ``log(b!/a!) = (hi[b] - hi[a]) + (lo[b] - lo[a])`` keeps the
    precision of the ``b - a`` logarithms it sums, not of ``log b!``."""
    hi, lo = _log_fact_compiled(n_max)
    hi.flags.writeable = False
    lo.flags.writeable = False
    return hi, lo
