"""The exact expected padding of an epoch: bucketed shuffle, full shuffle, sorted batches.

A batch costs ``padded = size * longest`` (the longest rounded up to the rule's
``pad_to_multiple_of``); ``useful`` is the sum of its lengths; ``efficiency = useful /
padded``.  Every function here is a pure function of a
:class:`~analysis.lengths.LengthHistogram` and runs in O(distinct lengths), whatever the
number of samples; the order statistics behind it live in :mod:`analysis.padding.order_stats`.

Each function takes its batch rule as a :class:`~analysis.batching.BatchRule`; the public
entry point :func:`expected_strategies` also takes the keywords ``batch_size=`` /
``max_tokens=`` / ``pad_to_multiple_of=`` (:func:`analysis.batching.as_rule` builds the rule
once there).
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from analysis._validate import known_name
from analysis.batching import BatchRule, as_rule, bucket_bounds, check_edges, round_up
from analysis.lengths import LengthHistogram
from analysis.padding.order_stats import FILLED_ABOVE, LogProbs, bucket_waste, exact_cumsum, fill_log_probs

__all__ = [
    "WasteEstimate",
    "expected_padding",
    "random_padding",
    "sorted_padding",
    "expected_strategies",
    "EXACT_STRATEGIES",
    "exact_padding",
    "strategy_table",
    "step_tokens",
    "batch_step_tokens",
    "budget_fill",
]


@dataclass(frozen=True, kw_only=True)
class WasteEstimate:
    """Expected padding of one epoch (see :func:`expected_padding`, :func:`sorted_padding`).

    ``useful_tokens`` and ``n_batches`` are exact; ``waste_tokens`` is the expected padding
    over shuffles, computed directly as a sum of non-negative terms (never as a difference of
    two large numbers): a Python ``int`` where the expectation is an integer (sorted batching,
    a bucket per length, ``B = 1``, a bucket that is one batch), else a float.
    ``padded_tokens = useful_tokens + waste_tokens``.  ``strategy`` says which batching it
    describes: ``"bucketed"`` (``edges``), ``"random"`` (one bucket) or ``"sorted"`` (batches
    cut from the sorted samples; one row).  The ``bucket_*`` tuples hold one value per bucket.
    """

    strategy: str
    rule: BatchRule
    edges: tuple[int, ...]
    batch_sizes: tuple[int, ...]
    useful_tokens: int
    waste_tokens: int | float
    n_batches: int
    bucket_samples: tuple[int, ...]
    bucket_tokens: tuple[int, ...]
    bucket_batches: tuple[int, ...]
    bucket_waste_tokens: tuple[int | float, ...]

    @property
    def padded_tokens(self) -> int | float:
        """Expected padded tokens: ``useful_tokens + waste_tokens`` (exact when both are ints)."""
        return self.useful_tokens + self.waste_tokens

    @property
    def bucket_padded_tokens(self) -> tuple[int | float, ...]:
        """Expected padded tokens of each bucket."""
        return tuple(t + w for t, w in zip(self.bucket_tokens, self.bucket_waste_tokens))

    @property
    def efficiency(self) -> float:
        """Useful over expected padded tokens (in ``(0, 1]``)."""
        return _efficiency(self.useful_tokens, self.waste_tokens)

    @property
    def n_buckets(self) -> int:
        """Number of buckets (``len(edges) - 1``)."""
        return len(self.edges) - 1

    def to_frame(self) -> pd.DataFrame:
        """One row per bucket: ``lower_edge``, ``upper_edge``, ``samples``, ``tokens``,
        ``batch_size``, ``batches``, ``padded_tokens`` (expected) and ``efficiency`` (NaN for
        an empty bucket)."""
        eff = [
            _efficiency(t, w) if s else float("nan")
            for s, t, w in zip(self.bucket_samples, self.bucket_tokens, self.bucket_waste_tokens)
        ]
        frame = pd.DataFrame(
            {
                "lower_edge": list(self.edges[:-1]),
                "upper_edge": list(self.edges[1:]),
                "samples": list(self.bucket_samples),
                "tokens": list(self.bucket_tokens),
                "batch_size": list(self.batch_sizes),
                "batches": list(self.bucket_batches),
                "padded_tokens": list(self.bucket_padded_tokens),
                "waste_tokens": list(self.bucket_waste_tokens),
                "efficiency": eff,
            }
        )
        frame.index.name = "bucket"
        return frame

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready totals (plain ints, floats and lists)."""
        return {
            "strategy": self.strategy,
            **self.rule.kwargs(),
            "edges": list(self.edges),
            "batch_sizes": list(self.batch_sizes),
            "efficiency": float(self.efficiency),
            "padded_tokens": self.padded_tokens,
            "useful_tokens": int(self.useful_tokens),
            "waste_tokens": self.waste_tokens,
            "n_batches": int(self.n_batches),
        }


