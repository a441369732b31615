"""A bucket plan: edges with their batch rule, and what they cost (one result type)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from analysis.batching import BatchRule, bucket_bounds, bucket_index
from analysis.lengths import LengthHistogram
from analysis.optimize._problem import Problem, StepTimeLike
from analysis.padding.mixing import edges_mixing
from analysis.padding.order_stats import expected_batch_sum
from analysis.padding.waste import WasteEstimate, bucketed_estimate, step_tokens
from analysis.tables import format_percent


@dataclass(frozen=True)
class FloorChoice:
    """How a plan was picked on the padding-mixing frontier (``optimize_edges(min_efficiency=)``
    or ``min_mixing=``).

    ``floor`` names it, ``value`` is its value.  ``below`` and ``above`` are the
    ``(efficiency, mixing)`` of the two hull vertices of the frontier of ``K``-bucket plans that
    the floor falls between (the plan is one of them: ``below`` for ``min_efficiency``, the
    vertex with more padding and more mixing ``above`` for ``min_mixing``).  ``bound`` is proven
    from them: for ``min_efficiency`` the most mixing any ``K``-bucket plan whose objective
    meets the floor can keep, for ``min_mixing`` the least objective any plan keeping the
    floor's mixing can have; ``exact`` when the plan reaches it (the best plan, proven).
    ``passes``: DP passes (one per ``lambda``) the search ran.
    """

    floor: str
    value: float
    bound: float
    exact: bool
    below: tuple[float, float]
    above: tuple[float, float]
    passes: int

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return {
            "floor": self.floor,
            "value": float(self.value),
            "bound": float(self.bound),
            "exact": bool(self.exact),
            "below": [float(x) for x in self.below],
            "above": [float(x) for x in self.above],
            "passes": int(self.passes),
        }


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
    ``step_tokens``) beside ``efficiency`` (useful over padded), and ``warnings`` name, one
    line each, the buckets of batch size 1 and the samples longer than half the budget (a
    plan of such buckets pads nothing yet wastes its steps).  ``gap`` a proven bound on how far the
    objective is above the exact optimum (relative: ``(objective - optimum) / objective <=
    gap``; 0 for the exact DP, and for a candidate-grid search whose lower bound met it),
    ``exact`` whether the optimum is proven (``gap == 0``).  ``mixing`` is the exact share of
    the data's length variance a batch keeps (:mod:`analysis.padding.mixing`); ``floor`` says how a
    frontier search picked the plan (:class:`FloorChoice`; None otherwise).

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
    warnings: tuple[str, ...] = ()
    mixing: float = field(default=math.nan, compare=False)
    floor: FloorChoice | None = field(default=None, compare=False)

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
        lone sample beyond the budget counting as it is padded): in ``(0, 1]``; ``None`` under
        a batch size."""
        return None if self.step_tokens is None else self.useful_tokens / self.step_tokens

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
            "warnings": list(self.warnings),
            "exact": bool(self.exact),
            "gap": float(self.gap),
            "mixing": float(self.mixing),
            "floor": None if self.floor is None else self.floor.to_dict(),
        }


def _objective(prob: Problem, edges: list[int], batch_sizes: list[int]) -> float:
    """The optimiser's objective for any ``edges``, exact: per bucket of ``n`` samples
    ``floor(n / B) * B * E[g_B(max of B)] + r * E[g_r(max of r)]`` (``r = n mod B``, the last,
    short batch as it is: :func:`~analysis.padding.order_stats.expected_batch_sum`), plus
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


def make_plan(
    hist: LengthHistogram, prob: Problem, edges: list[int], method: str, requested: int, gap: float = 0.0
) -> BucketPlan:
    """The plan of validated ``edges`` (covering ``hist``); ``gap``: the proven bound on its
    distance to the optimum (0: optimal)."""
    est = bucketed_estimate(hist, edges, prob.rule)
    return BucketPlan(
        estimate=est,
        method=method,
        n_buckets_requested=requested,
        objective=_objective(prob, edges, list(est.batch_sizes)),
        edge_multiple=prob.edge_multiple,
        step_time=prob.step_time,
        gap=gap,
        objective_kind=prob.objective,
        step_tokens=step_tokens(hist, est.rule, est.n_batches),
        warnings=_warnings(hist, est),
        mixing=edges_mixing(hist, edges, est.batch_sizes),
    )


def _tokens(value: float) -> str:
    """A token count that may be a half (``max_tokens / 2``): ``4,096`` or ``4,095.5``."""
    return f"{value:,.0f}" if value == int(value) else f"{value:,.1f}"


def _bucket_names(est: WasteEstimate, which: list[int]) -> str:
    """``(lo, hi]`` of the buckets ``which`` (the first four, then how many more)."""
    names = [f"({est.edges[i]:,}, {est.edges[i + 1]:,}]" for i in which[:4]]
    more = f" and {len(which) - 4} more" if len(which) > 4 else ""
    return ", ".join(names) + more


def _warnings(hist: LengthHistogram, est: WasteEstimate) -> tuple[str, ...]:
    """One line per degenerate trait of a token budget's plan: buckets of batch size 1, samples
    longer than half the budget (no two share a batch), samples longer than the budget."""
    budget = est.rule.max_tokens
    if budget is None:
        return ()
    out = []
    ones = [i for i, (b, n) in enumerate(zip(est.batch_sizes, est.bucket_samples)) if b == 1 and n]
    if ones:
        n = sum(est.bucket_samples[i] for i in ones)
        tokens = sum(est.bucket_tokens[i] for i in ones)
        steps = sum(est.bucket_batches[i] for i in ones)
        fill = format_percent(min(1.0, tokens / (steps * budget)), 1)
        its = "its" if len(ones) == 1 else "their"
        out.append(
            f"batch size 1 in {len(ones)} of {est.n_buckets} bucket{'s' if est.n_buckets != 1 else ''} "
            f"{_bucket_names(est, ones)} (upper edge above max_tokens / 2 = {_tokens(budget / 2)}): "
            f"{its} {n:,} sample{'s' if n != 1 else ''} take{'s' if n == 1 else ''} a step each, "
            f"filling {fill} of the {budget:,}-token budget"
        )
    for limit, what in ((budget / 2, "half of max_tokens"), (budget, "max_tokens")):
        long = hist.lengths > limit
        if not long.any():
            continue
        count = sum(hist.counts[long].tolist())
        where = sorted(set(bucket_index(hist.lengths[long], list(est.edges)).tolist()))
        plural = "s are" if count != 1 else " is"
        consequence = (
            "no two fit one batch, so whatever the edges they train one per step"
            if limit < budget
            else "each is a batch over the budget (clip them with max_len or raise max_tokens)"
        )
        out.append(
            f"{count:,} sample{plural} longer than {what} {budget:,} ({_tokens(limit)} tokens; the "
            f"longest has {hist.max:,}), in bucket{'s' if len(where) != 1 else ''} "
            f"{_bucket_names(est, where)}: {consequence}"
        )
    return tuple(out)
