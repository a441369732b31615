"""The padding-mixing frontier of the DP (analysis.optimize._frontier) against exhaustive search
over every edge set: each plan it returns is Pareto-optimal among all plans with its K, and the
bound a floor states holds for every one of them."""

from __future__ import annotations

import importlib
import itertools

import numpy as np
import pytest

from analysis import BatchRule, LengthHistogram, evaluate_edges, optimize_edges
from analysis.optimize import frontier_lambdas, frontier_plans, frontier_sweep, optimal_plans
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
    lag = frontier_dp._lagrangian(hist, prob)
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


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
@pytest.mark.parametrize("rule", RULES, ids=str)
@pytest.mark.parametrize("k", [2, 3])
def test_floors_against_exhaustive_search(seed, rule, k):
    hist = _hist(seed)
    plans = _every_plan(hist, k, rule)
    useful = hist.total_tokens
    top = max(useful / f for f, _, _ in plans)
    for share in (0.3, 0.6, 0.8, 0.95, 0.99):
        x = top * share + (1 - share) * min(useful / f for f, _, _ in plans)
        plan = optimize_edges(hist, k, rule, min_efficiency=x)
        assert plan.efficiency >= x and plan.objective <= useful / x
        assert not _dominated(plan.objective, plan.mixing, plans)
        reach = [g for f, g, _ in plans if f <= useful / x]
        assert max(reach) <= plan.floor.bound + 1e-12  # the stated bound holds
        assert plan.floor.bound >= plan.mixing
        if plan.floor.exact:
            assert plan.mixing == pytest.approx(max(reach), abs=1e-12)
        assert plan.floor.floor == "min_efficiency" and plan.floor.below[1] == plan.mixing
    gs = [g for _, g, _ in plans]
    for share in (0.1, 0.4, 0.7, 0.95):
        y = min(gs) + share * (max(gs) - min(gs))
        plan = optimize_edges(hist, k, rule, min_mixing=y)
        assert plan.mixing >= y
        assert not _dominated(plan.objective, plan.mixing, plans)
        reach = [f for f, g, _ in plans if g >= y]
        assert min(reach) >= plan.floor.bound * (1 - 1e-12)
        assert plan.objective >= plan.floor.bound * (1 - 1e-12)
        if plan.floor.exact:
            assert plan.objective == pytest.approx(min(reach), rel=1e-12)


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


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"min_efficiency": 0.5, "min_mixing": 0.5}, "give min_efficiency or min_mixing, not both"),
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
    assert d["floor"]["floor"] == "min_mixing" and d["mixing"] == plan.mixing
    with pytest.raises(AttributeError):
        plan.mixing = 0.0  # type: ignore[misc]


def test_a_token_budget_over_many_lengths_searches_a_grid_and_proves_nothing():
    rng = np.random.default_rng(4)
    lengths = np.arange(1, 2_301)
    hist = LengthHistogram.from_counts(lengths, rng.integers(1, 4, size=lengths.size))
    prob = build_problem(hist, BatchRule(max_tokens=4_096))
    lag = frontier_dp._lagrangian(hist, prob)
    assert not lag.exact and lag.points.size - 1 < prob.ends.size and lag.points[-1] == prob.m
    plan = optimize_edges(hist, 3, max_tokens=4_096, min_mixing=0.3)
    assert plan.mixing >= 0.3 and plan.floor is not None and not plan.floor.exact
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