def _bucket_tokens(hist: LengthHistogram, lo: int, hi: int) -> int:
    """Exact tokens of the distinct lengths ``lo:hi`` (a Python int)."""
    return sum(map(operator.mul, hist.lengths[lo:hi].tolist(), hist.counts[lo:hi].tolist()))


def _efficiency(useful: int, waste: int | float) -> float:
    """``useful / (useful + waste)``, never above 1: a correctly rounded ratio of ints, or
    ``1 / (1 + waste / useful)`` for a float ``waste >= 0``."""
    if isinstance(waste, int):
        padded = useful + waste
        return useful / padded if padded else float("nan")
    return 1.0 / (1.0 + waste / useful) if useful else float("nan")


def _prefix_sums(hist: LengthHistogram, pad_to_multiple_of: int) -> tuple[np.ndarray, ...] | None:
    """int64 prefix sums of samples, tokens and rounding waste over the distinct lengths (a
    leading 0), when every sum fits (padded tokens below ``2**62``); else None."""
    padded = round_up(hist.lengths, pad_to_multiple_of)
    if hist.n_samples * int(padded[-1]) >= 2**62:
        return None
    out = []
    for values in (hist.counts, hist.counts * hist.lengths, hist.counts * (padded - hist.lengths)):
        prefix = np.zeros(values.size + 1, np.int64)
        np.cumsum(values, out=prefix[1:])
        out.append(prefix)
    return tuple(out)


def _memo_prefix_sums(
    hist: LengthHistogram, pad_to_multiple_of: int, memo: dict[Any, Any] | None
) -> tuple[np.ndarray, ...] | None:
    """:func:`_prefix_sums`, kept in ``memo`` (one ``hist``'s) when there is one."""
    key = ("prefix", pad_to_multiple_of)
    if memo is not None and key in memo:
        prefix: tuple[np.ndarray, ...] | None = memo[key]
        return prefix
    prefix = _prefix_sums(hist, pad_to_multiple_of)
    if memo is not None:
        memo[key] = prefix
    return prefix


