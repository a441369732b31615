"""Padding against mixing: the Lagrangian DP, its hull and the floors.

A bucket's mixing share (:func:`analysis.padding.mixing.bucket_mixing`: ``w SS / ((n - 1) N S**2)``)
is additive over buckets like its padding, so the exact DP minimises ``objective - lam *
mixing`` as it minimises the objective.  The matrices of every bucket between two allowed
ends are computed once per problem: its exact cost (the exact rows of
:func:`~analysis.optimize._exact.exact_row`, each bucket's last short batch as it is) and its
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
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any

import numba
import numpy as np

from analysis.batching import BatchRule
from analysis.lengths import LengthHistogram
from analysis.optimize._costs import INF, Arrays
from analysis.optimize._exact import exact_arrays
from analysis.optimize._gradient import GradientArrays, axis_matrix
from analysis.optimize._labels import bounds, label_search, polish
from analysis.optimize._layers import FOLD, fold, fold_one
from analysis.optimize._problem import Problem, StepTimeLike, build_problem, resolve_objective
from analysis.optimize._pruned import exact_matrix
from analysis.optimize._search import candidate_grid, check_k, edges_to_ends, ends_to_edges
from analysis.optimize.floors import Floor, FloorChoice
from analysis.optimize.plan import BucketPlan, make_plan
from analysis.padding.mixing import length_variance
from analysis.padding.waste import step_tokens
from analysis.timing.noise import GradientNoise, between_share_limit, effective_batch_share

# Above this many allowed ends the frontier's DP runs on a candidate grid of _GRID ends.
_EXACT_UP_TO = 2_048  # (not AUTO_CANDIDATES_ABOVE: the matrices are p x p; see the package docstring)
_GRID = 1024
# Relative tolerance of "strictly below the hull line" (float arithmetic of the DP).
TOL = 1e-12
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


# Ends a tile of :func:`_solve_points` takes side by side (the loops across them vectorised).
_TILE = 64


@numba.njit(cache=True, nogil=True, error_model="numpy", inline="always")
def _point_value(
    costs: np.ndarray, mixing: np.ndarray, per: float, c: int, a: int
) -> float:  # pragma: no cover - compiled
    """Bucket ``(points[a], points[c]]``'s value in the λ-DP: ``costs[c, a] - per * mixing[c, a]``,
    ``costs`` alone where ``per = 0`` (one expression for the pass and its trace: the same
    floats)."""
    return float(costs[c, a] - per * mixing[c, a] if per != 0.0 else costs[c, a])


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _solve_points(
    costs: np.ndarray, mixing: np.ndarray, per: float, n_buckets: int
) -> np.ndarray:  # pragma: no cover
    """The DP over the points: ``best[c, k]`` = least sum of ``k`` buckets covering
    ``(points[0], points[c]]``, bucket ``(points[a], points[c]]`` costing ``costs[c, a] - per *
    mixing[c, a]`` (``per = 0``: ``costs`` alone).  Every ``k`` at once, by tiles of ``_TILE``
    ends: for each start below the tile its buckets to every end of the tile (a column of the
    matrices), then each layer's running minimum across the ends (vectorised), then the starts
    within the tile end by end; each minimum takes its starts in ascending order, as the
    plain DP does, so the same floats; the minimisers are traced afterwards
    (:func:`_trace_points`)."""
    p = costs.shape[0]
    best = np.full((p, n_buckets + 1), INF)  # best[c, k]
    best[0, 0] = 0.0
    rows = np.empty((FOLD, _TILE))
    acc = np.empty((n_buckets + 1, _TILE))
    c0 = int(np.int64(1))  # the tile: ends c0 <= c < c1 (typed int64: a literal compiles again)
    while c0 < p:
        c1 = min(p, c0 + _TILE)
        n = c1 - c0
        acc[:, :n] = INF
        for a in range(0, c0, FOLD):  # below the tile: every end's buckets from FOLD starts
            _points_block(costs, mixing, per, best, a, min(a + FOLD, c0), c0, c1, rows, acc)
        for q in range(n):  # within the tile, from the lowest end
            c = c0 + q
            for a in range(c0, c):
                x = _point_value(costs, mixing, per, c, a)
                prev = best[a]
                for k in range(1, min(n_buckets, a + 1) + 1):
                    v = prev[k - 1] + x
                    acc[k, q] = v if v < acc[k, q] else acc[k, q]
            for k in range(1, n_buckets + 1):
                best[c, k] = acc[k, q]
        c0 = c1
    return best


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _points_block(
    costs: np.ndarray,
    mixing: np.ndarray,
    per: float,
    best: np.ndarray,
    a0: int,
    a1: int,
    c0: int,
    c1: int,
    rows: np.ndarray,
    acc: np.ndarray,
) -> None:  # pragma: no cover - compiled
    """The running minima ``acc[k, q]`` of :func:`_solve_points`' tile (ends ``c0 <= c < c1``)
    over the starts ``a0 <= a < a1`` (at most ``FOLD``) in ascending order, each bucket's
    value ``rows[a - a0, q]`` from :func:`_point_value` (a sum that is inf or NaN is
    never a minimum, as where the plain DP reads no layer)."""
    n = c1 - c0
    for a in range(a0, a1):
        row = rows[a - a0]
        for q in range(n):
            row[q] = _point_value(costs, mixing, per, c0 + q, a)
    n_buckets = acc.shape[0] - 1
    if a1 - a0 == FOLD and a0 + 1 >= n_buckets:  # (every start reads every layer)
        for k in range(1, n_buckets + 1):
            fold(
                acc[k],
                rows,
                (best[a0, k - 1], best[a0 + 1, k - 1], best[a0 + 2, k - 1], best[a0 + 3, k - 1]),
                n,
            )
        return
    for a in range(a0, a1):
        for k in range(1, min(n_buckets, a + 1) + 1):  # (more than a + 1 buckets: none)
            fold_one(acc[k], rows[a - a0], best[a, k - 1], n)


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _trace_points(
    best: np.ndarray, costs: np.ndarray, mixing: np.ndarray, per: float, k: int, last: int
) -> np.ndarray:  # pragma: no cover
    """The point indices ending the ``k`` buckets of the minimum ``best[last, k]`` of
    :func:`_solve_points` (the same arguments): at each layer the smallest start whose sum
    equals the layer's minimum, the start a strict ``<`` in ascending order keeps (the
    padding DP's tie rule), each bucket's cost from :func:`_point_value`, as the pass formed it."""
    ends = np.empty(k, np.int64)
    c = last
    for layer in range(k, 0, -1):
        ends[layer - 1] = c
        target = best[c, layer]
        for a in range(layer - 1, c):
            x = _point_value(costs, mixing, per, c, a)
            if best[a, layer - 1] + x == target:
                c = a
                break
    return ends


@dataclass(frozen=True)
class Lagrangian:
    """What every pass of one problem shares: the matrices of exact costs and mixing sums."""

    prob: Problem
    exact: bool  # every allowed end searched (not a candidate grid)
    points: np.ndarray  # 0 and the ends: the DP's starts and ends
    costs: np.ndarray  # costs[c, a]: the exact objective of bucket (points[a], points[c]]
    mixing: np.ndarray  # mixing[c, a]: its mixing sum w SS / (n - 1) (a share once over scale)
    scale: float  # N S**2: a plan's mixing is its sum of w SS / (n - 1) over this
    # "mixing" (the length variance kept), or "gradient" (1 - ρ under a noise model: the
    # matrix of analysis.optimize._gradient, its scale N tr Σ)
    axis: str = "mixing"
    noise: GradientArrays | None = None
    # the passes made on these matrices, by (k_max, lam): every K's ends and the DP's minimum
    # (_pass: a floor search asks again for the optimum and the most mixing it bracketed its gap
    # with; a pass of more buckets answers for fewer at the same lam)
    passes: dict[tuple[int, float], tuple[dict[int, list[int]], np.ndarray]] = field(
        default_factory=dict, compare=False
    )
    # the plans evaluated on this problem, by their edges (plan_of: the sweep, the bounds and
    # every floor search ask for many of the same)
    plans: dict[tuple[int, ...], BucketPlan] = field(default_factory=dict, compare=False)
    # their buckets' numbers, by bounds (make_plan's memo: plans share many buckets)
    buckets: dict[Any, Any] = field(default_factory=dict, compare=False)
    # the floor searches' shared completion tables, by the pair of matrices searched
    # (analysis.optimize._labels.bounds' memo)
    floor_tables: dict[Any, dict[int, Any]] = field(default_factory=dict, compare=False)


# The matrices made inside a reuse_matrices() scope, per thread: (hist, key, noise, Lagrangian).
_LOCAL = threading.local()


@contextmanager
def reuse_matrices(kept: list[Any] | None = None) -> Iterator[None]:
    """Within this scope every function of this module on the same histogram (the same object),
    rule, edge multiple, objective and noise model reuses one set of matrices and the passes
    made on them (the frontier's sweep, its bounds and its floor searches); they are dropped
    when the outermost scope ends, or, with ``kept`` (a list the caller keeps and passes to
    each of its scopes), held in that list: the next scope given it starts with them (the
    explorer's floor searches, one K at a time; the caller bounds the list and runs one such
    scope at a time, since the passes' memos are not locked).  A scope belongs to the thread
    that opened it; one inside another uses the outer one's matrices.

    Examples
    --------
    >>> hist = LengthHistogram.from_counts([1, 2, 3, 9, 10], [5, 5, 5, 5, 5])
    >>> with reuse_matrices():
    ...     a = floor_plans(hist, BatchRule(4), [(2, Floor("mixing", 0.2))])
    ...     b = floor_plans(hist, BatchRule(4), [(2, Floor("mixing", 0.2))])
    >>> a[0].edges == b[0].edges, _LOCAL.scope is None
    (True, True)
    >>> kept: list = []
    >>> with reuse_matrices(kept):
    ...     c = floor_plans(hist, BatchRule(4), [(2, Floor("mixing", 0.2))])
    >>> with reuse_matrices(kept):  # the same matrices, made once
    ...     d = floor_plans(hist, BatchRule(4), [(3, Floor("mixing", 0.2))])
    >>> len(kept), c[0].edges == a[0].edges
    (1, True)
    """
    outer = getattr(_LOCAL, "scope", None)
    if outer is None:
        _LOCAL.scope = [] if kept is None else kept
    try:
        yield
    finally:
        if outer is None:
            _LOCAL.scope = None


def axis_value(lag: Lagrangian, ends: Sequence[int]) -> float:
    """A plan's coordinate on the axis of ``lag`` from its matrix (the sum over its buckets
    over the scale): on the gradient axis ``1 - ρ``."""
    idx = [0, *(int(i) for i in np.searchsorted(lag.points, np.asarray(ends, np.int64)))]
    total = math.fsum(float(lag.mixing[c, a]) for a, c in zip(idx, idx[1:]))
    return total / lag.scale if lag.scale > 0 else 0.0


def lagrangian(hist: LengthHistogram, prob: Problem, noise: GradientNoise | None = None) -> Lagrangian:
    """:func:`_make_lagrangian`, or the one already made in a :func:`reuse_matrices` scope."""
    scope: list[tuple[LengthHistogram, tuple[Any, ...], GradientNoise | None, Lagrangian]] | None = getattr(
        _LOCAL, "scope", None
    )
    if scope is None:
        return _make_lagrangian(hist, prob, noise)
    key = (prob.rule, prob.edge_multiple, prob.objective, id(prob.step_time))
    for h, k, n, lag in scope:
        if h is hist and k == key and n is noise:
            return lag
    lag = _make_lagrangian(hist, prob, noise)
    scope.append((hist, key, noise, lag))
    return lag


def _make_lagrangian(hist: LengthHistogram, prob: Problem, noise: GradientNoise | None = None) -> Lagrangian:
    """The matrices of ``prob`` for the λ-DP, each bucket's exact cost (the exact rows of
    :mod:`analysis.optimize._exact`) and mixing sum between every two points, computed once
    for every pass; the points are the allowed ends, or a candidate grid of ``_GRID`` ends
    above ``_EXACT_UP_TO`` (the matrices are quadratic in the points).  With ``noise`` the
    second matrix is the gradient axis (:mod:`analysis.optimize._gradient`)."""
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
    if noise is not None:
        grad, g_scale, arrays = axis_matrix(hist, prob, noise, points)
        return Lagrangian(prob, exact, points, costs, grad, g_scale, "gradient", arrays)
    return Lagrangian(prob, exact, points, costs, _mixing_matrix(data, points, p1, p2), scale)


def _pass(lag: Lagrangian, k_max: int, lam: float) -> dict[int, list[int]]:
    """Bucket ends (ascending, last ``m``) minimising ``objective - lam * mixing`` for every
    ``K <= k_max`` (one DP pass over the matrices; a pass made before is read back)."""
    ends, _ = _made_pass(lag, k_max, lam)
    return {k: list(e) for k, e in ends.items() if k <= k_max}


def _made_pass(lag: Lagrangian, k_max: int, lam: float) -> tuple[dict[int, list[int]], np.ndarray]:
    """The pass of ``lag`` at ``lam`` for at least ``k_max`` buckets, made once: the ends by
    ``K`` and ``values[K]``, the least ``objective - lam * mixing`` of ``K`` buckets (inf:
    none).  The DP's layer ``K`` depends on the layers below it only, so a pass made for more
    buckets answers for fewer, the same ends and sums."""
    made = lag.passes.get((k_max, lam))
    if made is None:
        made = next((v for (k, x), v in lag.passes.items() if x == lam and k >= k_max), None)
    if made is None:
        made = lag.passes[(k_max, lam)] = _new_pass(lag, k_max, lam)
    return made


def _new_pass(lag: Lagrangian, k_max: int, lam: float) -> tuple[dict[int, list[int]], np.ndarray]:
    per = lam / lag.scale if lag.scale > 0 else 0.0
    best = _solve_points(lag.costs, lag.mixing, per, min(k_max, lag.points.size - 1))
    last = lag.points.size - 1
    out = {}
    for k in range(1, min(k_max, last) + 1):
        if np.isfinite(best[last, k]):
            idx = _trace_points(best, lag.costs, lag.mixing, per, k, last)
            out[k] = [int(x) for x in lag.points[idx]]
    return out, best[last].copy()


def _edges(lag: Lagrangian, ends: list[int]) -> list[int]:
    return ends_to_edges(lag.prob, ends)


def plan_of(hist: LengthHistogram, lag: Lagrangian, edges: tuple[int, ...]) -> BucketPlan:
    """The plan of ``edges`` on the problem of ``lag`` (``hist`` its histogram), evaluated once
    (:func:`~analysis.optimize.plan.make_plan`, method ``"frontier"``, ``K`` its buckets)."""
    plan = lag.plans.get(edges)
    if plan is None:
        plan = make_plan(hist, lag.prob, list(edges), "frontier", len(edges) - 1, memo=lag.buckets)
        lag.plans[edges] = plan
    return plan


@dataclass(frozen=True)
class Point:
    """A plan on the ``(objective, mixing)`` plane."""

    edges: tuple[int, ...]
    objective: float
    mixing: float


def _floor_search(
    lag: Lagrangian,
    k: int,
    point: object,
    feasible: object,
    low: Point,
    high: Point,
) -> tuple[Point, Point, float, int]:
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
        if r.objective - lam * r.mixing >= line - TOL * max(abs(p.objective), abs(q.objective), 1.0):
            return p, q, lam, passes + 1  # no plan below the line: P-Q is a hull edge
        if r.edges in (p.edges, q.edges):
            return p, q, lam, passes + 1
        if feasible(r) == feasible(p):
            p = r
        else:
            q = r
    return p, q, (q.objective - p.objective) / (q.mixing - p.mixing), _MAX_PASSES


class Evaluator:
    """Plans of one problem by their ends, each evaluated once (exact objective and mixing)."""

    def __init__(self, hist: LengthHistogram, lag: Lagrangian, k: int) -> None:
        self.hist, self.lag, self.k = hist, lag, k
        self.plans: dict[tuple[int, ...], BucketPlan] = {}

    def plan(self, ends: list[int]) -> BucketPlan:
        edges = tuple(_edges(self.lag, ends))
        if edges not in self.plans:
            self.plans[edges] = plan_of(self.hist, self.lag, edges)
        return self.plans[edges]

    def point(self, ends: list[int]) -> Point:
        plan = self.plan(ends)
        axis = plan.mixing if self.lag.axis == "mixing" else axis_value(self.lag, ends)
        return Point(tuple(plan.edges), plan.objective, axis)

    def measure(self, p: Point, measure: str) -> float:
        """The point's efficiency, budget fill, mixing (its axis coordinate) or effective-batch
        share (from its ``1 - ρ``: :func:`analysis.timing.noise.effective_batch_share`)."""
        if measure == "effective_batch":
            return share_of(self.lag, p.mixing)
        if measure == "mixing":
            return p.mixing
        return _measure(self.plans[p.edges], measure)

    def meets(self, p: Point, floor: Floor) -> bool:
        """Whether the point meets ``floor`` on its own numbers."""
        return self.measure(p, floor.measure) >= floor.value


def share_of(lag: Lagrangian, axis: float) -> float:
    """The effective-batch share of a plan at gradient-axis coordinate ``axis`` (``1 - ρ``)
    under the batch size of ``lag``'s rule."""
    size = lag.prob.rule.batch_size
    assert size is not None, "the effective-batch share needs a batch size"
    return effective_batch_share(1.0 - axis, size)


