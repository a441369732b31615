"""How much of the data's length variety a batch still sees: the exact mixing of an epoch.

``mixing = E[within-batch sample variance] / S**2``, where a batch's sample variance is the
unbiased one (``SS / (size - 1)``; a batch of one sample counts as variance 0) and ``S**2 =
SS_total / (N - 1)`` is the dataset's.  The average over batches is **sample-weighted** (a
batch of ``size`` samples counts ``size`` times: the question is what a *sample* sees around
it, and a token budget's batches of many short samples would otherwise count as much as one
long sample alone).  A full shuffle keeps 1 in expectation (a uniform random batch drawn
without replacement has ``E[sample variance] = S**2``), sorted batching keeps almost 0.

For a bucketed shuffle each batch is a uniform random subset of its bucket, so its expected
sample variance is the bucket's ``S_b**2 = SS_b / (n_b - 1)``: the mixing is exact from the
histogram, ``sum_b w_b S_b**2 / (N S**2)`` with ``w_b`` the bucket's samples in batches of
at least two (``n_b``, less the one sample of a last batch of one; 0 with ``B = 1``).  Up to
those ``w_b`` and the ``n / (n - 1)`` factors it is ``1 - eta**2`` of the bucket partition.
Every term is additive over buckets, so the optimiser's DP can trade it against padding
(:mod:`analysis.optimize._frontier`).  Sorted batching is exact too (only batches straddling
two lengths vary); the other strategies are simulated (:func:`batch_mixing`, a column of
:mod:`analysis.simulation.metrics`).  The simulated ``within_batch_cv`` (mean CV inside a batch),
``lag1_autocorr`` (length pattern in the order of steps) and ``composition_repeat`` (batches
seen again next epoch) measure other things and stay beside it.

A dataset of one distinct length has nothing to mix: every strategy keeps 1 by convention.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from analysis.batching import BatchRule, as_rule, bucket_bounds, check_edges
from analysis.lengths import LengthHistogram

__all__ = [
    "batch_mixing",
    "bucket_mixing",
    "bucketed_mixing",
    "edges_mixing",
    "length_variance",
    "random_mixing",
    "sorted_mixing",
]


def _sums(hist: LengthHistogram) -> tuple[list[int], list[int], list[int]]:
    """Exact prefix sums (Python ints) of count, count * length, count * length**2: in
    ``int64`` where the total fits, else in Python ints."""
    v, k = hist.lengths, hist.counts
    if int(hist.n_samples) * int(hist.max) ** 2 < 2**62:
        zero = np.zeros(1, np.int64)
        sums = [np.concatenate([zero, np.cumsum(x)]).tolist() for x in (k, k * v, k * v * v)]
        return sums[0], sums[1], sums[2]
    c, q1, q2 = [0], [0], [0]
    for x, n in zip(v.tolist(), k.tolist()):
        c.append(c[-1] + n)
        q1.append(q1[-1] + n * x)
        q2.append(q2[-1] + n * x * x)
    return c, q1, q2


def _scaled_ss(n: int, s1: int, s2: int) -> int:
    """``n * SS`` of ``n`` samples with sum ``s1`` and sum of squares ``s2`` (exact)."""
    return n * s2 - s1 * s1


def length_variance(hist: LengthHistogram) -> float:
    """The dataset's unbiased length variance ``S**2 = SS / (N - 1)`` (0 for one sample).

    Examples
    --------
    >>> length_variance(LengthHistogram.from_lengths([1, 2, 3, 4]))
    1.6666666666666667
    """
    n = hist.n_samples
    if n < 2:
        return 0.0
    c, s1, s2 = _sums(hist)
    return _scaled_ss(n, s1[-1], s2[-1]) / (n * (n - 1))


def _weighted(n: int, size: int) -> int:
    """Samples of a bucket of ``n`` in batches of at least two (batches of ``size``)."""
    if size <= 1 or n <= 1:
        return 0
    return n - 1 if n % size == 1 else n


def bucket_mixing(
    hist: LengthHistogram,
    edges: Sequence[int],
    batch_sizes: Sequence[int],
    memo: dict[Any, Any] | None = None,
) -> tuple[float, ...]:
    """Each bucket's share of the mixing of a bucketed shuffle (they sum to it): ``w_b S_b**2 /
    (N S**2)`` (validated ``edges`` covering ``hist``; ``batch_sizes`` one per bucket;
    ``memo``: a dict kept across calls on the same ``hist``, which holds its prefix sums).

    Examples
    --------
    >>> hist = LengthHistogram.from_lengths([1, 2, 3, 10, 11, 12])
    >>> [round(x, 4) for x in bucket_mixing(hist, [0, 3, 12], [3, 3])]
    [0.0199, 0.0199]
    """
    sums = None if memo is None else memo.get("mixing_sums")
    if sums is None:
        sums = _sums(hist)
        if memo is not None:
            memo["mixing_sums"] = sums
    c, s1, s2 = sums
    n_all = c[-1]
    total = _scaled_ss(n_all, s1[-1], s2[-1])  # N * SS_total
    out = []
    for lo, hi, size in zip(*bucket_bounds(hist.lengths, edges), batch_sizes):
        n = c[hi] - c[lo]
        w = _weighted(n, size)
        if w == 0 or total == 0:
            out.append(0.0)
            continue
        ss = _scaled_ss(n, s1[hi] - s1[lo], s2[hi] - s2[lo])  # n * SS_b
        # w * SS_b / (n - 1) / (N * SS / (N - 1)) = w (n SS_b) (N - 1) / (n (n - 1) N SS)
        out.append(w * ss * (n_all - 1) / (n * (n - 1) * total))
    return tuple(out)


def _total(hist: LengthHistogram, parts: Sequence[float]) -> float:
    if hist.lengths.size == 1:
        return 1.0
    return min(1.0, math.fsum(parts)) if parts else 0.0


def edges_mixing(
    hist: LengthHistogram,
    edges: Sequence[int],
    batch_sizes: Sequence[int],
    memo: dict[Any, Any] | None = None,
) -> float:
    """The mixing of a bucketed shuffle: the sum of :func:`bucket_mixing` (validated input;
    ``memo`` as there).

    Examples
    --------
    >>> edges_mixing(LengthHistogram.from_lengths([1, 2, 3, 10, 11, 12]), [0, 12], [3])
    1.0
    """
    return _total(hist, bucket_mixing(hist, edges, batch_sizes, memo))


def bucketed_mixing(
    hist: LengthHistogram,
    edges: Sequence[int],
    rule: BatchRule,
) -> float:
    """Exact expected mixing of a bucketed shuffle with ``edges`` (see the module docstring).

    Examples
    --------
    >>> hist = LengthHistogram.from_lengths([1, 2, 3, 10, 11, 12])
    >>> round(bucketed_mixing(hist, [0, 3, 12], BatchRule(batch_size=3)), 4)  # variance 1 of 25.1
    0.0398
    >>> round(bucketed_mixing(hist, [0, 12], BatchRule(batch_size=3)), 4)  # one bucket: a full shuffle
    1.0
    """
    rule = as_rule(rule)
    edges = check_edges(edges, hist)
    return edges_mixing(hist, edges, rule.batch_sizes(edges))


def random_mixing(
    hist: LengthHistogram,
    rule: BatchRule,
) -> float:
    """Exact expected mixing of a full shuffle with one batch size (``rule.fixed_batch_size``):
    1, less a last batch of one sample.

    Examples
    --------
    >>> hist = LengthHistogram.from_lengths([1, 2, 3, 10, 11, 12, 7])
    >>> random_mixing(hist, BatchRule(batch_size=3)), random_mixing(hist, BatchRule(batch_size=2))
    (0.8571428571428571, 0.8571428571428571)
    """
    rule = as_rule(rule)
    size = rule.fixed_batch_size(hist.max)
    return edges_mixing(hist, [hist.min - 1, hist.max], [size])


def sorted_mixing(
    hist: LengthHistogram,
    rule: BatchRule,
) -> float:
    """Exact mixing of sorted batching (the sorted samples cut into batches of
    ``rule.fixed_batch_size``): only the batches that straddle two lengths vary.

    Examples
    --------
    >>> hist = LengthHistogram.from_lengths([1, 1, 2, 2, 9, 9])
    >>> sorted_mixing(hist, BatchRule(2)), round(sorted_mixing(hist, BatchRule(3)), 4)
    (0.0, 0.5482)
    """
    rule = as_rule(rule)
    size = rule.fixed_batch_size(hist.max)
    n_all = hist.n_samples
    if hist.lengths.size == 1:
        return 1.0
    c, s1, s2 = _sums(hist)
    total = _scaled_ss(n_all, s1[-1], s2[-1])
    lengths = hist.lengths.tolist()
    # batches holding a boundary between two distinct lengths: j = c_t // B where B does not
    # divide c_t; each is rebuilt from the lengths it overlaps
    straddle = sorted({ct // size for ct in c[1:-1] if ct % size})
    parts = []
    t = 0
    for j in straddle:
        a, b = j * size, min((j + 1) * size, n_all)
        while c[t + 1] <= a:
            t += 1
        n = q1 = q2 = 0
        u = t
        while u < len(lengths) and c[u] < b:
            k = min(b, c[u + 1]) - max(a, c[u])
            n, q1, q2 = n + k, q1 + k * lengths[u], q2 + k * lengths[u] ** 2
            u += 1
        if n >= 2:  # n * SS_b / (n - 1) over N * SS / (N - 1), times n / N: n SS_b (N-1) / ((n-1) N SS)
            parts.append(_scaled_ss(n, q1, q2) * (n_all - 1) / ((n - 1) * total))
    return min(1.0, math.fsum(parts))


def batch_mixing(
    square_sums: np.ndarray, size: np.ndarray, useful: np.ndarray, variance: float
) -> tuple[float, float]:
    """Mixing of simulated batches and its standard error (batches taken as independent
    draws: a ratio estimator over batches), from each batch's exact ``int64`` sum of squared
    lengths, size and sum of lengths; ``variance``: the data's ``S**2``
    (:func:`length_variance`; 0: one length, mixing 1).

    Examples
    --------
    >>> sq, size, useful = np.array([5, 13]), np.array([2, 2]), np.array([3, 5])
    >>> batch_mixing(sq, size, useful, 1.0)   # batches {1, 2}, {2, 3}: variance 0.5 each
    (0.5, 0.0)
    """
    if variance <= 0:
        return 1.0, 0.0
    spread = (size * square_sums - useful * useful).astype(float)  # size * SS of each batch
    x = np.where(size >= 2, spread / np.maximum(size - 1, 1), 0.0) / variance  # size * var / S^2
    weight = float(size.sum())
    mix = float(x.sum()) / weight
    se = math.sqrt(float(np.sum((x - mix * size) ** 2))) / weight
    return mix, se
