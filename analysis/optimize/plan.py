"""A bucket plan: edges with their batch rule, and what they cost (one result type)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from analysis.batching import BatchRule, bucket_bounds, bucket_index, round_up
from analysis.lengths import LengthHistogram
from analysis.optimize._problem import Problem, StepTimeLike
from analysis.optimize.floors import FloorChoice
from analysis.optimize.gradient import PlanGradient
from analysis.padding.mixing import edges_mixing
from analysis.padding.order_stats import LogProbs, expected_batch_sum
from analysis.padding.waste import WasteEstimate, bucketed_estimate, budget_fill, step_tokens

#: The kinds of :class:`PlanWarning`.
WARNING_KINDS = ("batch_size_one", "longer_than_half_budget", "longer_than_budget")


@dataclass(frozen=True, kw_only=True)
class PlanWarning:
    """One degenerate trait of a token budget's plan, as facts (the engine writes no prose: the
    sentence is :func:`analysis.narrative.plan.describe_warning`).

    ``kind`` is one of :data:`WARNING_KINDS`: ``"batch_size_one"``, buckets whose upper edge is
    above half of ``budget`` (``max_tokens``), so each of their ``samples`` (``tokens`` in all)
    takes a step of its own (``steps``); ``"longer_than_half_budget"``, ``samples`` longer than
    half the budget (no two share a batch, whatever the edges); ``"longer_than_budget"``,
    ``samples`` longer than the budget (each a batch over it).  ``buckets``: the ``(lower,
    upper]`` edges of the buckets concerned, of the plan's ``n_buckets``; ``longest``: the data's
    longest sample, padded to ``multiple`` (the rule's ``pad_to_multiple_of``; lengths are
    compared padded); ``fill``: the budget fill of the ``"batch_size_one"`` buckets' steps.
    """

    kind: str
    budget: int
    n_buckets: int
    buckets: tuple[tuple[int, int], ...]
    samples: int
    multiple: int = 1
    tokens: int = 0
    steps: int = 0
    fill: float = 0.0
    longest: int = 0

    @property
    def limit(self) -> float:
        """The length the samples of this warning exceed (``budget / 2`` or ``budget``; 0 for
        ``"batch_size_one"``)."""
        return {"longer_than_half_budget": self.budget / 2, "longer_than_budget": float(self.budget)}.get(
            self.kind, 0.0
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return {
            "kind": self.kind,
            "budget": self.budget,
            "n_buckets": self.n_buckets,
            "buckets": [list(b) for b in self.buckets],
            "samples": self.samples,
            "multiple": self.multiple,
            "tokens": self.tokens,
            "steps": self.steps,
            "fill": self.fill,
            "longest": self.longest,
        }

    @classmethod
    def from_dict(cls, value: dict[str, Any]) -> PlanWarning:
        """The warning of :meth:`to_dict`'s ``value``."""
        return cls(**{**value, "buckets": tuple(tuple(b) for b in value["buckets"])})


