"""The token strategies: ``token_budget`` (AllenNLP's noisy sort and greedy fill) and
``packing`` (first-fit-decreasing bins, :func:`ffd_plan`).

Each is a ``prepare`` function (the per-dataset work, once) returning a frozen state whose
``epoch`` method draws one epoch (see :mod:`analysis.simulation.strategies` for what each one does).
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

import numpy as np

from analysis._validate import positive_int
from analysis.batching import round_up
from analysis.lengths import LengthHistogram
from analysis.simulation.bucketed import gather_batches, small_keys
from analysis.simulation.strategies._epoch import Epoch, Setup, no_buckets

#: AllenNLP's relative noise on the token_budget sort key.
PADDING_NOISE = 0.1


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


@dataclass(frozen=True, eq=False)
class TokenBudgetState:
    """``token_budget``: the lengths (and a narrow copy for random gathers), the budget."""

    lengths: np.ndarray
    narrow: np.ndarray  # the padded lengths, narrow: random gathers read it (fewer cache misses)
    max_tokens: int
    noise: float = PADDING_NOISE

    def epoch(self, rng: np.random.Generator) -> Epoch:
        n = self.lengths.size
        noise = rng.uniform(-self.noise, self.noise, size=n)
        order = _stable_argsort_keys(self.lengths * (1.0 + noise))
        starts = _token_budget_starts(self.narrow[order], self.max_tokens)
        offsets = np.append(starts, np.int64(n))
        perm = rng.permutation(offsets.size - 1)
        indices, new_offsets = gather_batches(order, offsets, perm)
        return Epoch(indices, new_offsets, no_buckets(perm.size), "token_budget")


def prepare_token_budget(b: Setup) -> TokenBudgetState:
    assert b.max_tokens is not None  # the token strategies always get a budget
    # a batch is filled by padded length (its longest rounded up to pad_to_multiple_of), so
    # its padded tokens stay within the budget; the noisy sort key stays the raw length
    padded = round_up(b.lengths, b.rule.pad_to_multiple_of)
    return TokenBudgetState(b.lengths, small_keys(padded), b.max_tokens, b.padding_noise)


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


@dataclass(frozen=True, eq=False)
class PackingState:
    """``packing``: where each length-descending slot sits in the bin-major layout, the bins'
    offsets, and the sort keys."""

    slot_pos: np.ndarray
    offsets: np.ndarray
    desc_keys: np.ndarray  # narrow: a radix argsort

    def epoch(self, rng: np.random.Generator) -> Epoch:
        n = self.slot_pos.size
        perm = rng.permutation(n).astype(np.int64, copy=False)
        by_length = perm[np.argsort(self.desc_keys[perm], kind="stable")]
        flat = np.empty(n, dtype=np.int64)
        flat[self.slot_pos] = by_length
        offsets = self.offsets
        order = rng.permutation(offsets.size - 1)
        indices, new_offsets = gather_batches(flat, offsets, order)
        return Epoch(indices, new_offsets, no_buckets(order.size), "packing")


def prepare_packing(b: Setup) -> PackingState:
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
    return PackingState(slot_pos, offsets, small_keys(b.hist.max - b.lengths))
