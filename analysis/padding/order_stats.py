"""Order statistics of a uniformly random subset drawn without replacement from a histogram.

The numerics behind :func:`analysis.padding.waste.expected_padding`: ``E[g(max)]`` of a random
``size``-subset, computed to near machine precision for any subset size and sample count as a
sum of non-negative terms (nothing cancels).  The building blocks take validated arrays and
check nothing; :func:`expected_batch_max` is the one validated entry (the expected longest of
a random batch, from any ``lengths, counts`` pair).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, overload

import numpy as np

from analysis._validate import positive_int
from analysis.batching import round_up

# Within a bucket of n samples (distinct lengths v_1 < ... < v_k, cumulative counts C_j), a
# shuffle cut into batches of B makes every full batch a uniformly random B-subset and the last
# partial batch (r = n mod B samples) a uniformly random r-subset.  For a size-s subset,
#
#     F_j = P(max <= v_j) = C(C_j, s) / C(n, s)          (0 when C_j < s)
#
# and, for any non-decreasing g, E[g(max)] = g(v_1) + sum_j (g(v_{j+1}) - g(v_j)) (1 - F_j):
# a sum of non-negative terms, so nothing cancels.  1 - F_j = -expm1(log F_j), and log F_j is
# computed to near machine precision by one of these forms (d_j = n - C_j samples are longer):
#
#   * s <= _PRODUCT_TERMS:  log F = sum_{i<s} log1p(-d / (n - i))
#   * d <= _PRODUCT_TERMS:  log F = sum_{i<d} log1p(-s / (n - i))   (= C(n-s, d) / C(n, d))
#   * C_j >= 6 s:           the s terms of the first form summed by a Taylor series around the
#                           middle term (they vary slowly there)
#   * otherwise Stirling's series with the large terms paired through log1p / log1p(u) - u, so
#     no difference of two huge log-gamma values is ever taken.  (Rows whose C_j - s is tiny
#     there have F_j < 1e-20 and use plain gammaln differences.)
#
# The cost is O(distinct lengths) per bucket, whatever the number of samples.

_PRODUCT_TERMS = 64
_STIRLING_MIN = 16.0
_MIDPOINT_MIN_RATIO = 6


def _log1pmx(u: np.ndarray) -> np.ndarray:
    """``log1p(u) - u`` for ``u >= 0`` without cancellation near 0."""
    u = np.asarray(u, dtype=float)
    out = np.empty_like(u)
    big = u > 0.5
    out[big] = np.log1p(u[big]) - u[big]
    s = u[~big]
    # log1p(u) = 2 atanh(t), t = u / (2 + u);  u - 2t = u t.
    t = s / (2.0 + s)
    t2 = t * t
    series = np.zeros_like(t)
    for k in range(23, 1, -2):  # 1/3 + t^2/5 + t^4/7 + ... + t^20/23 (t <= 0.2: < 1e-16)
        series = series * t2 + 1.0 / k
    out[~big] = -s * t + 2.0 * t2 * t * series
    return out


@overload
def stirling_series(x: float) -> float: ...
@overload
def stirling_series(x: np.ndarray) -> np.ndarray: ...
def stirling_series(x: float | np.ndarray) -> float | np.ndarray:
    """``lgamma(x + 1) - (x log x - x + log(2 pi x) / 2)`` for float ``x >= 16``: the first five
    terms of Stirling's series (plain arithmetic: NumPy arrays here, compiled for a scalar by
    the optimiser's kernel)."""
    y = 1.0 / (x * x)
    return (1.0 / 12 - y * (1.0 / 360 - y * (1.0 / 1260 - y * (1.0 / 1680 - y / 1188)))) / x


def _stirlerr(x: np.ndarray) -> np.ndarray:
    """``stirling_series`` of an array (as floats: ``x * x`` of integers could overflow)."""
    return stirling_series(np.asarray(x, dtype=float))


def log_prob_max_at_most(cum: np.ndarray, n: int, size: int) -> np.ndarray:
    """``log P(max <= v_j) = log C(cum_j, size) - log C(n, size)`` for rows with
    ``size <= cum_j <= n`` (other rows are the caller's business)."""
    return _log_probs(cum, n, size, None)


