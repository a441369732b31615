"""The field's packers, as strategies of their own: ``packing_bfd`` (TRL), ``packing_first_fit``
(axolotl's multipack) and ``packing_next_fit`` (torchtune).

Each packs samples into rows of ``max_tokens`` (the token strategies' budget; a sample longer
than it is refused, as ``packing`` does) and a step is one row:

- :func:`pack_bfd`: TRL's ``pack_dataset(dataset, seq_length, strategy="bfd")``.  ``datasets``
  maps it over batches of :data:`TRL_MAP_BATCH` samples in dataset order, so each batch is
  packed on its own: its samples longest first (ties in dataset order), each into the open row
  with the least room that fits it (ties: the row that came to that room first), else a new
  row.  Rows in the order they were opened, samples in the order they went in.  The packed
  dataset is fixed; the trainer's sampler shuffles its rows each epoch.
- :func:`pack_first_fit`: first fit over a random permutation of the samples (fresh each
  epoch), cut into groups of :data:`MULTIPACK_GROUP` samples packed on their own: each sample
  into the earliest-opened row of its group with room for it, else a new row.
- :func:`pack_next_fit`: torchtune's ``PackedDataset`` (``split_across_pack=False``): samples
  in dataset order go into the current row until the next one does not fit, which closes the
  row.  Fixed; rows shuffled each epoch.

The packers are compiled (numba, cached on disk): a loop per sample, with a segment tree over
rooms (best fit) or rows (first fit) so that each sample costs ``O(log)``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np

from analysis.simulation.bucketed import gather_batches
from analysis.simulation.strategies._epoch import Epoch, Setup, no_buckets

#: Samples per ``datasets.map`` batch of TRL's ``pack_dataset`` (``datasets``' default).
TRL_MAP_BATCH = 1000
#: Samples per group of axolotl's multipack first fit (its ``group_size`` default).
MULTIPACK_GROUP = 100_000


@numba.njit(cache=True, nogil=True)
def _bfd_rows(
    lengths: np.ndarray, capacity: int, chunk: int
) -> tuple[np.ndarray, np.ndarray]:  # pragma: no cover
    """TRL's best fit decreasing over chunks of ``chunk``: the samples in the order they were
    placed, and the row of each of them (``int64``)."""
    n = lengths.size
    row = np.empty(n, np.int64)
    placed = np.empty(n, np.int64)
    size = 1
    while size < capacity:
        size *= 2
    tree = np.zeros(2 * size, np.int64)  # leaf capacity - 1 + ... holds a room when some row has it
    head = np.full(capacity + 1, -1, np.int64)  # rows with each room, first come first served
    tail = np.full(capacity + 1, -1, np.int64)
    nxt = np.full(n, -1, np.int64)
    rows = 0
    for start in range(0, n, chunk):
        stop = min(start + chunk, n)
        tree[:] = 0
        head[:] = -1
        tail[:] = -1
        order = np.argsort(-lengths[start:stop], kind="mergesort") + start
        placed[start:stop] = order
        for i in order:
            length = lengths[i]
            # the least room >= length: the leftmost leaf holding a value >= length
            if tree[1] >= length:
                node = 1
                while node < size:
                    node = 2 * node if tree[2 * node] >= length else 2 * node + 1
                room = tree[node]
                r = head[room]
                head[room] = nxt[r]
                if head[room] == -1:
                    tail[room] = -1
                    node = size + room - 1
                    tree[node] = 0
                    node //= 2
                    while node >= 1:
                        tree[node] = max(tree[2 * node], tree[2 * node + 1])
                        node //= 2
            else:
                r = rows
                rows += 1
                room = capacity
            row[i] = r
            room -= length
            if room > 0:
                nxt[r] = -1
                if tail[room] == -1:
                    head[room] = r
                    node = size + room - 1
                    tree[node] = room
                    node //= 2
                    while node >= 1:
                        tree[node] = max(tree[2 * node], tree[2 * node + 1])
                        node //= 2
                else:
                    nxt[tail[room]] = r
                tail[room] = r
    return placed, row[placed]


@numba.njit(cache=True, nogil=True)
def _first_fit_rows(lengths: np.ndarray, capacity: int, group: int) -> np.ndarray:  # pragma: no cover
    """Row of each sample (``int64``): first fit in the given order, groups of ``group``."""
    n = lengths.size
    row = np.empty(n, np.int64)
    rows = 0
    for start in range(0, n, group):
        stop = min(start + group, n)
        size = 1
        while size < stop - start:
            size *= 2
        tree = np.full(2 * size, capacity, np.int64)  # max room in the subtree; unopened rows full
        opened = 0
        for i in range(start, stop):
            length = lengths[i]
            node = 1
            while node < size:
                node = 2 * node if tree[2 * node] >= length else 2 * node + 1
            r = node - size
            opened = max(opened, r + 1)
            row[i] = rows + r
            tree[node] -= length
            node //= 2
            while node >= 1:
                tree[node] = max(tree[2 * node], tree[2 * node + 1])
                node //= 2
        rows += opened
    return row


@numba.njit(cache=True, nogil=True)
def _next_fit_rows(lengths: np.ndarray, capacity: int) -> np.ndarray:  # pragma: no cover
    """Row of each sample (``int64``): next fit in the given order."""
    row = np.empty(lengths.size, np.int64)
    r, room = -1, 0
    for i in range(lengths.size):
        if lengths[i] > room:
            r += 1
            room = capacity
        room -= lengths[i]
        row[i] = r
    return row


def _lengths(lengths: np.ndarray, capacity: int, name: str) -> np.ndarray:
    """``lengths`` as the kernels take them, once each fits ``capacity``: int64, C-contiguous
    and read-only (a view; numba compiles a writable array apart, seconds per kernel, so every
    caller passes the one type)."""
    arr = np.ascontiguousarray(lengths, dtype=np.int64).view()
    arr.flags.writeable = False
    _check_fits(arr, capacity, name)
    return arr


def _check_fits(lengths: np.ndarray, capacity: int, name: str) -> None:
    if lengths.size and int(lengths.max()) > capacity:
        n_long = int(np.count_nonzero(lengths > capacity))
        raise ValueError(
            f"{name}: {n_long} sample(s) longer than max_tokens = {capacity} "
            f"(longest {int(lengths.max())}); raise max_tokens or clip the lengths"
        )


def _rows(order: np.ndarray, row: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(indices, offsets)`` of rows from each sample's row (samples of ``order``, in the order
    they went in; rows numbered in opening order)."""
    by_row = np.argsort(row, kind="stable")
    offsets = np.zeros(int(row.max()) + 2 if row.size else 1, dtype=np.int64)
    np.cumsum(np.bincount(row, minlength=offsets.size - 1), out=offsets[1:])
    return order[by_row].astype(np.int64, copy=False), offsets


