"""Counting lengths as they stream in: a running exact histogram, chunk by chunk.

:class:`LengthCounter` is what :func:`analysis.load_lengths` and
:func:`analysis.measure_lengths` fill while they read: short lengths in one dense ``int64``
count array, long ones (a length of 10**12 would need a terabyte dense) in sparse parts merged
as they pile up; every count is checked against int64 overflow.  It hands back a
:class:`~analysis.lengths.LengthHistogram`.  Reads no files.

Examples
--------
>>> import numpy as np
>>> counter = LengthCounter()
>>> counter.add_lengths(np.array([3, 1, 3], dtype=np.int64))
>>> counter.add_counts(np.array([3, 2**40]), np.array([5, 1]), "table.csv")
>>> hist = counter.histogram("table.csv")
>>> hist.lengths.tolist(), hist.counts.tolist()
([1, 3, 1099511627776], [1, 7, 1])
"""

from __future__ import annotations

import numpy as np

from analysis.lengths import LengthHistogram

__all__ = ["LengthCounter"]

_INT64_MAX = np.iinfo(np.int64).max

# Lengths below this are counted in a dense array (at most 8 MB); longer ones sparsely.
_DENSE_LIMIT = 1 << 20


class LengthCounter:
    """Running exact histogram: a dense int64 count array plus sparse parts for long lengths."""

    def __init__(self) -> None:
        self.dense = np.zeros(0, dtype=np.int64)
        self.sparse: list[tuple[np.ndarray, np.ndarray]] = []

    def add_lengths(self, arr: np.ndarray) -> None:
        """Count a validated non-negative int64 array of per-sample lengths."""
        if arr.size == 0:
            return
        if int(arr.max()) >= _DENSE_LIMIT:
            big = arr >= _DENSE_LIMIT
            lengths, counts = np.unique(arr[big], return_counts=True)
            self._add_sparse(lengths, counts.astype(np.int64), "")
            arr = arr[~big]
            if arr.size == 0:
                return
        # Counts per chunk are at most _CHUNK_ROWS, and rows never reach 2**63: no overflow.
        binned = np.bincount(arr)
        if binned.size > self.dense.size:
            binned[: self.dense.size] += self.dense
            self.dense = binned
        else:
            self.dense[: binned.size] += binned

    def add_counts(self, lengths: np.ndarray, counts: np.ndarray, where: str) -> None:
        """Add a validated ``(lengths, counts)`` table (lengths may repeat), checking overflow."""
        big = lengths >= _DENSE_LIMIT
        if big.any():
            self._add_sparse(lengths[big], counts[big], where)
            lengths, counts = lengths[~big], counts[~big]
        if lengths.size == 0:
            return
        top = int(lengths.max())
        if top >= self.dense.size:
            self.dense = np.concatenate([self.dense, np.zeros(top + 1 - self.dense.size, np.int64)])
        order = np.argsort(lengths, kind="stable")
        lengths, counts = lengths[order], counts[order]
        starts = np.flatnonzero(np.r_[True, np.diff(lengths) != 0])
        flat, bounds = counts.tolist(), [*starts.tolist(), lengths.size]
        sums = [sum(flat[a:b]) for a, b in zip(bounds, bounds[1:])]  # exact Python ints
        distinct = lengths[starts]
        room = (_INT64_MAX - self.dense[distinct]).tolist()
        if any(s > r for s, r in zip(sums, room)):
            raise ValueError(f"{where}: the count of one length exceeds int64")
        self.dense[distinct] += np.array(sums, dtype=np.int64)

    def _add_sparse(self, lengths: np.ndarray, counts: np.ndarray, where: str) -> None:
        self.sparse.append((lengths, counts))
        if len(self.sparse) > 16:
            merged = self._sparse_histogram(where)
            self.sparse = [(merged.lengths, merged.counts)]

    def _sparse_histogram(self, where: str) -> LengthHistogram:
        try:
            return LengthHistogram.from_counts(
                np.concatenate([p[0] for p in self.sparse]),
                np.concatenate([p[1] for p in self.sparse]),
                allow_zero=True,
            )
        except ValueError as err:  # a count beyond int64
            raise ValueError(f"{where}: {err}" if where else str(err)) from None

    def histogram(self, where: str) -> LengthHistogram:
        """Everything counted so far; ``where`` names the input in the error when it was empty."""
        lengths = np.flatnonzero(self.dense).astype(np.int64)
        hist = LengthHistogram(lengths, self.dense[lengths]) if lengths.size else None
        if self.sparse:
            sparse = self._sparse_histogram(where)
            hist = sparse if hist is None else hist + sparse
        if hist is None:
            raise ValueError(f"{where}: empty input, no samples (all counts are zero)")
        return hist
