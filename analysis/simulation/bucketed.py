"""The bucketed shuffle, pure: per-sample buckets, batch sizes and a NumPy ``Generator`` in, one
global epoch of index batches out.

This is the case's bucketed shuffle: shuffle inside each bucket, cut batches of the bucket's
batch size, interleave the buckets' batches in a random order.  The training sampler
(:class:`analysis.sampler.BucketedBatchSampler`) and the simulator's ``bucketed`` epochs
(:mod:`analysis.simulation.strategies`) both draw their epochs here, so the simulated batches, the
expected padding of :func:`analysis.padding.waste.expected_padding` and the training run agree by
construction.

:func:`bucketed_epoch` is the whole core (a :class:`BucketedEpoch` of flat indices, batch
offsets and the bucket of each batch).  It is two steps, which callers that build many epochs
of one dataset take apart: :func:`bucket_layout` (what the epoch looks like before the
shuffles: depends only on the bucket counts) and :func:`draw_epoch` (one epoch of a layout:
two draws from the generator).  Epoch ``e`` of a sampler with ``seed`` uses the generator
:func:`epoch_rng` ``(seed, e)``; nothing else is random, so every rank builds the same global
epoch and takes its own share, without communicating.  :func:`gather_batches` and
:func:`small_keys` are the fast gather and radix-sort keys the other epoch builders share.

Data parallelism (``world_size = W``)
-------------------------------------
The global epoch is a list of *steps*; step ``s`` holds batches ``s*W .. s*W + W-1`` and rank
``r`` gets batch ``s*W + r``.  Every rank has the same number of batches, ``len(sampler)``, in
every epoch, so no rank waits forever at the end of an epoch.

``sync_buckets=True``
    The W batches of a step come from one bucket, so a synchronous step is not paced by one
    rank holding a batch from a longer bucket.  A bucket's batches are grouped W at a time;
    its last group is completed with *repeats* (``drop_last=False``: each batch missing from
    the group is one sample, taken from the start of the bucket's shuffled order, cycling when
    the bucket has fewer samples than missing batches) or the bucket's samples that do not fill
    a step of W full batches are *dropped* (``drop_last=True``: then every batch is full).
``sync_buckets=False``
    Batches are interleaved freely and dealt to ranks round-robin (what a per-rank sampler
    does).  Each batch missing from the last step is one repeated sample, the first samples of
    the bucket-grouped shuffled order in turn (``drop_last=False``), or the trailing incomplete
    step and every bucket's short batch are dropped (``drop_last=True``).

A repeat is one sample in a batch of its own: the fewest samples that give every rank of the
last step a batch (each needs one) while the bucket's own batches stay as cut, so at most
``W - 1`` a bucket (``sync_buckets``) or an epoch, whatever the batch size, and the own batches
are those of :func:`analysis.padding.waste.expected_padding` (``floor(n / B)`` full ones and one of
``n mod B``).  (Re-cutting the own batches could spare a few more repeats, at the price of that
model.)

With ``drop_last=False`` every sample is in some batch of every epoch (on some rank) and
``n_repeated`` sample slots are repeats; with ``drop_last=True`` nothing repeats and
``n_dropped`` samples are left out.  With ``world_size=1`` both settings of ``sync_buckets`` are
the plain bucketed shuffle, and with ``drop_last=False`` nothing repeats.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from analysis._validate import check_rng, positive_int

__all__ = [
    "BucketLayout",
    "BucketedEpoch",
    "bucket_layout",
    "bucketed_epoch",
    "draw_epoch",
    "epoch_rng",
    "gather_batches",
    "small_keys",
]


def epoch_rng(seed: int, epoch: int) -> np.random.Generator:
    """The generator of epoch ``epoch`` of a sampler with ``seed``: ``default_rng([seed, epoch])``.

    Examples
    --------
    >>> int(epoch_rng(0, 1).integers(100)) == int(epoch_rng(0, 1).integers(100))
    True
    """
    return np.random.default_rng([int(seed), int(epoch)])


@dataclass(frozen=True, eq=False)
class BucketedEpoch:
    """One global epoch of bucketed batches, stored flat, step-major.

    Attributes
    ----------
    indices : numpy.ndarray
        ``int64`` sample indices of all batches concatenated in consumption order.
    offsets : numpy.ndarray
        ``int64``, ``n_batches + 1`` values: batch ``b`` is ``indices[offsets[b]:offsets[b+1]]``.
        Batch ``b`` is step ``b // world_size`` of rank ``b % world_size``.
    buckets : numpy.ndarray
        ``int64`` bucket of each batch.
    world_size : int
    n_repeated, n_dropped : int
        Sample slots that repeat a sample already in this epoch; samples left out.
    """

    indices: np.ndarray
    offsets: np.ndarray
    buckets: np.ndarray
    world_size: int
    n_repeated: int
    n_dropped: int

    def __len__(self) -> int:
        return int(self.offsets.size - 1)

    @property
    def n_steps(self) -> int:
        """Steps of the epoch (batches per rank)."""
        return len(self) // self.world_size

    def rank_batches(self, rank: int) -> list[np.ndarray]:
        """Rank ``rank``'s batches, in order (batches ``rank, rank + W, ...``)."""
        starts, ends = self.offsets[rank : -1 : self.world_size], self.offsets[rank + 1 :: self.world_size]
        return [self.indices[a:b] for a, b in zip(starts.tolist(), ends.tolist())]


