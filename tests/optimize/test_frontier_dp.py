"""The padding-mixing frontier of the DP (analysis.optimize._frontier) against exhaustive search
over every edge set: each plan it returns is Pareto-optimal among all plans with its K, and the
bound a floor states holds for every one of them."""

from __future__ import annotations

import importlib
import itertools
import json
import math

import numpy as np
import pytest

from analysis import BatchRule, LengthHistogram, StepTimeModel, evaluate_edges, optimize_edges
from analysis.optimize import (
    Floor,
    frontier_lambdas,
    frontier_minima,
    frontier_plans,
    frontier_sweep,
    optimal_plans,
)
from analysis.optimize._problem import build_problem, resolve_objective

frontier_dp = importlib.import_module("analysis.optimize._frontier")

RULES = [
    BatchRule(batch_size=3),
    BatchRule(batch_size=2, pad_to_multiple_of=4),
    BatchRule(max_tokens=40),
]


def _hist(seed: int) -> LengthHistogram:
    rng = np.random.default_rng(seed)
    lengths = np.sort(rng.choice(np.arange(1, 30), size=8, replace=False))
    counts = rng.integers(1, 9, size=8)
    return LengthHistogram.from_counts(lengths, counts)


def _every_plan(hist: LengthHistogram, k: int, rule: BatchRule) -> list[tuple[float, float, list[int]]]:
    """(objective, mixing, edges) of every k-bucket edge set on the distinct lengths."""
    inner = hist.lengths[:-1].tolist()
    out = []
    for cut in itertools.combinations(inner, k - 1):
        edges = [0, *cut, int(hist.max)]
        plan = evaluate_edges(hist, edges, rule)
        out.append((plan.objective, plan.mixing, edges))
    return out


def _dominated(f: float, g: float, plans: list[tuple[float, float, list[int]]]) -> bool:
    tol = 1e-9
    return any(
        (f2 <= f * (1 + tol) and g2 >= g - tol) and (f2 < f * (1 - tol) or g2 > g + tol)
        for f2, g2, _ in plans
    )


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("rule", RULES, ids=str)
def test_every_lambda_gives_pareto_optimal_plans_for_every_k(seed, rule):
    hist = _hist(seed)
    prob = build_problem(hist, rule, objective=resolve_objective(rule, None, None))
    lag = frontier_dp.lagrangian(hist, prob)
    everything = {k: _every_plan(hist, k, rule) for k in (2, 3, 4)}
    for lam in (1e-3, 10.0, 100.0, 1e3, 1e5):
        for k, ends in frontier_dp._pass(lag, 4, lam).items():
            if k == 1:
                continue
            plan = evaluate_edges(hist, frontier_dp._edges(lag, ends), rule)
            assert not _dominated(plan.objective, plan.mixing, everything[k]), (lam, k, plan.edges)
            # and it is the minimiser of objective - lam * mixing
            best = min(f - lam * g for f, g, _ in everything[k])
            assert plan.objective - lam * plan.mixing <= best + 1e-9 * abs(best) + 1e-9


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("rule", RULES, ids=str)
def test_the_pass_minima_are_the_least_of_every_plan_and_the_wanted_plans_are_the_passes(seed, rule):
    """``frontier_minima``'s ``low[K][j]`` is the least ``objective - lam_j * mixing`` of every
    K-bucket edge set (exhaustive), and its plans are those of ``frontier_plans`` at the same
    lambdas that ``wanted`` keeps, in the same order, the same numbers."""
    hist = _hist(seed)
    lambdas = [1e-3, 10.0, 1e3, 1e5]
    low, plans = frontier_minima(hist, rule, 4, lambdas, lambda e, f, g: len(e) % 2 == 1)
    for k in (1, 2, 3, 4):
        every = _every_plan(hist, k, rule)
        for j, lam in enumerate(lambdas):
            best = min(f - lam * g for f, g, _ in every)
            assert low[k][j] == pytest.approx(best, rel=1e-12, abs=1e-9), (k, lam)
    listed = [p for _, _, p in frontier_plans(hist, rule, 4, lambdas) if len(p.edges) % 2 == 1]
    assert [p.edges for p in plans] == [p.edges for p in listed] and listed
    assert [(p.objective, p.mixing) for p in plans] == [(p.objective, p.mixing) for p in listed]


