"""Exact histograms of sample lengths: the one value the whole workbench passes around.

A dataset of millions of samples usually has only thousands of distinct lengths, so
everything downstream (the padding model, the optimiser, the figures) works on
``(lengths, counts)`` pairs.  Totals are exact: they are Python ``int`` values computed
without any fixed-width accumulator.  Counting a stream of lengths chunk by chunk (what the
loaders do) is :class:`analysis.counting.LengthCounter`, one floor up.

This module imports only :mod:`analysis._validate` from the project and reads no files.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from analysis._validate import ZeroLengthError, as_length_array, positive_int

__all__ = ["LengthHistogram", "ZeroLengthError"]

_INT64_MAX = np.iinfo(np.int64).max
# Below this maximum length, counting with bincount (O(n)) beats sorting (O(n log n)).
_BINCOUNT_MAX_LENGTH = 1 << 24


def count_distinct(arr: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct ascending values of a validated non-negative int64 array, with counts."""
    if arr.size == 0:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    top = int(arr.max())
    if top < _BINCOUNT_MAX_LENGTH and top <= 8 * arr.size + 1024:
        counts = np.bincount(arr)
        lengths = np.flatnonzero(counts)
        return lengths.astype(np.int64), counts[lengths].astype(np.int64)
    lengths, counts = np.unique(arr, return_counts=True)
    return lengths.astype(np.int64), counts.astype(np.int64)


def _exact_dot(a: np.ndarray, b: np.ndarray) -> int:
    """Exact ``sum(a * b)`` of two integer arrays as a Python int (no overflow)."""
    return sum(map(operator.mul, a.tolist(), b.tolist()))