@dataclass(frozen=True, kw_only=True)
class BucketPlan:
    """Bucket edges with their batch rule and their exact expected padding.

    The plan holds its :class:`~analysis.padding.waste.WasteEstimate` (``estimate``) and exposes its
    numbers as properties: ``edges`` (``[e0, ..., eK]``, bucket ``i`` holds
    ``e_i < L <= e_{i+1}``), ``batch_sizes``, ``efficiency``, ``padded_tokens``... ``objective``
    is what the optimiser minimises, named by ``objective_kind``: ``"padding"``, expected
    padded tokens, each bucket's last short batch as it is;
    ``"steps"`` (a token budget's default), the tokens of the steps, ``max_tokens`` each (a
    lone sample padded beyond the budget adds what it passes by: ``step_tokens``), plus the
    padding scaled far below one step to break ties (:func:`~analysis.optimize_edges`);
    ``"time"`` (``step_time``, a :class:`~analysis.StepTimeModel`), the expected seconds of
    :func:`~analysis.timing.epoch.expected_epoch_time` without the ``per_sample`` term, which no
    edge changes.  Under a token
    budget ``budget_fill`` is the share of the steps' tokens that are real (useful over
    ``step_tokens``) beside ``efficiency`` (useful over padded), and ``warnings``
    (:class:`PlanWarning`, facts; the faces word them) name the buckets of batch size 1 and
    the samples longer than half the budget (a plan of such buckets pads nothing yet wastes
    its steps).  ``gap`` a proven bound on how far the
    objective is above the exact optimum (relative: ``(objective - optimum) / objective <=
    gap``; 0 for the exact DP, and for a candidate-grid search whose lower bound met it),
    ``exact`` whether the optimum is proven (``gap == 0``).  ``mixing`` is the exact share of
    the data's length variance a batch keeps (:mod:`analysis.padding.mixing`); ``floor`` says how a
    frontier search picked the plan (:class:`FloorChoice`; None otherwise); ``gradient``, for
    a plan placed with a gradient-noise model (``optimize_edges(..., noise=)``), its figures
    on the gradient axis, the optimiser's design-effect form beside the exact price
    (:class:`~analysis.optimize.gradient.PlanGradient`; None otherwise).  A plan placed for
    time to quality keeps ``objective`` the epoch seconds (``objective_kind`` ``"time"``): what
    it minimised is ``gradient.predicted_time_ratio``.

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
    objective_kind: str = "padding"
    step_tokens: int | None = None
    warnings: tuple[PlanWarning, ...] = ()
    mixing: float = field(default=math.nan, compare=False)
    floor: FloorChoice | None = field(default=None, compare=False)
    gradient: PlanGradient | None = field(default=None, compare=False, repr=False)

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
    def n_batches(self) -> int:
        """Batches of an epoch (exact): the optimizer steps on one rank."""
        return self.estimate.n_batches

    @property
    def budget_fill(self) -> float | None:
        """Under a token budget, useful tokens over ``step_tokens`` (``max_tokens`` per step, a
        lone sample padded beyond the budget counting as it is padded:
        :func:`~analysis.padding.waste.budget_fill`): in ``(0, 1]``; ``None`` under a batch size."""
        return budget_fill(self.useful_tokens, self.step_tokens)

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
            "objective_kind": self.objective_kind,
            "n_batches": int(self.n_batches),
            "step_tokens": self.step_tokens,
            "budget_fill": self.budget_fill,
            "warnings": [w.to_dict() for w in self.warnings],
            "exact": bool(self.exact),
            "gap": float(self.gap),
            "mixing": float(self.mixing),
            "floor": None if self.floor is None else self.floor.to_dict(),
            **({} if self.gradient is None else {"gradient": self.gradient.to_dict()}),
        }


def _objective(
    prob: Problem,
    edges: list[int],
    batch_sizes: list[int],
    memo: dict[Any, Any] | None = None,
    shared: dict[tuple[int, int], LogProbs] | None = None,
) -> float:
    """The optimiser's objective for any ``edges``, exact: per bucket of ``n`` samples
    ``floor(n / B) * B * E[g_B(max of B)] + r * E[g_r(max of r)]`` (``r = n mod B``, the last,
    short batch as it is: :func:`~analysis.padding.order_stats.expected_batch_sum`), plus
    ``per_batch * ceil(n / B)`` (the time objective's per-step seconds); ``g_s`` is the
    per-sample weight in a batch of ``s`` (``weight + B * weight2`` for a full one; see
    :func:`_problem`); ``memo``: each bucket's terms by its bounds, kept across calls on one
    problem (:func:`make_plan`); ``shared``: the buckets' order statistics by their bounds, as
    :func:`~analysis.padding.waste.bucketed_estimate` left them for the same plan."""
    total: list[float] = []
    for lo, hi, b in zip(*bucket_bounds(prob.lengths, edges), batch_sizes):
        if lo == hi:
            continue
        key = ("objective", lo, hi, b)
        terms = None if memo is None else memo.get(key)
        if terms is None:
            terms = _bucket_objective(prob, lo, hi, b, None if shared is None else shared.get((lo, hi)))
            if memo is not None:
                memo[key] = terms
        total.extend(terms)
    return math.fsum(total)


def _bucket_objective(prob: Problem, lo: int, hi: int, b: int, shared: LogProbs | None = None) -> list[float]:
    """The terms of :func:`_objective` of the bucket of distinct lengths ``lo:hi``, batch size
    ``b`` (``shared``: its :data:`~analysis.padding.order_stats.LogProbs`)."""
    cum = prob.cum[lo + 1 : hi + 1] - prob.cum[lo]
    n = int(cum[-1])
    if prob.rule.batch_size is None:  # g_s = weight + s * weight2
        g, per_size = prob.weight[lo + 1 : hi + 1], prob.weight2[lo + 1 : hi + 1]
    elif prob.member is not None:  # g_s = weight - (B - s) * member
        per_size = prob.member[lo + 1 : hi + 1]
        g = prob.weight[lo + 1 : hi + 1] - b * per_size
    else:
        g, per_size = prob.weight[lo + 1 : hi + 1], None
    per_size = per_size if per_size is not None and per_size.any() else None
    total = [expected_batch_sum(g, cum, b, per_size, shared)]
    if prob.per_batch:
        total.append(prob.per_batch * -(-n // b))
    return total


def make_plan(
    hist: LengthHistogram,
    prob: Problem,
    edges: list[int],
    method: str,
    requested: int,
    gap: float = 0.0,
    memo: dict[Any, Any] | None = None,
) -> BucketPlan:
    """The plan of validated ``edges`` (covering ``hist``); ``gap``: the proven bound on its
    distance to the optimum (0: optimal); ``memo``: a dict kept across the plans of one
    ``hist`` and ``prob`` (the frontier's), where each bucket's numbers are computed once.  The
    padding and the objective of a bucket share its order statistics (``hist``'s and ``prob``'s
    distinct lengths are the same: ``prob`` built from ``hist``), kept for this plan only."""
    shared: dict[tuple[int, int], LogProbs] | None = {} if prob.lengths is hist.lengths else None
    est = bucketed_estimate(hist, edges, prob.rule, memo=memo, shared=shared)
    return BucketPlan(
        estimate=est,
        method=method,
        n_buckets_requested=requested,
        objective=_objective(prob, edges, list(est.batch_sizes), memo, shared),
        edge_multiple=prob.edge_multiple,
        step_time=prob.step_time,
        gap=gap,
        objective_kind=prob.objective,
        step_tokens=step_tokens(hist, est.rule, est.n_batches),
        warnings=_warnings(hist, est),
        mixing=edges_mixing(hist, edges, est.batch_sizes, memo),
    )


def _warnings(hist: LengthHistogram, est: WasteEstimate) -> tuple[PlanWarning, ...]:
    """One fact per degenerate trait of a token budget's plan: buckets of batch size 1, samples
    longer than half the budget (no two share a batch), samples longer than the budget (each a
    batch over it: the one way a plan of :meth:`BatchRule.batch_sizes` passes the budget).  With
    ``pad_to_multiple_of`` ``m`` the lengths are the padded ones (the sentences:
    :func:`analysis.narrative.plan.describe_warning`)."""
    budget = est.rule.max_tokens
    if budget is None:
        return ()
    m = est.rule.pad_to_multiple_of
    padded = round_up(hist.lengths, m)
    out = []

    def buckets(which: list[int]) -> tuple[tuple[int, int], ...]:
        return tuple((int(est.edges[i]), int(est.edges[i + 1])) for i in which)

    ones = [i for i, (b, n) in enumerate(zip(est.batch_sizes, est.bucket_samples)) if b == 1 and n]
    if ones:
        inside = np.isin(bucket_index(hist.lengths, list(est.edges)), ones)
        alone = LengthHistogram.from_counts(hist.lengths[inside], hist.counts[inside])
        steps = int(sum(est.bucket_batches[i] for i in ones))
        out.append(
            PlanWarning(
                kind="batch_size_one",
                budget=budget,
                multiple=m,
                n_buckets=est.n_buckets,
                buckets=buckets(ones),
                samples=int(sum(est.bucket_samples[i] for i in ones)),
                tokens=int(sum(est.bucket_tokens[i] for i in ones)),
                steps=steps,
                fill=budget_fill(alone.total_tokens, step_tokens(alone, est.rule, steps)) or 0.0,
                longest=int(padded[-1]),
            )
        )
    for kind, limit in (("longer_than_half_budget", budget / 2), ("longer_than_budget", float(budget))):
        long = padded > limit
        if not long.any():
            continue
        where = sorted(set(bucket_index(hist.lengths[long], list(est.edges)).tolist()))
        out.append(
            PlanWarning(
                kind=kind,
                budget=budget,
                multiple=m,
                n_buckets=est.n_buckets,
                buckets=buckets(where),
                samples=int(sum(hist.counts[long].tolist())),
                longest=int(padded[-1]),
            )
        )
    return tuple(out)