EXHAUSTIVE_RULES = [
    BatchRule(batch_size=3),
    BatchRule(batch_size=2, pad_to_multiple_of=4),
    BatchRule(max_tokens=40),
    BatchRule(max_tokens=48, pad_to_multiple_of=8),
]


def _random_hist(seed: int) -> LengthHistogram:
    """6..10 distinct lengths in 1..59, each 1..11 times."""
    rng = np.random.default_rng(seed)
    m = int(rng.integers(6, 11))
    lengths = np.sort(rng.choice(np.arange(1, 60), size=m, replace=False))
    return LengthHistogram.from_counts(lengths, rng.integers(1, 12, size=m))


def _plans(hist: LengthHistogram, k: int, rule: BatchRule, step_time=None) -> list:
    """Every k-bucket plan on the distinct lengths."""
    inner = hist.lengths[:-1].tolist()
    kw = {} if step_time is None else {"step_time": step_time}
    return [
        evaluate_edges(hist, [0, *cut, int(hist.max)], rule, **kw)
        for cut in itertools.combinations(inner, k - 1)
    ]


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("rule", EXHAUSTIVE_RULES, ids=str)
def test_floors_are_the_constrained_optimum_of_exhaustive_search(seed, rule):
    """For K = 2..4 and random floors of each kind: the plan meets the floor, nothing meeting it
    beats it (the most mixing at an efficiency or budget-fill floor, the least objective at a
    mixing floor), it says it is exact, and its bound is the optimum."""
    hist = _random_hist(seed)
    rng = np.random.default_rng(100 + seed)
    side = "efficiency" if rule.max_tokens is None else "budget_fill"
    for k in (2, 3, 4):
        plans = _plans(hist, k, rule)

        def measure(p):
            return p.efficiency if side == "efficiency" else p.budget_fill

        values = [measure(p) for p in plans]
        for x in min(values) + rng.uniform(0, 1, 3) * (max(values) - min(values)):
            plan = optimize_edges(hist, k, rule, floor=Floor(side, float(x)))
            best = max(p.mixing for p in plans if measure(p) >= x)
            assert measure(plan) >= x and plan.mixing >= best - 1e-12, (k, x)
            f = plan.floor
            assert f.exact and f.measure == side and f.bound >= best - 1e-12 and f.reach == f.bound
        gs = [p.mixing for p in plans]
        for y in min(gs) + rng.uniform(0, 1, 3) * (max(gs) - min(gs)):
            if y <= 0:
                continue
            plan = optimize_edges(hist, k, rule, min_mixing=float(y))
            best = min(p.objective for p in plans if p.mixing >= y)
            assert plan.mixing >= y and plan.objective <= best * (1 + 1e-12), (k, y)
            assert plan.floor.exact and plan.floor.bound <= best * (1 + 1e-12)
            assert plan.floor.reach == pytest.approx(measure(plan), rel=1e-12)