def log_probs(rows: Sequence[np.ndarray], ns: Sequence[int], sizes: Sequence[int]) -> list[np.ndarray]:
    """:func:`log_prob_max_at_most` of several buckets at once (``rows[b]``, ``ns[b]``,
    ``sizes[b]``): their rows side by side in each NumPy call, every function elementwise, so
    each row's floats are those of its bucket alone, in a fraction of the calls (a plan's
    buckets under a token budget: one call for all, not two per bucket).

    Examples
    --------
    >>> rows, ns, sizes = [np.array([70, 90, 200]), np.array([150, 400])], [300, 500], [65, 100]
    >>> together = log_probs(rows, ns, sizes)
    >>> [bool((t == log_prob_max_at_most(*one)).all()) for t, one in zip(together, zip(rows, ns, sizes))]
    [True, True]
    >>> round(float(together[1][0]), 6)  # log(C(150, 100) / C(500, 100))
    -154.287422
    """
    if len(rows) < 2:
        return [log_prob_max_at_most(r, n, size) for r, n, size in zip(rows, ns, sizes, strict=True)]
    lens = [r.size for r in rows]
    big = any(int(n) >= 2**63 for n in ns)  # (counts past int64: Python ints, as the rows)
    n_each = np.repeat(np.array([int(n) for n in ns], dtype=object if big else np.int64), lens)
    size_each = np.repeat(np.asarray(sizes, np.int64), lens)
    bucket = np.repeat(np.arange(len(rows)), lens)
    out = _log_probs(np.concatenate(rows), n_each, size_each, bucket)
    return np.split(out, np.cumsum(lens[:-1]))


def _log_probs(cum: np.ndarray, n: Any, size: Any, bucket: np.ndarray | None) -> np.ndarray:
    """:func:`log_prob_max_at_most` of the rows ``cum``: of one bucket (``bucket`` None; ``n``
    and ``size`` Python ints) or of several (``n``, ``size`` and ``bucket`` arrays, one value
    per row, the buckets' rows in turn)."""
    d = (n - cum).astype(float)
    nf: Any = float(n) if bucket is None else n.astype(float)
    if bucket is None and size <= _PRODUCT_TERMS:  # every row: sum_{i<size} log1p(-d / (n - i))
        return _running_log1p(np.negative(d), nf, size)
    out = np.zeros(d.shape)
    taken = None  # rows in the product form (several buckets only)
    if bucket is not None and (taken := size <= _PRODUCT_TERMS).any():
        out[taken] = _running_log1p(np.negative(d[taken]), nf[taken], size[taken])
    few = d <= _PRODUCT_TERMS if taken is None else ~taken & (d <= _PRODUCT_TERMS)
    if few.any():  # sum_{i<d} log1p(-size / (n - i)), in order of i
        out[few] = _running_log1p(-_at(size, few), _at(nf, few), d[few].astype(np.int64))
    if taken is not None:
        few |= taken  # (from here: the rows with their sums)
    # Far from the singularity (c >= 6 size): the B terms log1p(-d / x), x = n - i, vary
    # slowly; expand around the middle x0 (midpoint series, ratio <= 1/121 per term).
    c = cum.astype(float)
    middle = ~few & (c >= _MIDPOINT_MIN_RATIO * size)
    if middle.any():
        out[middle] = _midpoints(
            d[middle], _at(nf, middle), _at(size, middle), None if bucket is None else bucket[middle]
        )
    rest = ~few & ~middle
    if rest.any():
        out[rest] = _stirling_rows(c[rest], d[rest], _at(nf, rest), _at(size, rest))
    return out


def _at(value: Any, rows: np.ndarray) -> Any:
    """``value`` at ``rows``: the value itself where it is one bucket's (a Python number)."""
    return value[rows] if isinstance(value, np.ndarray) else value


