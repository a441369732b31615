"""The install's compile-ahead (``python -m analysis.optimize._ahead``) reaches the passes it
names: its rules take the three different compiled DPs and its grid is a real grid."""

from __future__ import annotations

from analysis.optimize import _ahead as ahead
from analysis.optimize._exact import exact_arrays
from analysis.optimize._problem import build_problem, resolve_objective
from analysis.optimize._search import use_grid


def test_its_rules_take_the_product_the_carried_and_the_budget_passes():
    hist = ahead.histogram()
    probs = [build_problem(hist, rule, 1, None, resolve_objective(rule, None, None)) for rule in ahead.RULES]
    kinds = [(short.product, data.token) for data, short in map(exact_arrays, probs)]
    assert kinds == [(True, False), (False, False), (False, True)]
    assert use_grid(probs[0], ahead._GRID) == ahead._GRID  # fewer candidates than ends: the grid