@dataclass(frozen=True, eq=False)
class BucketLayout:
    """What a bucketed epoch looks like before the shuffles (depends only on bucket counts).

    Made by :func:`bucket_layout`; :func:`draw_epoch` draws epochs of it.
    """

    bucket_keys: np.ndarray  # per-sample bucket, narrow unsigned dtype (a radix argsort)
    # flat slot -> position in the bucket-grouped shuffled samples; None when that is the
    # identity (every sample in exactly one slot: no repeats, no drops)
    slot_source: np.ndarray | None
    offsets: np.ndarray  # batch offsets over the slots, bucket-major
    batch_buckets: np.ndarray
    world_size: int
    sync_buckets: bool
    drop_last: bool
    n_samples: int
    # sync_buckets=False, drop_last=False: the last batches are this many one-sample repeats
    # (the first samples of the bucket-grouped order), kept last when the batches are shuffled
    n_tail: int = 0

    @property
    def n_batches(self) -> int:
        return int(self.offsets.size - 1)

    @property
    def n_steps(self) -> int:
        m, w = self.n_batches, self.world_size
        if self.sync_buckets:
            return m // w
        return m // w if self.drop_last else -(-m // w)


def small_keys(values: np.ndarray, top: int | None = None) -> np.ndarray:
    """``values`` (non-negative ints, at most ``top`` when given) in the narrowest unsigned
    dtype, so a stable argsort of them is a radix sort (NumPy does that for 16-bit keys and
    narrower).

    Examples
    --------
    >>> small_keys(np.array([3, 70000])).dtype, small_keys(np.array([3, 7]), top=255).dtype
    (dtype('uint32'), dtype('uint8'))
    """
    if top is None:
        top = int(values.max()) if values.size else 0
    for dtype in (np.uint8, np.uint16, np.uint32):
        if top <= np.iinfo(dtype).max:
            return values.astype(dtype)
    return values.astype(np.uint64)


