"""Padding against mixing: the Lagrangian DP, its hull and the floors.

A bucket's mixing share (:func:`analysis.padding.mixing.bucket_mixing`: ``w SS / ((n - 1) N S**2)``)
is additive over buckets like its padding, so the exact DP minimises ``objective - lam *
mixing`` as it minimises the objective.  The matrices of every bucket between two allowed
ends are computed once per problem: its exact cost (the exact rows of
:func:`~analysis.optimize._exact._exact_row`, each bucket's last short batch as it is) and its
mixing sum from prefix sums of ``count``, ``count * d`` and ``count * d**2`` (``d`` the length
less the mean length, so the sums stay small where a bucket sits far from the mean).  Each
``lam`` is then one pass of the DP over ``costs - lam * mixing``, which gives every ``K`` at
once (a floor's search runs tens of passes on the same matrices).

For ``lam > 0`` a minimiser is Pareto-optimal among all ``K``-bucket plans (no plan has less
objective and more mixing); sweeping ``lam`` finds the vertices of the frontier's convex hull.
Between two hull neighbours ``P`` and ``Q`` that both minimise at ``lam* = (f_Q - f_P) /
(g_Q - g_P)`` every plan ``Z`` has ``f_Z - lam* g_Z >= f_P - lam* g_P``: that is the bound a
floor reports when it falls in a gap (:func:`_floor_search`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numba
import numpy as np

from analysis.batching import BatchRule
from analysis.lengths import LengthHistogram
from analysis.optimize._costs import INF, Arrays
from analysis.optimize._exact import exact_arrays
from analysis.optimize._problem import Problem, StepTimeLike, build_problem, resolve_objective
from analysis.optimize._pruned import exact_matrix
from analysis.optimize._search import candidate_grid, check_k, ends_to_edges
from analysis.optimize.plan import BucketPlan, FloorChoice, make_plan
from analysis.padding.mixing import length_variance

# Above this many allowed ends the frontier's DP runs on a candidate grid of _GRID ends.
_EXACT_UP_TO = 2_048  # (not AUTO_CANDIDATES_ABOVE: the matrices are p x p; see the package docstring)
_GRID = 1024
# Relative tolerance of "strictly below the hull line" (float arithmetic of the DP).
_TOL = 1e-12
# Most DP passes of one floor search.
_MAX_PASSES = 60


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _mixing_matrix(
    data: Arrays, points: np.ndarray, p1: np.ndarray, p2: np.ndarray
) -> np.ndarray:  # pragma: no cover - compiled
    """``out[c, a]`` (transposed: a column's starts side by side) = the mixing sum ``w SS /
    (n - 1)`` of bucket ``(points[a], points[c]]`` (0 where it has fewer than two samples or
    batches of one, or no spread; ``w = n - 1`` when the last batch holds one sample)."""
    cum, size = data.cum, data.size
    p = points.size
    out = np.zeros((p, p))
    for c in range(1, p):
        j = points[c]
        b = size[j]
        for a in range(c):
            i = points[a]
            n = cum[j] - cum[i]
            if n < 2 or b < 2:
                continue
            w = n - 1 if n % b == 1 else n
            s1 = p1[j] - p1[i]
            ss = (p2[j] - p2[i]) - s1 * s1 / n
            if ss > 0.0:
                out[c, a] = w * ss / (n - 1)
    return out


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _solve_points(costs: np.ndarray, n_buckets: int) -> tuple[np.ndarray, np.ndarray]:  # pragma: no cover
    """The DP over the points: ``best[k, c]`` = least sum of ``k`` buckets covering
    ``(points[0], points[c]]``, ``costs[c, a]`` the cost of bucket ``(points[a], points[c]]``
    (transposed, so a column's starts are contiguous); ``arg[k, c]`` the start's index, the
    smallest on a tie (strict ``<`` in ascending order, as the padding DP)."""
    p = costs.shape[0]
    best = np.full((n_buckets + 1, p), INF)
    arg = np.zeros((n_buckets + 1, p), np.int64)
    best[0, 0] = 0.0
    for k in range(1, n_buckets + 1):
        prev = best[k - 1]
        for c in range(k, p):
            row = costs[c]
            bv = INF
            ba = 0
            for a in range(k - 1, c):
                v = prev[a] + row[a]
                if v < bv:
                    bv = v
                    ba = a
            best[k, c] = bv
            arg[k, c] = ba
    return best, arg


@dataclass(frozen=True)
class _Lagrangian:
    """What every pass of one problem shares: the matrices of exact costs and mixing sums."""

    prob: Problem
    exact: bool  # every allowed end searched (not a candidate grid)
    points: np.ndarray  # 0 and the ends: the DP's starts and ends
    costs: np.ndarray  # costs[c, a]: the exact objective of bucket (points[a], points[c]]
    mixing: np.ndarray  # mixing[c, a]: its mixing sum w SS / (n - 1) (a share once over scale)
    scale: float  # N S**2: a plan's mixing is its sum of w SS / (n - 1) over this


def _lagrangian(hist: LengthHistogram, prob: Problem) -> _Lagrangian:
    """The matrices of ``prob`` for the λ-DP, each bucket's exact cost (the exact rows of
    :mod:`analysis.optimize._exact`) and mixing sum between every two points, computed once
    for every pass; the points are the allowed ends, or a candidate grid of ``_GRID`` ends
    above ``_EXACT_UP_TO`` (the matrices are quadratic in the points)."""
    data, short = exact_arrays(prob)
    exact = prob.ends.size <= _EXACT_UP_TO
    ends = prob.ends if exact else candidate_grid(prob, _GRID)
    points = np.concatenate([np.zeros(1, np.int64), np.asarray(ends, np.int64)])
    counts = np.diff(prob.cum).astype(float)
    d = prob.lengths.astype(float) - hist.mean
    p1 = np.zeros(prob.m + 1)
    p2 = np.zeros(prob.m + 1)
    np.cumsum(counts * d, out=p1[1:])
    np.cumsum(counts * d * d, out=p2[1:])
    scale = hist.n_samples * length_variance(hist)
    costs = np.ascontiguousarray(exact_matrix(data, short, points).T)
    return _Lagrangian(prob, exact, points, costs, _mixing_matrix(data, points, p1, p2), scale)


def _pass(lag: _Lagrangian, k_max: int, lam: float) -> dict[int, list[int]]:
    """Bucket ends (ascending, last ``m``) minimising ``objective - lam * mixing`` for every
    ``K <= k_max`` (one DP pass over the matrices)."""
    per = lam / lag.scale if lag.scale > 0 else 0.0
    costs = lag.costs - per * lag.mixing if per != 0.0 else lag.costs
    best, arg = _solve_points(costs, min(k_max, lag.points.size - 1))
    last = lag.points.size - 1
    out = {}
    for k in range(1, min(k_max, last) + 1):
        if np.isfinite(best[k, last]):
            ends, c = [], last
            for layer in range(k, 0, -1):
                ends.append(int(lag.points[c]))
                c = int(arg[layer, c])
            out[k] = ends[::-1]
    return out


def _edges(lag: _Lagrangian, ends: list[int]) -> list[int]:
    return ends_to_edges(lag.prob, ends)


@dataclass(frozen=True)
class _Point:
    """A plan on the ``(objective, mixing)`` plane."""

    edges: tuple[int, ...]
    objective: float
    mixing: float


def _floor_search(
    lag: _Lagrangian,
    k: int,
    point: object,
    feasible: object,
    low: _Point,
    high: _Point,
) -> tuple[_Point, _Point, float, int]:
    """The hull edge of ``K = k`` that a floor falls in: ``low`` (least objective) is
    infeasible or feasible, ``high`` (most mixing) the other; ``point(ends)`` evaluates ends,
    ``feasible(p)`` the floor.  Returns the hull neighbours ``(P, Q)`` (``P`` the one with
    less mixing), the slope ``lam*`` between them (inf when they are one point) and the DP
    passes run."""
    assert callable(point) and callable(feasible)
    p, q = low, high
    for passes in range(_MAX_PASSES):
        if q.mixing <= p.mixing or q.objective <= p.objective:
            return p, q, math.inf, passes
        lam = (q.objective - p.objective) / (q.mixing - p.mixing)
        ends = _pass(lag, k, lam).get(k)
        if ends is None:
            break
        r = point(ends)
        line = p.objective - lam * p.mixing
        if r.objective - lam * r.mixing >= line - _TOL * max(abs(p.objective), abs(q.objective), 1.0):
            return p, q, lam, passes + 1  # no plan below the line: P-Q is a hull edge
        if r.edges in (p.edges, q.edges):
            return p, q, lam, passes + 1
        if feasible(r) == feasible(p):
            p = r
        else:
            q = r
    return p, q, (q.objective - p.objective) / (q.mixing - p.mixing), _MAX_PASSES


class _Evaluator:
    """Plans of one problem by their ends, each evaluated once (exact objective and mixing)."""

    def __init__(self, hist: LengthHistogram, lag: _Lagrangian, k: int) -> None:
        self.hist, self.lag, self.k = hist, lag, k
        self.plans: dict[tuple[int, ...], BucketPlan] = {}

    def plan(self, ends: list[int]) -> BucketPlan:
        edges = tuple(_edges(self.lag, ends))
        if edges not in self.plans:
            self.plans[edges] = make_plan(self.hist, self.lag.prob, list(edges), "frontier", self.k)
        return self.plans[edges]

    def point(self, ends: list[int]) -> _Point:
        plan = self.plan(ends)
        return _Point(tuple(plan.edges), plan.objective, plan.mixing)


def _ends_at(lag: _Lagrangian, k: int, lam: float) -> list[int]:
    ends = _pass(lag, k, lam).get(k)
    if ends is None:
        raise ValueError(f"no {k} non-empty buckets: the bucket costs are not finite")
    return ends


def _most_mixing_ends(lag: _Lagrangian, k: int, objective: float) -> list[int]:
    """The ends of the ``k``-bucket plan with the most mixing, ties to the least objective: a
    pass at ``lam`` a million times the padding optimum's ``objective`` (at least 1)."""
    return _ends_at(lag, k, 1e6 * max(objective, 1.0))


def floor_plan(
    hist: LengthHistogram,
    prob: Problem,
    k: int,
    min_efficiency: float | None,
    min_mixing: float | None,
) -> BucketPlan:
    """The ``K``-bucket plan with the most mixing whose objective meets ``min_efficiency``
    (``objective <= useful / min_efficiency``, so its efficiency does too), or the least
    objective whose mixing is at least ``min_mixing``; the floor and its bound in
    ``plan.floor``."""
    lag = _lagrangian(hist, prob)
    ev = _Evaluator(hist, lag, k)
    passes = 3
    lo_ends = _ends_at(lag, k, 0.0)
    f0 = max(ev.point(lo_ends).objective, 1.0)
    lo = ev.point(_ends_at(lag, k, 1e-9 * f0))  # the padding optimum, ties to more mixing
    hi = ev.point(_most_mixing_ends(lag, k, f0))
    if lo.objective > ev.point(lo_ends).objective * (1 + 1e-9):  # pragma: no cover - float ties
        lo = ev.point(lo_ends)
    useful = hist.total_tokens
    if min_efficiency is not None:
        limit = useful / min_efficiency

        def feasible(p: _Point) -> bool:
            return p.objective <= limit

        if not feasible(lo):
            best = ev.plans[lo.edges].efficiency
            raise ValueError(
                f"min_efficiency = {min_efficiency:g} is unreachable with {k} buckets: the best is {best:.4f}"
            )
        if feasible(hi):
            chosen, p, q, bound = hi, hi, hi, hi.mixing
        else:
            p, q, lam, more = _floor_search(lag, k, ev.point, feasible, lo, hi)
            passes += more
            bound = min(q.mixing, p.mixing + (limit - p.objective) / lam) if math.isfinite(lam) else p.mixing
            chosen = p
        exact = bound - chosen.mixing <= 1e-12
        floor, value = "min_efficiency", float(min_efficiency)
    else:
        assert min_mixing is not None
        goal = float(min_mixing)

        def feasible(p: _Point) -> bool:
            return p.mixing >= goal

        if not feasible(hi):
            raise ValueError(
                f"min_mixing = {goal:g} is unreachable with {k} buckets: the most is {hi.mixing:.4f}"
            )
        if feasible(lo):
            chosen, p, q, bound = lo, lo, lo, lo.objective
        else:
            p, q, lam, more = _floor_search(lag, k, ev.point, feasible, lo, hi)
            passes += more
            bound = (
                max(p.objective, p.objective + lam * (goal - p.mixing)) if math.isfinite(lam) else q.objective
            )
            chosen = q
        exact = chosen.objective - bound <= 1e-12 * max(chosen.objective, 1.0)
        floor, value = "min_mixing", goal
    plans = ev.plans

    def pair(x: _Point) -> tuple[float, float]:
        return (float(plans[x.edges].efficiency), float(x.mixing))

    # on a candidate grid (long context) the hull is the grid's: nothing is proven
    choice = FloorChoice(floor, value, float(bound), bool(exact and lag.exact), pair(p), pair(q), passes)
    return replace(plans[chosen.edges], floor=choice)


def frontier_plans(
    hist: LengthHistogram,
    rule: BatchRule,
    max_buckets: int,
    lambdas: Sequence[float],
    step_time: StepTimeLike | None = None,
    edge_multiple: int = 1,
) -> list[tuple[float, int, BucketPlan]]:
    """``(lam, K, plan)`` minimising ``objective - lam * mixing`` for every ``lam`` of
    ``lambdas`` (> 0, in objective units per unit of mixing) and every ``K <= max_buckets``: one DP
    pass per ``lam``; each plan Pareto-optimal among all ``K``-bucket plans (exact search;
    on the candidate grid of long-context data, among the grid's), the objective the
    optimiser's (padded tokens, or seconds with ``step_time``).

    Examples
    --------
    >>> hist = LengthHistogram.from_counts([1, 2, 3, 9, 10], [5, 5, 5, 5, 5])
    >>> [(k, p.edges, round(p.mixing, 3)) for _, k, p in frontier_plans(hist, BatchRule(4), 2, [5.0, 200.0])]
    [(1, [0, 10], 0.96), (2, [0, 3, 10], 0.037), (2, [0, 1, 10], 0.722)]
    """
    if any(not (isinstance(x, int | float) and math.isfinite(x) and x > 0) for x in lambdas):
        raise ValueError(f"every lambda must be a finite number > 0, got {list(lambdas)!r}")
    prob = build_problem(hist, rule, edge_multiple, step_time, resolve_objective(rule, step_time, None))
    k_max = check_k(prob, max_buckets)
    return _sweep(hist, prob, _lagrangian(hist, prob), k_max, lambdas)


def _sweep(
    hist: LengthHistogram, prob: Problem, lag: _Lagrangian, k_max: int, lambdas: Sequence[float]
) -> list[tuple[float, int, BucketPlan]]:
    """:func:`frontier_plans` on the matrices of ``lag``: each new plan once."""
    seen: dict[tuple[int, ...], BucketPlan] = {}
    out = []
    for lam in lambdas:
        for k, ends in _pass(lag, k_max, float(lam)).items():
            edges = tuple(_edges(lag, ends))
            if edges not in seen:
                seen[edges] = make_plan(hist, prob, list(edges), "frontier", k)
                out.append((float(lam), k, seen[edges]))
    return out


def frontier_sweep(
    hist: LengthHistogram,
    rule: BatchRule,
    max_buckets: int,
    n_lambdas: int,
    step_time: StepTimeLike | None = None,
    edge_multiple: int = 1,
) -> tuple[list[float], list[tuple[float, int, BucketPlan]]]:
    """:func:`frontier_plans` for ``n_lambdas`` values of ``lam`` spread by
    :func:`frontier_lambdas` between this DP's own ``max_buckets``-bucket optimum (its ``lam = 0``
    pass: on the candidate grid of long-context data, the grid's) and its ``max_buckets``-bucket plan
    with the most mixing (a pass at a huge ``lam``; not one bucket, whose mixing under a token
    budget can be 0: a batch of one sample), all on one set of matrices; returns the lambdas
    and the plans.

    Examples
    --------
    >>> hist = LengthHistogram.from_counts([1, 2, 3, 9, 10], [5, 5, 5, 5, 5])
    >>> lambdas, plans = frontier_sweep(hist, BatchRule(4), 2, 2)
    >>> [round(x, 2) for x in lambdas], [(k, p.edges) for _, k, p in plans]
    ([0.08, 76.7], [(1, [0, 10]), (2, [0, 3, 10]), (2, [0, 2, 10])])
    """
    if isinstance(n_lambdas, bool) or not isinstance(n_lambdas, int) or n_lambdas < 1:
        raise ValueError(f"n_lambdas must be an integer >= 1, got {n_lambdas!r}")
    prob = build_problem(hist, rule, edge_multiple, step_time, resolve_objective(rule, step_time, None))
    k_max = check_k(prob, max_buckets)
    lag = _lagrangian(hist, prob)
    low = make_plan(hist, prob, _edges(lag, _ends_at(lag, k_max, 0.0)), "frontier", k_max)
    most = _most_mixing_ends(lag, k_max, low.objective)
    lambdas = frontier_lambdas(low, make_plan(hist, prob, _edges(lag, most), "frontier", k_max), n_lambdas)
    return lambdas, _sweep(hist, prob, lag, k_max, lambdas)


def frontier_lambdas(low: BucketPlan, high: BucketPlan, count: int) -> list[float]:
    """``count`` values of ``lam`` spread geometrically around the slope between ``low`` (the
    optimum with the most buckets) and ``high`` (one bucket): from 1/1000 of it to the slope.

    Examples
    --------
    >>> from analysis import LengthHistogram, optimize_edges
    >>> hist = LengthHistogram.from_counts([1, 2, 3, 9, 10], [5, 5, 5, 5, 5])
    >>> low, high = optimize_edges(hist, 3, batch_size=4), optimize_edges(hist, 1, batch_size=4)
    >>> [round(x, 2) for x in frontier_lambdas(low, high, 3)]
    [0.09, 2.88, 91.17]
    """
    slope = (high.objective - low.objective) / max(high.mixing - low.mixing, 1e-12)
    slope = slope if slope > 0 and math.isfinite(slope) else max(high.objective, 1.0)
    return [float(x) for x in np.geomspace(slope / 1000, slope, count)] if count > 1 else [slope]
