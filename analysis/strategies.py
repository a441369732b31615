"""Batching strategies: real epochs of index batches built from per-sample lengths.

Every strategy turns per-sample ``lengths`` and an explicit ``rng`` into one epoch: a
sequence of batches, each an ``int64`` array of sample indices, in the order a trainer
would consume them.  Every sample appears exactly once per epoch, except in ``bucketed``
epochs for ``world_size > 1``, whose last steps are completed with counted repeats.

=================  ==========================================================================
strategy           what it does (and who does it)
=================  ==========================================================================
``sorted``         stable sort by length, cut batches from the shortest, shuffle only the
                   *order* of the batches each epoch: the same compositions every epoch
                   (fairseq, ESPnet).
``random``         a random permutation cut into batches (PyTorch ``DataLoader(shuffle=True)``).
``bucketed``       the case's bucketed shuffle: shuffle inside each bucket of ``edges``, cut
                   batches of that bucket's batch size, interleave all buckets' batches in a
                   random order.  Built by :func:`analysis.sampler.bucketed_epoch`, the core
                   of :class:`~analysis.sampler.BucketedBatchSampler`: with ``world_size``
                   and ``sync_buckets`` the epoch is the sampler's global epoch (batch ``b``
                   is step ``b // world_size`` of rank ``b % world_size``), and
                   ``builder.epoch(epoch_rng(seed, e))`` is the sampler's epoch ``e``.
``length_grouped`` Hugging Face ``TrainingArguments(train_sampling_strategy="group_by_length")``
                   (transformers 4.x: ``group_by_length=True``).  The Trainer builds its
                   ``LengthGroupedSampler`` with ``train_batch_size * gradient_accumulation_steps``
                   (``Trainer._get_train_sampler``), so with ``G = gradient_accumulation_steps``:
                   a permutation split into megabatches of ``mult * batch_size * G`` samples
                   (``mult = min(n // (4 * batch_size * G), 50)``, at least 1), each stably
                   sorted by length descending; the longest sample is swapped to the very first
                   position (so an out-of-memory error shows up at step 1); then cut into
                   batches of ``batch_size``.  This replicates ``get_length_grouped_indices``.
``token_budget``   AllenNLP-style: sort by ``length * (1 + U(-0.1, 0.1))``
                   (fresh noise each epoch), fill each batch while
                   ``(size + 1) * longest <= max_tokens``, shuffle batch order.  Needs
                   ``max_tokens``; a sample longer than ``max_tokens`` goes alone in its batch.
``packing``        first-fit-decreasing packing into bins of ``max_tokens`` (no padding inside
                   a bin, a bin costs ``max_tokens``).  Needs ``max_tokens``; which samples of
                   a given length fill which bin, and the order of bins, are random per epoch.
=================  ==========================================================================

The batch rule is a :class:`~analysis.batching.BatchRule`: ``bucketed`` takes its
per-bucket sizes (``rule.batch_sizes(edges)``), the other fixed-size strategies one size for
the epoch (``rule.fixed_batch_size(longest)``), the token strategies a token budget
(``rule.token_budget(longest)``: ``max_tokens``, or ``batch_size`` full batches of the
longest sample, the same activation memory).

An epoch is stored flat (:class:`Epoch`: ``indices`` plus batch ``offsets``), built with a
handful of vectorised NumPy calls; ``Epoch.batches()`` gives the list of arrays.
:class:`EpochBuilder` does the per-dataset
work once (sorting, bucket assignment, the packing plan) and then builds any number of
epochs, which is how :func:`analysis.simulate` uses it.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from analysis._validate import as_length_array, check_rng, known_name
from analysis.batching import BatchRule, as_rule, bucket_index, check_edges, positive_int
from analysis.lengths import LengthHistogram, count_distinct
from analysis.sampler import _draw as _bucket_draw
from analysis.sampler import _gather, _small_keys
from analysis.sampler import _layout as _bucket_layout

__all__ = [
    "EXACT_STRATEGIES",
    "STRATEGIES",
    "TOKEN_STRATEGIES",
    "Epoch",
    "EpochBuilder",
    "epoch_builder",
    "build_epoch",
    "ffd_plan",
    "strategy_rule",
]

#: Every strategy name, in the order tables and figures show them.
STRATEGIES = ("sorted", "random", "bucketed", "length_grouped", "token_budget", "packing")
#: The strategies that fill batches up to a token budget instead of a sample count.
TOKEN_STRATEGIES = ("token_budget", "packing")
#: The strategies whose expected padding the histogram gives exactly (:mod:`analysis.waste`);
#: the others are known only from simulated epochs.
EXACT_STRATEGIES = ("sorted", "random", "bucketed")
#: AllenNLP's relative noise on the token_budget sort key.
PADDING_NOISE = 0.1


def strategy_rule(strategy: str, rule: BatchRule, longest: int) -> BatchRule:
    """The batch rule ``strategy`` actually runs with on data whose longest sample is ``longest``.

    ``bucketed`` runs ``rule`` itself; the token strategies fill batches up to
    ``rule.token_budget(longest)``; the others take one batch size for the epoch
    (``rule.fixed_batch_size(longest)``).

    Examples
    --------
    >>> rule = BatchRule(max_tokens=4096)
    >>> [strategy_rule(name, rule, 1000).text for name in ("bucketed", "packing", "sorted")]
    ['max_tokens 4,096', 'max_tokens 4,096', 'batch_size 4']
    """
    if strategy in TOKEN_STRATEGIES:
        return BatchRule(max_tokens=rule.token_budget(longest))
    if strategy == "bucketed":
        return rule
    return BatchRule(rule.fixed_batch_size(longest), None, rule.pad_to_multiple_of)


@dataclass(frozen=True, eq=False)
class Epoch:
    """One epoch of batches, stored flat.

    Parameters
    ----------
    indices : numpy.ndarray
        Sample indices (``int64``) of all batches, concatenated in consumption order; every
        sample appears exactly once.
    offsets : numpy.ndarray
        ``int64``, ``n_batches + 1`` values: batch ``b`` is ``indices[offsets[b]:offsets[b+1]]``.
    buckets : numpy.ndarray
        ``int64`` bucket of each batch (``bucketed`` only; ``-1`` for the other strategies).
    strategy : str
        The strategy that built it.

    Examples
    --------
    >>> import numpy as np
    >>> from analysis.strategies import build_epoch
    >>> ep = build_epoch([5, 1, 4, 2, 3], "sorted", rng=np.random.default_rng(0), batch_size=2)
    >>> sorted(b.tolist() for b in ep.batches())
    [[0], [1, 3], [4, 2]]
    >>> len(ep), ep.sizes.tolist() in ([2, 2, 1], [2, 1, 2], [1, 2, 2])
    (3, True)
    """

    indices: np.ndarray
    offsets: np.ndarray
    buckets: np.ndarray
    strategy: str

    def __len__(self) -> int:
        return int(self.offsets.size - 1)

    def __iter__(self) -> Iterator[np.ndarray]:
        return iter(self.batches())

    @property
    def sizes(self) -> np.ndarray:
        """Samples in each batch (``int64``)."""
        return np.diff(self.offsets)

    def batches(self) -> list[np.ndarray]:
        """The epoch as a list of ``int64`` index arrays, in consumption order."""
        return np.split(self.indices, self.offsets[1:-1])


@dataclass(frozen=True, eq=False)
class EpochBuilder:
    """A strategy prepared for one dataset: call :meth:`epoch` once per epoch.

    Make one with :func:`epoch_builder`.  Attributes: ``strategy``, ``lengths`` (per-sample,
    ``int64``), ``hist`` (their :class:`~analysis.lengths.LengthHistogram`), ``rule`` (the
    batch rule as given), ``edges`` (``bucketed`` only), ``batch_sizes`` (samples per batch:
    one value, or one per bucket for ``bucketed``; empty for the token strategies),
    ``max_tokens`` (the token strategies' budget, else None), ``gradient_accumulation_steps``,
    ``world_size``, ``sync_buckets``.
    """

    strategy: str
    lengths: np.ndarray
    hist: LengthHistogram
    rule: BatchRule
    edges: tuple[int, ...] | None
    batch_sizes: tuple[int, ...]
    max_tokens: int | None
    gradient_accumulation_steps: int
    world_size: int
    sync_buckets: bool
    _state: dict[str, Any] = field(repr=False)

    def epoch(self, rng: np.random.Generator) -> Epoch:
        """Build one epoch with ``rng`` (the only source of randomness)."""
        check_rng(rng)
        return _EPOCH_FUNCS[self.strategy](self, rng)


def epoch_builder(
    lengths: Sequence[int] | np.ndarray | LengthHistogram,
    strategy: str,
    rule: BatchRule | None = None,
    *,
    batch_size: int | None = None,
    max_tokens: int | None = None,
    edges: Sequence[int] | None = None,
    gradient_accumulation_steps: int = 1,
    world_size: int = 1,
    sync_buckets: bool = True,
) -> EpochBuilder:
    """Prepare ``strategy`` for per-sample ``lengths`` (the per-dataset work, done once).

    Parameters
    ----------
    lengths : array-like of int or LengthHistogram
        Per-sample lengths (positive integers), 1-D; a histogram is expanded (sample ``i``
        is the ``i``-th shortest).
    strategy : str
        One of :data:`STRATEGIES`.
    rule : BatchRule, optional
        The batch rule (or ``batch_size=`` / ``max_tokens=``); see the module docstring for
        how each strategy uses it.
    edges : sequence of int, optional
        Bucket edges, required by ``bucketed`` (must cover the data), ignored otherwise.
    gradient_accumulation_steps : int, default 1
        ``length_grouped`` only: the Trainer's megabatches are built from
        ``batch_size * gradient_accumulation_steps``.
    world_size : int, default 1
        ``bucketed`` only: ranks the epoch is built for (steps of ``world_size`` batches,
        completed with repeats; see :mod:`analysis.sampler`).  Other strategies ignore it.
    sync_buckets : bool, default True
        ``bucketed`` with ``world_size > 1`` only: every step's batches come from one bucket.

    Examples
    --------
    >>> import numpy as np
    >>> b = epoch_builder([10, 20, 30, 40], "bucketed", batch_size=2, edges=[0, 25, 40])
    >>> b.batch_sizes
    (2, 2)
    >>> ep = b.epoch(np.random.default_rng(1))
    >>> sorted(sorted(x.tolist()) for x in ep.batches()), sorted(ep.buckets.tolist())
    ([[0, 1], [2, 3]], [0, 1])
    >>> epoch_builder([1, 2], "shuffled", batch_size=2)
    Traceback (most recent call last):
    ...
    ValueError: unknown strategy 'shuffled'; choose one of sorted, random, bucketed, length_grouped,
    token_budget, packing
    """
    known_name(strategy, STRATEGIES, "strategy")
    rule = as_rule(rule, batch_size=batch_size, max_tokens=max_tokens)
    arr = as_length_array(
        lengths.expand() if isinstance(lengths, LengthHistogram) else lengths,
        allow_zero=False,
        source="lengths",
    )
    if arr.size == 0:
        raise ValueError("lengths is empty: no samples")
    arr.setflags(write=False)
    hist = lengths if isinstance(lengths, LengthHistogram) else LengthHistogram(*count_distinct(arr))
    accumulation = positive_int(gradient_accumulation_steps, "gradient_accumulation_steps")
    world_size = positive_int(world_size, "world_size")
    edges_out, budget = None, None
    if strategy == "bucketed":
        if edges is None:
            raise ValueError("strategy 'bucketed' needs edges")
        edges_out = tuple(check_edges(edges, hist))
        sizes = tuple(rule.batch_sizes(edges_out))
    elif strategy in TOKEN_STRATEGIES:
        sizes, budget = (), rule.token_budget(hist.max)
    else:
        sizes = (rule.fixed_batch_size(hist.max),)
    builder = EpochBuilder(
        strategy, arr, hist, rule, edges_out, sizes, budget, accumulation, world_size, bool(sync_buckets), {}
    )
    _PREPARE_FUNCS[strategy](builder)
    return builder


def build_epoch(
    lengths: Sequence[int] | np.ndarray,
    strategy: str,
    rule: BatchRule | None = None,
    *,
    rng: np.random.Generator,
    batch_size: int | None = None,
    max_tokens: int | None = None,
    edges: Sequence[int] | None = None,
    gradient_accumulation_steps: int = 1,
    world_size: int = 1,
    sync_buckets: bool = True,
) -> Epoch:
    """One epoch of ``strategy`` over per-sample ``lengths``; see :func:`epoch_builder`.

    Examples
    --------
    >>> import numpy as np
    >>> ep = build_epoch([3, 9, 4, 8, 2], "packing", rng=np.random.default_rng(0), max_tokens=12)
    >>> sorted(sorted(b.tolist()) for b in ep.batches())
    [[0, 1], [2, 3], [4]]
    """
    return epoch_builder(
        lengths,
        strategy,
        rule,
        batch_size=batch_size,
        max_tokens=max_tokens,
        edges=edges,
        gradient_accumulation_steps=gradient_accumulation_steps,
        world_size=world_size,
        sync_buckets=sync_buckets,
    ).epoch(rng)


# ---------------------------------------------------------------------------- helpers
def _even_offsets(n: int, size: int) -> np.ndarray:
    """Offsets cutting ``n`` samples into batches of ``size`` (last one shorter)."""
    return np.append(np.arange(0, n, size, dtype=np.int64), np.int64(n))


def _stable_order(keys: np.ndarray) -> np.ndarray:
    """Stable ascending argsort of non-negative integer ``keys`` as ``int64``."""
    return np.argsort(_small_keys(keys), kind="stable").astype(np.int64, copy=False)


def _no_buckets(n_batches: int) -> np.ndarray:
    return np.full(n_batches, -1, dtype=np.int64)


# ---------------------------------------------------------------------------- strategies
def _prepare_sorted(b: EpochBuilder) -> None:
    order = _stable_order(b.lengths)
    b._state["order"] = order
    b._state["offsets"] = _even_offsets(order.size, b.batch_sizes[0])


def _epoch_sorted(b: EpochBuilder, rng: np.random.Generator) -> Epoch:
    offsets = b._state["offsets"]
    perm = rng.permutation(offsets.size - 1)
    indices, new_offsets = _gather(b._state["order"], offsets, perm)
    return Epoch(indices, new_offsets, _no_buckets(perm.size), "sorted")


def _prepare_random(b: EpochBuilder) -> None:
    b._state["offsets"] = _even_offsets(b.lengths.size, b.batch_sizes[0])


def _epoch_random(b: EpochBuilder, rng: np.random.Generator) -> Epoch:
    offsets = b._state["offsets"]
    indices = rng.permutation(b.lengths.size).astype(np.int64, copy=False)
    return Epoch(indices, offsets.copy(), _no_buckets(offsets.size - 1), "random")


def _prepare_bucketed(b: EpochBuilder) -> None:
    # One implementation with the training sampler: its layout (drop_last=False) and draw.
    assert b.edges is not None  # epoch_builder requires edges for bucketed
    b._state["layout"] = _bucket_layout(
        _bucket_ids(b.lengths, b.hist.max, b.edges), b.batch_sizes, b.world_size, b.sync_buckets, False
    )


def _bucket_ids(lengths: np.ndarray, longest: int, edges: Sequence[int]) -> np.ndarray:
    """:func:`~analysis.batching.bucket_index` of every sample in the narrowest unsigned dtype:
    looked up in a table of the buckets of ``0..longest`` when that table is no longer than the
    data (no ``int64`` array per sample)."""
    top = len(edges) - 2  # the last bucket
    if longest < max(lengths.size, 1 << 16):
        table = _small_keys(bucket_index(np.arange(longest + 1, dtype=np.int64), edges), top)
        ids: np.ndarray = table[lengths]
        return ids
    return _small_keys(bucket_index(lengths, edges), top)


def _epoch_bucketed(b: EpochBuilder, rng: np.random.Generator) -> Epoch:
    ep = _bucket_draw(b._state["layout"], rng)
    return Epoch(ep.indices, ep.offsets, ep.buckets, "bucketed")


def _prepare_token_budget(b: EpochBuilder) -> None:
    # random gathers of the lengths read a narrow copy (fewer cache misses)
    b._state["narrow"] = _small_keys(b.lengths)


def _prepare_length_grouped(b: EpochBuilder) -> None:
    n, size = b.lengths.size, b.batch_sizes[0]
    group = size * b.gradient_accumulation_steps  # what the Trainer passes as batch_size
    mult = max(1, min(n // (group * 4), 50))
    b._state["megabatch"] = mult * group
    b._state["offsets"] = _even_offsets(n, size)
    b._state["desc_keys"] = b.hist.max - b.lengths  # ascending key = length descending


def _epoch_length_grouped(b: EpochBuilder, rng: np.random.Generator) -> Epoch:
    n, mbs = b.lengths.size, b._state["megabatch"]
    perm = rng.permutation(n).astype(np.int64, copy=False)
    span = b.hist.max - b.hist.min + 1
    # megabatches in order, each by length descending (stable, as Python's sorted(reverse=True))
    key = (np.arange(n, dtype=np.int64) // mbs) * span + b._state["desc_keys"][perm]
    indices = perm[np.argsort(key, kind="stable")]
    firsts = np.arange(0, n, mbs, dtype=np.int64)
    top = int(firsts[np.argmax(b.lengths[indices[firsts]])])
    indices[0], indices[top] = indices[top], indices[0]
    offsets = b._state["offsets"]
    return Epoch(indices, offsets.copy(), _no_buckets(offsets.size - 1), "length_grouped")


def _stable_argsort_keys(keys: np.ndarray) -> np.ndarray:
    """``np.argsort(keys, kind="stable")`` of finite float keys, as ``int64``, ~3x faster.

    A radix pass on a 16-bit quantisation of the keys (a function of the key alone, so equal
    keys stay in index order) leaves every key near its place; the stable sort of the keys in
    that order (timsort, fast on nearly sorted runs) then puts them exactly in place, ties
    still in index order.
    """
    if keys.size < 2:
        return np.arange(keys.size, dtype=np.int64)
    lo, hi = float(keys.min()), float(keys.max())
    if not hi > lo:
        return np.arange(keys.size, dtype=np.int64)
    scale = 65535.0 / (hi - lo)
    digit = np.minimum((keys - lo) * scale, 65535.0).astype(np.uint16)
    coarse = np.argsort(digit, kind="stable")
    return coarse[np.argsort(keys[coarse], kind="stable")].astype(np.int64, copy=False)


#: Positions per block of the token-budget batch ends (bounds the table of minima), and the
#: most entries a block's table may have.
_BUDGET_BLOCK = 1 << 16
_BUDGET_TABLE = 1 << 25


def _token_budget_starts(lengths: np.ndarray, max_tokens: int) -> np.ndarray:
    """Batch starts (``int64``) of the greedy fill over ``lengths`` in consumption order: a batch
    takes the next sample while ``(size + 1) * longest <= max_tokens`` (its first sample always).

    Exact, without a loop over samples.  Let ``e_j = max(max_tokens // L_j, 1)``, the most
    samples a batch holding sample ``j`` may have.  The batch that starts at ``s`` ends before
    the first ``i > s`` with ``i >= s + e_j`` for some ``j`` in ``[s, i]``, so it ends at
    ``next(s) = min over j >= s of max(j, s + e_j)``.  With ``F(s)`` the first ``j`` with
    ``j - e_j >= s`` (a prefix maximum and a count), the terms ``j >= F(s)`` give ``F(s)`` and
    the others ``s + e_j``, of which only ``j < s + e_s`` can win:
    ``next(s) = min(F(s), s + min(e[s:R(s)]))``, ``R(s) = min(F(s), s + e_s)``, a range
    minimum (a sparse table, block by block).  The batches are then ``0, next(0), ...``: a
    Python step per batch, not per sample.

    Examples
    --------
    >>> _token_budget_starts(np.array([3, 3, 5, 9, 2, 2, 2]), 12).tolist()  # 5: 3*5 > 12
    [0, 2, 3, 4]
    """
    n = int(lengths.size)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    index = np.int32 if n * n.bit_length() < 2**31 else np.int64  # holds table positions too
    if lengths.dtype.itemsize <= 2 and lengths.dtype.kind == "u":  # narrow: a table of e by length
        every = np.arange(np.iinfo(lengths.dtype).max + 1, dtype=np.int64)
        e = np.take(max_tokens // np.maximum(every, 1), lengths)
    else:
        e = max_tokens // lengths.astype(np.int64)
    np.maximum(e, 1, out=e)
    np.minimum(e, n, out=e)  # more than n samples is as good as n: fits the index dtype
    e = e.astype(index)
    j = np.arange(n, dtype=index)
    reach = j - e
    np.maximum.accumulate(reach, out=reach)  # non-decreasing: F(s) = #{j: reach_j < s}
    counts = np.bincount((np.maximum(reach, -1) + 1).astype(np.intp), minlength=n + 1)  # intp: 2x faster
    first = np.cumsum(counts[:n]).astype(index)
    stop = np.minimum(first, j + e)  # R(s) > s
    blocks = [(a, min(a + _BUDGET_BLOCK, n)) for a in range(0, n, _BUDGET_BLOCK)]
    spans = [(int(stop[a:b].max()), int((stop[a:b] - j[a:b]).max())) for a, b in blocks]
    if any(width.bit_length() * (top - a) > _BUDGET_TABLE for (a, _), (top, width) in zip(blocks, spans)):
        # batches of millions of samples: few of them, so one NumPy step per batch
        starts, s = [0], 0
        while (s := min(first.item(s), s + int(e[s : stop.item(s)].min()))) < n:
            starts.append(s)
        return np.array(starts, dtype=np.int64)
    nxt = np.empty(n, dtype=index)
    for (a, b), (top, _) in zip(blocks, spans):
        r = stop[a:b]
        width = r - j[a:b]
        levels = max(int(width.max()).bit_length(), 1)
        table = np.empty((levels, top - a), dtype=index)  # table[k, i]: min e[a+i : a+i+2**k]
        table[0] = e[a:top]
        for k in range(1, levels):
            half = 1 << (k - 1)
            np.minimum(table[k - 1, :-half], table[k - 1, half:], out=table[k, :-half])
            table[k, -half:] = table[k - 1, -half:]
        k = np.frexp(width)[1].astype(index) - 1  # floor(log2(width))
        row = k * (top - a)
        flat = table.ravel()
        low = np.minimum(flat[row + (j[a:b] - a)], flat[row + (r - a) - (1 << k)])
        np.minimum(first[a:b], j[a:b] + low, out=nxt[a:b])
    starts = [0]
    s = nxt.item(0)
    while s < n:
        starts.append(s)
        s = nxt.item(s)
    return np.array(starts, dtype=np.int64)


def _epoch_token_budget(b: EpochBuilder, rng: np.random.Generator) -> Epoch:
    n = b.lengths.size
    noise = rng.uniform(-PADDING_NOISE, PADDING_NOISE, size=n)
    order = _stable_argsort_keys(b.lengths * (1.0 + noise))
    assert b.max_tokens is not None  # the token strategies always get a budget
    starts = _token_budget_starts(b._state["narrow"][order], b.max_tokens)
    offsets = np.append(starts, np.int64(n))
    perm = rng.permutation(offsets.size - 1)
    indices, new_offsets = _gather(order, offsets, perm)
    return Epoch(indices, new_offsets, _no_buckets(perm.size), "token_budget")


def ffd_plan(hist: LengthHistogram, max_tokens: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """First-fit-decreasing on a histogram: ``(bin, length, count)`` placement events.

    Items are taken longest first; each goes to the earliest-opened bin with room for it,
    else opens a new bin.  Items of one length are placed together: the bins that fit
    them, in opening order, each take ``room // length`` until the count is used up, then
    new bins take ``max_tokens // length`` each.  One event per bin that takes items, in
    placement order.

    Bins are kept as *runs*: consecutive bins with the same room (the bins one length opens
    are one run, and a run stays one when a length fills it).  Runs with room for the current
    length wait in a heap by position (first fit = the earliest run); the others in a heap by
    room, until the lengths come down to their room (bins whose room is below the shortest
    length are dropped).  Cost: a few heap operations per run touched, not a scan of the open
    bins per length.

    Examples
    --------
    >>> from analysis import LengthHistogram
    >>> bins, lengths, counts = ffd_plan(LengthHistogram.from_lengths([6, 5, 4, 3, 2]), 10)
    >>> [(int(b), int(v), int(c)) for b, v, c in zip(bins, lengths, counts)]
    [(0, 6, 1), (1, 5, 1), (0, 4, 1), (1, 3, 1), (1, 2, 1)]
    """
    max_tokens = positive_int(max_tokens, "max_tokens")
    if hist.max > max_tokens:
        n_long = sum(hist.counts[hist.lengths > max_tokens].tolist())
        raise ValueError(
            f"packing: {n_long} sample(s) longer than max_tokens = {max_tokens} "
            f"(longest {hist.max}); raise max_tokens or clip the lengths"
        )
    shortest = hist.min
    fitting: list[tuple[int, int, int]] = []  # (first bin, bins, room): room >= the length
    waiting: list[tuple[int, int, int]] = []  # (-room, first bin, bins): room below it
    events: list[tuple[int, int, int, int]] = []  # (first bin, bins, length, items per bin)
    push, pop = heapq.heappush, heapq.heappop

    def fill(first: int, bins: int, room: int, length: int, take: int) -> None:
        """``bins`` bins from ``first``, each with ``room``, take ``take`` items of ``length``."""
        events.append((first, bins, length, take))
        left = room - take * length
        if left >= shortest:
            push(waiting, (-left, first, bins))

    n_bins = 0
    for length, count in zip(hist.lengths[::-1].tolist(), hist.counts[::-1].tolist()):
        while waiting and -waiting[0][0] >= length:
            neg_room, first, bins = pop(waiting)
            push(fitting, (first, bins, -neg_room))
        while count and fitting:
            first, bins, room = pop(fitting)
            take = room // length
            full = min(count // take, bins)  # bins of the run that take `take` items
            if full:
                fill(first, full, room, length, take)
                count -= full * take
                first, bins = first + full, bins - full
            if bins and count:  # the next bin takes the rest
                fill(first, 1, room, length, count)
                count = 0
                first, bins = first + 1, bins - 1
            if bins:
                push(fitting, (first, bins, room))
        if count:  # new bins: all but the last full
            per_bin = max_tokens // length
            n_new = -(-count // per_bin)
            if n_new > 1:
                fill(n_bins, n_new - 1, max_tokens, length, per_bin)
            fill(n_bins + n_new - 1, 1, max_tokens, length, count - per_bin * (n_new - 1))
            n_bins += n_new
    starts, runs, lengths, takes = (np.array(column, dtype=np.int64) for column in zip(*events))
    shift = np.repeat(starts - (np.cumsum(runs) - runs), runs)  # bin = first + position in the run
    return shift + np.arange(shift.size, dtype=np.int64), np.repeat(lengths, runs), np.repeat(takes, runs)


def _prepare_packing(b: EpochBuilder) -> None:
    assert b.max_tokens is not None  # the token strategies always get a budget
    ev_bin, _, ev_cnt = ffd_plan(b.hist, b.max_tokens)
    # Slots in event order (= length descending) -> flat position in a bin-major layout.
    n_bins = int(ev_bin.max()) + 1
    bin_sizes = np.bincount(ev_bin, weights=ev_cnt, minlength=n_bins).astype(np.int64)
    offsets = np.zeros(n_bins + 1, dtype=np.int64)
    np.cumsum(bin_sizes, out=offsets[1:])
    # Bin-major layout: an event's first slot = slots of all events before it once the
    # events are stably sorted by bin (earlier bins first, then opening order).
    by_bin = np.argsort(ev_bin, kind="stable")
    event_pos = np.empty_like(ev_cnt)
    event_pos[by_bin] = np.cumsum(ev_cnt[by_bin]) - ev_cnt[by_bin]
    event_start = np.cumsum(ev_cnt) - ev_cnt  # first slot of each event, in event order
    slot_pos = np.repeat(event_pos - event_start, ev_cnt) + np.arange(int(ev_cnt.sum()), dtype=np.int64)
    b._state["slot_pos"] = slot_pos
    b._state["offsets"] = offsets
    b._state["desc_keys"] = _small_keys(b.hist.max - b.lengths)  # narrow: a radix argsort


def _epoch_packing(b: EpochBuilder, rng: np.random.Generator) -> Epoch:
    n = b.lengths.size
    perm = rng.permutation(n).astype(np.int64, copy=False)
    by_length = perm[np.argsort(b._state["desc_keys"][perm], kind="stable")]
    flat = np.empty(n, dtype=np.int64)
    flat[b._state["slot_pos"]] = by_length
    offsets = b._state["offsets"]
    order = rng.permutation(offsets.size - 1)
    indices, new_offsets = _gather(flat, offsets, order)
    return Epoch(indices, new_offsets, _no_buckets(order.size), "packing")


_PREPARE_FUNCS = {
    "sorted": _prepare_sorted,
    "random": _prepare_random,
    "bucketed": _prepare_bucketed,
    "length_grouped": _prepare_length_grouped,
    "token_budget": _prepare_token_budget,
    "packing": _prepare_packing,
}
_EPOCH_FUNCS = {
    "sorted": _epoch_sorted,
    "random": _epoch_random,
    "bucketed": _epoch_bucketed,
    "length_grouped": _epoch_length_grouped,
    "token_budget": _epoch_token_budget,
    "packing": _epoch_packing,
}