def bucket_layout(
    bucket_of_sample: np.ndarray,
    batch_sizes: Sequence[int],
    world_size: int,
    sync_buckets: bool,
    drop_last: bool,
) -> BucketLayout:
    """Per-bucket batches (and the repeats or drops that make whole steps): the layout of every
    epoch of these samples; arguments as in :func:`bucketed_epoch`.

    Examples
    --------
    >>> layout = bucket_layout(np.array([0, 0, 0, 1, 1]), [2, 2], 2, True, False)
    >>> layout.n_batches, layout.n_steps, layout.offsets.tolist()
    (4, 2, [0, 2, 3, 5, 6])
    """
    bucket = np.asarray(bucket_of_sample)
    sizes = [int(s) for s in batch_sizes]
    bad = ValueError(f"bucket_of_sample must be 1-D with values in [0, {len(sizes)})")
    if bucket.ndim != 1:
        raise bad
    if bucket.dtype in (np.uint8, np.uint16) and len(sizes) <= 64:
        # narrow bucket ids (strategies pass them): counted without an int64 copy
        if bucket.size and int(bucket.max()) >= len(sizes):
            raise bad
        counts = [int(np.count_nonzero(bucket == i)) for i in range(len(sizes))]
    else:
        bucket = np.asarray(bucket, dtype=np.int64)
        try:  # the counts check the values: no negative (bincount refuses them), none >= K
            counts = np.bincount(bucket, minlength=len(sizes)).tolist()
        except ValueError:
            raise bad from None
        if len(counts) > len(sizes):
            raise bad
    if any(s < 1 for s in sizes):
        raise ValueError(f"batch sizes must be positive, got {sizes}")
    w = world_size
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64).tolist()
    sources, batch_len, n_batches = [], [], []
    for start, count, size in zip(starts, counts, sizes):
        full, rem = divmod(count, size)
        if drop_last:
            n_full = (full // w) * w if sync_buckets else full
            lens, used, extra = np.full(n_full, size, dtype=np.int64), n_full * size, 0
        else:  # the bucket's own batches, then a one-sample batch for each missing one
            own = full + (1 if rem else 0)
            extra = (-own) % w if sync_buckets else 0
            lens = np.ones(own + extra, dtype=np.int64)
            lens[:full] = size
            if rem:
                lens[full] = rem
            used = count
        slots = used + extra
        sources.append((start, slots, count))
        batch_len.append(lens)
        n_batches.append(lens.size)
    tail = 0 if sync_buckets or drop_last else (-sum(n_batches)) % w
    tail = tail if bucket.size else 0
    offsets = np.zeros(sum(n_batches) + tail + 1, dtype=np.int64)
    np.cumsum(np.concatenate(batch_len + [np.ones(tail, dtype=np.int64)]), out=offsets[1:])
    batch_buckets = np.repeat(np.arange(len(sizes), dtype=np.int64), n_batches)
    if tail:  # the bucket of each grouped sample the one-sample repeats take
        first = np.arange(tail, dtype=np.int64) % bucket.size
        bounds = np.cumsum(counts, dtype=np.int64)
        batch_buckets = np.concatenate([batch_buckets, np.searchsorted(bounds, first, side="right")])
    return BucketLayout(
        small_keys(bucket, max(len(sizes) - 1, 0)),
        _slot_source(sources, tail, int(bucket.size)),
        offsets,
        batch_buckets,
        w,
        bool(sync_buckets),
        bool(drop_last),
        int(bucket.size),
        tail,
    )


def _slot_source(buckets: list[tuple[int, int, int]], tail: int = 0, n: int = 0) -> np.ndarray | None:
    """Flat slot -> grouped sample, from each bucket's ``(start, slots, count)``: the bucket's
    samples in order, cycling when it has more slots than samples (repeats), a prefix when
    fewer (drops); then ``tail`` slots cycling over all ``n`` grouped samples; None when every
    bucket has one slot per sample and there is no tail (the identity)."""
    if not tail and all(slots == count for _, slots, count in buckets):
        return None
    return np.concatenate(
        [
            np.arange(start, start + slots, dtype=np.int64)
            if slots <= count
            else start + np.arange(slots, dtype=np.int64) % count
            for start, slots, count in buckets
        ]
        + [np.arange(tail, dtype=np.int64) % max(n, 1)]
    )


def gather_batches(
    order: np.ndarray, offsets: np.ndarray, perm: np.ndarray, index: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """The batches ``source[offsets[b]:offsets[b+1]]`` in the order ``perm`` (repeats allowed),
    with ``source = order[index]`` (``order`` itself when ``index`` is None; read as needed, not
    built first).  Returns the gathered values and their batch offsets.

    Examples
    --------
    >>> values, offsets = gather_batches(np.array([5, 6, 7, 8, 9]), np.array([0, 2, 5]), np.array([1, 0]))
    >>> values.tolist(), offsets.tolist()
    ([7, 8, 9, 5, 6], [0, 3, 5])
    """
    src_sizes = np.diff(offsets)
    sizes = src_sizes[perm]
    new_offsets = np.zeros(perm.size + 1, dtype=np.int64)
    np.cumsum(sizes, out=new_offsets[1:])
    width = int(src_sizes.max()) if src_sizes.size else 0
    short = np.count_nonzero(src_sizes != width)
    if width > 1 and short <= _MAX_SHORT_BATCHES and short * width <= int(offsets[-1]):
        # the rows hold at most twice the slots (a short batch takes a whole row)
        return _gather_rows(order, index, offsets, perm, width), new_offsets
    shift = np.repeat(offsets[:-1][perm] - new_offsets[:-1], sizes)
    shift += np.arange(shift.size, dtype=np.int64)
    return (order if index is None else order[index])[shift], new_offsets


#: :func:`gather_batches` copies whole rows when at most this many batches are short of the
#: longest (the one-sample repeats of ``sync_buckets`` are up to ``W - 1`` a bucket).
_MAX_SHORT_BATCHES = 256


def _gather_rows(
    order: np.ndarray, index: np.ndarray | None, offsets: np.ndarray, perm: np.ndarray, width: int
) -> np.ndarray:
    """:func:`gather_batches` when nearly every batch is ``width`` long: the batches laid out as
    rows of ``width`` slots (block copies, or takes through ``index``; a short batch padded), then
    the rows taken whole in the order ``perm`` (a copy per batch, not an index per sample:
    several times faster on a random order) straight into the output, a run of full rows at a
    time, the short ones copied alone."""

    def fill(target: np.ndarray, start: int, stop: int) -> None:
        """``target[:] = source[start:stop]``."""
        if index is None:
            target[:] = order[start:stop]
        else:
            np.take(order, index[start:stop], out=target, mode="clip")

    src_sizes = np.diff(offsets)
    m = src_sizes.size
    rows = np.empty((m, width), dtype=order.dtype)
    done = 0  # batches laid out
    for short in np.flatnonzero(src_sizes != width).tolist() + [m]:
        fill(rows[done:short].reshape(-1), int(offsets[done]), int(offsets[short]))
        if short < m:
            fill(rows[short, : src_sizes[short]], int(offsets[short]), int(offsets[short + 1]))
        done = short + 1
    sizes = src_sizes[perm]
    out = np.empty(int(sizes.sum()), dtype=order.dtype)
    at = done = 0  # output slots and batches written
    for short in np.flatnonzero(sizes != width).tolist() + [perm.size]:
        run = short - done
        if run:  # full rows: one take (mode="clip": no buffered copy; the rows are in range)
            target = out[at : at + run * width].reshape(run, width)
            np.take(rows, perm[done:short], axis=0, out=target, mode="clip")
            at += run * width
        if short < perm.size:
            size = int(sizes[short])
            out[at : at + size] = rows[perm[short], :size]
            at += size
        done = short + 1
    return out


def draw_epoch(layout: BucketLayout, rng: np.random.Generator) -> BucketedEpoch:
    """One epoch from a layout: two draws from ``rng`` (the sample shuffle, the batch order).

    Examples
    --------
    >>> layout = bucket_layout(np.array([0, 0, 0, 1, 1]), [2, 2], 1, True, False)
    >>> ep = draw_epoch(layout, np.random.default_rng(0))
    >>> len(ep), sorted(ep.buckets.tolist()), sorted(ep.indices.tolist())
    (3, [0, 0, 1], [0, 1, 2, 3, 4])
    """
    n, w = layout.n_samples, layout.world_size
    perm = rng.permutation(n).astype(np.int64, copy=False)
    by_bucket = np.argsort(layout.bucket_keys[perm], kind="stable")  # perm[by_bucket]: grouped
    index = by_bucket if layout.slot_source is None else by_bucket[layout.slot_source]
    m = layout.n_batches
    if layout.sync_buckets:
        steps = rng.permutation(m // w).astype(np.int64, copy=False)
        order = steps if w == 1 else (steps[:, None] * w + np.arange(w, dtype=np.int64)).ravel()
    else:  # the batches shuffled, the one-sample repeats that complete the last step after them
        tail = layout.n_tail
        order = rng.permutation(m - tail).astype(np.int64, copy=False)[: layout.n_steps * w]
        if tail:  # (drop_last: the trailing incomplete step cut off instead)
            order = np.concatenate([order, np.arange(m - tail, m, dtype=np.int64)])
    indices, offsets = gather_batches(perm, layout.offsets, order, index)
    # drop_last never repeats and otherwise nothing is dropped, so the size difference is exact
    extra = int(indices.size) - n
    return BucketedEpoch(
        indices, offsets, layout.batch_buckets[order], w, n_repeated=max(extra, 0), n_dropped=max(-extra, 0)
    )


def bucketed_epoch(
    bucket_of_sample: Sequence[int] | np.ndarray,
    batch_sizes: Sequence[int],
    rng: np.random.Generator,
    *,
    world_size: int = 1,
    sync_buckets: bool = True,
    drop_last: bool = False,
) -> BucketedEpoch:
    """One epoch of the bucketed shuffle for ``world_size`` ranks (the pure core).

    Parameters
    ----------
    bucket_of_sample : array of int
        Bucket of each sample (``0 .. K-1``, e.g. :func:`analysis.batching.bucket_index`).
    batch_sizes : sequence of int
        Samples per batch in each bucket (``K`` values).
    rng : numpy.random.Generator
        The only source of randomness: one permutation of the samples (the shuffle inside each
        bucket), then one of the steps (``sync_buckets``) or of the batches.
    world_size, sync_buckets, drop_last
        As in :class:`~analysis.sampler.BucketedBatchSampler` (see the module docstring).

    Returns
    -------
    BucketedEpoch

    Examples
    --------
    >>> import numpy as np
    >>> ep = bucketed_epoch([0, 0, 0, 1, 1], [2, 2], np.random.default_rng(0), world_size=2)
    >>> len(ep), ep.n_steps, ep.n_repeated, ep.n_dropped
    (4, 2, 1, 0)
    >>> sorted(ep.buckets.reshape(2, 2).tolist())  # one bucket a step
    [[0, 0], [1, 1]]
    >>> sorted(int(i) for i in np.unique(ep.indices))
    [0, 1, 2, 3, 4]
    """
    check_rng(rng)
    world_size = positive_int(world_size, "world_size")
    return draw_epoch(
        bucket_layout(np.asarray(bucket_of_sample), batch_sizes, world_size, sync_buckets, drop_last), rng
    )
