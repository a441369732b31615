"""Padding against mixing: the Lagrangian DP, its hull and the floors.

A bucket's mixing share (:func:`analysis.mixing.bucket_mixing`: ``w SS / ((n - 1) N S**2)``)
is additive over buckets like its padding, so the exact DP minimises ``objective - lam *
mixing`` as it minimises the objective: the exact rows of bucket costs
(:func:`~analysis.optimize._exact._exact_row`, each bucket's last short batch as it is), each
cell less ``lam`` times the bucket's share from prefix sums of ``count``, ``count * d`` and
``count * d**2`` (``d`` the length less the mean length, so the sums stay small where a
bucket sits far from the mean).
One pass per ``lam`` gives every ``K`` at once.

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
from analysis.mixing import length_variance
from analysis.optimize._costs import _Arrays
from analysis.optimize._exact import _exact_arrays, _exact_row, _Short
from analysis.optimize._layers import _ROWS, _group, _layers, _push_rows
from analysis.optimize._problem import StepTimeLike, _Problem, _problem, _resolve_objective
from analysis.optimize._search import _check_k, _ends_to_edges, _grid
from analysis.optimize.plan import BucketPlan, FloorChoice, _plan

# Above this many allowed ends the frontier's DP runs on a candidate grid of _GRID ends.
_EXACT_UP_TO = 2_048
_GRID = 1024
# Relative tolerance of "strictly below the hull line" (float arithmetic of the DP).
_TOL = 1e-12
# Most DP passes of one floor search.
_MAX_PASSES = 60


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _solve_lambda(
    data: _Arrays,
    short: _Short,
    rows: np.ndarray,
    is_end: np.ndarray,
    n_buckets: int,
    lam: float,
    p1: np.ndarray,
    p2: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:  # pragma: no cover - compiled
    """``D[k, j]`` of ``objective - lam * mixing`` (``lam`` already divided by ``N S**2``)
    and the backtracking starts: each start's row of exact bucket costs
    (:func:`~analysis.optimize._exact._exact_row`: the last short batch as it is) less the
    mixing term, pushed into every layer as the padding DP pushes them."""
    cum, size = data.cum, data.size
    m = cum.size - 1
    best, arg = _layers(n_buckets, m)
    costs = np.empty((_ROWS, m + 1))
    tb = np.zeros(m + 1)
    t2b = np.zeros(m + 1)
    starts = np.empty(_ROWS, np.int64)
    for g0 in range(0, rows.size, _ROWS):
        g, n_sub = _group(rows, g0, starts)
        for a in range(g):
            i = starts[a]
            row = costs[a]
            _exact_row(i, data, short, is_end, row, tb, t2b)
            if lam != 0.0:
                for j in range(i + 1, m + 1):
                    n = cum[j] - cum[i]
                    b = size[j]
                    if n < 2 or b < 2:
                        continue
                    w = n - 1 if n % b == 1 else n
                    s1 = p1[j] - p1[i]
                    ss = (p2[j] - p2[i]) - s1 * s1 / n
                    if ss > 0.0:
                        row[j] -= lam * (w * ss / (n - 1))
        _push_rows(best, arg, starts, g, n_sub, costs)
    return best, arg


@dataclass(frozen=True)
class _Lagrangian:
    """What every pass of one problem shares: the kernel's arrays and the centred sums."""

    prob: _Problem
    data: _Arrays
    ends: np.ndarray
    p1: np.ndarray
    p2: np.ndarray
    scale: float  # N S**2: a plan's mixing is its sum of w SS / (n - 1) over this
    exact: bool  # every allowed end searched (not a candidate grid)
    short: _Short  # the exact rows' short-batch arrays


def _lagrangian(hist: LengthHistogram, prob: _Problem) -> _Lagrangian:
    """The arrays of ``prob`` for the λ-DP (exact rows, :mod:`analysis.optimize._exact`): on a
    candidate grid of ``_GRID`` ends above ``_EXACT_UP_TO`` ends (every row is costed whole,
    so the pass is quadratic in the ends)."""
    data, short = _exact_arrays(prob)
    exact = prob.ends.size <= _EXACT_UP_TO
    ends = prob.ends if exact else _grid(prob, _GRID)
    counts = np.diff(prob.cum).astype(float)
    d = prob.lengths.astype(float) - hist.mean
    p1 = np.zeros(prob.m + 1)
    p2 = np.zeros(prob.m + 1)
    np.cumsum(counts * d, out=p1[1:])
    np.cumsum(counts * d * d, out=p2[1:])
    scale = hist.n_samples * length_variance(hist)
    return _Lagrangian(prob, data, ends, p1, p2, scale, exact, short)


def _pass(lag: _Lagrangian, k_max: int, lam: float) -> dict[int, list[int]]:
    """Bucket ends (ascending, last ``m``) minimising ``objective - lam * mixing`` for every
    ``K <= k_max`` (one DP pass)."""
    from analysis.optimize._kernel import _backtrack

    prob = lag.prob
    m = prob.m
    is_end = np.zeros(m + 1, np.bool_)
    is_end[lag.ends] = True
    is_row = np.zeros(m + 1, np.bool_)
    is_row[0] = True
    is_row[lag.ends[:-1]] = True
    rows = np.flatnonzero(is_row) if k_max > 1 else np.zeros(1, np.int64)
    per = lam / lag.scale if lag.scale > 0 else 0.0
    best, arg = _solve_lambda(lag.data, lag.short, rows, is_end, k_max, per, lag.p1, lag.p2)
    out = {}
    for k in range(1, k_max + 1):
        if np.isfinite(best[k, m]):
            out[k] = _backtrack(arg, k, m)
    return out


def _edges(lag: _Lagrangian, ends: list[int]) -> list[int]:
    return _ends_to_edges(lag.prob, ends)


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
            self.plans[edges] = _plan(self.hist, self.lag.prob, list(edges), "frontier", self.k)
        return self.plans[edges]

    def point(self, ends: list[int]) -> _Point:
        plan = self.plan(ends)
        return _Point(tuple(plan.edges), plan.objective, plan.mixing)


def _ends_at(lag: _Lagrangian, k: int, lam: float) -> list[int]:
    ends = _pass(lag, k, lam).get(k)
    if ends is None:
        raise ValueError(f"no {k} non-empty buckets: the bucket costs are not finite")
    return ends


def _floor_plan(
    hist: LengthHistogram,
    prob: _Problem,
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
    hi = ev.point(_ends_at(lag, k, 1e6 * f0))  # the most mixing, ties to less padding
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
    k_max: int,
    lambdas: Sequence[float],
    step_time: StepTimeLike | None = None,
    edge_multiple: int = 1,
) -> list[tuple[float, int, BucketPlan]]:
    """``(lam, K, plan)`` minimising ``objective - lam * mixing`` for every ``lam`` of
    ``lambdas`` (> 0, in objective units per unit of mixing) and every ``K <= k_max``: one DP
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
    prob = _problem(hist, rule, edge_multiple, step_time, _resolve_objective(rule, step_time, None))
    k_max = _check_k(prob, k_max)
    lag = _lagrangian(hist, prob)
    seen: dict[tuple[int, ...], BucketPlan] = {}
    out = []
    for lam in lambdas:
        for k, ends in _pass(lag, k_max, float(lam)).items():
            edges = tuple(_edges(lag, ends))
            if edges not in seen:
                seen[edges] = _plan(hist, prob, list(edges), "frontier", k)
                out.append((float(lam), k, seen[edges]))
    return out


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