@dataclass(frozen=True, eq=False)
class LengthHistogram:
    """Exact histogram of sample lengths (tokens, frames, characters...).

    Parameters
    ----------
    lengths : numpy.ndarray
        Distinct lengths, strictly ascending, ``int64``, non-negative.
    counts : numpy.ndarray
        Number of samples of each length, ``int64``, all positive.

    Build one with :meth:`from_lengths` (per-sample values) or :meth:`from_counts`
    (a histogram you already have); ``analysis.load_lengths`` reads files.  Both arrays
    are read-only.  Zero-length samples are rejected unless ``allow_zero=True`` is passed
    to the constructors, because an empty training sample is nearly always a data bug.

    Examples
    --------
    >>> from analysis import LengthHistogram
    >>> hist = LengthHistogram.from_lengths([3, 1, 3, 7])
    >>> hist.lengths.tolist(), hist.counts.tolist()
    ([1, 3, 7], [1, 2, 1])
    >>> hist.n_samples, hist.total_tokens, hist.mean
    (4, 14, 3.5)
    >>> big = LengthHistogram.from_counts([8192], [2**40])
    >>> big.total_tokens == 8192 * 2**40
    True
    """

    lengths: np.ndarray
    counts: np.ndarray

    def __post_init__(self) -> None:
        lengths = np.asarray(self.lengths)
        counts = np.asarray(self.counts)
        if lengths.ndim != 1 or counts.ndim != 1 or lengths.shape != counts.shape:
            raise ValueError(
                f"lengths and counts must be 1-D of equal size, got {lengths.shape} and {counts.shape}"
            )
        if lengths.size == 0:
            raise ValueError("empty histogram: no samples")
        # Validate the values (no silent float truncation or uint64 wrap-around), then copy.
        lengths = np.array(as_length_array(lengths, allow_zero=True, source="lengths"), copy=True)
        counts = np.array(as_length_array(counts, allow_zero=True, source="counts", what="count"), copy=True)
        if (counts <= 0).any():
            raise ValueError("counts must be positive")
        if lengths[0] < 0:
            raise ValueError(f"negative length {int(lengths[0])}")
        if (np.diff(lengths) <= 0).any():
            raise ValueError("lengths must be distinct and ascending")
        lengths.setflags(write=False)
        counts.setflags(write=False)
        object.__setattr__(self, "lengths", lengths)
        object.__setattr__(self, "counts", counts)

    # ------------------------------------------------------------------ constructors
    @classmethod
    def from_lengths(
        cls, values: Iterable[int] | np.ndarray | pd.Series, *, allow_zero: bool = False
    ) -> LengthHistogram:
        """Histogram of per-sample lengths.

        Accepts any integer dtype (int8..uint64), a Python list, a pandas Series, or
        floats when every value is integral.  Bool, NaN, non-integral, negative and
        (unless ``allow_zero``) zero values raise ``ValueError`` naming the first bad row.

        Examples
        --------
        >>> import numpy as np
        >>> LengthHistogram.from_lengths(np.array([5, 5, 2], dtype=np.uint8)).total_tokens
        12
        >>> LengthHistogram.from_lengths([1.0, 2.5])
        Traceback (most recent call last):
        ...
        ValueError: row 1: length 2.5 is not an integer
        """
        if isinstance(values, Iterable) and not isinstance(
            values, str | bytes | np.ndarray | pd.Series | pd.Index | list | tuple
        ):
            values = list(values)
        arr = as_length_array(values, allow_zero=allow_zero)
        if arr.size == 0:
            raise ValueError("empty input: no lengths")
        return cls(*count_distinct(arr))

    @classmethod
    def from_counts(
        cls,
        lengths: Iterable[int] | np.ndarray,
        counts: Iterable[int] | np.ndarray,
        *,
        allow_zero: bool = False,
    ) -> LengthHistogram:
        """Histogram from ``lengths`` and how many samples have each.

        Lengths need not be sorted or distinct (repeats are summed); zero counts are
        dropped; negative counts raise ``ValueError``.

        Examples
        --------
        >>> h = LengthHistogram.from_counts([7, 3, 7], [1, 2, 4])
        >>> h.lengths.tolist(), h.counts.tolist()
        ([3, 7], [2, 5])
        """
        lengths_arr = as_length_array(
            list(lengths) if not isinstance(lengths, np.ndarray) else lengths,
            allow_zero=allow_zero,
            source="lengths",
        )
        counts_arr = as_length_array(
            list(counts) if not isinstance(counts, np.ndarray) else counts,
            allow_zero=True,
            source="counts",
            what="count",
        )
        if lengths_arr.shape != counts_arr.shape:
            raise ValueError(f"lengths and counts differ in size: {lengths_arr.size} and {counts_arr.size}")
        keep = counts_arr > 0
        lengths_arr, counts_arr = lengths_arr[keep], counts_arr[keep]
        if lengths_arr.size == 0:
            raise ValueError("empty input: no samples (all counts are zero)")
        order = np.argsort(lengths_arr, kind="stable")
        lengths_arr, counts_arr = lengths_arr[order], counts_arr[order]
        starts = np.flatnonzero(np.r_[True, np.diff(lengths_arr) != 0])
        ends = np.r_[starts[1:], lengths_arr.size]
        flat = counts_arr.tolist()
        merged = [sum(flat[a:b]) for a, b in zip(starts.tolist(), ends.tolist())]
        if max(merged) > _INT64_MAX:
            raise ValueError("a count exceeds int64")
        return cls(lengths_arr[starts], np.array(merged, dtype=np.int64))

    # ------------------------------------------------------------------ exact totals
    @property
    def n_samples(self) -> int:
        """Number of samples (exact ``int``)."""
        return sum(self.counts.tolist())

    @property
    def total_tokens(self) -> int:
        """Sum of all lengths (exact ``int``)."""
        return _exact_dot(self.lengths, self.counts)

    @property
    def n_distinct(self) -> int:
        """Number of distinct lengths."""
        return int(self.lengths.size)

    @property
    def min(self) -> int:
        """Shortest length."""
        return int(self.lengths[0])

    @property
    def max(self) -> int:
        """Longest length."""
        return int(self.lengths[-1])

    @property
    def mean(self) -> float:
        """Mean length (correctly rounded ``total_tokens / n_samples``)."""
        return self.total_tokens / self.n_samples

    # ------------------------------------------------------------------ statistics
    def cumulative_counts(self) -> np.ndarray:
        """``cumulative_counts()[i]`` = samples with length ``<= lengths[i]`` (int64, exact
        while the sample count fits in int64, which the constructor guarantees)."""
        total = self.n_samples
        if total > _INT64_MAX:
            raise ValueError("more than 2**63 samples")
        return np.cumsum(self.counts)

    def quantile(self, q: float | Iterable[float]) -> int | np.ndarray:
        """Smallest length ``L`` with at least a fraction ``q`` of samples ``<= L``.

        This is NumPy's ``method="inverted_cdf"`` on the expanded samples.

        Examples
        --------
        >>> h = LengthHistogram.from_lengths([1, 2, 3, 4])
        >>> h.quantile(0.5), h.quantile(0.51), h.quantile([0, 1]).tolist()
        (2, 3, [1, 4])
        """
        qs = np.asarray(q, dtype=float)
        if np.isnan(qs).any() or (qs < 0).any() or (qs > 1).any():
            raise ValueError(f"quantile q must be in [0, 1], got {q!r}")
        cum = self.cumulative_counts()
        n = int(cum[-1])
        # need: smallest i with cum[i] >= q * n  (q = 0 -> the minimum).
        targets = np.ceil(qs * n)
        idx = np.searchsorted(cum, np.maximum(targets, 1), side="left")
        out = self.lengths[np.minimum(idx, self.lengths.size - 1)]
        return int(out) if out.ndim == 0 else out

    def tail_token_share(self, fraction: float) -> float:
        """Share of all tokens held by the longest ``fraction`` of samples.

        The longest ``ceil(fraction * n_samples)`` samples are counted (at least one).

        Examples
        --------
        >>> LengthHistogram.from_lengths([1, 1, 1, 7]).tail_token_share(0.25)
        0.7
        """
        if not 0 < fraction <= 1:
            raise ValueError(f"fraction must be in (0, 1], got {fraction!r}")
        k = max(1, math.ceil(fraction * self.n_samples))
        taken, tokens = 0, 0
        for length, count in zip(self.lengths[::-1].tolist(), self.counts[::-1].tolist()):
            use = min(count, k - taken)
            tokens += use * length
            taken += use
            if taken == k:
                break
        return tokens / self.total_tokens if self.total_tokens else 0.0

    def summary(self) -> pd.Series:
        """The numbers a design review asks first, as a pandas Series.

        Examples
        --------
        >>> LengthHistogram.from_lengths([1, 2, 3, 4]).summary()["tokens"]
        10
        """
        p10, p50, p90, p99 = np.asarray(self.quantile([0.10, 0.50, 0.90, 0.99])).tolist()
        return pd.Series(
            {
                "samples": self.n_samples,
                "tokens": self.total_tokens,
                "distinct_lengths": self.n_distinct,
                "min": self.min,
                "p10": p10,
                "p50": p50,
                "p90": p90,
                "p99": p99,
                "max": self.max,
                "mean": self.mean,
                "token_share_longest_1pct": self.tail_token_share(0.01),
                "token_share_longest_10pct": self.tail_token_share(0.10),
            },
            dtype=object,
            name="value",
        )

    # ------------------------------------------------------------------ transforms
    def clip(self, max_len: int) -> LengthHistogram:
        """What a trainer's truncation does: lengths above ``max_len`` become ``max_len``.

        Examples
        --------
        >>> LengthHistogram.from_lengths([2, 5, 9]).clip(4).lengths.tolist()
        [2, 4]
        """
        max_len = positive_int(max_len, "max_len")
        if self.max <= max_len:
            return self
        keep = self.lengths < max_len
        above = sum(self.counts[~keep].tolist())
        return LengthHistogram(
            np.append(self.lengths[keep], max_len),
            np.append(self.counts[keep], above),
        )

    def drop_zero(self) -> tuple[LengthHistogram, int]:
        """The histogram without its zero-length samples, and how many were dropped.

        Examples
        --------
        >>> hist, dropped = LengthHistogram.from_lengths([0, 3, 0, 5], allow_zero=True).drop_zero()
        >>> hist.lengths.tolist(), dropped
        ([3, 5], 2)
        >>> LengthHistogram.from_lengths([0], allow_zero=True).drop_zero()
        Traceback (most recent call last):
        ...
        ValueError: every sample has length zero: none left after dropping them
        """
        if self.lengths[0] != 0:
            return self, 0
        if self.n_distinct == 1:
            raise ValueError("every sample has length zero: none left after dropping them")
        return LengthHistogram(self.lengths[1:], self.counts[1:]), int(self.counts[0])

    def clip_summary(self, max_len: int) -> pd.Series:
        """What clipping at ``max_len`` would cut: samples affected and tokens lost.

        Examples
        --------
        >>> s = LengthHistogram.from_lengths([2, 5, 9]).clip_summary(4)
        >>> s["samples_clipped"], s["tokens_removed"]
        (2, 6)
        """
        max_len = positive_int(max_len, "max_len")
        above = self.lengths > max_len
        n_clipped = sum(self.counts[above].tolist())
        removed = _exact_dot(self.lengths[above] - max_len, self.counts[above])
        return pd.Series(
            {
                "max_len": max_len,
                "samples_clipped": n_clipped,
                "share_samples_clipped": n_clipped / self.n_samples,
                "tokens_removed": removed,
                "share_tokens_removed": removed / self.total_tokens if self.total_tokens else 0.0,
            },
            dtype=object,
            name="value",
        )

    def __add__(self, other: LengthHistogram) -> LengthHistogram:
        """Merge two histograms (samples of both)."""
        if not isinstance(other, LengthHistogram):
            return NotImplemented
        return LengthHistogram.from_counts(
            np.concatenate([self.lengths, other.lengths]),
            np.concatenate([self.counts, other.counts]),
            allow_zero=True,
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, LengthHistogram):
            return NotImplemented
        return bool(np.array_equal(self.lengths, other.lengths) and np.array_equal(self.counts, other.counts))

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (
            f"LengthHistogram(n_samples={self.n_samples:,}, total_tokens={self.total_tokens:,}, "
            f"lengths {self.min}..{self.max}, {self.n_distinct:,} distinct)"
        )

    def to_frame(self) -> pd.DataFrame:
        """``length, count`` table (the CSV histogram format).

        Examples
        --------
        >>> LengthHistogram.from_lengths([3, 1, 3]).to_frame()
           length  count
        0       1      1
        1       3      2
        """
        return pd.DataFrame({"length": self.lengths.copy(), "count": self.counts.copy()})

    # ------------------------------------------------------------------ curves for figures
    def binned(self, bin_edges: np.ndarray, weight: str = "samples") -> np.ndarray:
        """Samples (or tokens, ``weight="tokens"``) per bin of ``bin_edges`` (floats, ascending;
        a length ``L`` falls in ``[e_i, e_{i+1})``, the last bin closed), without expanding.

        Examples
        --------
        >>> LengthHistogram.from_lengths([1, 2, 2, 9]).binned(np.array([0.5, 2.5, 9.5])).tolist()
        [3.0, 1.0]
        >>> LengthHistogram.from_lengths([1, 2, 2, 9]).binned(np.array([0.5, 2.5, 9.5]), "tokens").tolist()
        [5.0, 9.0]
        """
        if weight not in ("samples", "tokens"):
            raise ValueError(f"weight must be 'samples' or 'tokens', got {weight!r}")
        w = self.counts.astype(float)
        if weight == "tokens":
            w = w * self.lengths
        heights, _ = np.histogram(self.lengths, bins=np.asarray(bin_edges, dtype=float), weights=w)
        return heights

    def token_share_curve(self) -> tuple[np.ndarray, np.ndarray]:
        """Corner points of the tail curve: (share of samples, share of their tokens), longest
        samples first, from (0, 0) to (1, 1); exact between corners by linearity.

        Examples
        --------
        >>> x, y = LengthHistogram.from_lengths([1, 1, 1, 7]).token_share_curve()
        >>> x.tolist(), y.tolist()
        ([0.0, 0.25, 1.0], [0.0, 0.7, 1.0])
        """
        counts = self.counts[::-1].astype(float)
        tokens = counts * self.lengths[::-1]
        x = np.concatenate([[0.0], np.cumsum(counts) / counts.sum()])
        y = np.concatenate([[0.0], np.cumsum(tokens) / tokens.sum()])
        return x, y

    def clipping_curve(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """For each candidate ``max_len`` (each distinct length): the share of samples longer
        than it and the share of tokens clipping there removes (floats, for display).

        Examples
        --------
        >>> lengths, samples, tokens = LengthHistogram.from_lengths([2, 5, 9]).clipping_curve()
        >>> samples.round(3).tolist(), tokens.round(3).tolist()
        ([0.667, 0.333, 0.0], [0.6, 0.25, 0.0])
        """
        counts = self.counts.astype(float)
        lengths = self.lengths.astype(float)
        above = counts[::-1].cumsum()[::-1] - counts  # samples strictly longer than lengths[i]
        tokens_above = (counts * lengths)[::-1].cumsum()[::-1] - counts * lengths
        removed = tokens_above - lengths * above
        return self.lengths, above / counts.sum(), removed / (counts * lengths).sum()

    def expand(self) -> np.ndarray:
        """Per-sample lengths (sorted ascending), for simulators that need samples."""
        return np.repeat(self.lengths, self.counts)


def as_histogram(lengths: LengthHistogram | Iterable[int] | np.ndarray | pd.Series) -> LengthHistogram:
    """``lengths`` as a :class:`LengthHistogram` (a histogram is returned as it is).

    Examples
    --------
    >>> as_histogram([3, 1, 3]).counts.tolist()
    [1, 2]
    """
    return lengths if isinstance(lengths, LengthHistogram) else LengthHistogram.from_lengths(lengths)