def bucketed_estimate(
    hist: LengthHistogram,
    edges: list[int],
    rule: BatchRule,
    strategy: str = "bucketed",
    memo: dict[Any, Any] | None = None,
    shared: dict[tuple[int, int], LogProbs] | None = None,
) -> WasteEstimate:
    """:func:`expected_padding` without validation (``edges`` already cover ``hist``);
    ``memo``: each bucket's numbers by its bounds (and the prefix sums), kept across calls on
    the same ``hist`` and ``rule`` (a bucket that many plans share is computed once, the same
    numbers); ``shared``: each bucket's :data:`~analysis.padding.order_stats.LogProbs` by its
    bounds ``(lo, hi)``, filled here for a caller that prices the same buckets again (one
    plan's: the caller drops it)."""
    batch_sizes = rule.batch_sizes(edges)
    prefix = _memo_prefix_sums(hist, rule.pad_to_multiple_of, memo)
    buckets = list(zip(*bucket_bounds(hist.lengths, edges), batch_sizes))
    logs = _order_statistics(hist, buckets, prefix, memo, shared)
    samples: list[int] = []
    tokens: list[int] = []
    batches: list[int] = []
    waste: list[int | float] = []
    for lo, hi, size in buckets:
        if lo == hi:
            for column in (samples, tokens, batches, waste):
                column.append(0)
            continue
        key = ("waste", lo, hi, size)
        numbers = None if memo is None else memo.get(key)
        if numbers is None:
            numbers = _bucket_numbers(hist, lo, hi, size, rule.pad_to_multiple_of, prefix, logs[lo, hi, size])
            if memo is not None:
                memo[key] = numbers
        n, t, b, w = numbers
        samples.append(n)
        tokens.append(t)
        batches.append(b)
        waste.append(w)
    floats = [w for w in waste if isinstance(w, float)]
    total: int | float = sum(w for w in waste if isinstance(w, int))
    if floats:  # the int part exact, the expectations summed once
        total = total + math.fsum(floats)
    return WasteEstimate(
        strategy=strategy,
        rule=rule,
        edges=tuple(edges),
        batch_sizes=tuple(batch_sizes),
        useful_tokens=sum(tokens),
        waste_tokens=total,
        n_batches=sum(batches),
        bucket_samples=tuple(samples),
        bucket_tokens=tuple(tokens),
        bucket_batches=tuple(batches),
        bucket_waste_tokens=tuple(waste),
    )


def _order_statistics(
    hist: LengthHistogram,
    buckets: list[tuple[int, int, int]],
    prefix: tuple[np.ndarray, ...] | None,
    memo: dict[Any, Any] | None,
    shared: dict[tuple[int, int], LogProbs] | None,
) -> dict[tuple[int, int, int], LogProbs | None]:
    """What :func:`~analysis.padding.order_stats.bucket_waste` reads for each bucket ``(lo, hi,
    batch size)`` not in ``memo``: its order statistics (``shared``'s, or None), those of the
    batch sizes above ``FILLED_ABOVE`` filled in one call for every bucket
    (:func:`~analysis.padding.order_stats.fill_log_probs`)."""
    todo = [b for b in buckets if b[0] < b[1] and (memo is None or ("waste", *b) not in memo)]
    logs = {b: None if shared is None else shared.setdefault(b[:2], {}) for b in todo}
    filled = [b for b in todo if b[2] > FILLED_ABOVE]
    if filled:
        got = fill_log_probs(
            [
                (hist.counts[lo:hi], _samples(hist, lo, hi, prefix), size, logs[lo, hi, size])
                for lo, hi, size in filled
            ]
        )
        logs.update(zip(filled, got, strict=True))
    return logs


def _samples(hist: LengthHistogram, lo: int, hi: int, prefix: tuple[np.ndarray, ...] | None) -> int:
    """Samples of the distinct lengths ``lo:hi`` (a Python int)."""
    return sum(hist.counts[lo:hi].tolist()) if prefix is None else int(prefix[0][hi] - prefix[0][lo])


