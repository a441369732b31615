"""Train with the plan: a deterministic, resumable, data-parallel bucketed batch sampler.

:class:`BucketedBatchSampler` yields one rank's batches (lists of sample indices) for
``torch.utils.data.DataLoader(dataset, batch_sampler=sampler)``.  It is the case's bucketed
shuffle: shuffle inside each bucket of ``edges``, cut batches of the bucket's batch size,
interleave the buckets' batches in a random order.  The same code builds the simulator's
``bucketed`` epochs (:mod:`analysis.strategies`), so the simulated batches, the expected
padding of :func:`analysis.waste.expected_padding` and the training run agree by construction.

The pure core is :func:`bucketed_epoch` (per-sample buckets, batch sizes and a NumPy
``Generator`` in; a :class:`BucketedEpoch` of flat indices, batch offsets and the bucket of each
batch out).  Epoch ``e`` of a sampler with ``seed`` uses the generator :func:`epoch_rng`
``(seed, e)``; nothing else is random, so every rank builds the same global epoch and takes its
own share, without communicating.

Data parallelism (``world_size = W``)
-------------------------------------
The global epoch is a list of *steps*; step ``s`` holds batches ``s*W .. s*W + W-1`` and rank
``r`` gets batch ``s*W + r``.  Every rank has the same number of batches, ``len(sampler)``, in
every epoch, so no rank waits forever at the end of an epoch.

``sync_buckets=True``
    The W batches of a step come from one bucket, so a synchronous step is not paced by one
    rank holding a batch from a longer bucket.  A bucket's batches are grouped W at a time;
    its last group is completed with *repeats* (``drop_last=False``: whole batches of the
    bucket's batch size, taken from the start of the bucket's shuffled order, cycling when the
    bucket is small, as ``DistributedSampler`` pads) or the bucket's samples that do not fill a
    step of W full batches are *dropped* (``drop_last=True``: then every batch is full).
``sync_buckets=False``
    Batches are interleaved freely and dealt to ranks round-robin (what a per-rank sampler
    does).  The last step is completed by repeating the epoch's first batches
    (``drop_last=False``), or the trailing incomplete step and every bucket's short batch are
    dropped (``drop_last=True``).

With ``drop_last=False`` every sample is in some batch of every epoch (on some rank) and
``n_repeated`` sample slots are repeats; with ``drop_last=True`` nothing repeats and
``n_dropped`` samples are left out.  With ``world_size=1`` both settings of ``sync_buckets`` are
the plain bucketed shuffle, and with ``drop_last=False`` nothing repeats.

Resume contract
---------------
``state_dict(consumed)`` takes the number of this epoch's batches the training loop has
*consumed* (its step counter inside the epoch); the sampler cannot know it.  A DataLoader with
worker processes draws ``num_workers * prefetch_factor`` batches of indices from the sampler as
soon as the epoch's iterator is created and keeps that many in flight, so the batches the
sampler has *yielded* (``sampler.yielded``) run ahead of training by an amount that depends on
the loader's settings and timing; saving it would skip the prefetched batches on resume.  With
the consumed count, a sampler built with the same arguments (same lengths, edges, batch rule,
seed, world size) and given ``load_state_dict(state)`` yields exactly the batches the
uninterrupted run would have consumed next, on every rank.  The state is the same on every rank
(ranks consume in lockstep), so rank 0 can save it.  After the resumed epoch, iteration starts
from the first batch again; ``set_epoch`` to another epoch also clears the resume point.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from analysis._validate import as_length_array, check_rng, positive_int
from analysis.batching import BatchRule, as_rule, bucket_index, check_edges
from analysis.lengths import LengthHistogram

__all__ = ["BucketedBatchSampler", "BucketedEpoch", "bucketed_epoch", "epoch_rng"]

_STATE_FORMAT = "analysis.BucketedBatchSampler/1"


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
class _Layout:
    """What a bucketed epoch looks like before the shuffles (depends only on bucket counts)."""

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

    @property
    def n_batches(self) -> int:
        return int(self.offsets.size - 1)

    @property
    def n_steps(self) -> int:
        m, w = self.n_batches, self.world_size
        if self.sync_buckets:
            return m // w
        return m // w if self.drop_last else -(-m // w)


def _small_keys(values: np.ndarray, top: int | None = None) -> np.ndarray:
    """``values`` (non-negative ints, at most ``top`` when given) in the narrowest unsigned
    dtype, so a stable argsort of them is a radix sort (NumPy does that for 16-bit keys and
    narrower)."""
    if top is None:
        top = int(values.max()) if values.size else 0
    for dtype in (np.uint8, np.uint16, np.uint32):
        if top <= np.iinfo(dtype).max:
            return values.astype(dtype)
    return values.astype(np.uint64)


def _layout(
    bucket_of_sample: np.ndarray,
    batch_sizes: Sequence[int],
    world_size: int,
    sync_buckets: bool,
    drop_last: bool,
) -> _Layout:
    """Per-bucket batches (and the repeats or drops that make whole steps)."""
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
        else:
            own = full + (1 if rem else 0)
            extra = (-own) % w if sync_buckets else 0
            lens = np.full(own + extra, size, dtype=np.int64)
            if rem:
                lens[full] = rem
            used = count
        slots = used + extra * size
        sources.append((start, slots, count))
        batch_len.append(lens)
        n_batches.append(lens.size)
    offsets = np.zeros(sum(n_batches) + 1, dtype=np.int64)
    np.cumsum(np.concatenate(batch_len) if batch_len else [], out=offsets[1:])
    return _Layout(
        _small_keys(bucket, max(len(sizes) - 1, 0)),
        _slot_source(sources),
        offsets,
        np.repeat(np.arange(len(sizes), dtype=np.int64), n_batches),
        w,
        bool(sync_buckets),
        bool(drop_last),
        int(bucket.size),
    )


def _slot_source(buckets: list[tuple[int, int, int]]) -> np.ndarray | None:
    """Flat slot -> grouped sample, from each bucket's ``(start, slots, count)``: the bucket's
    samples in order, cycling when it has more slots than samples (repeats), a prefix when
    fewer (drops); None when every bucket has one slot per sample (the identity)."""
    if all(slots == count for _, slots, count in buckets):
        return None
    return np.concatenate(
        [
            np.arange(start, start + slots, dtype=np.int64)
            if slots <= count
            else start + np.arange(slots, dtype=np.int64) % count
            for start, slots, count in buckets
        ]
    )


def _gather(
    order: np.ndarray, offsets: np.ndarray, perm: np.ndarray, index: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """The batches ``source[offsets[b]:offsets[b+1]]`` in the order ``perm`` (repeats allowed),
    with ``source = order[index]`` (``order`` itself when ``index`` is None; read as needed, not
    built first)."""
    src_sizes = np.diff(offsets)
    sizes = src_sizes[perm]
    new_offsets = np.zeros(perm.size + 1, dtype=np.int64)
    np.cumsum(sizes, out=new_offsets[1:])
    width = int(src_sizes.max()) if src_sizes.size else 0
    if width > 1 and np.count_nonzero(src_sizes != width) <= _MAX_SHORT_BATCHES:
        return _gather_rows(order, index, offsets, perm, width), new_offsets
    shift = np.repeat(offsets[:-1][perm] - new_offsets[:-1], sizes)
    shift += np.arange(shift.size, dtype=np.int64)
    return (order if index is None else order[index])[shift], new_offsets


#: :func:`_gather` copies whole rows when at most this many batches are short of the longest.
_MAX_SHORT_BATCHES = 64


def _gather_rows(
    order: np.ndarray, index: np.ndarray | None, offsets: np.ndarray, perm: np.ndarray, width: int
) -> np.ndarray:
    """:func:`_gather` when nearly every batch is ``width`` long: the batches laid out as rows
    of ``width`` slots (block copies, or takes through ``index``; a short batch padded), then
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