def _on_axis(floor: Floor) -> bool:
    """Whether ``floor`` is on the frontier's second axis (mixing, the effective batch) rather
    than on the objective's measure (efficiency, budget fill)."""
    return floor.measure in ("mixing", "effective_batch")


def _axis_floor(lag: Lagrangian, floor: Floor) -> float:
    """An axis floor in the axis's own units: the mixing, or the least ``1 - ρ`` of an
    effective-batch share (:func:`analysis.timing.noise.between_share_limit`)."""
    if floor.measure != "effective_batch":
        return floor.value
    size = lag.prob.rule.batch_size
    assert size is not None
    return 1.0 - between_share_limit(floor.value, size)


def ends_at(lag: Lagrangian, k: int, lam: float) -> list[int]:
    ends = _pass(lag, k, lam).get(k)
    if ends is None:
        raise ValueError(f"no {k} non-empty buckets: the bucket costs are not finite")
    return ends


def most_mixing_ends(lag: Lagrangian, k: int, objective: float) -> list[int]:
    """The ends of the ``k``-bucket plan with the most mixing, ties to the least objective: a
    pass at ``lam`` a million times the padding optimum's ``objective`` (at least 1)."""
    return ends_at(lag, k, 1e6 * max(objective, 1.0))


#: The exact search of a floor's gap stops (and the plan keeps the hull's bound) past this many
#: labels in one state or label extensions in all (a fraction of a second of compiled work).
FLOOR_MAX_LABELS = 200_000
FLOOR_MAX_WORK = 40_000_000
# Candidates of the exact search checked on the plan's own numbers before the hull vertex stands.
_VERIFY = 64
# The targets of the exact search, as shares of the way from the hull's bound to its vertex.
_TARGETS = (*(2.0**-j for j in range(12, 0, -1)), 1.0)


