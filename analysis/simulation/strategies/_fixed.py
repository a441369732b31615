"""The sample-count strategies: ``sorted``, ``random``, ``bucketed`` and ``length_grouped``.

Each is a ``prepare`` function (the per-dataset work, once) returning a frozen state whose
``epoch`` method draws one epoch (see :mod:`analysis.simulation.strategies` for what each one does).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from analysis.batching import bucket_index
from analysis.simulation.bucketed import BucketLayout, bucket_layout, draw_epoch, gather_batches, small_keys
from analysis.simulation.strategies._epoch import Epoch, Setup, even_offsets, no_buckets, stable_order


@dataclass(frozen=True, eq=False)
class SortedState:
    """``sorted``: the samples by length and the cuts of its batches (fixed for every epoch)."""

    order: np.ndarray
    offsets: np.ndarray

    def epoch(self, rng: np.random.Generator) -> Epoch:
        perm = rng.permutation(self.offsets.size - 1)
        indices, new_offsets = gather_batches(self.order, self.offsets, perm)
        return Epoch(indices, new_offsets, no_buckets(perm.size), "sorted")


def prepare_sorted(b: Setup) -> SortedState:
    order = stable_order(b.lengths)
    return SortedState(order, even_offsets(order.size, b.batch_sizes[0]))


@dataclass(frozen=True, eq=False)
class RandomState:
    """``random``: the batch cuts over a fresh permutation of the ``n`` samples."""

    n: int
    offsets: np.ndarray

    def epoch(self, rng: np.random.Generator) -> Epoch:
        offsets = self.offsets
        indices = rng.permutation(self.n).astype(np.int64, copy=False)
        return Epoch(indices, offsets.copy(), no_buckets(offsets.size - 1), "random")


def prepare_random(b: Setup) -> RandomState:
    return RandomState(b.lengths.size, even_offsets(b.lengths.size, b.batch_sizes[0]))


@dataclass(frozen=True, eq=False)
class BucketedState:
    """``bucketed``: the training sampler's layout (:mod:`analysis.simulation.bucketed`), drawn as it does."""

    layout: BucketLayout

    def epoch(self, rng: np.random.Generator) -> Epoch:
        ep = draw_epoch(self.layout, rng)
        return Epoch(ep.indices, ep.offsets, ep.buckets, "bucketed")


def prepare_bucketed(b: Setup) -> BucketedState:
    # One implementation with the training sampler: its layout (drop_last=False) and draw.
    assert b.edges is not None  # epoch_builder requires edges for bucketed
    return BucketedState(
        bucket_layout(
            _bucket_ids(b.lengths, b.hist.max, b.edges), b.batch_sizes, b.world_size, b.sync_buckets, False
        )
    )


def _bucket_ids(lengths: np.ndarray, longest: int, edges: Sequence[int]) -> np.ndarray:
    """:func:`~analysis.batching.bucket_index` of every sample in the narrowest unsigned dtype:
    looked up in a table of the buckets of ``0..longest`` when that table is no longer than the
    data (no ``int64`` array per sample)."""
    top = len(edges) - 2  # the last bucket
    if longest < max(lengths.size, 1 << 16):
        table = small_keys(bucket_index(np.arange(longest + 1, dtype=np.int64), edges), top)
        ids: np.ndarray = table[lengths]
        return ids
    return small_keys(bucket_index(lengths, edges), top)


@dataclass(frozen=True, eq=False)
class LengthGroupedState:
    """``length_grouped``: the megabatch size, the batch cuts, and the sort keys."""

    lengths: np.ndarray
    megabatch: int
    span: int  # distinct values a key of one megabatch can take: longest - shortest + 1
    offsets: np.ndarray
    desc_keys: np.ndarray  # ascending key = length descending

    def epoch(self, rng: np.random.Generator) -> Epoch:
        n, mbs = self.lengths.size, self.megabatch
        perm = rng.permutation(n).astype(np.int64, copy=False)
        # megabatches in order, each by length descending (stable, as Python's sorted(reverse=True))
        key = (np.arange(n, dtype=np.int64) // mbs) * self.span + self.desc_keys[perm]
        indices = perm[np.argsort(key, kind="stable")]
        firsts = np.arange(0, n, mbs, dtype=np.int64)
        top = int(firsts[np.argmax(self.lengths[indices[firsts]])])
        indices[0], indices[top] = indices[top], indices[0]
        offsets = self.offsets
        return Epoch(indices, offsets.copy(), no_buckets(offsets.size - 1), "length_grouped")


def prepare_length_grouped(b: Setup) -> LengthGroupedState:
    n, size = b.lengths.size, b.batch_sizes[0]
    group = size * b.gradient_accumulation_steps  # what the Trainer passes as batch_size
    mult = max(1, min(n // (group * 4), 50))
    # a megabatch of more than n samples is one of all n (capped, so that keys fit in int64)
    return LengthGroupedState(
        b.lengths,
        min(mult * group, max(n, 1)),
        b.hist.max - b.hist.min + 1,
        even_offsets(n, size),
        b.hist.max - b.lengths,
    )
