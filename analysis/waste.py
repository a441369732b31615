"""Edges, the batch rule, and the exact expected padding of a bucketed shuffle.

Definitions used everywhere in the workbench:

- ``edges``: increasing integers ``[e0, e1, ..., eK]``; bucket ``i`` holds lengths ``L`` with
  ``e_i < L <= e_{i+1}``; ``e0`` is below the shortest length, ``eK`` at or above the longest.
- A batch costs ``padded = size * longest`` (the longest rounded up to ``pad_to_multiple_of``);
  ``useful`` is the sum of its lengths; ``efficiency = useful / padded``.
- Batch rule: ``batch_size`` samples per batch, or ``max_tokens``, where bucket ``i`` takes
  ``max(1, max_tokens // e_{i+1})`` samples.

Pure functions of a :class:`~analysis.lengths.LengthHistogram`; nothing here reads a file.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from scipy.special import gammaln

from analysis.lengths import LengthHistogram, _positive_int

__all__ = ["check_edges", "cover_edges", "batch_rule", "bucket_batch_sizes", "check_batch_rule", "bucket_index",
           "WasteEstimate", "expected_padding", "expected_efficiency", "expected_batch_max",
           "expected_bucket_padded_tokens"]


def check_edges(edges: Sequence[int] | np.ndarray, hist: LengthHistogram | None = None) -> list[int]:
    """Validate bucket ``edges`` and return them as a list of Python ints.

    Raises ``ValueError`` naming the problem: fewer than 2 values, non-integers, not
    strictly increasing, or (given ``hist``) not covering the data (``e0`` must be below the
    shortest length and ``eK`` at or above the longest).

    Examples
    --------
    >>> check_edges([0, 770, 1216, 1728, 2432, 3296, 8192])
    [0, 770, 1216, 1728, 2432, 3296, 8192]
    >>> check_edges([0, 10, 10])
    Traceback (most recent call last):
    ...
    ValueError: edges must be strictly increasing: edges[1] = 10 >= edges[2] = 10
    """
    if isinstance(edges, str | bytes):
        raise ValueError("edges must be a sequence of integers, got a string")
    values = list(np.asarray(edges).ravel().tolist()) if isinstance(edges, np.ndarray) else list(edges)
    if len(values) < 2:
        raise ValueError(f"edges need at least 2 values (one bucket), got {len(values)}")
    out = []
    for i, e in enumerate(values):
        if isinstance(e, bool | np.bool_):
            raise ValueError(f"edges[{i}] = {e!r} is not an integer")
        if isinstance(e, float) and e.is_integer():
            e = int(e)
        if not isinstance(e, int | np.integer):
            raise ValueError(f"edges[{i}] = {e!r} is not an integer")
        out.append(int(e))
    for i in range(len(out) - 1):
        if out[i] >= out[i + 1]:
            raise ValueError(
                f"edges must be strictly increasing: edges[{i}] = {out[i]} >= edges[{i + 1}] = {out[i + 1]}"
            )
    if out[0] < 0:
        raise ValueError(f"edges[0] = {out[0]} is negative")
    if hist is not None:
        if out[0] >= hist.min:
            raise ValueError(
                f"edges do not cover the data: edges[0] = {out[0]} must be below the shortest length {hist.min}"
            )
        if out[-1] < hist.max:
            raise ValueError(
                f"edges do not cover the data: edges[-1] = {out[-1]} is below the longest length {hist.max}"
            )
    return out


def cover_edges(edges: Sequence[int] | np.ndarray, hist: LengthHistogram) -> list[int]:
    """``edges`` stretched just enough to cover ``hist``: the first edge lowered below the
    shortest length, the last raised to the longest; interior edges are kept.

    For evaluating published edges (the case's were fitted to lengths up to 8,192) on other
    data: interior edges beyond the data leave empty buckets, which the model allows.

    Examples
    --------
    >>> hist = LengthHistogram.from_lengths([100, 9000])
    >>> cover_edges([0, 770, 8192], hist)
    [0, 770, 9000]
    >>> cover_edges([200, 770, 8192], LengthHistogram.from_lengths([100, 500]))
    [99, 770, 8192]
    """
    out = check_edges(edges)
    out[0] = min(out[0], hist.min - 1)
    out[-1] = max(out[-1], hist.max)
    return check_edges(out, hist)


def check_batch_rule(batch_size: Any = None, max_tokens: Any = None) -> tuple[int | None, int | None]:
    """Exactly one of ``batch_size`` and ``max_tokens``, as positive ints.

    Examples
    --------
    >>> check_batch_rule(batch_size=8)
    (8, None)
    >>> check_batch_rule()
    Traceback (most recent call last):
    ...
    ValueError: give exactly one of batch_size and max_tokens (got neither)
    """
    if (batch_size is None) == (max_tokens is None):
        which = "neither" if batch_size is None else "both"
        raise ValueError(f"give exactly one of batch_size and max_tokens (got {which})")
    if batch_size is not None:
        return _positive_int(batch_size, "batch_size"), None
    return None, _positive_int(max_tokens, "max_tokens")


def batch_rule(batch_size: Any = None, max_tokens: Any = None) -> dict[str, int]:
    """The batch rule as keyword arguments for the engine: ``{"batch_size": B}`` or
    ``{"max_tokens": T}`` (validated by :func:`check_batch_rule`).

    Examples
    --------
    >>> batch_rule(max_tokens=16384)
    {'max_tokens': 16384}
    """
    batch_size, max_tokens = check_batch_rule(batch_size, max_tokens)
    return {"batch_size": batch_size} if batch_size is not None else {"max_tokens": max_tokens}


def bucket_batch_sizes(edges: Sequence[int], *, batch_size: int | None = None,
                       max_tokens: int | None = None) -> list[int]:
    """Samples per batch in each bucket under the batch rule.

    With ``max_tokens`` a bucket takes ``max(1, max_tokens // upper_edge)`` samples, as
    token-budget trainers do.

    Examples
    --------
    >>> bucket_batch_sizes([0, 1000, 4000], max_tokens=16384)
    [16, 4]
    >>> bucket_batch_sizes([0, 1000, 4000], batch_size=8)
    [8, 8]
    """
    edges = check_edges(edges)
    batch_size, max_tokens = check_batch_rule(batch_size, max_tokens)
    if batch_size is not None:
        return [batch_size] * (len(edges) - 1)
    return [max(1, max_tokens // upper) for upper in edges[1:]]


def bucket_index(values: np.ndarray, edges: Sequence[int]) -> np.ndarray:
    """Bucket of each length: ``i`` such that ``edges[i] < L <= edges[i+1]``.

    Assumes ``edges`` already cover ``values`` (see :func:`check_edges`).

    Examples
    --------
    >>> bucket_index(np.array([1, 10, 11, 30]), [0, 10, 30]).tolist()
    [0, 0, 1, 1]
    """
    return np.searchsorted(np.asarray(edges[1:-1], dtype=np.int64), values, side="left")


# ---------------------------------------------------------------------------------------------
# The exact expected padding of a bucketed shuffle
# ---------------------------------------------------------------------------------------------
#
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


def _stirlerr(x: np.ndarray) -> np.ndarray:
    """``lgamma(x + 1) - (x log x - x + log(2 pi x) / 2)`` for ``x >= 16`` (series)."""
    x = np.asarray(x, dtype=float)
    y = 1.0 / (x * x)
    return (1.0 / 12 - y * (1.0 / 360 - y * (1.0 / 1260 - y * (1.0 / 1680 - y / 1188)))) / x


def _log_prob_max_at_most(cum: np.ndarray, n: int, size: int) -> np.ndarray:
    """``log P(max <= v_j) = log C(cum_j, size) - log C(n, size)`` for rows with
    ``size <= cum_j <= n`` (other rows are the caller's business)."""
    c = cum.astype(float)
    d = (n - cum).astype(float)
    nf = float(n)
    out = np.zeros(c.shape)
    if size <= _PRODUCT_TERMS:
        for i in range(size):
            out += np.log1p(-d / (nf - i))
        return out
    few = d <= _PRODUCT_TERMS
    if few.any():
        df = d[few]
        acc = np.zeros(df.shape)
        for i in range(int(df.max())):
            acc += np.where(i < df, np.log1p(-size / (nf - i)), 0.0)
        out[few] = acc
    # Far from the singularity (c >= 6 size): the B terms log1p(-d / x), x = n - i, vary
    # slowly; expand around the middle x0 (midpoint series, ratio <= 1/121 per term).
    middle = ~few & (c >= _MIDPOINT_MIN_RATIO * size)
    if middle.any():
        out[middle] = _midpoint_log_sum(d[middle], nf, size)
    rest = ~few & ~middle
    if rest.any():
        a = c[rest]
        dr = d[rest]
        b = a - size
        stirling = b >= _STIRLING_MIN
        res = np.empty(a.shape)
        if stirling.any():
            a_, d_, b_ = a[stirling], dr[stirling], b[stirling]
            res[stirling] = (
                -a_ * _log1pmx(d_ / a_) + b_ * _log1pmx(d_ / b_)
                + d_ * np.log1p(-size / nf)
                - 0.5 * (np.log1p(d_ / a_) - np.log1p(d_ / b_))
                + _stirlerr(a_) - _stirlerr(a_ + d_) - _stirlerr(b_) + _stirlerr(b_ + d_)
            )
        if (~stirling).any():
            a_, b_ = a[~stirling], b[~stirling]
            res[~stirling] = (gammaln(a_ + 1) - gammaln(b_ + 1)
                              - gammaln(nf + 1) + gammaln(nf - size + 1))
        out[rest] = res
    return out


def _midpoint_log_sum(d: np.ndarray, n: float, size: int, terms: int = 9) -> np.ndarray:
    """``sum_{i<size} log1p(-d / (n - i))`` by its Taylor series around ``x0 = n - (size-1)/2``.

    With ``f(x) = log(x - d) - log(x)``, the odd terms cancel by symmetry and
    ``f^(k)(x0) / k! = -(1/k) ((x0 - d)^-k - x0^-k) = -(1/k) x0^-k expm1(-k log1p(-d/x0))``
    for even ``k``.  Accurate when ``size`` is well below ``x0 - d`` (callers ensure
    ``c >= 6 size``, so each term shrinks by at least 121).
    """
    x0 = n - (size - 1) / 2.0
    main = np.log1p(-d / x0)
    offsets = (np.arange(size) - (size - 1) / 2.0) / x0
    out = size * main
    for k in range(2, 2 * terms + 1, 2):
        w = float(np.sum(offsets**k))  # sum_i (t_i / x0)^k, no overflow
        if w == 0.0:
            break
        out = out - (w / k) * np.expm1(-k * main)
    return out


def _expected_g_of_max(g: np.ndarray, cum: np.ndarray, size: int) -> float:
    """E[g(max)] of a uniformly random ``size``-subset; ``g`` non-decreasing per distinct
    length, ``cum`` the cumulative counts (``cum[-1]`` = n >= size >= 1).  No validation."""
    n = int(cum[-1])
    if g.size == 1:
        return float(g[0])
    steps = np.diff(g)  # >= 0
    inner = cum[:-1]
    above = np.ones(inner.shape)  # P(max > v_j): 1 where fewer than `size` samples are <= v_j
    ok = inner >= size
    if ok.any():
        above[ok] = -np.expm1(_log_prob_max_at_most(inner[ok], n, size))
    return float(g[0] + np.dot(steps, above))


def _as_length_counts(lengths: Any, counts: Any) -> tuple[np.ndarray, np.ndarray]:
    """Validated (ascending distinct lengths, positive counts) arrays for the public helpers."""
    lengths = np.asarray(lengths)
    counts = np.asarray(counts)
    if lengths.ndim != 1 or lengths.shape != counts.shape or lengths.size == 0:
        raise ValueError(
            f"lengths and counts must be non-empty 1-D arrays of equal size, got {lengths.shape} "
            f"and {counts.shape}"
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


def _padded_values(lengths: np.ndarray, pad_to_multiple_of: int) -> np.ndarray:
    """Lengths rounded up to a multiple (as float64: what a batch's longest pads to)."""
    if pad_to_multiple_of == 1:
        return lengths.astype(float)
    m = pad_to_multiple_of
    return ((lengths + (m - 1)) // m * m).astype(float)


def expected_batch_max(lengths: Sequence[int] | np.ndarray, counts: Sequence[int] | np.ndarray,
                       batch_size: int, *, pad_to_multiple_of: int = 1, power: int = 1) -> float:
    """Expected longest sample of a uniformly random ``batch_size``-subset of a multiset.

    The multiset holds ``counts[j]`` samples of length ``lengths[j]``.  Sampling is without
    replacement, as in a shuffled epoch: ``P(max <= v) = C(c(v), B) / C(n, B)`` with ``c(v)``
    the samples of length ``<= v``.  ``pad_to_multiple_of`` rounds the longest up first (the
    rounded maximum is the maximum of rounded lengths); ``power=2`` gives ``E[max**2]`` (the
    attention term of :func:`analysis.throughput.batch_cost`).  Costs O(distinct lengths)
    whatever ``counts.sum()`` is; the building block of :func:`expected_padding` (and of
    optimisers that price one candidate bucket at a time).

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
    batch_size = _positive_int(batch_size, "batch_size")
    m = _positive_int(pad_to_multiple_of, "pad_to_multiple_of")
    power = _positive_int(power, "power")
    n = sum(counts.tolist())
    if batch_size > n:
        raise ValueError(f"batch_size = {batch_size} exceeds the {n} samples")
    g = _padded_values(lengths, m) ** power
    return _expected_g_of_max(g, np.cumsum(counts), batch_size)


def _bucket_expectations(g: np.ndarray, cum: np.ndarray, batch_size: int) -> float:
    """Expected ``sum over batches of size * g(longest)`` for one shuffled bucket."""
    n = int(cum[-1])
    full, rest = divmod(n, batch_size)
    total = 0.0
    if full:
        total += full * batch_size * _expected_g_of_max(g, cum, batch_size)
    if rest:
        total += rest * _expected_g_of_max(g, cum, rest)
    return total


def expected_bucket_padded_tokens(lengths: Sequence[int] | np.ndarray,
                                  counts: Sequence[int] | np.ndarray, batch_size: int, *,
                                  pad_to_multiple_of: int = 1, power: int = 1) -> float:
    """Expected padded tokens of one shuffled bucket: ``floor(n/B) * B * E[max_B] + r * E[max_r]``.

    The bucket holds ``counts[j]`` samples of length ``lengths[j]`` (``n`` in all); it is
    shuffled and cut into ``floor(n / B)`` full batches and one partial batch of
    ``r = n mod B``.  ``power=2`` gives the expected ``sum over batches of size * longest**2``
    (the attention term).  This is the per-bucket term of :func:`expected_padding`, for
    optimisers and simulators that price one candidate bucket at a time.

    Examples
    --------
    >>> round(expected_bucket_padded_tokens([1, 3], [2, 1], 2), 12)  # 2 * 7/3 + 1 * 5/3
    6.333333333333
    >>> expected_bucket_padded_tokens([5], [7], 3, pad_to_multiple_of=4)
    56.0
    """
    lengths, counts = _as_length_counts(lengths, counts)
    batch_size = _positive_int(batch_size, "batch_size")
    m = _positive_int(pad_to_multiple_of, "pad_to_multiple_of")
    power = _positive_int(power, "power")
    return _bucket_expectations(_padded_values(lengths, m) ** power, np.cumsum(counts), batch_size)


@dataclass(frozen=True)
class WasteEstimate:
    """Expected padding of one epoch of a bucketed shuffle (see :func:`expected_padding`).

    ``useful_tokens`` and ``n_batches`` are exact; ``padded_tokens`` is an expectation over
    shuffles.  ``expected_cost`` is the expected sum over batches of
    ``size * (longest + attention_weight * longest**2)`` (equal to ``padded_tokens`` when
    ``attention_weight`` is 0); :class:`analysis.throughput.Calibration` turns it into tokens/s.
    The ``bucket_*`` tuples hold one value per bucket, for :meth:`to_frame`.
    """

    useful_tokens: int
    padded_tokens: float
    efficiency: float
    waste_tokens: float
    n_batches: int
    edges: list[int]
    batch_sizes: list[int]
    pad_to_multiple_of: int = 1
    attention_weight: float = 0.0
    expected_cost: float = float("nan")
    bucket_samples: tuple[int, ...] = ()
    bucket_tokens: tuple[int, ...] = ()
    bucket_batches: tuple[int, ...] = ()
    bucket_padded_tokens: tuple[float, ...] = ()
    bucket_cost: tuple[float, ...] = ()

    @property
    def n_buckets(self) -> int:
        """Number of buckets (``len(edges) - 1``)."""
        return len(self.edges) - 1

    def to_frame(self) -> pd.DataFrame:
        """One row per bucket: its edges, samples, tokens, batch size, batches, expected
        padded tokens and efficiency (NaN for an empty bucket); an ``expected cost`` column
        is added when ``attention_weight`` is not 0."""
        eff = [t / p if s else float("nan")
               for s, t, p in zip(self.bucket_samples, self.bucket_tokens, self.bucket_padded_tokens)]
        frame = pd.DataFrame({
            "lower edge": self.edges[:-1],
            "upper edge": self.edges[1:],
            "samples": list(self.bucket_samples),
            "tokens": list(self.bucket_tokens),
            "batch_size": self.batch_sizes,
            "batches": list(self.bucket_batches),
            "expected padded tokens": list(self.bucket_padded_tokens),
            "efficiency": eff,
        })
        if self.attention_weight:
            frame["expected cost"] = list(self.bucket_cost)
        frame.index.name = "bucket"
        return frame


def expected_padding(hist: LengthHistogram | Sequence[int] | np.ndarray, edges: Sequence[int], *,
                     batch_size: int | None = None, max_tokens: int | None = None,
                     pad_to_multiple_of: int = 1, attention_weight: float = 0.0) -> WasteEstimate:
    """Exact expected padding of one epoch of a bucketed shuffle.

    The model is the sampler itself: each bucket's samples are shuffled and cut, in order,
    into batches of its batch size ``B``; every full batch is then a uniformly random
    ``B``-subset of the bucket and the last partial batch (``r = n mod B`` samples) a uniformly
    random ``r``-subset.  So a bucket's expected padded tokens are
    ``floor(n / B) * B * E[max_B] + r * E[max_r]``, with ``E[max]`` from
    :func:`expected_batch_max` (order statistics without replacement).  One bucket is the full
    random shuffle; a bucket per distinct length is waste-free.  Runs on the histogram:
    O(distinct lengths), whatever the number of samples.

    Parameters
    ----------
    hist : LengthHistogram or array of per-sample lengths
        The data (an array is converted with ``LengthHistogram.from_lengths``).
    edges : sequence of int
        Bucket edges ``[e0, ..., eK]`` covering the data (see :func:`check_edges`).
    batch_size, max_tokens : int
        The batch rule: exactly one (see :func:`bucket_batch_sizes`).
    pad_to_multiple_of : int, default 1
        Each batch's longest is rounded up to a multiple of this.
    attention_weight : float, default 0.0
        Also compute ``expected_cost``, the expected sum of
        ``size * (longest + attention_weight * longest**2)`` (rounded longest).

    Returns
    -------
    WasteEstimate

    Examples
    --------
    Lengths 1, 1, 3 in one bucket, batches of 2: the pair is {1, 1} with probability 1/3
    (padded 2), otherwise it holds the 3 (padded 6), and the single leftover pads to itself:

    >>> est = expected_padding([1, 1, 3], [0, 3], batch_size=2)
    >>> est.useful_tokens, round(est.padded_tokens, 12), est.n_batches
    (5, 6.333333333333, 2)
    >>> expected_padding([1, 1, 3], [0, 1, 3], batch_size=2).efficiency  # a bucket per length
    1.0
    >>> est.to_frame()[["samples", "tokens", "batches", "expected padded tokens"]]
            samples  tokens  batches  expected padded tokens
    bucket
    0             3       5        2                   6.333
    """
    if not isinstance(hist, LengthHistogram):
        hist = LengthHistogram.from_lengths(hist)
    edges = check_edges(edges, hist)
    batch_sizes = bucket_batch_sizes(edges, batch_size=batch_size, max_tokens=max_tokens)
    m = _positive_int(pad_to_multiple_of, "pad_to_multiple_of")
    if isinstance(attention_weight, bool) or not isinstance(attention_weight, int | float | np.number) \
            or not math.isfinite(attention_weight) or attention_weight < 0:
        raise ValueError(f"attention_weight must be a finite number >= 0, got {attention_weight!r}")
    attention_weight = float(attention_weight)

    lengths, counts = hist.lengths, hist.counts
    bounds = np.searchsorted(lengths, np.asarray(edges[1:-1], dtype=np.int64), side="right")
    starts = [0, *bounds.tolist()]
    stops = [*bounds.tolist(), lengths.size]
    values = _padded_values(lengths, m)
    squares = values * values if attention_weight else None
    fast = hist.n_samples < 2**62 and hist.max * hist.n_samples < 2**62
    tokens_each = lengths * counts if fast else None

    samples, tokens, batches, padded, cost = [], [], [], [], []
    for lo, hi, size in zip(starts, stops, batch_sizes):
        if lo == hi:
            samples.append(0), tokens.append(0), batches.append(0), padded.append(0.0)
            cost.append(0.0)
            continue
        c = counts[lo:hi]
        cum = np.cumsum(c)
        n = int(cum[-1])
        samples.append(n)
        if fast:
            tokens.append(int(tokens_each[lo:hi].sum()))
        else:
            tokens.append(sum(map(operator.mul, lengths[lo:hi].tolist(), c.tolist())))
        batches.append(-(-n // size))
        p = _bucket_expectations(values[lo:hi], cum, size)
        padded.append(p)
        cost.append(p + attention_weight * _bucket_expectations(squares[lo:hi], cum, size)
                    if attention_weight else p)
    useful = sum(tokens)
    padded_total = math.fsum(padded)
    return WasteEstimate(
        useful_tokens=useful,
        padded_tokens=padded_total,
        efficiency=useful / padded_total,
        waste_tokens=padded_total - useful,
        n_batches=sum(batches),
        edges=edges,
        batch_sizes=batch_sizes,
        pad_to_multiple_of=m,
        attention_weight=attention_weight,
        expected_cost=math.fsum(cost),
        bucket_samples=tuple(samples),
        bucket_tokens=tuple(tokens),
        bucket_batches=tuple(batches),
        bucket_padded_tokens=tuple(padded),
        bucket_cost=tuple(cost),
    )


def expected_efficiency(hist: LengthHistogram | Sequence[int] | np.ndarray, edges: Sequence[int], *,
                        batch_size: int | None = None, max_tokens: int | None = None,
                        pad_to_multiple_of: int = 1) -> float:
    """``expected_padding(...).efficiency``: useful tokens over expected padded tokens.

    Examples
    --------
    >>> round(expected_efficiency([1, 1, 3], [0, 3], batch_size=2), 6)
    0.789474
    """
    return expected_padding(hist, edges, batch_size=batch_size, max_tokens=max_tokens,
                            pad_to_multiple_of=pad_to_multiple_of).efficiency