def _running_log1p(num: Any, nf: Any, count: Any) -> np.ndarray:
    """Per row ``sum_{i < count} log1p(num / (nf - i))``, the terms added to 0 in order of
    ``i`` (a running sum down the columns of the terms); ``num``, ``nf`` and ``count`` (at
    least 0) each a number or one per row (``count``: or one per row where ``num`` and ``nf``
    are numbers)."""
    if not isinstance(count, np.ndarray):  # every row takes every term (each one valid)
        terms = np.log1p(num / (nf - np.arange(count, dtype=float)[:, None]))
        if num.size and num[-1] == 0.0:  # (a row at the top, d = 0: its -0.0 added to 0 is 0.0)
            terms[:1] += 0.0
        _add_down(terms)
        last: np.ndarray = terms[-1]
        return last
    top = int(count.max())
    if top == 0:
        return np.zeros(count.shape)
    # terms past a row's count may divide by 0 or pass -1: never read
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.log1p(num / (nf - np.arange(top, dtype=float)[:, None]))
        terms[:1] += 0.0  # (each first term added to 0, as a sum from 0 is: -0.0 becomes 0.0)
        _add_down(terms)
    columns = 0 if terms.shape[1] == 1 else np.arange(count.size)
    sums: np.ndarray = terms[count - 1, columns]
    return sums if count.min() > 0 else np.where(count > 0, sums, 0.0)


# Columns below which :func:`_add_down` takes NumPy's running sum (one call; its loop is scalar,
# about 3.5 ns an element here) rather than a row at a time (vectorised, about 0.5 us a row):
# 64 rows of 40 columns 10.7 against 58.9 us, of 2,000 columns 450 against 116 us.
_ACCUMULATE_BELOW = 128


def _add_down(terms: np.ndarray) -> None:
    """Each row of ``terms`` into the sum of the rows up to it, added in order (in place; one
    order of additions either way, so the same floats)."""
    if terms.shape[1] < _ACCUMULATE_BELOW:
        np.add.accumulate(terms, axis=0, out=terms)
        return
    above = terms[0]
    for row in terms[1:]:  # (rows as views: no index per row)
        row += above
        above = row


def _stirling_rows(a: np.ndarray, d: np.ndarray, nf: Any, size: Any) -> np.ndarray:
    """The rows neither near the top nor far above ``size`` (``c = a`` samples at most the row,
    ``d`` above it; ``nf`` and ``size`` numbers, or one per row): Stirling's series with the
    large terms paired through log1p / log1p(u) - u, so no difference of two huge log-gamma
    values is ever taken; rows whose ``a - size`` is tiny have ``F < 1e-20`` and take plain
    gammaln differences."""
    b = a - size
    res = np.empty(a.shape)
    stirling = b >= _STIRLING_MIN
    if stirling.any():
        a_, d_, b_ = a[stirling], d[stirling], b[stirling]
        # each function once over the rows' arguments side by side (elementwise: the same
        # floats as a call per argument, a third of the NumPy calls on short rows)
        k = a_.size
        ratios = np.concatenate((d_ / a_, d_ / b_))
        pm, lp = _log1pmx(ratios), np.log1p(ratios)
        se = _stirlerr(np.concatenate((a_, a_ + d_, b_, b_ + d_)))
        res[stirling] = (
            -a_ * pm[:k]
            + b_ * pm[k:]
            + d_ * np.log1p(-_at(size, stirling) / _at(nf, stirling))
            - 0.5 * (lp[:k] - lp[k:])
            + se[:k]
            - se[k : 2 * k]
            - se[2 * k : 3 * k]
            + se[3 * k :]
        )
    if (~stirling).any():
        from scipy.special import gammaln  # on first use: ~0.2 s of CPU a process importing analysis

        a_, b_, n_, s_ = a[~stirling], b[~stirling], _at(nf, ~stirling), _at(size, ~stirling)
        res[~stirling] = gammaln(a_ + 1) - gammaln(b_ + 1) - gammaln(n_ + 1) + gammaln(n_ - s_ + 1)
    return res


def _midpoint_log_sum(d: np.ndarray, n: float, size: int, terms: int = 9) -> np.ndarray:
    """``sum_{i<size} log1p(-d / (n - i))`` by its Taylor series around ``x0 = n - (size-1)/2``
    (:func:`_midpoints` of one bucket)."""
    return _midpoints(d, n, size, None, terms)