@pytest.mark.parametrize("seed", range(4))
def test_a_mixing_floor_under_step_time_is_the_least_time(seed):
    hist = _random_hist(seed)
    model = StepTimeModel(per_step=0.05, per_token=1e-3, attention=1e-5)
    for rule in (BatchRule(batch_size=3), BatchRule(max_tokens=64)):
        plans = _plans(hist, 3, rule, model)
        gs = sorted(p.mixing for p in plans)
        for y in (gs[len(gs) // 3], gs[2 * len(gs) // 3]):
            if y <= 0:
                continue
            plan = optimize_edges(hist, 3, rule, step_time=model, min_mixing=y)
            best = min(p.objective for p in plans if p.mixing >= y)
            assert plan.mixing >= y and plan.objective <= best * (1 + 1e-12)
            assert plan.floor.exact and math.isnan(plan.floor.reach)


def test_the_issue_example_finds_the_plan_the_hull_missed():
    """2,000 lengths uniform on 1..499, K = 4, batch size 8, min_mixing 0.2: the hull vertex was
    0,1,2,3,499 at 57.69 %; 0,290,390,450,499 meets the floor at 77.05 %."""
    hist = LengthHistogram.from_lengths(np.random.default_rng(0).integers(1, 500, 2_000))
    plan = optimize_edges(hist, 4, batch_size=8, min_mixing=0.2)
    assert plan.mixing >= 0.2 and plan.efficiency >= 0.7705
    assert evaluate_edges(hist, [0, 290, 390, 450, 499], batch_size=8).efficiency <= plan.efficiency
    assert plan.floor.exact and plan.floor.searched == "labels" and plan.floor.above[0] < 0.58
    assert plan.floor.bound == plan.objective


def test_a_search_past_its_work_limit_keeps_the_hull_vertex_and_a_bound(monkeypatch):
    hist = LengthHistogram.from_lengths(np.random.default_rng(0).integers(1, 500, 2_000))
    exact = optimize_edges(hist, 4, batch_size=8, min_mixing=0.2)
    monkeypatch.setattr(frontier_dp, "FLOOR_MAX_WORK", 10)
    plan = optimize_edges(hist, 4, batch_size=8, min_mixing=0.2)
    f = plan.floor
    assert not f.exact and f.searched == "bounded" and plan.mixing >= 0.2
    assert f.bound <= exact.objective <= plan.objective  # a proven bound, the best plan found
    assert f.reach >= exact.efficiency


def test_unreachable_floors_name_the_best_value():
    hist = _hist(0)
    with pytest.raises(
        ValueError, match=r"^min_efficiency = 0.9999 is unreachable with 2 buckets: the best is 0\.\d{4}$"
    ):
        optimize_edges(hist, 2, batch_size=3, min_efficiency=0.9999)
    with pytest.raises(
        ValueError, match=r"^min_mixing = 1 is unreachable with 3 buckets: the most is 0\.\d{4}$"
    ):
        optimize_edges(hist, 3, batch_size=3, min_mixing=1.0)


def test_under_a_token_budget_the_floor_is_on_budget_fill():
    """The issue's example: max_tokens 16, a floor of 0.7 named as what it floors."""
    hist = LengthHistogram.from_counts([1, 2, 3, 9, 10], [5] * 5)
    with pytest.raises(
        ValueError, match=r"^min_budget_fill = 0.7 is unreachable with 2 buckets: the best is 0\.6010$"
    ):
        optimize_edges(hist, 2, max_tokens=16, min_budget_fill=0.7)
    with pytest.raises(ValueError, match="under a token budget the edges are placed for budget fill"):
        optimize_edges(hist, 2, max_tokens=16, min_efficiency=0.7)
    plan = optimize_edges(hist, 2, max_tokens=16, objective="padding", min_efficiency=0.7)
    assert plan.efficiency >= 0.7 and plan.floor.axis == "efficiency"
    plan = optimize_edges(hist, 2, max_tokens=16, min_budget_fill=0.5)
    assert plan.budget_fill >= 0.5 and plan.floor.axis == "budget_fill" and plan.floor.exact


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"min_efficiency": 0.5, "min_mixing": 0.5},
            r"give one floor \(floor, min_efficiency, min_budget_fill, min_mixing or "
            r"min_effective_batch\), not 2",
        ),
        ({"min_budget_fill": 0.5}, "min_budget_fill floors the steps objective of a token budget"),
        ({"min_efficiency": 0.0}, r"min_efficiency must be a number in \(0, 1\], got 0.0"),
        ({"min_mixing": True}, r"min_mixing must be a number in \(0, 1\], got True"),
        ({"min_mixing": 0.5, "method": "geometric"}, "method must be 'optimal'"),
    ],
)
def test_floor_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        optimize_edges(_hist(0), 2, batch_size=3, **kwargs)


def test_floor_plan_is_frozen_and_serialises():
    plan = optimize_edges(_hist(1), 3, batch_size=3, min_mixing=0.3)
    d = plan.to_dict()
    assert (
        d["floor"]["floor"] == "min_mixing"
        and d["floor"]["measure"] == "mixing"
        and d["mixing"] == plan.mixing
    )
    assert json.loads(json.dumps(d))["floor"]["exact"] is plan.floor.exact
    with pytest.raises(AttributeError):
        plan.mixing = 0.0  # type: ignore[misc]


