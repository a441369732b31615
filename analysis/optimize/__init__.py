"""Where bucket edges go: the exact optimum for the real batch rule, and the field's rules.

How it works
------------
Read the private modules in this order: the plain DP the kernel is held to first, then the
path :func:`optimize_edges` takes down to the compiled kernel and back up to a plan.

1. ``_reference``: the textbook DP ``D[k, j] = min_i D[k-1, i] + cost(i, j)`` over a dense
   matrix of bucket costs, in plain NumPy.  The tests and benchmarks hold the kernel to it.
2. ``_problem``: the histogram as prefix arrays (index ``t = 1..m`` is the t-th distinct
   length), the per-sample weight of each objective and the objective's name
   (:data:`OBJECTIVES`, :func:`resolve_objective`).
3. ``_ratios``: ``C(a, B) / C(b, B)``, from a table of ``C(x, B)``, a product, or ``log x!``.
4. ``_costs``: a bucket's *full-batch* cost (each last short batch counted as full) as a
   running sum along its start's row; with a token budget, restarts where ``B`` changes.
5. ``_exact``: a bucket's *exact* cost (the last short batch as it is) and ``O(1)`` lower
   bounds on it from the full-batch cost.
6. ``_budget``: a token budget's restart-free lower bounds (a table of sums under lowered
   batch sizes).
7. ``_layers``: the DP's tables and the push of a row of costs into them (ties to the
   smallest start).
8. ``_lower``: a start's row of lower bounds on the exact costs (for a fixed ``B`` in three
   vectorised steps: ratios, the running sum, the bounds).
9. ``_backward``: the backward pass over those bounds, many starts side by side in one pass.
10. ``_pruned``: the one pruned DP: bounds backwards, an upper bound per ``K`` asked for, then
    exact costs forwards only where a bucket may lie on an optimal plan of such a ``K`` (bit
    for bit the dense DP).
11. ``_kernel``: :func:`~analysis.optimize._kernel.solve_kernel`, the entry point, and the
    dense matrices of exact and full-batch costs between given points.  ``_compile``: the lock
    that keeps two Python threads out of numba's parallel code; ``_ahead``: every kernel
    compiled into numba's cache on disk ahead of its first call (the dev install runs it).
12. ``_search``: which ends the DP may use: every distinct length, or above
    :data:`AUTO_CANDIDATES_ABOVE` a candidate grid refined at full resolution, then proven.
13. ``_cells``: the grid's proof, a DP over cells whose value bounds the exact optimum.
14. ``_frontier``: padding against mixing, the Lagrangian passes over dense matrices, and the
    floors (``min_efficiency``, ``min_mixing``); what one problem's passes share (the matrices,
    each pass once, each plan and bucket evaluated once) lives on its ``Lagrangian``.
    ``_gradient``: the second axis under a gradient-noise model (each bucket's between-bucket
    share, ``1 - ρ``), which replaces the length mixing there (floors:
    ``min_effective_batch``); ``_quality``: edges for time to quality, a walk over the hull of
    (epoch seconds, steps factor) with its proof;
    ``gradient``: :class:`PlanGradient`, what a plan placed with a noise model carries.
15. ``rules``: the field's rules (geometric, equal count, equal tokens, greedy descent).
16. ``plan``: :class:`BucketPlan`, the objective recomputed independently of the DP
    (:func:`~analysis.padding.order_stats.expected_batch_sum`), warnings and mixing.
17. This module: the public functions, which build a :class:`~analysis.BatchRule` once.

Two thresholds decide when a grid replaces every allowed end, for two different costs:
the DP needs ``O(K m)`` memory and about ``O(m)`` exact rows after pruning, so it is exact up
to ``AUTO_CANDIDATES_ABOVE = 20,000`` candidate ends; the frontier stores two dense
``p x p`` matrices that every λ pass reads in full, so it goes to a grid above
``_frontier._EXACT_UP_TO = 2,048`` (64 MB of matrices there).

A new objective touches: ``_problem`` (its name in :data:`OBJECTIVES`, the check of its
combination with ``step_time`` and the rule, its per-sample ``weight`` and ``per_batch`` in
``build_problem``); ``_exact._short`` (the weight of a sample in a short batch, if it depends
on the batch's size); the lower bounds, which must stay below every exact cost
(``_lower.fixed_bound`` and ``fixed_first``, ``_lower.budget_bound``); ``plan``
(``_objective``, the independent evaluation the tests compare with, and the
``objective_kind`` it reports); :func:`sweep_measure` (the measure the gain rule reads); and
``_frontier`` if a floor applies to it.

What it computes
----------------
:func:`optimize_edges` places ``K`` edges by ``method``: ``"optimal"`` is the exact global
minimiser of the expected padded tokens, each bucket's last short batch as it is (``floor(n /
B)`` full batches and one of ``n mod B``: what :func:`analysis.padding.waste.expected_padding` and the
sampler count), by a DP over the distinct lengths (:mod:`analysis.optimize._kernel`; why it is
exact: :mod:`analysis.optimize._pruned`); the others are the rules the field ships
(:mod:`analysis.optimize.rules`).  :func:`sweep_bucket_counts` gives every K in one DP pass
and :func:`recommend_n_buckets` picks K by the gain rule.  Long-context data (tens of
thousands of distinct lengths) can search a candidate grid refined at full resolution
(``candidates``, :mod:`analysis.optimize._search`).  Given ``step_time`` (a fitted
:class:`~analysis.StepTimeModel`) every function minimises expected epoch *time* instead, by
the same exact DP: the per-sample weight becomes the seconds a sample adds to its batch of
``B`` (``per_token * T + (attention + working_set * B) * T**2``, a short batch at its own
size) and each bucket pays ``per_step`` per batch.  A ``K`` whose DP tables would pass 2 GiB
is refused before anything is allocated.

Under a token budget (``max_tokens``, no ``step_time``) the default objective is the tokens
of the steps (``objective="steps"``, see :func:`optimize_edges`): padding alone would score a
plan of one sample per batch as 100 % efficient, each of its steps nearly empty.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import Any

import pandas as pd

from analysis._validate import known_name
from analysis.batching import DEFAULT_MIN_GAIN, BatchRule, as_rule, check_edges
from analysis.lengths import LengthHistogram
from analysis.optimize._frontier import (
    axis_value,
    check_axis_floor,
    floor_plan,
    floor_plans,
    frontier_lambdas,
    frontier_minima,
    frontier_plans,
    frontier_sweep,
    lagrangian,
    reuse_matrices,
)
from analysis.optimize._problem import (
    OBJECTIVES,
    Problem,
    StepTimeLike,
    build_problem,
    resolve_objective,
)
from analysis.optimize._quality import quality_plan
from analysis.optimize._search import (
    AUTO_CANDIDATES_ABOVE,
    check_k,
    edges_to_ends,
    ends_to_edges,
    optimal_ends,
    use_grid,
)
from analysis.optimize.floors import FLOOR_MEASURES, Floor, FloorChoice, as_floor, parse_share
from analysis.optimize.gradient import PlanGradient, plan_gradient
from analysis.optimize.plan import BucketPlan, PlanWarning, make_plan
from analysis.optimize.rules import RULES, baseline_edges
from analysis.timing.noise import GradientNoise, check_noise

__all__ = [
    "AUTO_CANDIDATES_ABOVE",
    "METHODS",
    "OBJECTIVES",
    "BucketPlan",
    "FLOOR_MEASURES",
    "Floor",
    "parse_share",
    "FloorChoice",
    "PlanGradient",
    "PlanWarning",
    "as_floor",
    "StepTimeLike",
    "evaluate_edges",
    "floor_plans",
    "frontier_lambdas",
    "frontier_minima",
    "frontier_plans",
    "frontier_sweep",
    "reuse_matrices",
    "optimal_plans",
    "optimize_edges",
    "recommend_n_buckets",
    "sweep_bucket_counts",
    "sweep_measure",
]

#: Every ``method`` :func:`optimize_edges` knows.
METHODS = ("optimal", *RULES)


def _check_method(method: str) -> None:
    known_name(method, METHODS, "method")


def _check_floor(floor: Floor | None, method: str, prob: Problem, axis: str = "mixing") -> Floor | None:
    """The floor, checked against the method, the frontier's second ``axis`` (``"gradient"``
    with a noise model) and the objective it floors (None: no floor)."""
    if floor is None:
        return None
    if method != "optimal":
        raise ValueError(
            f"{floor.keyword} places edges on the frontier: method must be 'optimal', got {method!r}"
        )
    check_axis_floor(floor, axis, prob.rule)
    if floor.measure in ("mixing", "effective_batch"):
        return floor
    if prob.objective == "time":
        on_axis = "min_mixing" if axis == "mixing" else "min_effective_batch"
        raise ValueError(f"{floor.keyword} floors the objective, which step_time makes time: give {on_axis}")
    want = "budget_fill" if prob.objective == "steps" else "efficiency"
    if floor.measure != want:
        raise ValueError(
            "under a token budget the edges are placed for budget fill (the steps objective): give "
            "min_budget_fill, or objective='padding' to floor padding efficiency"
            if want == "budget_fill"
            else "min_budget_fill floors the steps objective of a token budget (max_tokens): give "
            "min_efficiency here"
        )
    return floor


def optimize_edges(
    hist: LengthHistogram,
    n_buckets: int,
    rule: BatchRule | None = None,
    *,
    batch_size: int | None = None,
    max_tokens: int | None = None,
    pad_to_multiple_of: int | None = None,
    method: str = "optimal",
    edge_multiple: int = 1,
    candidates: int | str | None = "auto",
    step_time: StepTimeLike | None = None,
    objective: str | None = None,
    min_efficiency: float | None = None,
    min_budget_fill: float | None = None,
    min_mixing: float | None = None,
    floor: Floor | None = None,
    noise: GradientNoise | None = None,
    min_effective_batch: float | None = None,
) -> BucketPlan:
    """Bucket edges for ``hist`` under a batch rule: the exact optimum or a field rule.

    Parameters
    ----------
    hist : LengthHistogram
        The data.
    n_buckets : int
        Number of buckets ``K`` (at least 1, at most the number of distinct lengths, or of
        possible edges with ``edge_multiple``).
    rule : BatchRule, optional
        The batch rule; or give it as ``batch_size=`` / ``max_tokens=`` (exactly one) and
        ``pad_to_multiple_of=``.
    method : {"optimal", "geometric", "equal_count", "equal_tokens", "greedy"}
        ``"optimal"``: the exact minimiser of expected padded tokens; the others: see
        :mod:`analysis.optimize.rules`.
    edge_multiple : int, default 1
        Edges are multiples of this (each observed length rounded up is a candidate edge);
        the last edge is the longest length rounded up.
    candidates : None, "auto" or int, default "auto"
        ``"optimal"`` only.  ``None``: exact DP over every candidate edge.  An int ``q``: DP
        on a grid of about ``q`` candidates, refined at full resolution around the chosen
        edges, then a lower bound on the exact optimum (a DP over the cells between
        candidates, split where its own optimum needs them) proves the plan optimal or
        replaces it by the better plan it finds, or else bounds the distance:
        ``plan.gap`` (0 and ``plan.exact`` when proven); ``"auto"``: exact up to
        :data:`AUTO_CANDIDATES_ABOVE` candidate edges, a 1024-grid above.
    step_time : StepTimeModel, optional
        Minimise the expected epoch time under this fitted model instead of padding
        (``"optimal"`` and ``"greedy"``; see the module docstring).  The plan keeps it.
    objective : {None, "padding", "steps", "time"}
        What ``"optimal"`` (and ``"greedy"``) minimise.  ``"time"``: the expected epoch
        seconds, with ``step_time`` and only with it (``None`` picks it there; any other
        name beside ``step_time`` is an error).  ``"padding"``: the expected padded tokens.
        ``"steps"``, a token budget's default (``None`` picks it under ``max_tokens``,
        ``"padding"`` under ``batch_size``): the tokens of an epoch's steps.  A step is
        sized for and occupies the whole budget, so it costs ``max_tokens`` = its padded
        tokens + the budget it leaves unused; an epoch costs
        ``max_tokens`` times its steps, ``sum ceil(n_i / B_i)`` over the buckets (exact, no
        expectation), and a sample padded beyond the budget (alone in its batch) adds what it
        passes it by.  Padding alone is blind to the unused part: it isolates long samples in
        buckets of batch size 1, which pad nothing and fill a fraction of each step.  Among
        plans of equal steps the one with less padding wins: the padding is added scaled by a
        power of two that keeps it below a quarter step for any plan, so it decides only
        ties (exactly while the totals stay below 2**53).  The plan's ``budget_fill`` is the
        matching measure (useful over the steps' tokens), ``efficiency`` still useful over
        padded.  In the DP this is the per-batch cost ``max_tokens`` (as the time
        objective's ``per_step``) with a per-sample weight of the scaled padded length.
    min_efficiency, min_budget_fill, min_mixing : float, optional
        At most one, or ``floor``: a floor (:class:`Floor`) on the padding-mixing frontier of
        ``K``-bucket plans (:mod:`analysis.optimize._frontier`; ``"optimal"`` only).
        ``min_efficiency=x`` (the padding objective): the plan with the most mixing whose
        efficiency is at least ``x``; ``min_budget_fill=x`` (a token budget's steps
        objective): the most mixing whose budget fill is at least ``x``; ``min_mixing=y``: the
        plan with the least objective (the most efficiency, budget fill, or the least time)
        whose mixing is at least ``y``.  Exact: the hull of the Lagrangian DP brackets the
        floor and an exact search of the gap between its vertices
        (:mod:`analysis.optimize._labels`) finds the best plan; where that search would pass
        its work limit the hull vertex stands with the hull's proven bound.  ``plan.floor``
        (:class:`FloorChoice`) says which floor, whether the plan is proven best
        (``exact``), the bound and the hull vertices around it.
    floor : Floor, optional
        The floor as one value (instead of a ``min_*`` keyword).
    noise : GradientNoise, optional
        A fitted gradient-noise model (:func:`analysis.timing.noise.measure_gradient_noise`):
        the frontier's second axis becomes the gradient's between-bucket share ``ρ``
        (:mod:`analysis.optimize._gradient`, exact given the model's bins; lengths outside
        them are priced with the first or last bin) in place of the length mixing, and the
        plan carries ``plan.gradient`` (:class:`PlanGradient`: the design-effect form beside
        the exact price of :func:`~analysis.timing.noise.plan_noise`).  ``method="optimal"``
        and ``batch_size`` only.  With ``step_time`` and no floor the edges minimise the
        predicted **time to the same loss** over a shuffle's: epoch seconds times ``(1 /
        B_noise + (1 + (B - 1) ρ) / B)`` (Kish's design effect, every batch counted as full),
        the exact minimiser over every ``K``-bucket plan (:mod:`analysis.optimize._quality`:
        the vertices of a hull, why they suffice; ``plan.gradient.predicted_time_ratio`` is
        what it minimised, ``plan.gradient.time_ratio`` the exact price of the same plan).
        With a floor: ``min_effective_batch=x``, the least objective (padding, or time with
        ``step_time``) whose share of the batch kept, ``1 / (1 + (B - 1) ρ)``, is at least
        ``x``; ``min_efficiency=x``, the least ``ρ`` (the most effective batch) whose
        efficiency is at least ``x``; exact as the mixing floors.  Without ``step_time`` and
        without a floor it is refused: time to quality needs a clock (give
        ``StepTimeModel(per_token=1.0)`` to price padded tokens), and a product of padding and
        noise would be a proxy of a proxy.
    min_effective_batch : float, optional
        The floor on the effective batch share (with ``noise``; see above).

    Returns
    -------
    BucketPlan

    Examples
    --------
    >>> from analysis import LengthHistogram
    >>> hist = LengthHistogram.from_counts([1, 2, 3, 9, 10], [5, 5, 5, 5, 5])
    >>> optimize_edges(hist, 2, batch_size=4).edges
    [0, 3, 10]

    Under a token budget the steps decide.  Padding alone pads nothing by running 20 of the
    25 samples one per step, each step a fraction of the budget of 16:

    >>> bare = optimize_edges(hist, 2, max_tokens=16, objective="padding")
    >>> bare.edges, bare.batch_sizes, bare.efficiency, bare.n_batches, round(bare.budget_fill, 3)
    ([0, 1, 10], [16, 1], 1.0, 21, 0.372)
    >>> plan = optimize_edges(hist, 2, max_tokens=16)
    >>> plan.edges, plan.batch_sizes, round(plan.efficiency, 3), plan.n_batches, round(plan.budget_fill, 3)
    ([0, 3, 10], [5, 1], 0.901, 13, 0.601)
    >>> w = plan.warnings[0]  # the sentence: analysis.narrative.plan.describe_warning
    >>> w.kind, w.buckets, w.samples, w.steps
    ('batch_size_one', ((3, 10),), 10, 10)
    >>> optimize_edges(hist, 2, batch_size=4, method="equal_count").edges
    [0, 3, 10]
    >>> optimize_edges(hist, 6, batch_size=4)
    Traceback (most recent call last):
    ...
    ValueError: n_buckets = 6 exceeds the 5 distinct lengths
    >>> plan = optimize_edges(hist, 2, batch_size=4, min_mixing=0.2)
    >>> plan.edges, round(plan.mixing, 3), plan.floor.measure, plan.floor.exact  # in a hull gap
    ([0, 2, 10], 0.429, 'mixing', True)
    """
    rule = as_rule(rule, batch_size=batch_size, max_tokens=max_tokens, pad_to_multiple_of=pad_to_multiple_of)
    prob = build_problem(hist, rule, edge_multiple, step_time, resolve_objective(rule, step_time, objective))
    _check_method(method)
    k = check_k(prob, n_buckets)
    wanted = as_floor(
        floor,
        min_efficiency=min_efficiency,
        min_budget_fill=min_budget_fill,
        min_mixing=min_mixing,
        min_effective_batch=min_effective_batch,
    )
    if noise is not None:
        return _noise_plan(hist, prob, k, method, _check_floor(wanted, method, prob, "gradient"), noise)
    if (checked := _check_floor(wanted, method, prob)) is not None:
        return floor_plan(hist, prob, k, checked)
    if method == "optimal":
        ends, gaps = optimal_ends(prob, [k], use_grid(prob, candidates))
        return make_plan(hist, prob, ends_to_edges(prob, ends[k]), method, k, gaps[k])
    return make_plan(hist, prob, baseline_edges(prob, method, k), method, k)


def _noise_plan(
    hist: LengthHistogram, prob: Problem, k: int, method: str, floor: Floor | None, noise: GradientNoise
) -> BucketPlan:
    """:func:`optimize_edges` with a noise model: a floor on the gradient axis, or time to
    quality (the refusals the docstring names)."""
    check_noise(noise)
    if method != "optimal":
        raise ValueError(f"noise places edges on the gradient axis: method must be 'optimal', got {method!r}")
    if prob.rule.batch_size is None:
        raise ValueError(
            "time-to-quality edges need batch_size: under a token budget each bucket has its own batch size"
        )
    if floor is None:
        if prob.step_time is None:
            raise ValueError(
                "noise places edges for time to quality, which needs step_time (a StepTimeModel); "
                "or give min_effective_batch or min_efficiency"
            )
        return quality_plan(hist, prob, k, noise)
    lag = lagrangian(hist, prob, noise)
    plan = floor_plan(hist, prob, k, floor, lag)
    rho = 1.0 - axis_value(lag, edges_to_ends(prob, plan.edges))
    figures = plan_gradient(hist, plan.edges, prob.rule, noise, rho, prob.step_time, exact=lag.exact)
    return replace(plan, gradient=figures)


def evaluate_edges(
    hist: LengthHistogram,
    edges: Sequence[int],
    rule: BatchRule | None = None,
    *,
    method: str = "given",
    step_time: StepTimeLike | None = None,
    batch_size: int | None = None,
    max_tokens: int | None = None,
    pad_to_multiple_of: int | None = None,
    objective: str | None = None,
) -> BucketPlan:
    """A :class:`BucketPlan` for edges you already have (a published config, say); its
    ``objective`` is that of :func:`optimize_edges` with the same ``step_time`` and
    ``objective``.

    Examples
    --------
    >>> from analysis import LengthHistogram
    >>> hist = LengthHistogram.from_counts([1, 2, 3, 9, 10], [5, 5, 5, 5, 5])
    >>> plan = evaluate_edges(hist, [0, 5, 10], batch_size=4)
    >>> plan.method, plan.n_buckets, plan.useful_tokens
    ('given', 2, 125)
    """
    rule = as_rule(rule, batch_size=batch_size, max_tokens=max_tokens, pad_to_multiple_of=pad_to_multiple_of)
    prob = build_problem(hist, rule, 1, step_time, resolve_objective(rule, step_time, objective))
    edges = check_edges(edges, hist)
    return make_plan(hist, prob, edges, method, len(edges) - 1)


def optimal_plans(
    hist: LengthHistogram,
    n_buckets: Iterable[int],
    rule: BatchRule,
    *,
    edge_multiple: int = 1,
    candidates: int | str | None = "auto",
    step_time: StepTimeLike | None = None,
    objective: str | None = None,
) -> dict[int, BucketPlan]:
    """The optimal plan (as :func:`optimize_edges` places it) for every ``K`` of
    ``n_buckets``, from one DP pass, by ``K``.

    Examples
    --------
    >>> from analysis import LengthHistogram
    >>> hist = LengthHistogram.from_counts([1, 2, 3, 9, 10], [5, 5, 5, 5, 5])
    >>> {k: p.edges for k, p in optimal_plans(hist, [1, 2], BatchRule(4)).items()}
    {1: [0, 10], 2: [0, 3, 10]}
    """
    rule = as_rule(rule)
    prob = build_problem(hist, rule, edge_multiple, step_time, resolve_objective(rule, step_time, objective))
    ks = sorted({check_k(prob, k) for k in n_buckets})
    if not ks:
        raise ValueError("n_buckets is empty")
    return _optimal(hist, prob, ks, candidates)


def _optimal(hist: LengthHistogram, prob: Problem, ks: list[int], candidates: Any) -> dict[int, BucketPlan]:
    """The optimal plan of each ``K`` in ``ks``, priced through one memo (a bucket that several
    ``K`` share, and the mixing's prefix sums, computed once: the same numbers)."""
    ends, gaps = optimal_ends(prob, ks, use_grid(prob, candidates))
    memo: dict[Any, Any] = {}
    return {k: make_plan(hist, prob, ends_to_edges(prob, ends[k]), "optimal", k, gaps[k], memo) for k in ks}


# Deliberately the keywords of optimal_plans above: both are public entry points, so both take
# the batch rule (a BatchRule or its keywords), the edge grid and the objective, spelled alike.
def sweep_bucket_counts(
    hist: LengthHistogram,
    n_buckets: Iterable[int] = range(1, 17),
    methods: Sequence[str] = METHODS,
    rule: BatchRule | None = None,
    *,
    batch_size: int | None = None,
    max_tokens: int | None = None,
    pad_to_multiple_of: int | None = None,
    edge_multiple: int = 1,
    candidates: int | str | None = "auto",
    step_time: StepTimeLike | None = None,
    objective: str | None = None,
) -> pd.DataFrame:
    """Efficiency against the number of buckets for each method (a tidy frame).

    The ``"optimal"`` rows for every ``K`` come from one DP pass.  Columns: ``n_buckets``
    (requested), ``method``, ``efficiency``, ``padded_tokens``, ``edges``, ``buckets`` (after
    repeated edges collapse), ``objective`` (expected seconds with ``step_time``, which then
    places the optimal edges for time as :func:`optimize_edges` does; ``objective=`` as
    there), ``objective_kind``, ``budget_fill`` (NaN under a batch size).

    Examples
    --------
    >>> from analysis import LengthHistogram
    >>> hist = LengthHistogram.from_counts([1, 2, 3, 9, 10], [5, 5, 5, 5, 5])
    >>> sweep_bucket_counts(hist, [1, 2], ["optimal", "geometric"], batch_size=4)[
    ...     ["n_buckets", "method", "efficiency", "edges"]]
       n_buckets     method  efficiency       edges
    0          1    optimal    0.568539     [0, 10]
    1          1  geometric    0.568539     [0, 10]
    2          2    optimal    0.882657  [0, 3, 10]
    3          2  geometric    0.882657  [0, 3, 10]
    """
    rule = as_rule(rule, batch_size=batch_size, max_tokens=max_tokens, pad_to_multiple_of=pad_to_multiple_of)
    prob = build_problem(hist, rule, edge_multiple, step_time, resolve_objective(rule, step_time, objective))
    ks = [check_k(prob, k) for k in n_buckets]
    if not ks:
        raise ValueError("n_buckets is empty")
    methods = list(methods)
    for method in methods:
        _check_method(method)
    optimal = _optimal(hist, prob, sorted(set(ks)), candidates) if "optimal" in methods else {}
    rows = []
    for k in ks:
        for method in methods:
            if method == "optimal":
                plan = optimal[k]
            else:
                plan = make_plan(hist, prob, baseline_edges(prob, method, k), method, k)
            rows.append(
                {
                    "n_buckets": k,
                    "method": method,
                    "efficiency": plan.efficiency,
                    "padded_tokens": plan.padded_tokens,
                    "edges": plan.edges,
                    "buckets": plan.n_buckets,
                    "objective": plan.objective,
                    "gap": plan.gap if method == "optimal" else math.nan,
                    "objective_kind": plan.objective_kind,
                    "budget_fill": math.nan if plan.budget_fill is None else plan.budget_fill,
                }
            )
    return pd.DataFrame(rows)


def recommend_n_buckets(
    sweep: pd.DataFrame, min_gain: float = DEFAULT_MIN_GAIN, method: str = "optimal"
) -> int:
    """Smallest ``K`` after which one more bucket gains less than ``min_gain`` of the measure
    the plans were optimised for: ``efficiency``, or ``budget_fill`` for a sweep of the steps
    objective (a token budget's default: there every K may pad nothing, and the steps are
    what K changes).  ``K = 1`` only when one bucket is truly best: when some K of the sweep
    beats it by ``min_gain``, the rule goes on from ``K = 2``.

    ``sweep`` is a :func:`sweep_bucket_counts` frame; the largest ``K`` in it is returned
    when every step gains at least ``min_gain``.

    Examples
    --------
    >>> sweep = pd.DataFrame({"n_buckets": [1, 2, 3, 4], "method": ["optimal"] * 4,
    ...                       "efficiency": [0.50, 0.70, 0.705, 0.74]})
    >>> recommend_n_buckets(sweep, min_gain=0.01)
    2
    >>> flat_start = sweep.assign(efficiency=[0.50, 0.505, 0.70, 0.705])
    >>> recommend_n_buckets(flat_start, min_gain=0.01)  # K = 2 gains little, K = 3 much
    3
    """
    if isinstance(min_gain, bool) or not (
        isinstance(min_gain, int | float) and math.isfinite(min_gain) and min_gain >= 0
    ):
        raise ValueError(f"min_gain must be a finite number >= 0, got {min_gain!r}")
    rows = sweep[sweep["method"] == method].sort_values("n_buckets")
    if rows.empty:
        raise ValueError(f"the sweep has no rows for method {method!r}")
    ks = rows["n_buckets"].tolist()
    eff = rows[sweep_measure(rows)].tolist()
    for i in range(len(ks) - 1):
        if eff[i + 1] - eff[i] < min_gain and not (ks[i] == 1 and max(eff) - eff[i] >= min_gain):
            return int(ks[i])
    return int(ks[-1])


def sweep_measure(sweep: pd.DataFrame) -> str:
    """The column of a :func:`sweep_bucket_counts` frame that the gain rule reads and a face
    shows for K: ``"budget_fill"`` where its plans minimise the steps (a token budget's
    default objective), else ``"efficiency"``.

    Examples
    --------
    >>> from analysis import LengthHistogram
    >>> hist = LengthHistogram.from_counts([1, 2, 3, 9, 10], [5, 5, 5, 5, 5])
    >>> sweep_measure(sweep_bucket_counts(hist, [1, 2], ["optimal"], max_tokens=16))
    'budget_fill'
    """
    kinds = sweep["objective_kind"] if "objective_kind" in sweep.columns else pd.Series([], dtype=object)
    return "budget_fill" if len(kinds) and (kinds == "steps").all() else "efficiency"