def _midpoints(d: np.ndarray, nf: Any, size: Any, bucket: np.ndarray | None, terms: int = 9) -> np.ndarray:
    """``sum_{i<size} log1p(-d / (n - i))`` by its Taylor series around ``x0 = n - (size-1)/2``,
    for rows of one bucket (``bucket`` None; ``nf``, ``size`` numbers) or of several
    (``bucket``: each row's, ascending; ``nf`` and ``size`` one per row).

    With ``f(x) = log(x - d) - log(x)``, the odd terms cancel by symmetry and
    ``f^(k)(x0) / k! = -(1/k) ((x0 - d)^-k - x0^-k) = -(1/k) x0^-k expm1(-k log1p(-d/x0))``
    for even ``k``.  Accurate when ``size`` is well below ``x0 - d`` (callers ensure
    ``c >= 6 size``, so each term shrinks by at least 121).  The terms a bucket takes:
    :func:`_series`.
    """
    x0 = nf - (size - 1) / 2.0
    main = np.log1p(-d / x0)
    out: np.ndarray = size * main
    if bucket is None:
        for k, w in _series(size, x0, main, terms):
            out = out - (w / k) * np.expm1(-k * main)
        return out
    bounds = [0, *(np.flatnonzero(bucket[1:] != bucket[:-1]) + 1).tolist(), main.size]
    taken = [
        dict(_series(int(size[lo]), float(x0[lo]), main[lo:hi], terms)) for lo, hi in zip(bounds, bounds[1:])
    ]
    at = np.repeat(np.arange(len(taken)), np.diff(bounds))  # each row's bucket, from 0
    with np.errstate(over="ignore", invalid="ignore"):  # (in rows whose bucket takes no k: not kept)
        for k in range(2, 2 * terms + 1, 2):
            ws = [series.get(k) for series in taken]
            if all(w is None for w in ws):
                continue
            after = out - np.array([0.0 if w is None else w / k for w in ws])[at] * np.expm1(-k * main)
            out = after if None not in ws else np.where(np.array([w is not None for w in ws])[at], after, out)
    return out


def _series(size: int, x0: float, main: np.ndarray, terms: int) -> list[tuple[int, float]]:
    """The even ``k`` (from 2, at most ``terms`` of them) and power sums ``w`` of the midpoint
    series of one bucket's rows (``main = log1p(-d / x0)``), in order: the terms whose share
    of one of its rows may reach half an ulp (:func:`_share`; a negligible term would leave
    every element as it is), up to a power sum of 0."""
    steepest = -float(main.min(initial=0.0))  # log(x0 / (x0 - d)) at the largest d
    widest = (size - 1) / (2.0 * x0)  # the largest |t_i| / x0: w <= size widest**k
    ks = [k for k in range(2, 2 * terms + 1, 2) if _share(size * widest**k, k, size, steepest) >= _NEGLIGIBLE]
    out = []
    for k, w in zip(ks, _power_sums(size, x0, ks), strict=True):
        if w == 0.0:
            break
        out.append((k, w))
    return out