def test_a_token_budget_over_many_lengths_searches_a_grid_and_proves_nothing():
    rng = np.random.default_rng(4)
    lengths = np.arange(1, 2_301)
    hist = LengthHistogram.from_counts(lengths, rng.integers(1, 4, size=lengths.size))
    prob = build_problem(hist, BatchRule(max_tokens=4_096))
    lag = frontier_dp.lagrangian(hist, prob)
    assert not lag.exact and lag.points.size - 1 < prob.ends.size and lag.points[-1] == prob.m
    plan = optimize_edges(hist, 3, max_tokens=4_096, min_mixing=0.3)
    assert plan.mixing >= 0.3 and plan.floor is not None and not plan.floor.exact
    assert plan.floor.grid == lag.points.size - 1
    assert plan.edges[-1] == 2_300 and plan.n_buckets == 3


@pytest.mark.parametrize("rule", RULES, ids=str)
def test_the_sweep_places_its_lambdas_between_its_own_optimum_and_most_mixing(rule):
    """``frontier_sweep``: the lambdas ``frontier_lambdas`` spreads between the DP's own
    K-bucket optimum (on exact data: ``optimize_edges``'s) and the K-bucket plan with the most
    mixing (by exhaustive search), and the plans of ``frontier_plans`` for those lambdas."""
    hist = _hist(5)
    lambdas, plans = frontier_sweep(hist, rule, 4, 3)
    low = optimize_edges(hist, 4, rule)
    most = max(_every_plan(hist, 4, rule), key=lambda p: (p[1], -p[0]))
    high = evaluate_edges(hist, most[2], rule)
    assert lambdas == pytest.approx(frontier_lambdas(low, high, 3), rel=1e-12)
    again = frontier_plans(hist, rule, 4, lambdas)
    assert [(lam, k, p.edges) for lam, k, p in plans] == [(lam, k, p.edges) for lam, k, p in again]
    with pytest.raises(ValueError, match="n_lambdas must be an integer >= 1"):
        frontier_sweep(hist, rule, 4, 0)


@pytest.mark.parametrize("rule", RULES, ids=str)
def test_optimal_plans_are_optimize_edges_for_every_k(rule):
    hist = _hist(6)
    plans = optimal_plans(hist, [3, 1, 2], rule)
    assert list(plans) == [1, 2, 3]
    for k, plan in plans.items():
        one = optimize_edges(hist, k, rule)
        assert (plan.edges, plan.objective, plan.gap, plan.method) == (
            one.edges,
            one.objective,
            one.gap,
            "optimal",
        )


@pytest.mark.parametrize(("p", "k", "per"), [(70, 4, 0.0), (150, 6, 0.7), (200, 33, 3.0)])
def test_the_tiled_pass_is_the_plain_dp_bit_for_bit(p: int, k: int, per: float) -> None:
    """The λ-DP over the points by tiles of ends (several, and a last short one; some buckets
    missing) against the reference DP of ``analysis.optimize._reference`` over the matrix of
    ``costs - per * mixing`` (each bucket's value the same expression): every layer's minima,
    bit for bit, and the traced ends those of the reference's ``argmin`` (its smallest start)."""
    from analysis.optimize._reference import reference_dp

    rng = np.random.default_rng(p)
    costs = np.full((p, p), np.inf)
    low = np.tril(np.ones((p, p), bool), -1)
    costs[low] = rng.uniform(1.0, 50.0, low.sum())
    costs[low & (rng.random((p, p)) < 0.1)] = np.inf
    mixing = np.where(low, rng.uniform(0.0, 5.0, (p, p)), 0.0)
    best = frontier_dp._solve_points(costs, mixing, per, k)
    value = costs - per * mixing if per != 0.0 else costs
    want, arg = reference_dp(np.ascontiguousarray(value.T), k)
    assert best.T.tobytes() == want.tobytes()
    for layers in (1, k // 2, k):
        ends = frontier_dp._trace_points(best, costs, mixing, per, layers, p - 1)
        c, back = p - 1, []
        for layer in range(layers, 0, -1):
            back.append(c)
            c = int(arg[layer, c])
        assert ends.tolist() == back[::-1]