def pack_bfd(lengths: np.ndarray, capacity: int, chunk: int = TRL_MAP_BATCH) -> tuple[np.ndarray, np.ndarray]:
    """TRL's ``pack_dataset(..., strategy="bfd")`` rows: ``(indices, offsets)``, row ``r`` is
    ``indices[offsets[r]:offsets[r + 1]]`` (sample indices, in the order they went in).

    Examples
    --------
    >>> indices, offsets = pack_bfd(np.array([4, 2, 3, 1]), 4)  # as TRL packs [1 2 3 4] [6 7] [8 9 10] [11]
    >>> np.split(indices, offsets[1:-1])
    [array([0]), array([2, 3]), array([1])]
    """
    arr = _lengths(lengths, capacity, "packing_bfd")
    return _rows(*_bfd_rows(arr, int(capacity), int(chunk)))


def pack_first_fit(
    lengths: np.ndarray, capacity: int, order: np.ndarray, group: int = MULTIPACK_GROUP
) -> tuple[np.ndarray, np.ndarray]:
    """First-fit rows over the samples in ``order``, groups of ``group`` packed on their own.

    Examples
    --------
    >>> indices, offsets = pack_first_fit(np.array([3, 9, 4, 8, 2]), 12, np.arange(5))
    >>> np.split(indices, offsets[1:-1])
    [array([0, 1]), array([2, 3]), array([4])]
    """
    arr = _lengths(lengths, capacity, "packing_first_fit")
    order = np.asarray(order, dtype=np.int64)
    return _rows(order, _first_fit_rows(arr[order], int(capacity), int(group)))


def pack_next_fit(lengths: np.ndarray, capacity: int) -> tuple[np.ndarray, np.ndarray]:
    """torchtune's ``PackedDataset`` rows: next fit in dataset order.

    Examples
    --------
    >>> indices, offsets = pack_next_fit(np.array([3, 9, 4, 8, 2]), 12)
    >>> np.split(indices, offsets[1:-1])
    [array([0, 1]), array([2, 3]), array([4])]
    """
    arr = _lengths(lengths, capacity, "packing_next_fit")
    return _rows(np.arange(arr.size, dtype=np.int64), _next_fit_rows(arr, int(capacity)))


@dataclass(frozen=True, eq=False)
class FixedRowsState:
    """``packing_bfd`` / ``packing_next_fit``: the packed dataset's rows, shuffled each epoch."""

    indices: np.ndarray
    offsets: np.ndarray
    strategy: str

    def epoch(self, rng: np.random.Generator) -> Epoch:
        perm = rng.permutation(self.offsets.size - 1)
        indices, offsets = gather_batches(self.indices, self.offsets, perm)
        return Epoch(indices, offsets, no_buckets(perm.size), self.strategy)


@dataclass(frozen=True, eq=False)
class FirstFitState:
    """``packing_first_fit``: the lengths and the budget; each epoch packs a fresh permutation."""

    lengths: np.ndarray
    max_tokens: int

    def epoch(self, rng: np.random.Generator) -> Epoch:
        order = rng.permutation(self.lengths.size).astype(np.int64, copy=False)
        indices, offsets = pack_first_fit(self.lengths, self.max_tokens, order)
        return Epoch(indices, offsets, no_buckets(offsets.size - 1), "packing_first_fit")


def prepare_bfd(b: Setup) -> FixedRowsState:
    assert b.max_tokens is not None  # the token strategies always get a budget
    return FixedRowsState(*pack_bfd(b.lengths, b.max_tokens), "packing_bfd")


def prepare_next_fit(b: Setup) -> FixedRowsState:
    assert b.max_tokens is not None
    return FixedRowsState(*pack_next_fit(b.lengths, b.max_tokens), "packing_next_fit")


def prepare_first_fit(b: Setup) -> FirstFitState:
    assert b.max_tokens is not None
    _check_fits(b.lengths, b.max_tokens, "packing_first_fit")
    return FirstFitState(b.lengths, b.max_tokens)