def _power_sums(size: int, x0: float, ks: list[int]) -> list[float]:
    """``sum_{i<size} ((i - (size-1)/2) / x0)**k`` for each even ``k`` of ``ks``: twice the sum
    over the upper half (the points are symmetric, the centre of an odd ``size`` adds 0), all
    ``k`` in one power call; in closed form above :data:`_DIRECT_POWER_SUMS` (no
    ``size``-long array).  The upper half only: NumPy's float power of a negative base takes a
    scalar path, 119 ns per element against 3.6 for a positive one here, so a call costs 31
    rather than 86 us at batch size 110, 40 rather than 392 at 1,000.  The sums differ from
    the whole batch's in their last bits; the series' rows then differ in 7 of 119,638, by 1
    ulp, 4 of them nearer the exact value (``benchmarks/bench_midpoint.py``), and every plan
    and float of ``plans_snapshot.py --bits`` is unchanged."""
    if size > _DIRECT_POWER_SUMS:
        return [_centered_power_sum(size, x0, k) for k in ks]
    upper = (np.arange(size - size // 2, size) - (size - 1) / 2.0) / x0
    powers = upper ** np.array(ks, dtype=float)[:, None]
    sums: list[float] = (2.0 * powers.sum(axis=1)).tolist()
    return sums


# A term of the midpoint series at most this share of its element is below half an ulp of it
# (an ulp of x is at least |x| 2**-53), with room for the rounding of the share's own estimate.
_NEGLIGIBLE = 2.0**-58


def _share(w: float, k: int, size: int, steepest: float) -> float:
    """A bound above the share of its element that the midpoint series' term ``(w / k)
    expm1(k L)`` takes in every row (``L = -main >= 0`` by row; ``w`` or a bound above it):
    each element is at least ``size L`` in magnitude (``size * main``, then only terms of the
    same sign subtracted), and ``expm1(k L) / L`` grows with ``L``, so the share is largest at
    the largest ``L`` (``steepest``); where that is 0 every element and its term are exactly 0."""
    if steepest == 0.0:
        return 0.0
    return (w / (k * size)) * math.expm1(k * steepest) / steepest


# Bernoulli numbers B_0..B_18 (odd ones past B_1 are 0), for the power sums below.
_BERNOULLI = {
    0: 1.0,
    1: -0.5,
    2: 1 / 6,
    4: -1 / 30,
    6: 1 / 42,
    8: -1 / 30,
    10: 5 / 66,
    12: -691 / 2730,
    14: 7 / 6,
    16: -3617 / 510,
    18: 43867 / 798,
}
# Up to this batch size the power sums are summed directly; above, Faulhaber's formula.
_DIRECT_POWER_SUMS = 4096


def _centered_power_sum(size: int, x0: float, k: int) -> float:
    """``sum_{i<size} ((i - (size-1)/2) / x0)**k`` for even ``k`` without a ``size``-long
    array: Faulhaber, ``sum = 2 B_{k+1}((size+1)/2) / (k+1)`` (the points are symmetric, and
    ``B_n(1-x) = -B_n(x)`` for odd ``n``), expanded in ``u = (size+1) / (2 x0)`` so nothing
    overflows.  Accurate for ``size`` above a few thousand (the correction terms are then
    ``k / size`` small: nothing cancels)."""
    n = k + 1
    u = (size + 1) / (2.0 * x0)
    total = 0.0
    for j, b in _BERNOULLI.items():
        if j > n:
            break
        total += math.comb(n, j) * b * u ** (n - j) * x0 ** (-j)
    return 2.0 * x0 * total / n


#: Per bucket, :func:`inner_log_probs` by subset size: a caller that prices one bucket twice (its
#: padding and its objective, same counts, different ``g``) passes one such dict to both, so the
#: order statistics are computed once; it lives as long as the caller keeps it.
LogProbs = dict[int, np.ndarray]


def inner_log_probs(cum: np.ndarray, size: int, shared: LogProbs | None = None) -> np.ndarray:
    """``log P(max <= v_j)`` of a random ``size``-subset for the inner rows ``cum[:-1] >= size``
    (:func:`log_prob_max_at_most`; ``cum`` the cumulative counts, ``cum[-1]`` = n), from
    ``shared`` when it holds them for this ``size``, else computed (and kept there)."""
    out = None if shared is None else shared.get(size)
    if out is None:
        inner = cum[:-1]
        first = _first_at_least(inner, size)
        out = log_prob_max_at_most(inner[first:], int(cum[-1]), size) if first < inner.size else np.zeros(0)
        if shared is not None:
            shared[size] = out
    return out


def share_log_probs(cum: np.ndarray, sizes: tuple[int, ...], shared: LogProbs) -> None:
    """Fill ``shared`` with :func:`inner_log_probs` of each of the ascending ``sizes`` (all at
    most ``_PRODUCT_TERMS``: a bucket's single sample, short and full batch) at the cost of the
    largest: in the product form ``log F_s = sum_{i<s} log1p(-d / (n - i))``, summed in order
    of ``i``, a smaller size's sum is a partial sum of a larger one's (the same numbers as
    separate calls of :func:`log_prob_max_at_most`: one running sum over ``i``)."""
    inner, n = cum[:-1], int(cum[-1])
    d = (n - inner).astype(float)
    # rows with inner < size go past the singularity at i >= inner (-inf, nan): never read
    with np.errstate(divide="ignore", invalid="ignore"):
        partial = np.log1p(np.negative(d) / (float(n) - np.arange(sizes[-1], dtype=float))[:, None])
        _add_down(partial)  # row i: the sum of the terms 0..i, added in order
    for size in sizes:
        shared[size] = partial[size - 1, _first_at_least(inner, size) :].copy()


#: Batch sizes above which :func:`fill_log_probs` fills a bucket's order statistics (at most
#: it, :func:`share_log_probs` takes them together in the product form).
FILLED_ABOVE = _PRODUCT_TERMS


def fill_log_probs(buckets: Sequence[tuple[np.ndarray, int, int, LogProbs | None]]) -> list[LogProbs | None]:
    """For each bucket ``(counts, n, batch_size, shared)`` (``n`` its samples; ``shared`` its
    :data:`LogProbs` or None) whose :func:`bucket_waste` would take its order statistics from
    :func:`log_prob_max_at_most` (a batch size above ``FILLED_ABOVE``, more than one batch and
    one length), those of its full and its short batch, every bucket's in one :func:`log_probs`
    call (the same floats); returns what each bucket's :func:`bucket_waste` is to read:
    ``shared`` so filled, a new dict for a bucket filled without one, else ``shared``."""
    out: list[LogProbs | None] = []
    jobs: list[tuple[np.ndarray, int, int, LogProbs]] = []
    for counts, n, batch_size, shared in buckets:
        out.append(shared)
        if counts.size < 2 or batch_size <= FILLED_ABOVE or n <= batch_size or n >= 2**63:
            continue
        logs = out[-1] = {} if shared is None else shared
        cum = np.cumsum(counts)
        rest = n % batch_size
        for size in (batch_size, rest) if rest > 1 else (batch_size,):
            if size not in logs:
                inner = cum[:-1]
                jobs.append((inner[_first_at_least(inner, size) :], n, size, logs))
    if jobs:
        values = log_probs([j[0] for j in jobs], [j[1] for j in jobs], [j[2] for j in jobs])
        for (_, _, size, logs), value in zip(jobs, values, strict=True):
            logs[size] = value
    return out


def _first_at_least(inner: np.ndarray, size: int) -> int:
    """The first row of the ascending ``inner`` with ``inner >= size`` (the rows ``inner >= size``
    are ``inner[first:]``)."""
    return int(inner.searchsorted(size))


def expected_g_of_max(g: np.ndarray, cum: np.ndarray, size: int, shared: LogProbs | None = None) -> float:
    """E[g(max)] of a uniformly random ``size``-subset; ``g`` non-decreasing per distinct
    length, ``cum`` the cumulative counts (``cum[-1]`` = n >= size >= 1); ``shared``: the
    bucket's :data:`LogProbs`.  No validation."""
    if g.size == 1:
        return float(g[0])
    return _g_of_max(g, np.diff(g), cum, size, shared)


def _g_of_max(g: np.ndarray, steps: np.ndarray, cum: np.ndarray, size: int, shared: LogProbs | None) -> float:
    """:func:`expected_g_of_max` of ``g`` (more than one length) from ``steps = diff(g)``."""
    inner = cum[:-1]
    above = np.ones(inner.shape)  # P(max > v_j): 1 where fewer than `size` samples are <= v_j
    first = _first_at_least(inner, size)
    if first < inner.size:
        above[first:] = -np.expm1(inner_log_probs(cum, size, shared))
    return float(g[0] + np.dot(steps, above))


def expected_batch_sum(
    g: np.ndarray,
    cum: np.ndarray,
    batch_size: int,
    per_size: np.ndarray | None = None,
    shared: LogProbs | None = None,
) -> float:
    """``E[sum over the bucket's batches of size * g_size(longest)]`` for a shuffled bucket
    cut into batches of ``batch_size``: ``full * B * E[g_B(max_B)] + r * E[g_r(max_r)]``
    (:func:`expected_g_of_max`; ``r = n mod B``, the partial batch), with
    ``g_b = g + b * per_size`` (``per_size`` None: ``g`` for every size).  ``g`` and
    ``per_size`` non-decreasing per distinct length, ``cum`` the cumulative counts.  A sum of
    non-negative terms (the step-time model prices ``g`` in seconds); ``shared``: the bucket's
    :data:`LogProbs`.  No validation."""
    n = int(cum[-1])
    full, rest = divmod(n, batch_size)

    steps = np.diff(g) if per_size is None and g.size > 1 else None  # one g for both sizes

    def of(size: int) -> float:
        if steps is None:
            return expected_g_of_max(g if per_size is None else g + size * per_size, cum, size, shared)
        return _g_of_max(g, steps, cum, size, shared)

    total = full * batch_size * of(batch_size) if full else 0.0
    if rest:
        total += rest * of(rest)
    return float(total)


def expected_excess(g: np.ndarray, cum: np.ndarray, size: int, shared: LogProbs | None = None) -> float:
    """``E[g(max of a random size-subset)] - E[g(one random sample)]`` (``>= 0``), as the sum
    of non-negative terms ``sum_j (g(v_{j+1}) - g(v_j)) (F1_j - F_j)``, ``F1_j = cum_j / n``
    the single sample's ``P(L <= v_j)`` and ``F_j = P(max <= v_j) <= F1_j``.  Nothing is
    subtracted from a large number, so the excess keeps its relative precision however close
    to the mean the maximum is; ``size = 1`` gives exactly 0.  ``shared``: the bucket's
    :data:`LogProbs`."""
    if g.size == 1 or size == 1:
        return 0.0
    return _excess(np.diff(g), cum, cum[:-1].astype(float) / float(int(cum[-1])), size, shared)


def _excess(steps: np.ndarray, cum: np.ndarray, f1: np.ndarray, size: int, shared: LogProbs | None) -> float:
    """:func:`expected_excess` from ``steps = diff(g)`` and ``f1 = cum[:-1] / n`` (a bucket's
    two subset sizes share them)."""
    n = int(cum[-1])
    inner = cum[:-1]
    gap = f1.copy()  # F1 - F: F = 0 where fewer than `size` samples are <= v_j
    first = _first_at_least(inner, size)
    if first < inner.size:
        if shared is not None and 1 in shared:  # log F1 = log F of a single sample: the same numbers
            log_f1 = shared[1][first:]
        else:
            log_f1 = np.log1p(-(n - inner[first:]).astype(float) / float(n))
        ratio = inner_log_probs(cum, size, shared) - log_f1  # log(F / F1) <= 0
        gap[first:] = f1[first:] * -np.expm1(np.minimum(ratio, 0.0))
    return float(np.dot(steps, gap))


def padded_values(lengths: np.ndarray, pad_to_multiple_of: int) -> np.ndarray:
    """Lengths rounded up to a multiple (as float64: what a batch's longest pads to)."""
    return np.asarray(round_up(lengths, pad_to_multiple_of)).astype(float)


def bucket_waste(
    lengths: np.ndarray,
    counts: np.ndarray,
    batch_size: int,
    pad_to_multiple_of: int,
    sums: tuple[int, int, int] | None = None,
    shared: LogProbs | None = None,
) -> tuple[int, float]:
    """Expected padding of one shuffled bucket (distinct ``lengths`` ascending, ``counts``),
    as ``(exact, excess)``: ``exact`` (a Python int) is the rounding waste
    ``sum count * (round_up(L) - L)`` plus, when the bucket is one batch, its whole padding;
    ``excess`` (a float >= 0) is ``full * B * E[excess_B] + r * E[excess_r]``
    (:func:`expected_excess`), 0.0 when the padding is deterministic.  ``sums``: the bucket's
    exact ``(samples, tokens, rounding waste)`` when the caller has them (from prefix sums),
    else they are summed here in Python ints; ``shared``: the bucket's :data:`LogProbs`."""
    m = pad_to_multiple_of
    if sums is None:
        lens, cnts = lengths.tolist(), counts.tolist()
        padded = lens if m == 1 else [-(-v // m) * m for v in lens]  # exact, never wraps
        n = sum(cnts)
        tokens = sum(c * v for v, c in zip(lens, cnts))
        exact = sum(c * (p - v) for v, c, p in zip(lens, cnts, padded))
    else:
        n, tokens, exact = sums
    if lengths.size == 1 or batch_size == 1:
        return exact, 0.0
    if n <= batch_size:  # one batch: every sample pads to the longest
        top = int(lengths[-1])
        return n * (-(-top // m) * m) - tokens, 0.0
    g = padded_values(lengths, m)
    cum = np.cumsum(counts) if n < 2**63 else np.array(exact_cumsum(counts.tolist()), dtype=object)
    full, rest = divmod(n, batch_size)
    if shared is not None and batch_size <= _PRODUCT_TERMS and batch_size not in shared:
        share_log_probs(cum, (1, rest, batch_size) if rest > 1 else (1, batch_size), shared)
    steps, f1 = np.diff(g), cum[:-1].astype(float) / float(int(cum[-1]))  # as expected_excess
    excess = full * batch_size * _excess(steps, cum, f1, batch_size, shared)
    if rest > 1:
        excess += rest * _excess(steps, cum, f1, rest, shared)
    return exact, float(excess)


def exact_cumsum(values: list[int]) -> list[int]:
    out, total = [], 0
    for v in values:
        total += v
        out.append(total)
    return out


def _as_length_counts(
    lengths: Sequence[int] | np.ndarray, counts: Sequence[int] | np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Validated (ascending distinct lengths, positive counts) arrays."""
    lengths, counts = np.asarray(lengths), np.asarray(counts)
    if lengths.ndim != 1 or lengths.shape != counts.shape or lengths.size == 0:
        raise ValueError(
            f"lengths and counts must be non-empty 1-D arrays of equal size, got "
            f"{lengths.shape} and {counts.shape}"
        )
    if lengths.dtype.kind not in "iu" or counts.dtype.kind not in "iu":
        raise ValueError(f"lengths and counts must be integers, got {lengths.dtype} and {counts.dtype}")
    lengths = lengths.astype(np.int64)
    counts = counts.astype(np.int64)
    if (np.diff(lengths) <= 0).any():
        raise ValueError("lengths must be distinct and ascending")
    if (counts <= 0).any():
        raise ValueError("counts must be positive")
    if lengths[0] < 0:
        raise ValueError(f"negative length {int(lengths[0])}")
    return lengths, counts


def expected_batch_max(
    lengths: Sequence[int] | np.ndarray,
    counts: Sequence[int] | np.ndarray,
    batch_size: int,
    *,
    pad_to_multiple_of: int = 1,
    power: int = 1,
) -> float:
    """Expected longest sample of a uniformly random ``batch_size``-subset of a multiset.

    The multiset holds ``counts[j]`` samples of length ``lengths[j]``.  Sampling is without
    replacement, as in a shuffled epoch: ``P(max <= v) = C(c(v), B) / C(n, B)`` with ``c(v)``
    the samples of length ``<= v``.  ``pad_to_multiple_of`` rounds the longest up first (the
    rounded maximum is the maximum of rounded lengths); ``power=2`` gives ``E[max**2]``.
    Costs O(distinct lengths)
    whatever ``counts.sum()`` is; the building block of :func:`expected_padding`.

    Accuracy: ~1e-15 relative (checked against ``math.comb`` arithmetic for batch sizes
    1..5,000 and up to 10**8 samples); ``P(max <= v)`` is never formed as a difference of
    two large log-gamma values.

    Parameters
    ----------
    lengths : array of int
        Distinct lengths, strictly ascending.
    counts : array of int
        Positive number of samples of each length.
    batch_size : int
        Subset size, ``1 <= batch_size <= counts.sum()``.
    pad_to_multiple_of : int, default 1
        Round the longest up to a multiple of this.
    power : int, default 1
        Return ``E[max ** power]`` (positive int).

    Returns
    -------
    float

    Examples
    --------
    Two samples of length 1 and one of length 3: a random pair misses the 3 only with
    probability 1/3, so E[max] = 1/3 * 1 + 2/3 * 3:

    >>> expected_batch_max([1, 3], [2, 1], 2)
    2.333
    >>> expected_batch_max([1, 3], [2, 1], 1)  # the mean
    1.667
    >>> expected_batch_max([1, 3], [2, 1], 2, pad_to_multiple_of=4)
    4.0
    """
    lengths, counts = _as_length_counts(lengths, counts)
    batch_size = positive_int(batch_size, "batch_size")
    m = positive_int(pad_to_multiple_of, "pad_to_multiple_of")
    power = positive_int(power, "power")
    n = sum(counts.tolist())
    if batch_size > n:
        raise ValueError(f"batch_size = {batch_size} exceeds the {n} samples")
    g = padded_values(lengths, m) ** power
    return expected_g_of_max(g, np.cumsum(counts), batch_size)