@dataclass(frozen=True)
class _Gap:
    """A floor's hull search: the vertices around it, the slope between them, the passes."""

    low: Point  # the optimum (least objective)
    high: Point  # the most mixing
    p: Point
    q: Point
    lam: float
    passes: int


def _steps_matrix(lag: Lagrangian) -> np.ndarray:
    """``out[c, a]``: ``max_tokens`` times the batches of bucket ``(points[a], points[c]]``
    (the steps' tokens a plan's budget fill divides by, less the constant tokens of samples
    beyond the budget); inf where ``a >= c``."""
    prob = lag.prob
    assert prob.rule.max_tokens is not None
    pts = lag.points
    n = prob.cum[pts][:, None] - prob.cum[pts][None, :]
    size = prob.size[pts][:, None]
    out: np.ndarray = (-(-n // size) * prob.rule.max_tokens).astype(float)
    out[n <= 0] = INF
    return out


def _measure(plan: BucketPlan, measure: str) -> float:
    """The plan's efficiency, budget fill (NaN without a token budget) or mixing."""
    if measure == "budget_fill":
        return math.nan if plan.budget_fill is None else float(plan.budget_fill)
    return float(plan.efficiency if measure == "efficiency" else plan.mixing)


def _hull_gap(lag: Lagrangian, ev: Evaluator, k: int, feasible: Any) -> _Gap:
    """The optimum, the most mixing and, where the floor falls between them, the hull edge it
    falls in (:func:`_floor_search`)."""
    lo_ends = ends_at(lag, k, 0.0)
    f0 = max(ev.point(lo_ends).objective, 1.0)
    lo = ev.point(ends_at(lag, k, 1e-9 * f0))  # the padding optimum, ties to more mixing
    hi = ev.point(most_mixing_ends(lag, k, f0))
    if lo.objective > ev.point(lo_ends).objective * (1 + 1e-9):  # pragma: no cover - float ties
        lo = ev.point(lo_ends)
    if feasible(lo) == feasible(hi):
        return _Gap(low=lo, high=hi, p=lo, q=hi, lam=math.inf, passes=3)
    p, q, lam, more = _floor_search(lag, k, ev.point, feasible, lo, hi)
    return _Gap(low=lo, high=hi, p=p, q=q, lam=lam, passes=3 + more)


def _unreachable(floor: Floor, k: int, best: float) -> ValueError:
    most = "the most" if _on_axis(floor) else "the best"
    return ValueError(
        f"{floor.keyword} = {floor.value:g} is unreachable with {k} buckets: {most} is {best:.4f}"
    )


def _search_gap(
    lag: Lagrangian, ev: Evaluator, k: int, floor: Floor, gap: _Gap, max_work: int | None = None
) -> tuple[Point | None, bool, int, float]:
    """The exact search (:func:`analysis.optimize._labels.label_search`) of the plans between
    the floor and the hull edge ``gap.p``-``gap.q``, by rising targets: each search keeps
    only plans below a target between the hull's bound and the hull vertex (a low target keeps
    few); one that finds none proves the target a bound, one that finds plans holds the best.
    Returns the best plan that beats the hull vertex (None: none does), whether that is proven
    (a search finished), the labels kept, and the bound proven (mixing, or objective); where
    no search finishes, the best plan a local search from the hull vertex finds
    (:func:`analysis.optimize._labels.polish`)."""
    mixing = lag.mixing / lag.scale if lag.scale > 0 else lag.mixing * 0.0
    lam = gap.lam if math.isfinite(gap.lam) and gap.lam > 0 else 0.0
    if _on_axis(floor):
        xm, ym, mu = lag.costs, -mixing, lam
        high, limit, low = gap.q.objective, -_axis_floor(lag, floor), _hull_bound(gap, floor, lag, ev)
    else:
        hm = _steps_matrix(lag) if floor.measure == "budget_fill" else lag.costs
        xm, ym, mu = -mixing, hm, (1.0 / lam if lam > 0 else 0.0)
        high, limit, low = -gap.p.mixing, _limit(lag, ev, floor), -_hull_bound(gap, floor, lag, ev)
    labels, work = 0, FLOOR_MAX_WORK if max_work is None else max_work
    pair = ("axis",) if _on_axis(floor) else ("mixing", floor.measure)
    tables = bounds(xm, ym, k, mu, lag.floor_tables.setdefault(pair, {}))
    for share in _TARGETS:
        target = high if share == 1.0 else low + share * (high - low)
        found, kept, done, spent = label_search(
            tables, target, limit, max_labels=FLOOR_MAX_LABELS, max_work=work, max_found=_VERIFY
        )
        labels, work = labels + kept, work - spent
        if not done:
            break
        r = _verified(lag, ev, floor, found, high) if found else None
        if r is not None:  # the best plan below the target, so the best of all
            return r, True, labels, _sign(floor, r.objective if _on_axis(floor) else -r.mixing)
        if share == 1.0:  # no plan beats the hull vertex
            return None, True, labels, _sign(floor, high)
        if not found:  # none below the target: it is a bound
            low = target
    start = gap.q if _on_axis(floor) else gap.p
    idx = [int(i) for i in np.searchsorted(lag.points, edges_to_ends(lag.prob, start.edges))]
    r = _verified(lag, ev, floor, [(0.0, 0.0, polish(xm, ym, idx, limit))], high)
    return r, False, labels, _sign(floor, low)


def _sign(floor: Floor, x: float) -> float:
    """A search's ``x`` as the measure it bounds: the objective, or the mixing (negated there)."""
    return x if _on_axis(floor) else -x


def _verified(
    lag: Lagrangian, ev: Evaluator, floor: Floor, found: list[Any], incumbent: float
) -> Point | None:
    """The first of the search's plans (best first) that meets the floor on the plan's own
    numbers, if it beats the ``incumbent`` (an objective, or a mixing negated)."""
    for _, _, idx in found[:_VERIFY]:
        r = ev.point([int(lag.points[i]) for i in idx])
        if not ev.meets(r, floor):
            continue
        x = r.objective if _on_axis(floor) else -r.mixing
        return r if x < incumbent else None
    return None


def _limit(lag: Lagrangian, ev: Evaluator, floor: Floor) -> float:
    """The most padded tokens (or steps' tokens, less those beyond the budget) that still meet
    an efficiency (or budget-fill) floor."""
    useful = ev.hist.total_tokens
    if floor.measure == "efficiency":
        return useful / floor.value
    rule = lag.prob.rule
    beyond = int(step_tokens(ev.hist, rule, 0) or 0)
    return useful / floor.value - beyond


def floor_plans(
    hist: LengthHistogram,
    rule: BatchRule,
    asks: Sequence[tuple[int, Floor]],
    edge_multiple: int = 1,
    max_work: int | None = None,
    noise: GradientNoise | None = None,
) -> list[BucketPlan | None]:
    """The plan of :func:`analysis.optimize_edges` (``method="optimal"``, the rule's default
    objective) for each ``(K, floor)`` of ``asks``, or None where the floor is out of reach,
    all on one set of matrices (the frontier checks its Pareto points with these);
    ``max_work``: the exact search's work limit (default :data:`FLOOR_MAX_WORK`); ``noise``:
    the frontier's second axis is the gradient's (``effective_batch`` floors; see
    :func:`analysis.optimize_edges`).

    Examples
    --------
    >>> hist = LengthHistogram.from_counts([1, 2, 3, 9, 10], [5, 5, 5, 5, 5])
    >>> plans = floor_plans(hist, BatchRule(4), [(2, Floor("mixing", 0.2)), (2, Floor("efficiency", 0.99))])
    >>> plans[0].edges, plans[1]
    ([0, 2, 10], None)
    """
    prob = build_problem(hist, rule, edge_multiple, None, resolve_objective(rule, None, None))
    lag = lagrangian(hist, prob, noise)
    out: list[BucketPlan | None] = []
    for k, floor in asks:
        check_axis_floor(floor, lag.axis, rule)
        try:
            out.append(floor_plan(hist, prob, check_k(prob, k), floor, lag, max_work))
        except ValueError:
            out.append(None)
    return out


def check_axis_floor(floor: Floor, axis: str, rule: BatchRule) -> None:
    """A one-line error where ``floor`` does not fit the frontier's second axis: an
    effective-batch floor needs a noise model and a batch size, a length-mixing floor no noise
    model (the gradient axis replaces it)."""
    if floor.measure == "effective_batch" and axis != "gradient":
        raise ValueError("min_effective_batch needs a gradient-noise model (noise=)")
    if floor.measure == "mixing" and axis == "gradient":
        raise ValueError("with a noise model the frontier's axis is the gradient's: give min_effective_batch")
    if axis == "gradient" and rule.batch_size is None:
        raise ValueError(
            "gradient floors need batch_size: under a token budget each bucket has its own batch size"
        )


def floor_plan(
    hist: LengthHistogram,
    prob: Problem,
    k: int,
    floor: Floor,
    lag: Lagrangian | None = None,
    max_work: int | None = None,
) -> BucketPlan:
    """The ``K``-bucket plan that is best at ``floor``: the most mixing (on the gradient axis:
    the least ``ρ``) whose efficiency (or budget fill) meets it, or the least objective whose
    mixing (effective-batch share) does; exact where the search of the hull's gap finishes
    (:func:`_search_gap`), else the hull vertex with the hull's bound; how in ``plan.floor``;
    ``lag``: the problem's matrices, when already made."""
    lag = lagrangian(hist, prob) if lag is None else lag
    ev = Evaluator(hist, lag, k)

    def feasible(p: Point) -> bool:
        return ev.meets(p, floor)

    mix = _on_axis(floor)
    gap = _hull_gap(lag, ev, k, feasible)
    if mix and not feasible(gap.high):
        raise _unreachable(floor, k, ev.measure(gap.high, floor.measure))
    if not mix and not feasible(gap.low):
        raise _unreachable(floor, k, ev.measure(gap.low, floor.measure))
    p, q = gap.p, gap.q
    if feasible(gap.low) and feasible(gap.high):  # the end the floor asks for meets it
        chosen = gap.low if mix else gap.high
        p = q = chosen
        bound, searched, labels, done = (chosen.objective if mix else chosen.mixing), "hull", 0, True
    else:
        better, done, labels, bound = _search_gap(lag, ev, k, floor, gap, max_work)
        chosen = better if better is not None else (q if mix else p)
        searched = "labels" if done else "bounded"
    axis = "budget_fill" if prob.objective == "steps" else "efficiency"
    second = _second(lag)

    def pair(x: Point) -> tuple[float, float]:
        return (_measure(ev.plans[x.edges], axis), second(x.mixing))

    choice = FloorChoice(
        floor=floor,
        bound=float(bound if mix else second(bound)),
        exact=bool(done and lag.exact),
        reach=_reach(ev.plans[chosen.edges], floor, float(bound), done) if mix else second(bound),
        below=pair(p),
        above=pair(q),
        axis=axis,
        searched=searched,
        labels=labels,
        passes=gap.passes,
        grid=None if lag.exact else int(lag.points.size - 1),
        mixing_axis="mixing" if lag.axis == "mixing" else "effective_batch_share",
    )
    return replace(ev.plans[chosen.edges], floor=choice)


def _second(lag: Lagrangian) -> Any:
    """The frontier's second coordinate as a floor reports it: the mixing, or on the gradient
    axis the effective-batch share (under a token budget: ``1 - ρ``)."""
    if lag.axis == "mixing" or lag.prob.rule.batch_size is None:
        return float
    return lambda x: share_of(lag, float(x))


def _reach(plan: BucketPlan, floor: Floor, bound: float, done: bool) -> float:
    """The bound as a share (:attr:`FloorChoice.reach`)."""
    if not _on_axis(floor):
        return bound
    kind = plan.objective_kind
    if kind == "time":
        return math.nan
    axis = "budget_fill" if kind == "steps" else "efficiency"
    if done:
        return _measure(plan, axis)
    if kind == "padding":
        return min(1.0, plan.useful_tokens / bound)
    assert plan.rule.max_tokens is not None  # the steps: the padding term is below a quarter step
    return min(1.0, plan.useful_tokens / max(bound - plan.rule.max_tokens / 4, 1.0))


def _hull_bound(gap: _Gap, floor: Floor, lag: Lagrangian, ev: Evaluator) -> float:
    """What the hull edge ``p``-``q`` proves: the most mixing an efficiency (budget-fill) floor
    can reach, or the least objective a mixing floor can have."""
    p, q, lam = gap.p, gap.q, gap.lam
    if _on_axis(floor):
        goal = _axis_floor(lag, floor)
        return max(p.objective, p.objective + lam * (goal - p.mixing)) if math.isfinite(lam) else q.objective
    if not math.isfinite(lam):
        return p.mixing
    if floor.measure == "budget_fill":  # the objective's padding term is below a quarter step
        assert lag.prob.rule.max_tokens is not None
        limit = (
            _limit(lag, ev, floor)
            + int(step_tokens(ev.hist, lag.prob.rule, 0) or 0)
            + lag.prob.rule.max_tokens / 4
        )
    else:
        limit = _limit(lag, ev, floor)
    return min(q.mixing, p.mixing + (limit - p.objective) / lam)


def frontier_plans(
    hist: LengthHistogram,
    rule: BatchRule,
    max_buckets: int,
    lambdas: Sequence[float],
    step_time: StepTimeLike | None = None,
    edge_multiple: int = 1,
    noise: GradientNoise | None = None,
) -> list[tuple[float, int, BucketPlan]]:
    """``(lam, K, plan)`` minimising ``objective - lam * mixing`` (with ``noise``: ``objective
    - lam * (1 - ρ)``, the gradient axis) for every ``lam`` of
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
    return _sweep(hist, prob, lagrangian(hist, prob, noise), k_max, lambdas)


def frontier_minima(
    hist: LengthHistogram,
    rule: BatchRule,
    max_buckets: int,
    lambdas: Sequence[float],
    wanted: Any = None,
) -> tuple[dict[int, np.ndarray], list[BucketPlan]]:
    """``(low, plans)`` of the passes of :func:`frontier_plans` at ``lambdas``: ``low[K][j]``,
    the least ``objective - lambdas[j] * mixing`` of any ``K``-bucket plan (the DP's own
    minimum over the matrices, inf where there is none: on the candidate grid of long-context
    data, of the grid's plans), and the plans of the passes' minimisers (each new one once, in
    the order :func:`frontier_plans` lists them) for which ``wanted(edges, objective, mixing)``
    (the objective and mixing the matrices' sums, within a relative 1e-13 of the plan's own
    numbers) holds: only those are evaluated (None: every one).

    Examples
    --------
    >>> hist = LengthHistogram.from_counts([1, 2, 3, 9, 10], [5, 5, 5, 5, 5])
    >>> low, plans = frontier_minima(hist, BatchRule(4), 2, [5.0, 200.0], lambda e, f, g: g > 0.5)
    >>> [round(float(x), 1) for x in low[2]], [(p.n_buckets, p.edges) for p in plans]
    ([141.4, 49.8], [(1, [0, 10]), (2, [0, 1, 10])])
    """
    prob = build_problem(hist, rule, 1, None, resolve_objective(rule, None, None))
    k_max = check_k(prob, max_buckets)
    lag = lagrangian(hist, prob)
    low: dict[int, np.ndarray] = {}
    seen: set[tuple[int, ...]] = set()
    plans = []
    for j, lam in enumerate(lambdas):
        ends, values = _made_pass(lag, k_max, float(lam))
        for k in range(1, k_max + 1):
            if k not in ends:
                continue
            low.setdefault(k, np.full(len(lambdas), INF))[j] = values[k]
            edges = tuple(_edges(lag, ends[k]))
            if edges in seen:
                continue
            seen.add(edges)
            if wanted is None or wanted(edges, *_matrix_point(lag, ends[k])):
                plans.append(plan_of(hist, lag, edges))
    return low, plans


def _matrix_point(lag: Lagrangian, ends: Sequence[int]) -> tuple[float, float]:
    """A plan's objective and axis coordinate from the matrices of ``lag`` (sums over its
    buckets; the plan's own numbers are exact)."""
    idx = [0, *(int(i) for i in np.searchsorted(lag.points, np.asarray(ends, np.int64)))]
    f = math.fsum(float(lag.costs[c, a]) for a, c in zip(idx, idx[1:]))
    return f, axis_value(lag, ends)


def _sweep(
    hist: LengthHistogram, prob: Problem, lag: Lagrangian, k_max: int, lambdas: Sequence[float]
) -> list[tuple[float, int, BucketPlan]]:
    """:func:`frontier_plans` on the matrices of ``lag``: each new plan once."""
    seen: dict[tuple[int, ...], BucketPlan] = {}
    out = []
    for lam in lambdas:
        for k, ends in _pass(lag, k_max, float(lam)).items():
            edges = tuple(_edges(lag, ends))
            if edges not in seen:
                seen[edges] = plan_of(hist, lag, edges)
                out.append((float(lam), k, seen[edges]))
    return out


def frontier_sweep(
    hist: LengthHistogram,
    rule: BatchRule,
    max_buckets: int,
    n_lambdas: int,
    step_time: StepTimeLike | None = None,
    edge_multiple: int = 1,
    noise: GradientNoise | None = None,
) -> tuple[list[float], list[tuple[float, int, BucketPlan]]]:
    """:func:`frontier_plans` for ``n_lambdas`` values of ``lam`` spread by
    :func:`frontier_lambdas` between this DP's own ``K``-bucket optimum (its ``lam = 0``
    pass: on the candidate grid of long-context data, the grid's) and its ``K``-bucket plan
    with the most mixing (a pass at a huge ``lam``; not one bucket, whose mixing under a token
    budget can be 0: a batch of one sample), ``K`` the most buckets up to ``max_buckets`` where
    the two differ (``max_buckets`` but where it leaves each distinct length a bucket of its own), all on
    one set of matrices; returns the lambdas and the plans.  With ``noise`` the second axis is
    the gradient's, ``1 - ρ`` (:mod:`analysis.optimize._gradient`), and the lambdas are in
    objective units per unit of it.

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
    lag = lagrangian(hist, prob, noise)
    optimum = _pass(lag, k_max, 0.0)
    for k in range(k_max, 0, -1):  # the most buckets whose frontier is more than one plan
        ev = Evaluator(hist, lag, k)
        low = ev.point(optimum[k])
        high = ev.point(most_mixing_ends(lag, k, low.objective))
        if high.edges != low.edges:
            break
    lambdas = _lambdas(low.objective, high.objective, low.mixing, high.mixing, n_lambdas)
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
    return _lambdas(low.objective, high.objective, low.mixing, high.mixing, count)


def _lambdas(f_low: float, f_high: float, g_low: float, g_high: float, count: int) -> list[float]:
    """:func:`frontier_lambdas` from the two plans' objectives and axis coordinates."""
    slope = (f_high - f_low) / max(g_high - g_low, 1e-12)
    slope = slope if slope > 0 and math.isfinite(slope) else max(f_high, 1.0)
    return [float(x) for x in np.geomspace(slope / 1000, slope, count)] if count > 1 else [slope]
