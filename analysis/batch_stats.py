"""Statistics of simulated batches: the within-batch length spread, the lag-1
autocorrelation of a step series, how much of an epoch's batch compositions repeat.  Pure
numpy over per-batch sums (:mod:`analysis.epoch_metrics` measures epochs with them)."""

from __future__ import annotations

import math

import numpy as np

__all__ = [
    "coefficient_of_variation",
    "int64_squares",
    "lag1_autocorr",
    "share_seen",
    "within_batch_cv",
    "within_cv",
]


def share_seen(queries: np.ndarray, seen: np.ndarray) -> float:
    """Share of the sorted ``queries`` present in the sorted array ``seen``."""
    if seen.size == 0:
        return 0.0
    at = np.minimum(np.searchsorted(seen, queries), seen.size - 1)
    return float(np.mean(seen[at] == queries))


def coefficient_of_variation(x: np.ndarray) -> float:
    """Population coefficient of variation (NaN when the mean is 0)."""
    mean = float(x.mean())
    return float(x.std()) / mean if mean else float("nan")


def int64_squares(size: np.ndarray, longest: int) -> bool:
    """Whether ``size * sum(L**2)`` of every batch fits ``int64`` (``longest``: the longest
    length, or a bound on it)."""
    return int(size.max()) ** 2 * longest * longest < 2**62


def within_cv(square_sums: np.ndarray, size: np.ndarray, useful: np.ndarray) -> float:
    """Mean over batches of std/mean of the lengths in the batch (population std), from the
    batches' exact ``int64`` sums of squares and sums:
    ``std / mean = sqrt(size * sum(L**2) - sum(L)**2) / sum(L)``."""
    spread = (size * square_sums - useful * useful).astype(float)
    return float(np.mean(np.sqrt(spread) / useful))


def within_batch_cv(
    lengths: np.ndarray, starts: np.ndarray, size: np.ndarray, useful: np.ndarray, longest: np.ndarray
) -> float:
    """:func:`within_cv` from the samples' ``lengths`` (the batches starting at ``starts``);
    ``useful`` and ``longest`` are the batches' sums and maxima.  Exact in ``int64`` when it
    cannot overflow, else in floats."""
    if int64_squares(size, int(longest.max())):
        return within_cv(np.add.reduceat(lengths * lengths, starts), size, useful)
    lf = lengths.astype(float)  # batches of more than ~10^4 samples of ~10^5 tokens
    sq = np.add.reduceat(lf * lf, starts)
    spread = np.maximum(size * sq - useful.astype(float) ** 2, 0.0)
    return float(np.mean(np.sqrt(spread) / useful))


def lag1_autocorr(x: np.ndarray) -> float:
    """Pearson correlation of ``x[:-1]`` and ``x[1:]`` (NaN when undefined)."""
    if x.size < 3:
        return float("nan")
    a, b = x[:-1] - x[:-1].mean(), x[1:] - x[1:].mean()
    # elementwise sums, not BLAS dot products: on shared cores a multi-threaded dot of a
    # 100k-vector costs more than it saves
    den = math.sqrt(float(np.sum(a * a)) * float(np.sum(b * b)))
    return float(np.sum(a * b)) / den if den > 0 else float("nan")
