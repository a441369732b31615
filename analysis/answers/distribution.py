"""What a full shuffle and sorted batches cost on the lengths the trainer sees: the facts behind
the first sentence about a file (:func:`analysis.narrative.lengths.describe_distribution`)."""

from __future__ import annotations

from dataclasses import dataclass

from analysis.batching import BatchRule
from analysis.lengths import LengthHistogram
from analysis.optimize import evaluate_edges
from analysis.padding.waste import random_padding, sorted_padding

__all__ = ["DistributionFacts", "distribution_facts"]


@dataclass(frozen=True, kw_only=True)
class DistributionFacts:
    """The lengths as in the file (``hist``) and as the trainer sees them (``seen``: clipped at
    ``max_len``, or ``hist`` itself), the expected efficiency of a full shuffle and of sorted
    batches on ``seen`` under ``rule``, and, under a token budget, the one batch size both take
    (the longest sample must fit) with its budget fill; ``zero_length_dropped`` samples were
    dropped before counting."""

    hist: LengthHistogram
    seen: LengthHistogram
    rule: BatchRule
    max_len: int | None
    shuffle_efficiency: float
    sorted_efficiency: float
    one_batch_size: int | None
    one_budget_fill: float | None
    zero_length_dropped: int = 0


def distribution_facts(
    hist: LengthHistogram, rule: BatchRule, zero_length_dropped: int = 0, *, max_len: int | None = None
) -> DistributionFacts:
    """The facts of :class:`DistributionFacts` for ``hist`` (as in the file) under ``rule``.

    Examples
    --------
    >>> h = LengthHistogram.from_lengths([1, 2, 3, 4, 50, 60, 70, 80])
    >>> f = distribution_facts(h, BatchRule(2), max_len=60)
    >>> f.seen.max, round(f.shuffle_efficiency, 3), round(f.sorted_efficiency, 3), f.one_batch_size
    (60, 0.646, 0.952, None)
    >>> f = distribution_facts(h, BatchRule(max_tokens=160))
    >>> f.one_batch_size, round(f.one_budget_fill or 0, 4)
    (2, 0.4219)
    """
    seen = hist if max_len is None else hist.clip(max_len)
    one_size, one_fill = None, None
    if rule.max_tokens is not None:  # one batch size must fit the longest: how full are its steps
        one = evaluate_edges(seen, [0, seen.max], rule)
        one_size, one_fill = one.batch_sizes[0], float(one.budget_fill or 0)
    return DistributionFacts(
        hist=hist,
        seen=seen,
        rule=rule,
        max_len=max_len,
        shuffle_efficiency=random_padding(seen, rule).efficiency,
        sorted_efficiency=sorted_padding(seen, rule).efficiency,
        one_batch_size=one_size,
        one_budget_fill=one_fill,
        zero_length_dropped=zero_length_dropped,
    )