def _bucket_numbers(
    hist: LengthHistogram,
    lo: int,
    hi: int,
    size: int,
    m: int,
    prefix: tuple[np.ndarray, ...] | None,
    shared: LogProbs | None = None,
) -> tuple[int, int, int, int | float]:
    """One bucket's samples, tokens, batches and expected padding (:func:`bucketed_estimate`)."""
    if prefix is None:
        n, t, sums = _samples(hist, lo, hi, None), _bucket_tokens(hist, lo, hi), None
    else:
        n, t, r = (int(p[hi] - p[lo]) for p in prefix)
        sums = (n, t, r)
    exact, excess = bucket_waste(hist.lengths[lo:hi], hist.counts[lo:hi], size, m, sums, shared)
    return n, t, -(-n // size), exact + excess if excess else exact


def step_tokens(hist: LengthHistogram, rule: BatchRule, n_batches: int) -> int | None:
    """The tokens ``n_batches`` steps of ``hist`` take under ``rule``'s token budget: each step
    takes ``max_tokens``, or its padded tokens where it passes the budget, which under
    :meth:`~analysis.batching.BatchRule.batch_sizes` only a lone sample padded beyond the budget
    does (:func:`batch_step_tokens` per batch; the plans, shuffles and sorted batches of the
    rule, whose step count is fixed, take exactly this in every epoch); ``None`` without a
    token budget.  ``useful / step_tokens`` is the budget fill (:func:`budget_fill`).

    Examples
    --------
    >>> hist = LengthHistogram.from_lengths([3, 5, 12])
    >>> step_tokens(hist, BatchRule(max_tokens=10), 3)  # three steps, the 12 passes by 2
    32
    >>> step_tokens(hist, BatchRule(max_tokens=12, pad_to_multiple_of=8), 3)  # the 12 pads to 16
    40
    """
    budget = rule.max_tokens
    if budget is None:
        return None
    padded = round_up(hist.lengths, rule.pad_to_multiple_of)
    over = padded > budget
    beyond: int = sum(map(operator.mul, (padded[over] - budget).tolist(), hist.counts[over].tolist()))
    return int(n_batches) * budget + beyond


def batch_step_tokens(padded: np.ndarray, max_tokens: int) -> int:
    """The tokens steps of ``padded`` tokens each take under a budget of ``max_tokens``: each
    ``max(max_tokens, padded)`` (a step reserves the budget; one that passes it takes what it
    holds), summed exactly: the steps of :func:`step_tokens`, batch by batch.

    Examples
    --------
    >>> batch_step_tokens(np.array([6, 10, 12]), 10)
    32
    """
    over = padded[padded > max_tokens]
    return int(padded.size - over.size) * int(max_tokens) + sum(int(v) for v in over.tolist())


def budget_fill(useful_tokens: int, steps_tokens: int | None) -> float | None:
    """The budget fill: useful tokens over the steps' tokens (:func:`step_tokens`,
    :func:`batch_step_tokens`), in ``(0, 1]``; ``None`` without a token budget (``steps_tokens``
    None).  The one definition every face shows.

    Examples
    --------
    >>> budget_fill(20, 32), budget_fill(20, None)
    (0.625, None)
    """
    return None if steps_tokens is None else useful_tokens / steps_tokens


def expected_padding(
    hist: LengthHistogram | Sequence[int] | np.ndarray,
    edges: Sequence[int],
    rule: BatchRule,
) -> WasteEstimate:
    """Exact expected padding of one epoch of a bucketed shuffle.

    The model is the sampler itself: each bucket's samples are shuffled and cut, in order,
    into batches of its batch size ``B``; every full batch is then a uniformly random
    ``B``-subset of the bucket and the last partial batch (``r = n mod B`` samples) a uniformly
    random ``r``-subset.  So a bucket's expected padded tokens are
    ``floor(n / B) * B * E[max_B] + r * E[max_r]``, with ``E[max]`` from order statistics
    without replacement (:func:`analysis.padding.order_stats.expected_batch_max`).  One bucket is the
    full random shuffle; a bucket per distinct length is waste-free.

    Parameters
    ----------
    hist : LengthHistogram or array of per-sample lengths
        The data (an array is converted with ``LengthHistogram.from_lengths``).
    edges : sequence of int
        Bucket edges ``[e0, ..., eK]`` covering the data (see :func:`analysis.batching.check_edges`).
    rule : BatchRule
        The batch rule.

    Returns
    -------
    WasteEstimate

    Examples
    --------
    Lengths 1, 1, 3 in one bucket, batches of 2: the pair is {1, 1} with probability 1/3
    (padded 2), otherwise it holds the 3 (padded 6), and the single leftover pads to itself:

    >>> est = expected_padding([1, 1, 3], [0, 3], BatchRule(batch_size=2))
    >>> est.useful_tokens, round(est.padded_tokens, 12), est.n_batches
    (5, 6.333333333333, 2)
    >>> expected_padding([1, 1, 3], [0, 1, 3], BatchRule(batch_size=2)).efficiency  # a bucket per length
    1.0
    >>> est.to_frame()[["samples", "tokens", "batches", "padded_tokens"]]
            samples  tokens  batches  padded_tokens
    bucket
    0             3       5        2          6.333
    """
    if not isinstance(hist, LengthHistogram):
        hist = LengthHistogram.from_lengths(hist)
    rule = as_rule(rule)
    return bucketed_estimate(hist, check_edges(edges, hist), rule)


def random_padding(
    hist: LengthHistogram,
    rule: BatchRule,
) -> WasteEstimate:
    """Exact expected padding of a full random shuffle: one bucket over every length, one
    batch size for the epoch (``rule.fixed_batch_size``).

    Examples
    --------
    >>> est = random_padding(LengthHistogram.from_lengths([1, 1, 3]), BatchRule(batch_size=2))
    >>> round(est.padded_tokens, 9)
    6.333333333
    """
    rule = as_rule(rule)
    fixed = BatchRule(rule.fixed_batch_size(hist.max), None, rule.pad_to_multiple_of)
    return bucketed_estimate(hist, [hist.min - 1, hist.max], fixed, "random")


def sorted_padding(
    hist: LengthHistogram,
    rule: BatchRule,
) -> WasteEstimate:
    """Exact padding of sorted batching: the samples sorted by length, cut into batches of
    one size (``rule.fixed_batch_size``), in any order.

    Batch ``j`` holds the sorted samples ``j*B .. (j+1)*B - 1``, so its longest is the sorted
    sample at position ``min((j+1)*B, n) - 1``.  Computed on the histogram, without
    expanding the samples: O(distinct lengths) whatever the batch or sample count.
    ``padded_tokens`` is an exact integer (held as a float only when it is beyond 2**53).

    Examples
    --------
    >>> h = LengthHistogram.from_lengths([1, 2, 3, 4, 5])
    >>> est = sorted_padding(h, BatchRule(batch_size=2))  # batches [1,2] [3,4] [5]: 4 + 8 + 5
    >>> est.useful_tokens, est.padded_tokens, est.n_batches
    (15, 17, 3)
    >>> sorted_padding(h, BatchRule(batch_size=2, pad_to_multiple_of=4)).padded_tokens
    24
    """
    rule = as_rule(rule)
    size = rule.fixed_batch_size(hist.max)
    n = hist.n_samples
    n_batches = -(-n // size)
    # Batch j's longest is the length holding sorted position (j+1)*B - 1.  For each distinct
    # length, the batches whose last sample falls on it: count of j with cum[i-1] <= (j+1)B-1
    # < cum[i], i.e. of multiples of B in (cum[i-1], cum[i]]; the last, short batch apart.
    cum = [0, *np.cumsum(hist.counts).tolist()] if n < 2**63 else [0, *exact_cumsum(hist.counts.tolist())]
    full_ends = [c // size for c in cum]  # full batches ending at or before each prefix
    m = rule.pad_to_multiple_of
    longest = [-(-v // m) * m for v in hist.lengths.tolist()]  # exact, never wraps
    padded = sum(size * (full_ends[i + 1] - full_ends[i]) * longest[i] for i in range(len(longest)))
    rest = n - size * (n // size)
    padded += rest * longest[-1]
    waste = padded - hist.total_tokens
    return WasteEstimate(
        strategy="sorted",
        rule=BatchRule(size, None, rule.pad_to_multiple_of),
        edges=(hist.min - 1, hist.max),
        batch_sizes=(size,),
        useful_tokens=hist.total_tokens,
        waste_tokens=waste,
        n_batches=n_batches,
        bucket_samples=(n,),
        bucket_tokens=(hist.total_tokens,),
        bucket_batches=(n_batches,),
        bucket_waste_tokens=(waste,),
    )


def expected_strategies(
    hist: LengthHistogram,
    edges: Sequence[int],
    rule: BatchRule | None = None,
    *,
    batch_size: int | None = None,
    max_tokens: int | None = None,
    pad_to_multiple_of: int | None = None,
) -> dict[str, WasteEstimate]:
    """The exact padding of the three strategies that have one: ``random`` (a full shuffle),
    ``sorted`` (:func:`sorted_padding`) and ``bucketed`` on ``edges``.

    Use :func:`strategy_table` for the same as a frame.

    Examples
    --------
    >>> h = LengthHistogram.from_lengths([1, 2, 3, 4, 50, 60, 70, 80])  # sorted: 270 / 292
    >>> {k: round(v.efficiency, 3) for k, v in expected_strategies(h, [0, 4, 80], batch_size=2).items()}
    {'random': 0.63, 'sorted': 0.925, 'bucketed': 0.88}
    """
    rule = as_rule(rule, batch_size=batch_size, max_tokens=max_tokens, pad_to_multiple_of=pad_to_multiple_of)
    edges = check_edges(edges, hist)
    return {name: exact_padding(hist, name, rule, edges) for name in ("random", "sorted", "bucketed")}


#: The exact expected padding of each strategy that has one: the one table of them (the
#: others are known only from simulated epochs).  ``edges`` are already checked.
_EXACT: dict[str, Callable[[LengthHistogram, BatchRule, Sequence[int]], WasteEstimate]] = {
    "sorted": lambda hist, rule, edges: sorted_padding(hist, rule),
    "random": lambda hist, rule, edges: random_padding(hist, rule),
    "bucketed": lambda hist, rule, edges: bucketed_estimate(hist, list(edges), rule),
}
#: The strategies whose expected padding the histogram gives exactly, in table order.
EXACT_STRATEGIES = tuple(_EXACT)


def exact_padding(
    hist: LengthHistogram, strategy: str, rule: BatchRule, edges: Sequence[int]
) -> WasteEstimate:
    """The exact expected padding of ``strategy`` (one of :data:`EXACT_STRATEGIES`) on ``hist``
    under ``rule``; ``edges`` (checked, covering ``hist``) are the bucketed strategy's.

    Examples
    --------
    >>> h = LengthHistogram.from_lengths([1, 2, 3, 4, 50, 60, 70, 80])
    >>> round(exact_padding(h, "sorted", BatchRule(batch_size=2), [0, 80]).efficiency, 3)
    0.925
    """
    return _EXACT[known_name(strategy, EXACT_STRATEGIES, "exact strategy")](hist, rule, edges)


def strategy_table(estimates: dict[str, WasteEstimate]) -> pd.DataFrame:
    """One row per strategy of :func:`expected_strategies`: ``efficiency``,
    ``padded_tokens``, ``useful_tokens``, ``waste_tokens``, ``n_batches``, ``batch_sizes``.

    Examples
    --------
    >>> h = LengthHistogram.from_lengths([1, 2, 3, 4, 50, 60, 70, 80])
    >>> strategy_table(expected_strategies(h, [0, 4, 80], batch_size=2))["n_batches"].tolist()
    [4, 4, 4]
    """
    frame = pd.DataFrame(
        [
            {
                "strategy": name,
                "efficiency": est.efficiency,
                "padded_tokens": float(est.padded_tokens),
                "useful_tokens": est.useful_tokens,
                "waste_tokens": est.waste_tokens,
                "n_batches": est.n_batches,
                "batch_sizes": list(est.batch_sizes),
            }
            for name, est in estimates.items()
        ]
    )
    return frame.set_index("strategy")