def _draw(layout: _Layout, rng: np.random.Generator) -> BucketedEpoch:
    """One epoch from a layout: two draws from ``rng`` (the sample shuffle, the batch order)."""
    n, w = layout.n_samples, layout.world_size
    perm = rng.permutation(n).astype(np.int64, copy=False)
    by_bucket = np.argsort(layout.bucket_keys[perm], kind="stable")  # perm[by_bucket]: grouped
    index = by_bucket if layout.slot_source is None else by_bucket[layout.slot_source]
    m = layout.n_batches
    if layout.sync_buckets:
        steps = rng.permutation(m // w).astype(np.int64, copy=False)
        order = steps if w == 1 else (steps[:, None] * w + np.arange(w, dtype=np.int64)).ravel()
    else:
        order = rng.permutation(m).astype(np.int64, copy=False)
        order = np.resize(order, layout.n_steps * w) if order.size else order
    indices, offsets = _gather(perm, layout.offsets, order, index)
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
        As in :class:`BucketedBatchSampler` (see :mod:`analysis.sampler`).

    Returns
    -------
    BucketedEpoch

    Examples
    --------
    >>> import numpy as np
    >>> ep = bucketed_epoch([0, 0, 0, 1, 1], [2, 2], np.random.default_rng(0), world_size=2)
    >>> len(ep), ep.n_steps, ep.n_repeated, ep.n_dropped
    (4, 2, 2, 0)
    >>> sorted(ep.buckets.reshape(2, 2).tolist())  # one bucket a step
    [[0, 0], [1, 1]]
    >>> sorted(int(i) for i in np.unique(ep.indices))
    [0, 1, 2, 3, 4]
    """
    check_rng(rng)
    world_size = positive_int(world_size, "world_size")
    return _draw(_layout(np.asarray(bucket_of_sample), batch_sizes, world_size, sync_buckets, drop_last), rng)


def _plan_parts(edges_or_plan: Any) -> tuple[Any, list[int] | None]:
    """``(edges, batch_sizes or None)`` of a BucketPlan-like object or a plain edge list."""
    if hasattr(edges_or_plan, "edges") and hasattr(edges_or_plan, "batch_sizes"):
        return edges_or_plan.edges, [int(s) for s in edges_or_plan.batch_sizes]
    return edges_or_plan, None


class BucketedBatchSampler:
    """One rank's bucketed batches: ``DataLoader(dataset, batch_sampler=sampler)``.

    Parameters
    ----------
    lengths : array of int
        Per-sample lengths in dataset order (what ``measure_lengths(..., out=)`` writes);
        ``edges`` must cover them.
    edges_or_plan : sequence of int or BucketPlan
        Bucket edges (``e_i < L <= e_{i+1}``), or a plan whose ``edges`` and ``batch_sizes``
        are used.
    batch_size, max_tokens : int, optional
        The batch rule (:meth:`analysis.BatchRule.batch_sizes`), as ``rule=`` or these
        keywords; required with bare edges,
        and overriding a plan's ``batch_sizes`` when given.
    seed : int, default 0
        Epoch ``e`` is built from :func:`epoch_rng` ``(seed, e)``: the same on every rank.
    rank, world_size : int
        This process's rank and the number of data-parallel ranks.
    sync_buckets : bool, default True
        All ranks draw from the same bucket at every step (see :mod:`analysis.sampler`).
    drop_last : bool, default False
        Complete the last steps with repeats (False) or drop what doesn't fill them (True).

    Attributes
    ----------
    edges, batch_sizes : list of int
    epoch : int
        Set by :meth:`set_epoch` (default 0).
    n_repeated, n_dropped : int
        In the current epoch, over all ranks: sample slots that repeat a sample, samples left
        out (documented in :mod:`analysis.sampler`).
    yielded : int
        Batches the current iterator has yielded (ahead of consumption under prefetch).

    Examples
    --------
    >>> lengths = [5, 1, 7, 2, 8, 3, 4]
    >>> s = BucketedBatchSampler(lengths, [0, 4, 8], batch_size=3, world_size=2, rank=1)
    >>> len(s), s.n_repeated     # bucket (4, 8] has 1 batch: a repeated batch fills its step
    (2, 3)
    >>> batches = list(s)
    >>> state = s.state_dict(consumed=1)
    >>> t = BucketedBatchSampler(lengths, [0, 4, 8], batch_size=3, world_size=2, rank=1)
    >>> t.load_state_dict(state)
    >>> list(t) == batches[1:]
    True
    """

    def __init__(
        self,
        lengths: Sequence[int] | np.ndarray,
        edges_or_plan: Any,
        rule: BatchRule | None = None,
        *,
        batch_size: int | None = None,
        max_tokens: int | None = None,
        seed: int = 0,
        rank: int = 0,
        world_size: int = 1,
        sync_buckets: bool = True,
        drop_last: bool = False,
    ) -> None:
        arr = as_length_array(lengths, allow_zero=False, source="lengths")
        if arr.size == 0:
            raise ValueError("lengths is empty: no samples")
        edges, plan_sizes = _plan_parts(edges_or_plan)
        self.edges = check_edges(edges, LengthHistogram.from_lengths(arr))
        if plan_sizes is not None and rule is None and batch_size is None and max_tokens is None:
            if len(plan_sizes) != len(self.edges) - 1:
                raise ValueError(f"plan has {len(self.edges) - 1} buckets but {len(plan_sizes)} batch sizes")
            self.batch_sizes = plan_sizes
        else:
            rule = as_rule(rule, batch_size=batch_size, max_tokens=max_tokens)
            self.batch_sizes = rule.batch_sizes(self.edges)
        self.world_size = positive_int(world_size, "world_size")
        if not isinstance(rank, int | np.integer) or not 0 <= rank < self.world_size:
            raise ValueError(f"rank must be in [0, {self.world_size}), got {rank!r}")
        if not isinstance(seed, int | np.integer) or seed < 0:
            raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
        self.rank, self.seed = int(rank), int(seed)
        self.sync_buckets, self.drop_last = bool(sync_buckets), bool(drop_last)
        self._layout = _layout(
            bucket_index(arr, self.edges),
            self.batch_sizes,
            self.world_size,
            self.sync_buckets,
            self.drop_last,
        )
        digest = hashlib.sha256(np.ascontiguousarray(arr, dtype=np.int64).tobytes())
        digest.update(json.dumps([self.edges, self.batch_sizes]).encode())
        self._fingerprint = digest.hexdigest()[:16]
        self.epoch = 0
        self.yielded = 0
        self._resume_at = 0
        self._cache: tuple[int, BucketedEpoch] | None = None

    def __len__(self) -> int:
        """Batches per rank per epoch: the same on every rank and in every epoch."""
        return self._layout.n_steps

    def set_epoch(self, epoch: int) -> None:
        """Use epoch ``epoch``'s shuffle next (as ``DistributedSampler.set_epoch``).

        Another epoch than the one a loaded state points into clears the resume point.
        """
        if not isinstance(epoch, int | np.integer) or epoch < 0:
            raise ValueError(f"epoch must be a non-negative integer, got {epoch!r}")
        if int(epoch) != self.epoch:
            self._resume_at = 0
        self.epoch = int(epoch)

    def global_epoch(self, epoch: int | None = None) -> BucketedEpoch:
        """Every rank's batches of ``epoch`` (default: the current one)."""
        e = self.epoch if epoch is None else int(epoch)
        if self._cache is None or self._cache[0] != e:
            self._cache = (e, _draw(self._layout, epoch_rng(self.seed, e)))
        return self._cache[1]

    @property
    def n_repeated(self) -> int:
        return self.global_epoch().n_repeated

    @property
    def n_dropped(self) -> int:
        return self.global_epoch().n_dropped

    def __iter__(self) -> Iterator[list[int]]:
        ep = self.global_epoch()
        start, self._resume_at = self._resume_at, 0
        self.yielded = start
        w, offsets, indices = self.world_size, ep.offsets, ep.indices
        for step in range(start, ep.n_steps):
            b = step * w + self.rank
            self.yielded = step + 1
            yield indices[offsets[b] : offsets[b + 1]].tolist()

    def state_dict(self, consumed: int) -> dict[str, Any]:
        """Where to resume: ``consumed`` = batches of the current epoch the loop has used.

        JSON-serialisable and the same on every rank.  See "Resume contract" in
        :mod:`analysis.sampler` for why the count comes from the training loop.
        """
        if not isinstance(consumed, int | np.integer) or not 0 <= consumed <= len(self):
            raise ValueError(f"consumed must be an integer in [0, {len(self)}], got {consumed!r}")
        return {
            "format": _STATE_FORMAT,
            "seed": self.seed,
            "epoch": self.epoch,
            "consumed": int(consumed),
            "world_size": self.world_size,
            "sync_buckets": self.sync_buckets,
            "drop_last": self.drop_last,
            "fingerprint": self._fingerprint,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Resume: the next iteration yields the batches after the ``consumed`` ones."""
        if state.get("format") != _STATE_FORMAT:
            raise ValueError(f"not a BucketedBatchSampler state: format {state.get('format')!r}")
        mine = self.state_dict(0)
        for key in ("world_size", "sync_buckets", "drop_last", "fingerprint"):
            if state[key] != mine[key]:
                raise ValueError(
                    f"state was saved with {key} = {state[key]!r}, this sampler has "
                    f"{mine[key]!r} (lengths, edges and batch sizes make the fingerprint)"
                )
        consumed = int(state["consumed"])
        if not 0 <= consumed <= len(self):
            raise ValueError(f"consumed = {consumed} is outside [0, {len(self)}]")
        self.seed, self.epoch, self._resume_at = int(state["seed"]), int(state["epoch"]), consumed
