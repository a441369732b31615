"""A bucket plan: edges with their batch rule, and what they cost (one result type)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from analysis._order_stats import expected_batch_sum
from analysis.batching import BatchRule, bucket_bounds
from analysis.lengths import LengthHistogram
from analysis.optimize._problem import StepTimeLike, _Problem
from analysis.waste import WasteEstimate, bucketed_estimate


@dataclass(frozen=True)
class BucketPlan:
    """Bucket edges with their batch rule and their exact expected padding.

    The plan holds its :class:`~analysis.waste.WasteEstimate` (``estimate``) and exposes its
    numbers as properties: ``edges`` (``[e0, ..., eK]``, bucket ``i`` holds
    ``e_i < L <= e_{i+1}``), ``batch_sizes``, ``efficiency``, ``padded_tokens``... ``objective``
    is what the optimiser minimises (the expected padded tokens, each bucket's last short
    batch as it is; with ``step_time``, a :class:`~analysis.StepTimeModel`, the expected
    seconds of :func:`~analysis.epoch_time.expected_epoch_time` without the ``per_sample`` term, which
    no edge changes), ``gap`` a proven bound on how far the
    objective is above the exact optimum (relative: ``(objective - optimum) / objective <=
    gap``; 0 for the exact DP, and for a candidate-grid search whose lower bound met it),
    ``exact`` whether the optimum is proven (``gap == 0``).

    Examples
    --------
    >>> from analysis import LengthHistogram, optimize_edges
    >>> hist = LengthHistogram.from_counts([10, 11, 50, 52], [40, 40, 30, 30])
    >>> plan = optimize_edges(hist, 2, batch_size=4)
    >>> plan.edges, plan.batch_sizes
    ([0, 11, 52], [4, 4])
    >>> round(plan.efficiency, 4), plan.useful_tokens
    (0.9778, 3900)
    >>> plan.to_frame()[["lower_edge", "upper_edge", "samples", "efficiency"]]
            lower_edge  upper_edge  samples  efficiency
    bucket
    0                0          11       80    0.959586
    1               11          52       60    0.982894
    """

    estimate: WasteEstimate
    method: str
    n_buckets_requested: int
    objective: float
    edge_multiple: int = 1
    step_time: StepTimeLike | None = field(default=None, repr=False, compare=False)
    # a proof's bound, not the plan: a sweep and a single search may bound one plan differently
    gap: float = field(default=0.0, compare=False)

    @property
    def exact(self) -> bool:
        """Whether the plan is proven optimal (``gap == 0``)."""
        return self.gap == 0.0

    @property
    def edges(self) -> list[int]:
        """``[e0, ..., eK]``."""
        return list(self.estimate.edges)

    @property
    def batch_sizes(self) -> list[int]:
        """Samples per batch in each bucket."""
        return list(self.estimate.batch_sizes)

    @property
    def rule(self) -> BatchRule:
        """The batch rule the plan was made for."""
        return self.estimate.rule

    @property
    def n_buckets(self) -> int:
        """Buckets in the plan (a rule may give fewer than requested)."""
        return self.estimate.n_buckets

    @property
    def efficiency(self) -> float:
        """Expected useful over padded tokens."""
        return self.estimate.efficiency

    @property
    def padded_tokens(self) -> float:
        """Expected padded tokens of an epoch."""
        return self.estimate.padded_tokens

    @property
    def useful_tokens(self) -> int:
        """Tokens of the data (exact)."""
        return self.estimate.useful_tokens

    @property
    def waste_tokens(self) -> float:
        """Expected padding tokens of an epoch."""
        return self.estimate.waste_tokens

    def to_frame(self) -> pd.DataFrame:
        """One row per bucket (:meth:`WasteEstimate.to_frame`)."""
        return self.estimate.to_frame()

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready plan: the one serialisation (exports add to it, never re-spell it)."""
        return {
            "method": self.method,
            "n_buckets": self.n_buckets,
            "n_buckets_requested": int(self.n_buckets_requested),
            "edges": self.edges,
            "batch_sizes": self.batch_sizes,
            "batch_size": self.rule.batch_size,
            "max_tokens": self.rule.max_tokens,
            "pad_to_multiple_of": self.rule.pad_to_multiple_of,
            "edge_multiple": int(self.edge_multiple),
            "efficiency": float(self.efficiency),
            "padded_tokens": float(self.padded_tokens),
            "useful_tokens": int(self.useful_tokens),
            "objective": float(self.objective),
            "exact": bool(self.exact),
            "gap": float(self.gap),
        }


def _objective(prob: _Problem, edges: list[int], batch_sizes: list[int]) -> float:
    """The optimiser's objective for any ``edges``, exact: per bucket of ``n`` samples
    ``floor(n / B) * B * E[g_B(max of B)] + r * E[g_r(max of r)]`` (``r = n mod B``, the last,
    short batch as it is: :func:`~analysis._order_stats.expected_batch_sum`), plus
    ``per_batch * ceil(n / B)`` (the time objective's per-step seconds); ``g_s`` is the
    per-sample weight in a batch of ``s`` (``weight + B * weight2`` for a full one; see
    :func:`_problem`)."""
    total = []
    for lo, hi, b in zip(*bucket_bounds(prob.lengths, edges), batch_sizes):
        if lo == hi:
            continue
        cum = prob.cum[lo + 1 : hi + 1] - prob.cum[lo]
        n = int(cum[-1])
        if prob.rule.batch_size is None:  # g_s = weight + s * weight2
            g, per_size = prob.weight[lo + 1 : hi + 1], prob.weight2[lo + 1 : hi + 1]
        elif prob.member is not None:  # g_s = weight - (B - s) * member
            per_size = prob.member[lo + 1 : hi + 1]
            g = prob.weight[lo + 1 : hi + 1] - b * per_size
        else:
            g, per_size = prob.weight[lo + 1 : hi + 1], None
        total.append(
            expected_batch_sum(g, cum, b, per_size if per_size is not None and per_size.any() else None)
        )
        if prob.per_batch:
            total.append(prob.per_batch * -(-n // b))
    return math.fsum(total)


def _plan(
    hist: LengthHistogram, prob: _Problem, edges: list[int], method: str, requested: int, gap: float = 0.0
) -> BucketPlan:
    """The plan of validated ``edges`` (covering ``hist``); ``gap``: the proven bound on its
    distance to the optimum (0: optimal)."""
    est = bucketed_estimate(hist, edges, prob.rule)
    return BucketPlan(
        est,
        method,
        requested,
        _objective(prob, edges, list(est.batch_sizes)),
        prob.edge_multiple,
        prob.step_time,
        gap,
    )
